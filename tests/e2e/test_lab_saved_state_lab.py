"""A notebook saved by JupyterLab's own widget-state saving (the "Save Widget State Automatically"
setting, then ctrl+s), reopened with no kernel: the explorer has its whole history (a branch
included), Undo steps back, the memory view draws its heatmaps, and no error banner shows. The
`mlc-lab export` page of that file shows the same history."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from tests.e2e.lab import console_errors, run_notebook
from tests.e2e.saved import export_offline, widget_state
from tests.e2e.test_explorer_lab import row
from tests.e2e.test_saved_state_lab import _no_kernel_dialog

pytestmark = pytest.mark.e2e

SAVE_STATE = "@jupyter-widgets/jupyterlab-manager:saveWidgetState"
CODE = ".mlc-explorer .mlc-code-main .cm-content"
STEP_ROWS = ".mlc-explorer .mlc-history-list .mlc-hrow-step"

CELLS = [
    "import mlc_lab\nfrom tests.fixtures.programs import MM_RELU\n"
    "s = mlc_lab.Session(MM_RELU)\ns.apply('split', 'Y/j', factors=[None, 4])\nmlc_lab.explore(s)",
    "mlc_lab.access_view(s, 'j_1')",
]

# Made after the widgets are on screen, so the page gets them as history deltas: 2 after 1, then
# back to 1 and a branch (3) from there.
LATER_STEPS = "s.apply('reorder', 'Y/i', 'j_0', 'k', 'j_1')\ns.undo()\ns.apply('parallel', 'Y/i')"
HISTORY = [(0, None), (1, 0), (2, 1), (3, 1)]  # (step, parent)


def _code_has(page, needle: str) -> None:
    page.wait_for_function(
        "([sel, n]) => (document.querySelector(sel)?.innerText || '').includes(n)", arg=[CODE, needle], timeout=15_000
    )


def _check_saved_view(page) -> None:
    """The whole history, Undo, heatmaps, and no error banner, with no kernel behind the page."""
    page.wait_for_selector(".mlc-explorer", timeout=60_000)
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=20_000)
    steps = page.eval_on_selector_all(STEP_ROWS, "els => els.map(e => Number(e.dataset.step))")
    assert steps == [0, 1, 2, 3], steps
    # the branch: step 3 was made from step 1 after an undo: drawn as a branch off the list
    pads = page.eval_on_selector_all(STEP_ROWS, "els => els.map(e => parseFloat(e.style.paddingLeft))")
    assert pads[0] == pads[1] == pads[2] < pads[3], pads
    assert page.eval_on_selector_all(f"{STEP_ROWS}.mlc-branch", "els => els.map(e => Number(e.dataset.step))") == [3]
    current = page.eval_on_selector(f"{STEP_ROWS}.mlc-current", "e => Number(e.dataset.step)")
    assert current == 3
    _code_has(page, "T.parallel")
    page.locator(".mlc-explorer .mlc-undo").first.click()  # back to step 1
    page.wait_for_function(
        "(sel) => document.querySelector(sel + '.mlc-current')?.dataset.step === '1'", arg=STEP_ROWS, timeout=15_000
    )
    _code_has(page, "j_0")
    page.wait_for_function(
        "(sel) => !(document.querySelector(sel)?.innerText || '').includes('T.parallel')", arg=CODE, timeout=15_000
    )
    view = page.locator(".mlc-access-view").first
    view.scroll_into_view_if_needed()
    view.locator(".mlc-acc-buffers canvas").first.wait_for(timeout=20_000)
    assert page.locator(".mlc-explorer .mlc-banner:visible, .mlc-has-error").count() == 0
    assert page.locator(".mlc-offline-banner[data-refused]").count() == 0


def _save_with_widget_state(page) -> None:
    """ctrl+s with JupyterLab's "Save Widget State Automatically" on (as it was left afterwards)."""
    toggled = page.evaluate(f"() => window.jupyterapp.commands.isToggled('{SAVE_STATE}')")
    try:
        if not toggled:
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")
            page.wait_for_function(f"() => window.jupyterapp.commands.isToggled('{SAVE_STATE}')")
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    finally:
        if not toggled:
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")


def _without_kernel(nb: dict, dest):
    """The notebook as a file that opens with no kernel (an unknown kernelspec; we answer "No Kernel")."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"]["kernelspec"] = {"name": "mlc-lab-none", "display_name": "none", "language": "mlc-lab-none"}
    nb["metadata"].pop("language_info", None)
    dest.write_text(json.dumps(nb))
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(dest)], check=True, capture_output=True)
    return dest


@contextlib.contextmanager
def _opened_without_kernel(browser, url: str, dest, artifacts, prefix: str):
    """``dest`` opened in a second browser context with "No Kernel": yields its page; a screenshot is
    kept, and the page must log no console error."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    errors = console_errors(page)
    try:
        page.goto(f"{url}/lab/tree/{dest.name}?reset")
        _no_kernel_dialog(page, artifacts, prefix)
        try:
            yield page
        finally:
            page.screenshot(path=str(artifacts / f"{prefix}-nokernel.png"))
        assert not errors, errors
    finally:
        context.close()


def test_jupyterlab_widget_state_save_reopens_whole(lab_server, lab_page, browser, artifacts, tmp_path):
    url, root = lab_server
    page, errors = lab_page
    lab = run_notebook(page, lab_server, artifacts, "jl_saved.ipynb", CELLS, prefix="jl-saved")
    page.wait_for_selector(".mlc-access-view .mlc-acc-buffers canvas", timeout=120_000)
    lab.kernel(LATER_STEPS)
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=30_000)
    page.wait_for_timeout(1000)  # the memory view follows the step (its reply is recorded)

    _save_with_widget_state(page)
    nb = json.loads((root / "jl_saved.ipynb").read_text())
    (artifacts / "jl_saved.ipynb").write_text(json.dumps(nb))
    dest = _without_kernel(nb, root / "jl_saved_nokernel.ipynb")
    with _opened_without_kernel(browser, url, dest, artifacts, "jl-saved") as other:
        _check_saved_view(other)

    # `mlc-lab export` of the same file, opened from file:// with the network cut
    out = tmp_path / "site"
    context = export_offline(browser, dest, out)
    exported = context.new_page()
    export_errors = console_errors(exported)
    try:
        exported.goto((out / f"{dest.stem}.html").as_uri())
        exported.wait_for_function("() => document.body.dataset.mlcLabReady === 'true'", timeout=60_000)
        try:
            _check_saved_view(exported)
        finally:
            exported.screenshot(path=str(artifacts / "jl-saved-export.png"))
        assert not export_errors, export_errors
    finally:
        context.close()
    # what JupyterLab wrote holds the whole history, not the last delta the page received
    state = widget_state(json.loads((root / "jl_saved.ipynb").read_text()))
    explorer = next(m for m in state.values() if m["state"].get("_mlc_entry") == "explorer")
    history = explorer["state"]["history"]
    assert history["from"] == 0 and [(h["id"], h["parent"]) for h in history["steps"]] == HISTORY, history
    assert not errors, errors


def test_a_save_right_after_a_burst_of_clicks_keeps_every_step(lab_server, lab_page, browser, artifacts):
    """The kernel records steps 2 s after the last change (off the click's path); a save before that
    still holds every step: the page records the steps it holds that the kernel has not yet."""
    url, root = lab_server
    page, errors = lab_page
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "burst.ipynb",
        [CELLS[0].replace("mlc_lab.explore(s)", "ex = mlc_lab.explore(s)\nex")],
        prefix="burst",
    )
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=120_000)
    lab.kernel("ex.RECORD_DELAY_S = 600")  # the kernel records nothing more until after the save
    # (and this kernel checks what it sends against mlc_lab.model: tests/e2e/conftest.py reads the file)
    assert lab.kernel_json("__import__('mlc_lab.widgets._base').widgets._base.STRICT").endswith("wire.log")
    row(page, "loop", "Y/i").click()
    page.keyboard.press("p")
    _code_has(page, "T.parallel")
    row(page, "loop", "j_1").click()
    page.keyboard.press("u")
    _code_has(page, "T.unroll")
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=20_000)
    _save_with_widget_state(page)

    nb = json.loads((root / "burst.ipynb").read_text())
    (artifacts / "burst.ipynb").write_text(json.dumps(nb))
    state = widget_state(nb)
    explorer = next(m for m in state.values() if m["state"].get("_mlc_entry") == "explorer")
    recorded = explorer["state"]["_mlc_recorded"]
    assert {"step:0", "step:1", "step:2", "step:3"} <= set(recorded), recorded
    assert lab.kernel_json("sorted(k for k in ex._mlc_records if k.startswith('step:'))") == ["step:0", "step:1"]

    dest = _without_kernel(nb, root / "burst_nokernel.ipynb")
    with _opened_without_kernel(browser, url, dest, artifacts, "burst") as other:
        other.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=60_000)
        _code_has(other, "T.unroll")
        other.locator(".mlc-explorer .mlc-undo").first.click()  # step 2: recorded by the page at the save
        other.wait_for_function(
            "(sel) => document.querySelector(sel + '.mlc-current')?.dataset.step === '2'", arg=STEP_ROWS, timeout=15_000
        )
        _code_has(other, "T.parallel")
        other.wait_for_function(
            "(sel) => !(document.querySelector(sel)?.innerText || '').includes('T.unroll')", arg=CODE, timeout=15_000
        )
        assert other.locator(".mlc-offline-banner[data-refused]").count() == 0
    assert not errors, errors
