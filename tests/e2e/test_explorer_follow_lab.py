"""The explorer keeps what a student works on in view (issue 27, items 3 and 4), in a real JupyterLab:
- the code view scrolls the selected loop and the lines a step changed into its own view (a loop on
  line 28 of a script whose view shows lines 1-20: select it, press `v`);
- the History pane keeps the current step's row in view, and room for rows, with the latency plot
  open in a 640 px explorer (the default height)."""

from __future__ import annotations

import pytest

from tests.e2e.lab import run_notebook
from tests.e2e.test_explorer_lab import row

pytestmark = pytest.mark.e2e

SHORT_HISTORY_PX = 320  # js/explorer/view.ts: a History pane lower than this folds the plot

STEPS = (
    "s.apply('split', 'Y/j', factors=[None, 4])\n"
    "s.apply('reorder', 'Y/i', 'j_0', 'k', 'j_1')\n"
    "s.apply('reverse_compute_at', 'C', 'j_0')\n"
    "s.apply('decompose_reduction', 'Y', 'k')"
)
CELLS = [
    "import mlc_lab\nfrom tests.fixtures.programs import MM_RELU\ns = mlc_lab.Session(MM_RELU)\n" + STEPS,
    "ex = mlc_lab.explore(s)\nex",
]
SCROLLER = ".mlc-explorer .mlc-code-main .cm-scroller"

# Where the marked lines are against the code scroller's visible box (not CodeMirror's rendered range).
CODE_GEOMETRY_JS = """(sel) => {
  const sc = document.querySelector(sel);
  const box = sc.getBoundingClientRect();
  const top = box.top + sc.clientTop, bottom = top + sc.clientHeight;
  const seen = (el) => { const r = el.getBoundingClientRect(); return r.top >= top - 1 && r.bottom <= bottom + 1; };
  const lines = [...sc.querySelectorAll('.cm-content .cm-line')];
  const number = (el) => { const gutter = [...sc.querySelectorAll('.cm-lineNumbers .cm-gutterElement')]
    .find((g) => Math.abs(g.getBoundingClientRect().top - el.getBoundingClientRect().top) < 2); return gutter ? Number(gutter.innerText) : null; };
  const head = sc.querySelector('.mlc-line-selected-head');
  const changed = [...sc.querySelectorAll('.mlc-line-changed')];
  const selected = [...sc.querySelectorAll('.mlc-line-selected')];
  return {
    scrollTop: sc.scrollTop,
    shown: lines.filter(seen).map(number).filter((n) => n !== null),
    head: head ? { line: number(head), seen: seen(head) } : null,
    changed: changed.map((el) => ({ line: number(el), seen: seen(el) })),
    selected: selected.filter(seen).map(number),
  };
}"""


def _code_has(page, needle: str) -> None:
    page.wait_for_function(
        "([sel, n]) => (document.querySelector(sel)?.innerText || '').includes(n)",
        arg=[".mlc-explorer .mlc-code-main .cm-content", needle],
        timeout=20_000,
    )


def test_code_view_follows_the_selection_and_the_change(lab_server, lab_page, artifacts):
    page, errors = lab_page
    lab = run_notebook(page, lab_server, artifacts, "follow_code.ipynb", CELLS, prefix="follow-code")
    row(page, "loop", "ax0").wait_for(timeout=60_000)
    page.locator(".mlc-explorer").scroll_into_view_if_needed()
    before = page.evaluate(CODE_GEOMETRY_JS, SCROLLER)
    # the loop is below what the view shows (CodeMirror has it rendered, in its margin)
    assert before["scrollTop"] == 0 and max(before["shown"]) < 28, before

    row(page, "loop", "ax0").click()
    page.keyboard.press("v")
    _code_has(page, "for ax0 in T.vectorized(4):")
    page.wait_for_timeout(500)  # the scroll lands in the next frame
    after = page.evaluate(CODE_GEOMETRY_JS, SCROLLER)
    lab.shot("after-v", page.locator(".mlc-explorer"))
    assert after["head"] == {"line": 28, "seen": True}, after
    assert after["changed"] and all(c["seen"] for c in after["changed"]), after
    assert 28 in [c["line"] for c in after["changed"]], after
    assert after["selected"] == list(range(28, 35)), after  # the whole loop: it fits
    assert not errors, errors


# The History pane's rows against its scroller's visible box, and the plot's height.
HISTORY_GEOMETRY_JS = """() => {
  const ex = document.querySelector('.mlc-explorer');
  const list = ex.querySelector('.mlc-history');
  const box = list.getBoundingClientRect();
  const top = box.top + list.clientTop, bottom = top + list.clientHeight;
  const rows = [...list.querySelectorAll('.mlc-hrow')];
  const seen = (el) => { const r = el.getBoundingClientRect(); return r.top >= top - 1 && r.bottom <= bottom + 1; };
  const cur = list.querySelector('.mlc-hrow.mlc-current');
  const plot = ex.querySelector('.mlc-plot');
  return {
    explorer: Math.round(ex.getBoundingClientRect().height),
    tab: Math.round(ex.querySelector('.mlc-history-tab').clientHeight),
    list: Math.round(list.clientHeight),
    row: rows.length ? Math.round(rows[0].getBoundingClientRect().height) : 0,
    rowsSeen: rows.filter(seen).length,
    rows: rows.length,
    current: cur ? { step: cur.dataset.step, seen: seen(cur) } : null,
    plot: plot && !plot.hidden ? Math.round(plot.getBoundingClientRect().height) : 0,
    svg: !!(plot && plot.querySelector('svg')),
    fold: plot?.querySelector('.mlc-plot-fold')?.innerText ?? null,
  };
}"""


def test_history_keeps_the_current_row_in_view_with_the_plot_open(lab_server, lab_page, artifacts):
    page, errors = lab_page
    lab = run_notebook(page, lab_server, artifacts, "follow_history.ipynb", CELLS, prefix="follow-history")
    row(page, "loop", "ax0").wait_for(timeout=60_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    # Measured while the Checks tab is shown: the History pane has no height when the plot is drawn.
    explorer.locator(".mlc-tab-checks").click()
    lab.kernel("s.measure(step=0); s.measure(step=2); s.measure()")
    explorer.locator('.mlc-hrow[data-step="4"] .mlc-hlatency').wait_for(state="attached", timeout=60_000)
    explorer.locator(".mlc-tab-history").click()
    page.wait_for_timeout(500)
    shown = page.evaluate(HISTORY_GEOMETRY_JS)
    assert shown["explorer"] == 640 and shown["tab"] < SHORT_HISTORY_PX, shown  # a short pane...
    assert shown["fold"] == "show plot" and not shown["svg"], shown  # ...folds the plot to one line
    assert shown["current"] == {"step": "4", "seen": True}, shown

    explorer.locator(".mlc-plot .mlc-plot-fold").click()  # the plot open: the list is shorter
    page.wait_for_timeout(500)
    opened = page.evaluate(HISTORY_GEOMETRY_JS)
    lab.shot("plot-open", explorer)
    assert opened["svg"] and opened["list"] < shown["list"], opened
    assert opened["current"] == {"step": "4", "seen": True}, opened
    assert opened["rowsSeen"] >= 3, opened

    lab.kernel("ex.height = '560px'")  # a shorter explorer still shows the current row
    page.wait_for_function("() => document.querySelector('.mlc-explorer').getBoundingClientRect().height < 600")
    page.wait_for_timeout(500)
    shorter = page.evaluate(HISTORY_GEOMETRY_JS)
    lab.shot("shorter", explorer)
    assert shorter["list"] < opened["list"] and shorter["current"] == {"step": "4", "seen": True}, shorter
    assert not errors, errors
