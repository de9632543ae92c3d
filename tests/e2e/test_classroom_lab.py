"""The explorer as a student meets it in JupyterLab: keys stay in the widget, forms answer Enter and
Escape, and the layout fits a laptop screen (1280x720 with the file browser open).

Screenshots go to test-artifacts/e2e/ (prefix ``classroom``).
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.e2e.lab import Lab, write_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e

ACTIVE_CELL_JS = "() => window.jupyterapp.shell.currentWidget.content.activeCellIndex"
NOTEBOOK_MODE_JS = "() => window.jupyterapp.shell.currentWidget.content.mode"

CELLS = [
    "import mlc_lab\nfrom mlc_lab.widgets import explore\nfrom mlc_lab.widgets.access_view import access_view\n"
    "MM_RELU = " + repr(MM_RELU),
    "ex = explore(MM_RELU)\n"
    "ex.session.apply('sample_perfect_tile', 'Y/j', n=2, max_innermost_factor=16)\n"
    "ex",
    "av = access_view(mlc_lab.Session(MM_RELU), 'k')\nav",
    "x = 1  # a cell below the widgets: arrow keys must not move here",
]


def _api(url: str, method: str = "GET"):
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


@pytest.fixture()
def leave_no_trace(lab_server, page):
    yield
    url, _ = lab_server
    page.goto("about:blank")
    for s in _api(f"{url}/api/sessions") or []:
        if s.get("path", "").endswith("classroom.ipynb"):
            _api(f"{url}/api/sessions/{s['id']}", "DELETE")
    for ws in (_api(f"{url}/lab/api/workspaces") or {}).get("workspaces", {}).get("ids", []):
        _api(f"{url}/lab/api/workspaces/{ws}", "DELETE")


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
    assert page.evaluate("(el) => document.activeElement === el", locator.element_handle()), f"{key} took the focus away"
    return before, locator.input_value()


def test_keys_stay_in_the_widgets(lab_server, page, artifacts, leave_no_trace):
    url, root = lab_server
    write_notebook(root / "classroom.ipynb", CELLS)
    lab = Lab(page, url, artifacts, prefix="classroom")
    lab.open("classroom.ipynb")
    lab.run_all()
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    page.wait_for_selector(".mlc-access .mlc-acc-scrub", state="attached", timeout=60_000)
    explorer = page.locator(".mlc-explorer")

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
