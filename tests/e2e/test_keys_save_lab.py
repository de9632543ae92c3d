"""A student's week in a real JupyterLab (Debian chromium), one notebook for four things:

- Ctrl+S pressed with the focus in an explorer saves the notebook, with the step on screen (before:
  ``data-lm-suppress-shortcuts`` made JupyterLab skip every shortcut inside the view, and the
  browser's own "Save page as" was not prevented either);
- the toolbar stays one row at 968 px with a diff shown (it wrapped);
- the toolbar's target chooses the checks from step 0 (a GPU explorer read "CPU checks of step 0");
- the Memory panel's untouched elements are dark on JupyterLab Dark (white boxes before).
"""

from __future__ import annotations

import base64
import json

import pytest

from tests.e2e.lab import console_errors, forget, run_notebook
from tests.e2e.saved import widget_state, widget_views

pytestmark = pytest.mark.e2e

NAME = "keys_save.ipynb"
SAVE_STATE = "@jupyter-widgets/jupyterlab-manager:saveWidgetState"
CELLS = [
    "import mlc_lab\nfrom tests.fixtures.programs import MM_RELU, matmul\n"
    "ex = mlc_lab.explore(MM_RELU, height='560px')\nex",
    "gpu = mlc_lab.explore(matmul(256), target='cuda', height='520px')\ngpu",
]
ROW = '.mlc-row[data-kind="loop"][data-name="{}"]'
# The last Ctrl+S event, kept from the start of its dispatch (JupyterLab stops it at the document):
# whether its default (the browser's "Save page as") was prevented is read once it is over.
WATCH_SAVE = """() => { window.__save = null; window.addEventListener('keydown', (ev) => {
  if ((ev.ctrlKey || ev.metaKey) && ev.key.toLowerCase() === 's') window.__save = ev; }, true); }"""
DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"


@pytest.fixture()
def forget_it(lab_server, page):
    yield
    page.goto("about:blank")
    forget(lab_server[0], NAME)


def _saved_step(path) -> dict:
    """The first cell's explorer's current step as the file on disk has it (its `step` trait, a buffer)."""
    nb = json.loads(path.read_text())
    ex = widget_state(nb)[widget_views(nb)[0]]
    data = next(b["data"] for b in ex.get("buffers", []) if b["path"] == ["step"])
    return json.loads(base64.b64decode(data))


def test_ctrl_s_in_an_explorer_saves_what_is_on_screen(lab_server, page, artifacts, forget_it):
    url, root = lab_server
    errors = console_errors(page)
    lab = run_notebook(page, lab_server, artifacts, NAME, CELLS, prefix="keys-save")
    explorer = page.locator(".mlc-explorer").first
    explorer.locator(ROW.format("Y/i")).wait_for(timeout=90_000)
    explorer.scroll_into_view_if_needed()
    toggled = page.evaluate(f"() => window.jupyterapp.commands.isToggled('{SAVE_STATE}')")
    try:
        if not toggled:  # JupyterLab's "Save Widget State Automatically", as test_lab_saved_state_lab does
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")
        _week(page, lab, root, explorer)
    finally:
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
        if not toggled:
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")
    assert not errors, errors


def _week(page, lab, root, explorer) -> None:
    page.evaluate(WATCH_SAVE)

    # 1. click in the explorer, apply a step by key (p: parallel, no form), Ctrl+S with the focus there
    explorer.locator(ROW.format("Y/i")).click()
    page.keyboard.press("p")
    explorer.locator('.mlc-hrow.mlc-current[data-step="1"]').wait_for(timeout=30_000)
    assert page.evaluate("() => !!document.activeElement.closest('.mlc-explorer')"), "the focus left the explorer"
    path = root / NAME
    before = path.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    for _ in range(100):
        if path.stat().st_mtime_ns != before:
            break
        page.wait_for_timeout(100)
    assert path.stat().st_mtime_ns != before, "Ctrl+S in the explorer did not save the notebook"
    assert page.evaluate("() => window.__save && window.__save.defaultPrevented") is True, (
        "the browser's Save page as was not prevented"
    )
    page.wait_for_function(f"() => !({DIRTY})()", timeout=30_000)
    step = _saved_step(path)
    assert step["id"] == 1 and step["primitive"] == "parallel" and "T.parallel" in step["script"], (
        step["id"],
        step["label"],
    )
    lab.shot("saved-from-the-explorer", explorer)

    # 2. the toolbar at 968 px with a diff shown: one row
    page.evaluate("() => { document.querySelector('.mlc-explorer').style.width = '968px'; }")
    explorer.locator(".mlc-diff-mode").select_option("split")
    explorer.locator(".mlc-diff-base").wait_for(state="visible")
    page.wait_for_timeout(300)
    bar = explorer.locator(".mlc-toolbar").bounding_box()["height"]
    button = explorer.locator(".mlc-toolbar .mlc-undo").bounding_box()["height"]
    assert bar < 1.7 * button, f"the toolbar wraps at 968 px in diff mode ({bar} px for {button} px buttons)"
    lab.shot("toolbar-968-diff", explorer.locator(".mlc-toolbar"))
    explorer.locator(".mlc-diff-mode").select_option("off")
    page.evaluate("() => { document.querySelector('.mlc-explorer').style.width = ''; }")

    # 3. the GPU explorer lists the GPU's checks from step 0; the toolbar's target switches them
    gpu = page.locator(".mlc-explorer").nth(1)
    gpu.scroll_into_view_if_needed()
    gpu.locator(".mlc-tab-checks").click()
    heads = (
        "(t) => document.querySelectorAll('.mlc-explorer')[1]?.querySelector('.mlc-checks-head')?.innerText.includes(t)"
    )
    page.wait_for_function(heads, arg="GPU (CUDA) checks of step 0", timeout=60_000)
    assert gpu.locator(".mlc-measure-target").input_value() == "cuda"
    assert gpu.locator('.mlc-check[data-check="thread_block_tiling"]').count() == 1
    lab.shot("gpu-checks-step-0", gpu)
    gpu.locator(".mlc-measure-target").select_option("cpu")
    page.wait_for_function(heads, arg="CPU checks of step 0", timeout=60_000)
    assert lab.kernel_json("gpu.target") == "cpu"
    assert gpu.locator('.mlc-check[data-check="vectorize"]').count() == 1

    # 4. the Memory panel on JupyterLab Dark: untouched elements dark, not white boxes
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    explorer.scroll_into_view_if_needed()
    explorer.locator(".mlc-memory-toggle").click()
    explorer.locator(ROW.format("k")).click()
    page.wait_for_function(  # loop k's answer (the panel opens on the selection first: loop Y/i)
        "() => { const p = document.querySelector('.mlc-explorer .mlc-access');"
        " return p && !p.classList.contains('mlc-acc-loading')"
        " && p.querySelector('.mlc-acc-head').innerText.startsWith('Memory touched by loop k'); }",
        timeout=60_000,
    )
    card = explorer.locator('.mlc-access .mlc-acc-card[data-buffer="Y"] canvas.mlc-acc-canvas')
    # the most common colour of the Y heatmap (the untouched elements) is dark
    rgb = card.evaluate(
        """(c) => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; const n = new Map();
        for (let i = 0; i < d.length; i += 4) { const k = `${d[i]},${d[i + 1]},${d[i + 2]}`; n.set(k, (n.get(k) || 0) + 1); }
        return [...n.entries()].sort((a, b) => b[1] - a[1])[0][0].split(',').map(Number); }"""
    )
    assert sum(rgb) < 240, f"untouched elements drawn {rgb} on a dark theme"
    lab.shot("memory-dark-theme", explorer.locator(".mlc-access"))
