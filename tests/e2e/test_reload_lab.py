"""A browser reload (or a second browser) on a running kernel brings every widget back, live: an
explorer, a memory view, a tuning dashboard (reopened from a work directory) and a plain ipywidgets
IntSlider, with mlc_lab's JupyterLab extension loaded. None stays at "Loading widget...", none
falls back to a saved view (the kernel still holds their models)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.lab import KERNEL_READY_JS, run_notebook
from tests.e2e.saved import widget_state

pytestmark = pytest.mark.e2e

CELLS = [
    "import ipywidgets, mlc_lab\nfrom pathlib import Path\nfrom tests.fixtures.programs import MM_RELU\n"
    "s = mlc_lab.Session(MM_RELU)\ns.apply('split', 'Y/j', factors=[None, 4])\nmlc_lab.explore(s)",
    "mlc_lab.access_view(s, 'j_1')",
    "from tests.widgets.test_tuning_dashboard import WorkDir\nfrom mlc_lab.widgets.tuning import TuningDashboard\n"
    "wd = WorkDir(Path('reload_wd'), total=8)\nfor i in range(8):\n    wd.add(1e-4 * (1 + i % 3))\n"
    "TuningDashboard(str(wd.path))",
    "ipywidgets.IntSlider(value=7, description='plain')",
]

SAVE_STATE = "@jupyter-widgets/jupyterlab-manager:saveWidgetState"
LOADING_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]
  .filter((el) => (el.textContent || '').includes('Loading widget...')).length"""


def all_widgets_live(page, timeout: int = 60_000) -> None:
    for sel in (".mlc-explorer", ".mlc-access-view", ".mlc-tuning", ".widget-slider"):
        page.wait_for_selector(f".jp-NotebookPanel:not(.lm-mod-hidden) {sel}", timeout=timeout)
    assert page.evaluate(LOADING_JS) == 0
    # live views, not the saved ones: no "saved view, no kernel" banner, and the slider is ipywidgets'
    assert page.locator(".mlc-offline-banner").count() == 0
    assert (
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider .widget-readout").first.inner_text() == "7"
    )
    # the explorer's history has the split made in Python
    page.wait_for_selector(".mlc-explorer .mlc-history-list [data-step='1']", timeout=20_000)


def save(page) -> None:
    """Save the notebook (its outputs: what a reload shows) and wait until it is written."""
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)


def reopen(page, url: str) -> None:
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
    page.wait_for_function(KERNEL_READY_JS, timeout=90_000)


def test_reload_brings_back_every_widget(lab_server, lab_page, browser, artifacts):
    url, root = lab_server
    page, errors = lab_page
    lab = run_notebook(page, lab_server, artifacts, "reload.ipynb", CELLS, prefix="reload")
    all_widgets_live(page, timeout=120_000)
    save(page)

    page.reload()
    reopen(page, url)
    try:
        all_widgets_live(page)
    finally:
        lab.shot("after-reload")

    # a second browser on the same running kernel
    other = browser.new_context(viewport={"width": 1600, "height": 950})
    try:
        second = other.new_page()
        second.goto(f"{url}/lab/tree/reload.ipynb?reset")
        reopen(second, url)
        try:
            all_widgets_live(second)
        finally:
            second.screenshot(path=str(artifacts / "reload-second-browser.png"))
    finally:
        other.close()
    # the live explorer still answers the kernel: a step made in Python shows after the reload
    lab.kernel("s.apply('parallel', 'Y/i')")
    page.wait_for_selector(".mlc-explorer .mlc-history-list [data-step='2']", timeout=20_000)

    # Saved with the widget state in the file too ("Save Widget State Automatically"): after a
    # reload the kernel's models win over the saved copies (live views, no "saved view" banner).
    toggled = page.evaluate(f"() => window.jupyterapp.commands.isToggled('{SAVE_STATE}')")
    try:
        if not toggled:
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")
        page.evaluate("() => { window.jupyterapp.shell.currentWidget.context.model.dirty = true; }")
        save(page)
        state = widget_state(json.loads((root / "reload.ipynb").read_text()))
        assert any(m["state"].get("_mlc_entry") == "explorer" for m in state.values())
        page.reload()
        reopen(page, url)
        page.wait_for_selector(".mlc-explorer .mlc-history-list [data-step='2']", timeout=60_000)
        page.wait_for_function("() => document.querySelectorAll('.mlc-offline-banner').length === 0", timeout=30_000)
        all_widgets_live(page)
        lab.kernel("s.undo()")
        page.wait_for_selector(".mlc-explorer .mlc-history-list [data-step='1'].mlc-current", timeout=20_000)
    finally:
        if not toggled:
            page.evaluate(f"() => window.jupyterapp.commands.execute('{SAVE_STATE}')")
    assert not [e for e in errors if "Loading widget" in e or "model not found" in e], errors
