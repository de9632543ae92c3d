"""Room inside a notebook cell, on a 1280x720 laptop screen (Debian chromium, real JupyterLab): the
step label is whole, measured steps leave the History readable, the trace editor shows its lines
whole, tree badges are not cut off on long block names, and the crowded views point to the full
window."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.lab import run_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e

SHOTS = os.environ.get("MLC_LAB_SHOTS_DIR")
LONG = "matmul_accumulate_partial_sums"
PROGRAM = MM_RELU.replace('T.sblock("Y")', f'T.sblock("{LONG}")')

CLIPPED_JS = """(sel) => [...document.querySelectorAll(sel)].filter((e) => e.scrollWidth > e.clientWidth + 1).length"""


@pytest.fixture()
def laptop(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


def row(page, kind: str, name: str):
    return page.locator(f'.mlc-explorer .mlc-row[data-kind="{kind}"][data-name="{name}"]')


def test_room_inside_a_cell(lab_server, laptop, artifacts):
    page = laptop
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "room.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab.widgets import explore\nPROGRAM = " + repr(PROGRAM),
            "ex = explore(PROGRAM)\ns = ex.session\n"
            f"j0, j1 = s.apply('split', '{LONG}/j', factors=[None, 4])\n"
            f"s.apply('reorder', '{LONG}/i', j0, 'k', j1)\n"
            "s.apply('unroll', j1)\nex",
        ],
        prefix="room",
    )
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    ex = page.locator(".mlc-explorer")
    ex.scroll_into_view_if_needed()
    shots: list[Path] = []

    # the step label is whole (or, when the cell is really narrow, its full text is one hover away)
    label = ex.locator(".mlc-step-label")
    assert label.inner_text() == "step 3: unroll(j_1)"
    assert page.evaluate(CLIPPED_JS, ".mlc-explorer .mlc-step-label") == 0
    assert label.get_attribute("title") == "step 3: unroll(j_1)"

    # tree badges on a long block name are inside the pane
    badges_out = page.evaluate("""() => {
      const pane = document.querySelector('.mlc-explorer .mlc-tree').getBoundingClientRect();
      return [...document.querySelectorAll('.mlc-explorer .mlc-tree .mlc-badge')]
        .filter((b) => b.getBoundingClientRect().right > pane.right + 1).length;
    }""")
    assert badges_out == 0
    shots.append(lab.shot("tree-long-block-name-and-step-label", ex))

    # measure two steps (key m): the History still shows at least five rows beside the plot
    row(page, "loop", "k").click()
    page.keyboard.press("m")
    ex.locator('.mlc-hrow[data-step="3"] .mlc-hlatency').wait_for(timeout=120_000)
    ex.locator('.mlc-hrow[data-step="1"]').click()
    page.wait_for_function(
        "() => document.querySelector('.mlc-explorer .mlc-step-label').textContent.startsWith('step 1')"
    )
    ex.locator(".mlc-measure").click()
    ex.locator('.mlc-hrow[data-step="1"] .mlc-hlatency').wait_for(timeout=60_000)
    rows_visible = page.evaluate("""() => {
      const list = document.querySelector('.mlc-explorer .mlc-history').getBoundingClientRect();
      return [...document.querySelectorAll('.mlc-explorer .mlc-history .mlc-hrow')]
        .filter((r) => { const b = r.getBoundingClientRect(); return b.top >= list.top - 1 && b.bottom <= list.bottom + 1; }).length;
    }""")
    shots.append(lab.shot("history-with-latency-plot", ex))
    assert rows_visible >= 4, rows_visible  # all four steps of this history

    # the trace editor: long lines wrap instead of being cut at the pane's edge
    ex.locator(".mlc-tab-trace").click()
    ex.locator(".mlc-trace-editor .cm-content").wait_for()
    overflow = page.evaluate("""() => {
      const s = document.querySelector('.mlc-explorer .mlc-trace-editor .cm-scroller');
      return s.scrollWidth - s.clientWidth;
    }""")
    assert overflow <= 1, overflow
    assert ex.locator(".mlc-trace .mlc-more-room").is_visible()
    shots.append(lab.shot("trace-editor-lines-wrap", ex))

    # the compiler view points to the full window, which gives it the whole page
    ex.locator(".mlc-diff-mode").select_option("compiler")
    page.wait_for_function(
        "() => (document.querySelector('.mlc-explorer .mlc-compiler-verdict')?.textContent || '').length > 0",
        timeout=120_000,
    )
    more = ex.locator(".mlc-compiler .mlc-more-room")
    assert more.is_visible()
    shots.append(lab.shot("compiler-view-in-cell", ex))
    more.click()
    page.wait_for_selector(".mlc-explorer.mlc-maximized")
    assert not ex.locator(".mlc-compiler .mlc-more-room").is_visible()  # already there
    shots.append(lab.shot("compiler-view-full-window", page))
    page.keyboard.press("Escape")
    page.wait_for_selector(".mlc-explorer.mlc-maximized", state="detached")

    # the memory view of k (at fixed i, j_0): A's row is a 1 x 128 strip, B's a 128 x 4 band, C untouched
    ex.locator(".mlc-diff-mode").select_option("off")
    ex.locator(".mlc-memory-toggle").click()
    row(page, "loop", "k").click()
    panel = ex.locator(".mlc-memory")
    page.wait_for_selector(
        '.mlc-explorer .mlc-memory .mlc-acc-card[data-buffer="B"] canvas.mlc-acc-canvas', timeout=60_000
    )
    sizes = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('.mlc-explorer .mlc-memory .mlc-acc-card')].map((c) => {
      const cv = c.querySelector('canvas.mlc-acc-canvas'); const r = cv.getBoundingClientRect();
      return [c.dataset.buffer, [Math.round(r.width), Math.round(r.height), c.getBoundingClientRect().height]];
    }))""")
    assert min(sizes["A"][:2]) >= 24, sizes  # the row of A
    assert min(sizes["B"][:2]) >= 24, sizes  # the band of B
    assert sizes["C"][2] < 60, sizes  # an untouched buffer is a line, not a card of the buffer's size
    panel.scroll_into_view_if_needed()
    shots.append(lab.shot("memory-strips-and-untouched", panel))

    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        for p in shots:
            shutil.copy(p, Path(SHOTS) / p.name)
