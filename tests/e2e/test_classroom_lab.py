"""The explorer as a student meets it in JupyterLab: keys stay in the widget, forms answer Enter and
Escape, and the layout fits a laptop screen (1280x720 with the file browser open).

Screenshots go to test-artifacts/e2e/ (prefix ``classroom``).
"""

from __future__ import annotations

import pytest

from tests.e2e.lab import Lab, forget, run_notebook, write_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e

ACTIVE_CELL_JS = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"
NOTEBOOK_MODE_JS = "() => window.jupyterapp.shell.currentWidget.content.mode"

CELLS = [
    "import mlc_lab\nfrom mlc_lab.widgets import explore\nfrom mlc_lab.widgets.access.view import access_view\n"
    "MM_RELU = " + repr(MM_RELU),
    "ex = explore(MM_RELU)\nex.session.apply('sample_perfect_tile', 'Y/j', n=2, max_innermost_factor=16)\nex",
    "av = access_view(mlc_lab.Session(MM_RELU), 'k')\nav",
    "x = 1  # a cell below the widgets: arrow keys must not move here",
]


@pytest.fixture()
def leave_no_trace(lab_server, page):
    yield
    url, _ = lab_server
    page.goto("about:blank")
    forget(url, "classroom.ipynb")


@pytest.fixture()
def leave_no_trace_ctx(lab_server):
    """Like leave_no_trace, for a test that opens its own browser context (another viewport)."""
    contexts: list = []
    yield contexts
    url, _ = lab_server
    for c in contexts:
        c.close()
    forget(url, "classroom.ipynb")


def _press_keeps_cell(page, locator, key: str) -> tuple[str, str]:
    """Focus `locator`, press `key`; the active cell and the notebook mode must not change.
    Returns the input's value before and after."""
    locator.scroll_into_view_if_needed()
    locator.focus()
    cell, mode = page.evaluate(ACTIVE_CELL_JS), page.evaluate(NOTEBOOK_MODE_JS)
    before = locator.input_value()
    page.keyboard.press(key)
    page.wait_for_timeout(150)
    assert page.evaluate(ACTIVE_CELL_JS) == cell, f"{key} moved the active cell"
    assert page.evaluate(NOTEBOOK_MODE_JS) == mode
    assert page.evaluate("(el) => document.activeElement === el", locator.element_handle()), (
        f"{key} took the focus away"
    )
    return before, locator.input_value()


def test_keys_stay_in_the_widgets(lab_server, page, artifacts, leave_no_trace):
    lab = run_notebook(page, lab_server, artifacts, "classroom.ipynb", CELLS, prefix="classroom")
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    page.wait_for_selector(".mlc-access .mlc-acc-scrub", state="attached", timeout=60_000)
    explorer = page.locator(".mlc-explorer")

    # A form: Enter applies it, Escape closes it; neither reaches the notebook.
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="k"]').click()
    cell = page.evaluate(ACTIVE_CELL_JS)  # a click in an output makes its cell the active one
    page.keyboard.press("s")
    factor = page.locator('.mlc-form[data-primitive="split"] .mlc-factor').nth(1)
    factor.fill("8")
    factor.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.mlc-explorer .cm-content').innerText.includes('k_0')", timeout=20_000
    )
    assert lab.kernel_json("ex.session.current.primitive") == "split"
    assert page.locator(".mlc-explorer .mlc-form").count() == 0
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="Y/i"]').click()
    page.keyboard.press("s")
    page.locator('.mlc-form[data-primitive="split"] .mlc-factor').nth(1).press("Escape")
    assert page.locator(".mlc-explorer .mlc-form").count() == 0
    assert lab.kernel_json("len(ex.session.steps)") == 3
    assert page.evaluate(ACTIVE_CELL_JS) == cell
    assert page.locator(".jp-Notebook .jp-Cell").count() == len(CELLS)

    # A decision knob (range slider) in the explorer's trace tab.
    page.locator(".mlc-explorer .mlc-tab-trace").click()
    knob = page.locator(".mlc-explorer .mlc-knob-slider").first
    knob.wait_for()
    key = "ArrowLeft" if knob.input_value() == knob.get_attribute("max") else "ArrowRight"
    before, after = _press_keeps_cell(page, knob, key)
    assert after != before, f"{key} moves the knob"
    page.wait_for_function("([v]) => document.querySelector('.mlc-explorer .mlc-knob-slider').value === v", arg=[after])

    # The standalone access view: the enclosing-loop sliders and the scrubber.
    standalone = page.locator(".jp-OutputArea-output .mlc-access").last
    at = standalone.locator('.mlc-acc-at-slider[data-loop="Y/i"]')
    at.wait_for()
    before, after = _press_keeps_cell(page, at, "ArrowRight")
    assert (before, after) == ("0", "1")
    page.wait_for_function("() => [...document.querySelectorAll('.mlc-acc-at-slider')].some((s) => s.value === '1')")
    scrub = standalone.locator(".mlc-acc-scrub")
    scrub.wait_for()
    before, after = _press_keeps_cell(page, scrub, "ArrowRight")
    assert int(after) == int(before) + 1
    # Keys with no meaning for the view (a, b, Down on a button) do not reach the notebook either.
    play = standalone.locator(".mlc-acc-play")
    play.focus()
    cell = page.evaluate(ACTIVE_CELL_JS)
    for key in ("ArrowDown", "b", "a", "Enter"):
        if key == "Enter":
            break  # Enter on a button clicks it (plays): fine, and not the notebook's either
        page.keyboard.press(key)
    page.wait_for_timeout(150)
    assert page.evaluate(ACTIVE_CELL_JS) == cell
    assert page.locator(".jp-Notebook .jp-Cell").count() == len(CELLS), "no cell was inserted by a/b"
    lab.shot("keys", explorer)


# Columns of code the explorer's code panel shows without scrolling: the scroller's width less the
# gutters, over the width of one character of the editor's font.
CODE_COLUMNS_JS = """() => {
  const ex = document.querySelector('.mlc-explorer');
  const scroller = ex.querySelector('.mlc-code-main .cm-scroller');
  const gutters = scroller.querySelector('.cm-gutters');
  const content = scroller.querySelector('.cm-content');
  const probe = document.createElement('span');
  probe.textContent = '0'.repeat(100);
  probe.style.cssText = 'position:absolute;visibility:hidden;white-space:pre';
  content.appendChild(probe);
  const ch = probe.getBoundingClientRect().width / 100;
  probe.remove();
  const cs = getComputedStyle(content);
  const usable = scroller.clientWidth - (gutters ? gutters.getBoundingClientRect().width : 0)
    - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return { columns: Math.floor(usable / ch), char_px: ch, code_px: usable, explorer_px: ex.getBoundingClientRect().width };
}"""

FILE_BROWSER_OPEN_JS = """() => { const fb = document.querySelector('#filebrowser');
  return !!fb && !fb.classList.contains('lm-mod-hidden') && fb.getBoundingClientRect().width > 100; }"""


def test_layout_fits_a_laptop_screen(lab_server, browser, artifacts, leave_no_trace_ctx):
    """1280x720 with the file browser open: the code shows at least 80 columns; the explorer can
    be made taller with its grip and opened over the full window."""
    url, root = lab_server
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    leave_no_trace_ctx.append(context)
    page = context.new_page()
    page.set_default_timeout(30_000)
    write_notebook(root / "classroom.ipynb", CELLS[:2])
    lab = Lab(page, url, artifacts, prefix="classroom-1280")
    lab.open("classroom.ipynb")
    if not page.evaluate(FILE_BROWSER_OPEN_JS):
        page.evaluate("window.jupyterapp.commands.execute('filebrowser:activate')")
    page.wait_for_function(FILE_BROWSER_OPEN_JS)
    lab.run_all()
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    page.wait_for_function("() => document.querySelector('.mlc-explorer .cm-content').innerText.includes('T.grid')")
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    m = page.evaluate(CODE_COLUMNS_JS)
    print("code at 1280x720 with the file browser open:", m)
    lab.shot("notebook", page)
    lab.shot("explorer", explorer)
    assert m["columns"] >= 80, m
    # Every pane keeps a usable width: the loop nest, the primitives and the history/trace.
    for sel in (".mlc-pane-tree", ".mlc-pane-prims", ".mlc-right"):
        box = page.locator(f".mlc-explorer {sel}").bounding_box()
        assert box and box["width"] >= 220 and box["height"] >= 150, (sel, box)
    # The split form's Apply button is on screen inside its pane.
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="Y/j"]').click()
    page.keyboard.press("s")
    apply_btn = page.locator('.mlc-form[data-primitive="split"] .mlc-apply')
    apply_btn.wait_for()
    page.wait_for_timeout(100)  # the pane scrolls the form into view in the next frame
    pane = page.locator(".mlc-explorer .mlc-pane-prims").bounding_box()
    b = apply_btn.bounding_box()
    assert pane["y"] <= b["y"] and b["y"] + b["height"] <= pane["y"] + pane["height"] + 1
    lab.shot("split-form", explorer)
    page.keyboard.press("Escape")

    # The grip changes its height (here: shorter, as the window's foot is below the grip).
    h0 = explorer.bounding_box()["height"]
    page.locator(".mlc-explorer .mlc-resize-grip").scroll_into_view_if_needed()
    grip = page.locator(".mlc-explorer .mlc-resize-grip").bounding_box()
    page.mouse.move(grip["x"] + 50, grip["y"] + 3)
    page.mouse.down()
    page.mouse.move(grip["x"] + 50, grip["y"] - 147, steps=5)  # up: the grip sits at the window's foot
    page.mouse.up()
    assert explorer.bounding_box()["height"] == pytest.approx(h0 - 150, abs=4)

    # Full window: over the whole page, three columns, and back in its cell.
    page.locator(".mlc-explorer .mlc-maximize").click()
    page.wait_for_selector(".mlc-explorer.mlc-maximized")
    box = explorer.bounding_box()
    assert box["width"] >= 1250 and box["height"] >= 690
    wide = page.evaluate(CODE_COLUMNS_JS)
    assert wide["columns"] >= 80, wide
    tree, code = (
        page.locator(".mlc-explorer .mlc-pane-tree").bounding_box(),
        page.locator(".mlc-explorer .mlc-center").bounding_box(),
    )
    assert tree["x"] + tree["width"] <= code["x"] + 1  # side by side
    lab.shot("maximized", page)
    page.keyboard.press("Escape")
    page.wait_for_selector(".mlc-explorer.mlc-maximized", state="detached")
    assert page.locator(".jp-OutputArea-output .mlc-explorer").count() == 1
    assert page.locator(".mlc-explorer-placeholder").count() == 0


# Pixels of one heatmap that are not the empty colour, and how many colours they have.
CANVAS_COLOURS_JS = """([n, name]) => {
  const c = document.querySelectorAll('.mlc-access')[n].querySelector(`canvas.mlc-acc-canvas[data-buffer="${name}"]`);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const colours = new Set(); let painted = 0;
  for (let i = 0; i < d.length; i += 4) {
    const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    if (key === ((236 << 16) | (238 << 8) | 241)) continue;  // PALETTE.empty
    painted++; colours.add(key);
  }
  return { painted, colours: colours.size, width: c.width, height: c.height };
}"""

GPU_CELLS = [
    "import mlc_lab\nfrom mlc_lab.widgets.access.view import access_view\nfrom tests.fixtures import programs_access as P",
    "shared_mm = mlc_lab.Session(P.sched_gpu_shared(1024).mod)\naccess_view(shared_mm, 'k_0')",
]


def test_notebook04_k0_by_thread(lab_server, page, artifacts, leave_no_trace):
    """Notebook 04: "choose loop k_0, colour by thread, pick a warp" on the shared-memory matmul."""
    lab = run_notebook(page, lab_server, artifacts, "classroom.ipynb", GPU_CELLS, prefix="classroom-gpu")
    view = page.locator(".jp-OutputArea-output .mlc-access").first
    view.locator('.mlc-acc-card[data-buffer="A_shared"]').wait_for(timeout=90_000)
    idle = "() => !document.querySelector('.mlc-access').classList.contains('mlc-acc-loading')"
    page.wait_for_function(idle)
    # the thread loop runs over every thread: the slider says "all"
    assert view.locator('.mlc-acc-at-slider[data-loop="i_1_j_1_fused"]').is_disabled()
    view.locator(".mlc-acc-color").select_option("thread")
    shared = page.evaluate(CANVAS_COLOURS_JS, [0, "A_shared"])
    assert shared["colours"] > 8, shared  # many threads, many colours (one colour before)
    view.locator(".mlc-acc-warp").select_option("1")
    page.wait_for_function(
        "() => document.querySelector('.mlc-access .mlc-acc-gpu-title')?.textContent.includes('Warp 1')"
    )
    view.scroll_into_view_if_needed()
    lab.shot("k0-by-thread-warp1", view)

    # One thread (untick "all threads"): A's 1,024 touched elements of a 1024 x 1024 buffer are
    # drawn (pooled pixels), not a blank canvas.
    view.locator(".mlc-acc-sweep").uncheck()
    page.wait_for_function(
        "() => !document.querySelector('.mlc-access .mlc-acc-at-slider[data-loop=\"i_1_j_1_fused\"]').disabled"
    )
    page.wait_for_function(idle)
    a_card = view.locator('.mlc-acc-card[data-buffer="A"]')
    assert a_card.locator(".mlc-acc-stats tr").first.locator("td").inner_text() == "1,024"
    a = page.evaluate(CANVAS_COLOURS_JS, [0, "A"])
    assert a["painted"] >= 200, a
    lab.shot("k0-one-thread", view)
