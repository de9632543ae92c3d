"""The explorer's "open in a side panel" in a real JupyterLab: the button (offered by mlc_lab's
extension) opens a second, live view of the same explorer in the main area's right split
(JupyterLab's "Create New View for Output"); a click there changes the one in the notebook too.
Not offered inside the side panel itself. No console errors."""

from __future__ import annotations

import pytest

from tests.e2e.lab import run_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e

NOTEBOOK_CODE = ".jp-NotebookPanel .jp-Cell .mlc-explorer .mlc-code-main .cm-content"
SIDE = ".jp-LinkedOutputView"


def test_explorer_opens_in_a_side_panel(lab_server, lab_page, artifacts):
    page, errors = lab_page
    run_notebook(
        page,
        lab_server,
        artifacts,
        "side_panel.ipynb",
        [
            "from mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU),
            'ex = explore(MM_RELU, height="560px")\nex.session.apply("split", "Y/j", factors=[None, 4])\nex',
        ],
        prefix="side-panel",
    )
    page.wait_for_function(
        f"() => (document.querySelector({NOTEBOOK_CODE!r})?.innerText || '').includes('j_1')", timeout=120_000
    )
    button = page.locator(".jp-NotebookPanel .jp-Cell .mlc-explorer .mlc-side-panel")
    page.locator(".jp-NotebookPanel .jp-Cell .mlc-explorer").first.hover()
    button.wait_for(state="visible", timeout=10_000)
    button.click()
    side = page.locator(f"{SIDE} .mlc-explorer")
    side.wait_for(timeout=60_000)
    page.wait_for_function(
        f"() => (document.querySelector('{SIDE} .mlc-code-main .cm-content')?.innerText || '').includes('j_1')",
        timeout=60_000,
    )
    nb_box = page.locator(".jp-NotebookPanel").first.bounding_box()
    side_box = page.locator(SIDE).first.bounding_box()
    assert side_box["x"] >= nb_box["x"] + nb_box["width"] - 2, (nb_box, side_box)  # the right split
    side.hover()
    assert page.locator(f"{SIDE} .mlc-side-panel").is_hidden()  # not offered again in the side panel
    # one model, two views: Undo in the side panel reaches the kernel and both views follow
    page.locator(f"{SIDE} .mlc-undo").click()
    for code in (f"{SIDE} .mlc-code-main .cm-content", NOTEBOOK_CODE):
        page.wait_for_function(
            f"() => (document.querySelector({code!r})?.innerText || '').includes('for i, j, k in T.grid(128, 128, 128)')",
            timeout=60_000,
        )
    page.screenshot(path=str(artifacts / "side-panel.png"))
    assert not errors, errors
