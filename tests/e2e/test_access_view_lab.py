"""The access view in a real JupyterLab, driven by Debian chromium.

The course's chapter-2 picture in the explorer's Memory panel (mm_relu after split/reorder, loop j_1
at one k: one element of A, a contiguous run of a row of B and of Y), played as an animation; then
the chapter-6 GPU views as standalone AccessView widgets (window sum with its shared segment, the
1024^3 matmul with local and with shared-memory blocking), screenshotted to test-artifacts/e2e/.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.lab import forget, run_notebook
from tests.e2e.test_explorer_lab import MM_RELU

pytestmark = pytest.mark.e2e

CELLS = [
    "import mlc_lab\nfrom mlc_lab.widgets import explore\nfrom mlc_lab.widgets.access.view import access_view\n"
    "from tests.fixtures import programs_access as P\nMM_RELU = " + repr(MM_RELU),
    "ex = explore(MM_RELU)\n"
    "ex.session.apply('split', 'Y/j', factors=[None, 4])\n"
    "ex.session.apply('reorder', 'Y/i', 'j_0', 'k', 'j_1')\n"
    "ex",
    "ws = access_view(mlc_lab.Session(P.sched_window_sum(1024, 128).mod), 'i_1', at={'i_0': 1},\n"
    "                 color_by='thread')\nws",
    "local = access_view(mlc_lab.Session(P.sched_gpu_local(1024).mod), 'i_1', at={'i_0': 1, 'j_0': 2},\n"
    "                    color_by='thread', region='touched')\nlocal",
    "shared = access_view(mlc_lab.Session(P.sched_gpu_shared(1024).mod), 'i_1_j_1_fused', at={'i_0': 1, 'j_0': 2},\n"
    "                     color_by='thread', region='touched')\nshared",
]

EXPLORER_PANEL = ".mlc-explorer .mlc-access"

# toDataURL of one buffer's canvas in the n-th panel on the page.
CANVAS_URL_JS = """([n, name]) => document.querySelectorAll('.mlc-access')[n]
  .querySelector(`canvas.mlc-acc-canvas[data-buffer="${name}"]`).toDataURL()"""

SET_SLIDER_JS = "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('change')); }"

PANEL_IDLE_JS = """([sel, value]) => {
  const p = document.querySelector(sel);
  return !!p && !p.classList.contains('mlc-acc-loading') && p.textContent.includes(value);
}"""

# Frames drawn and distinct steps shown per second while the n-th panel plays.
FPS_JS = """(n) => new Promise((done) => {
  const el = document.querySelectorAll('.mlc-access')[n];
  const seen = new Set(); let frames = 0; const t0 = performance.now();
  const tick = () => {
    frames++; seen.add(el.dataset.time);
    if (performance.now() - t0 < 1500) requestAnimationFrame(tick);
    else done({ frames_per_s: frames / 1.5, distinct_steps_per_s: seen.size / 1.5, draw_ms: Number(el.dataset.drawMs) });
  };
  requestAnimationFrame(tick);
})"""


def stats(card) -> dict:
    rows = card.locator(".mlc-acc-stats tr")
    return {rows.nth(i).locator("th").inner_text(): rows.nth(i).locator("td").inner_text() for i in range(rows.count())}


@pytest.fixture()
def leave_no_trace(lab_server, page):
    """Afterwards: no kernel left running and no workspace that would reopen this notebook for the
    next test (JupyterLab restores open tabs from the saved workspace)."""
    yield
    url, _ = lab_server
    page.goto("about:blank")
    forget(url, "access.ipynb")


def test_access_view_in_lab(lab_server, page, artifacts, leave_no_trace):
    lab = run_notebook(page, lab_server, artifacts, "access.ipynb", CELLS, prefix="access")
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    page.wait_for_selector('.mlc-explorer .mlc-row[data-kind="loop"][data-name="j_1"]', timeout=30_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()

    # Chapter 2: open the Memory panel, select j_1, fix i = 3 and k = 7 with the sliders.
    page.locator(".mlc-explorer .mlc-memory-toggle").click()
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="j_1"]').click()
    panel = page.locator(EXPLORER_PANEL)
    page.wait_for_selector(f'{EXPLORER_PANEL} .mlc-acc-card[data-buffer="Y"]', timeout=30_000)
    assert panel.locator(".mlc-acc-loop").inner_text() == "j_1"
    page.eval_on_selector(f'{EXPLORER_PANEL} .mlc-acc-at-slider[data-loop="Y/i"]', SET_SLIDER_JS, 3)
    page.wait_for_function(PANEL_IDLE_JS, arg=[EXPLORER_PANEL, "[3, 3] × [0, 3]"])  # Y's bounds at i = 3
    page.eval_on_selector(f'{EXPLORER_PANEL} .mlc-acc-at-slider[data-loop="k"]', SET_SLIDER_JS, 7)
    page.wait_for_function(PANEL_IDLE_JS, arg=[EXPLORER_PANEL, "[7, 7] × [0, 3]"])  # B's bounds at k = 7
    card = lambda name: panel.locator(f'.mlc-acc-card[data-buffer="{name}"]')  # noqa: E731
    a, b, y = stats(card("A")), stats(card("B")), stats(card("Y"))
    assert a["distinct"] == "1" and a["bounds"] == "[3, 3] × [7, 7]"  # one element of A
    assert b["distinct"] == "4" and b["bounds"] == "[7, 7] × [0, 3]" and b["cache lines"] == "1"  # a run of row k of B
    assert y["distinct"] == "4" and y["bounds"] == "[3, 3] × [0, 3]"  # and of row i of Y
    assert "j_1: 1" in b["strides"]
    lab.shot("chapter2-j1", explorer)
    panel.scroll_into_view_if_needed()
    lab.shot("chapter2-j1-memory", panel)

    # Play: the scrubber advances and the canvas changes from frame to frame.
    before = page.evaluate(CANVAS_URL_JS, [0, "B"])
    panel.locator(".mlc-acc-speed").select_option("2")
    panel.locator(".mlc-acc-play").click()
    page.wait_for_function(
        f"() => Number(document.querySelector('{EXPLORER_PANEL}').dataset.time) >= 1", timeout=10_000
    )
    during = page.evaluate(CANVAS_URL_JS, [0, "B"])
    lab.shot("chapter2-playing", panel)
    page.wait_for_function(
        f"""() => {{ const p = document.querySelector('{EXPLORER_PANEL}');
        return p.dataset.time === '3' && !p.classList.contains('mlc-acc-playing'); }}""",
        timeout=10_000,
    )
    after = page.evaluate(CANVAS_URL_JS, [0, "B"])
    assert len({before, during, after}) == 3, "every frame draws a different picture"
    assert panel.locator(".mlc-acc-scrub").input_value() == "3"

    # Chapter 6 (standalone AccessView widgets); a tall window so that each fits one screenshot.
    page.set_viewport_size({"width": 1500, "height": 1700})
    page.wait_for_function(
        "() => document.querySelectorAll('.mlc-access-view .mlc-acc-card').length >= 3 + 4 + 6", timeout=60_000
    )
    page.wait_for_function(
        "() => document.querySelectorAll('.mlc-access-view .mlc-acc-gpu-table').length === 3", timeout=30_000
    )
    views = page.locator(".mlc-access-view")
    ws, local, shared = views.nth(0), views.nth(1), views.nth(2)
    # window sum: the shared segment is nthread + 2 elements; hovering A says which thread fetched it
    assert stats(ws.locator('.mlc-acc-card[data-buffer="A_shared"]'))["distinct"] == "130"
    # A is shown zoomed on the part block 1 reads (with context): find A[150]'s pixel from the view box.
    r0, c0, rows, cols, f = (
        int(v) for v in ws.locator('.mlc-acc-card[data-buffer="A"]').get_attribute("data-view").split(",")
    )
    assert f == 1 and c0 <= 150 < c0 + cols and cols < 1027  # zoomed, one pixel per element
    css_w = ws.locator('canvas[data-buffer="A"]').bounding_box()["width"]
    ws.locator('canvas[data-buffer="A"]').hover(position={"x": (150 - c0 + 0.5) * css_w / cols, "y": 8})
    assert ws.locator(".mlc-acc-tip").inner_text().startswith("A[150]: read, first at step")
    assert "thread 22" in ws.locator(".mlc-acc-tip").inner_text()
    ws.scroll_into_view_if_needed()
    lab.shot("window-sum-shared", ws)
    # local blocking: one block's 64 threads each own an 8x8 tile of C
    assert stats(local.locator('.mlc-acc-card[data-buffer="C"]'))["distinct"] == "4,096"
    local.scroll_into_view_if_needed()
    lab.shot("matmul-local-blocking", local)
    # shared blocking: the block stages a 64-row stripe of A and a 64-column stripe of B
    assert stats(shared.locator('.mlc-acc-card[data-buffer="A_shared"]'))["bounds"] == "[64, 127] × [0, 1023]"
    assert stats(shared.locator('.mlc-acc-card[data-buffer="B_shared"]'))["bounds"] == "[0, 1023] × [128, 191]"
    shared.scroll_into_view_if_needed()
    lab.shot("matmul-shared-blocking", shared)
    gpu_table = lambda v: v.locator(".mlc-acc-gpu-table").inner_text()  # noqa: E731
    assert gpu_table(local) != gpu_table(shared)  # the coalescing figures differ

    # Smoothness: six 1024x1024 heatmaps (whole buffers, pooled 4x4 elements a pixel) redrawn every
    # frame while playing.
    shared.locator(".mlc-acc-region").select_option("buffer")
    page.wait_for_function(
        "() => document.querySelectorAll('.mlc-access')[3]"
        ".querySelector('.mlc-acc-card[data-buffer=\"A\"]').dataset.view === '0,0,1024,1024,4'"
    )
    shared.locator(".mlc-acc-speed").select_option("30")
    shared.locator(".mlc-acc-play").click()
    fps = page.evaluate(FPS_JS, 3)
    shared.locator(".mlc-acc-play").click()  # pause
    (artifacts / "access-fps.json").write_text(json.dumps(fps))
    assert fps["distinct_steps_per_s"] >= 8, fps
