"""Saved widget state survives a second save (issue 27, item 1). With "Save Widget State
Automatically" on, a notebook saved with an explorer, a memory view and a plain ipywidgets slider is
reopened after its kernel was shut down (a fresh kernel starts, which holds none of the saved models),
then saved by ctrl+s and by an autosave: each save keeps every saved model (JupyterLab's manager alone
writes only the models its kernel holds: 0), the open does not mark the notebook changed, and the
next open shows every widget with its state."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
import urllib.request

import pytest

from tests.e2e.conftest import running_lab
from tests.e2e.lab import Lab, console_errors, write_notebook
from tests.e2e.saved import WIDGET_VIEW, widget_state
from tests.e2e.test_lab_saved_state_lab import (
    CELLS,
    LATER_STEPS,
    STEP_ROWS,
    _check_saved_view,
    _opened_without_kernel,
    _without_kernel,
)

pytestmark = pytest.mark.e2e

SETTINGS = {
    "@jupyter-widgets/jupyterlab-manager/plugin.jupyterlab-settings": {"saveState": True},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosaveInterval": 2},
}
SLIDER = "import ipywidgets\nslider = ipywidgets.IntSlider(value=7, max=20, description='plain')\nslider"
READOUT = ".jp-NotebookPanel:not(.lm-mod-hidden) .widget-slider .widget-readout"
DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"
NAME = "twice.ipynb"


@pytest.fixture(scope="module")
def autosave_lab(tmp_path_factory):
    """A JupyterLab of its own: widget state saved with every save, an autosave every 2 s."""
    with running_lab(tmp_path_factory.mktemp("twice"), user_settings=SETTINGS) as server:
        yield server


def _shut_down_kernel(url: str, name: str) -> None:
    """End the notebook's session (its kernel) on the server, as "Shut Down Kernel" and closing do."""
    with urllib.request.urlopen(f"{url}/api/sessions") as r:
        sessions = json.load(r)
    for s in sessions:
        if s.get("path") == name:
            sid = urllib.parse.quote(s["id"])
            urllib.request.urlopen(urllib.request.Request(f"{url}/api/sessions/{sid}", method="DELETE")).close()
    deadline = time.time() + 20
    while time.time() < deadline:
        with urllib.request.urlopen(f"{url}/api/sessions") as r:
            if not any(s.get("path") == name for s in json.load(r)):
                return
        time.sleep(0.3)
    raise AssertionError(f"the kernel of {name} did not shut down")


@contextlib.contextmanager
def _opened(browser, url: str, name: str, artifacts, prefix: str):
    """``name`` opened in a fresh browser context, its kernel ready: yields (page, lab, console errors)."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors = console_errors(page)
    try:
        lab = Lab(page, url, artifacts, prefix=prefix)
        lab.open(name)
        try:
            yield page, lab, errors
        finally:
            lab.shot("end")
    finally:
        context.close()


def _after_save(page, path, before_ns: int, what: str) -> dict:
    """The file's widget models once a save after ``before_ns`` (its mtime then) has finished."""
    t0 = time.time()
    while path.stat().st_mtime_ns == before_ns or page.evaluate(DIRTY):
        assert time.time() < t0 + 60, f"the notebook was not saved by {what}"
        page.wait_for_timeout(200)
    print(f"{what}: saved after {time.time() - t0:.1f} s")
    return widget_state(json.loads(path.read_text()))


def _slider_shows(page, value: str) -> None:
    page.wait_for_function(
        "([sel, v]) => document.querySelector(sel)?.innerText === v", arg=[READOUT, value], timeout=60_000
    )


def _kinds(state: dict) -> list[str]:
    return sorted(m["state"].get("_mlc_entry") or m["model_name"] for m in state.values())


def test_saved_widgets_survive_reopen_ctrl_s_autosave_reopen(autosave_lab, browser, artifacts):
    url, root = autosave_lab
    path = root / NAME
    write_notebook(path, [*CELLS, SLIDER])

    # 1. Run it, change the widgets, save (ctrl+s; widget state is saved with it).
    with _opened(browser, url, NAME, artifacts, "twice-1") as (page, lab, errors):
        lab.run_all()
        page.wait_for_selector(".mlc-access-view .mlc-acc-buffers canvas", timeout=120_000)
        _slider_shows(page, "7")
        lab.kernel(LATER_STEPS + "\nslider.value = 13")
        page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=30_000)
        _slider_shows(page, "13")
        page.wait_for_timeout(2500)  # the kernel records its steps 2 s after the last
        assert page.evaluate(
            "() => window.jupyterapp.commands.isToggled('@jupyter-widgets/jupyterlab-manager:saveWidgetState')"
        )
        before = path.stat().st_mtime_ns
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        first = _after_save(page, path, before, "first ctrl+s")
        assert not errors, errors
    shown = [
        v[WIDGET_VIEW]["model_id"]
        for c in json.loads(path.read_text())["cells"]
        for o in c.get("outputs", [])
        if (v := o.get("data", {})) and WIDGET_VIEW in v
    ]
    assert len(shown) == 3 and set(shown) <= set(first), (shown, sorted(first))
    kinds = _kinds(first)
    assert {"explorer", "access_view", "IntSliderModel"} <= set(kinds), kinds
    slider = next(m for m in first.values() if m["model_name"] == "IntSliderModel")
    assert slider["state"]["value"] == 13
    (artifacts / "twice-1.ipynb").write_text(path.read_text())
    _shut_down_kernel(url, NAME)

    # 2. Reopen: a fresh kernel that holds none of these models. Save by ctrl+s, then by autosave.
    counts = {"first save": len(first)}
    with _opened(browser, url, NAME, artifacts, "twice-2") as (page, lab, errors):
        page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4", arg=STEP_ROWS, timeout=60_000)
        _slider_shows(page, "13")  # ipywidgets' own view, of the model restored from the file
        page.wait_for_timeout(3000)  # longer than the autosave interval
        dirty_on_open = page.evaluate(DIRTY)
        before = path.stat().st_mtime_ns
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        after_ctrl_s = _after_save(page, path, before, "ctrl+s")
        counts["ctrl+s"] = len(after_ctrl_s)
        (artifacts / "twice-2-ctrl-s.ipynb").write_text(path.read_text())
        before = path.stat().st_mtime_ns
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:insert-cell-below')")  # a change
        page.wait_for_function(DIRTY)
        after_autosave = _after_save(page, path, before, "autosave")  # no key pressed: the autosave wrote it
        counts["autosave"] = len(after_autosave)
        (artifacts / "twice-2-autosave.ipynb").write_text(path.read_text())
        console = list(errors)
    print("widget models in the file:", counts, "dirty on open:", dirty_on_open)
    assert counts == {"first save": len(first), "ctrl+s": len(first), "autosave": len(first)}, counts
    assert after_ctrl_s == first and after_autosave == first  # every model, byte for byte
    assert not dirty_on_open, "opening the notebook marked it changed"
    assert not console, "\n".join(console)
    _shut_down_kernel(url, NAME)

    # 3. Reopen again, with a fresh kernel and with none: every widget, with its state.
    with _opened(browser, url, NAME, artifacts, "twice-3") as (page, lab, errors):
        _check_saved_view(page)
        _slider_shows(page, "13")
        page.locator(READOUT).scroll_into_view_if_needed()
        lab.shot("slider")
        assert page.locator(".jp-OutputArea-output >> text=model not found").count() == 0
        assert not errors, errors
    dest = _without_kernel(json.loads(path.read_text()), root / "twice_nokernel.ipynb")
    with _opened_without_kernel(browser, url, dest, artifacts, "twice-3") as other:
        _check_saved_view(other)
    _shut_down_kernel(url, NAME)
