"""Lecture notebook 1 in a real JupyterLab (Debian chromium): run all, then check that its widgets
render and answer clicks: the explorer shows mm_relu after the walk-through, undo by click changes
the session in the kernel, a primitive applied by click reaches the script; the plotly figures and
the access view are drawn."""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from tests.e2e.lab import Lab

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CODE = ".mlc-explorer .mlc-code-main .cm-content"


def code_has(page, needle: str, present: bool = True, timeout: int = 20_000) -> None:
    js = """([sel, needle, present]) => {
      const el = document.querySelector(sel);
      return !!el && el.innerText.includes(needle) === present;
    }"""
    page.wait_for_function(js, arg=[CODE, needle, present], timeout=timeout)


def test_notebook1_runs_and_its_widgets_respond(lab_server, page, artifacts):
    url, root = lab_server
    nb = nbformat.read(str(REPO / "notebooks" / "01_tensorir.ipynb"), as_version=4)
    # Short sweep, as in the notebook tests (the server's environment is shared by all e2e tests).
    nb.cells.insert(0, nbformat.v4.new_code_cell('import os\nos.environ["MLC_LAB_QUICK"] = "1"'))
    nbformat.write(nb, str(root / "01_tensorir.ipynb"))

    lab = Lab(page, url, artifacts, prefix="notebook1")
    t0 = time.monotonic()
    lab.open("01_tensorir.ipynb")
    # Opening a lecture marks nothing changed: its kernelspec is the one the kernel reports (its display
    # name differed: JupyterLab rewrote it on open, and every lecture asked to be saved at once).
    page.wait_for_timeout(2000)
    assert not page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty"), page.evaluate(
        "() => JSON.stringify(window.jupyterapp.shell.currentWidget.context.model.toJSON().metadata)"
    )
    lab.run_all()

    # The last cell prints the best split factor: everything above has run by then.
    page.wait_for_selector(".jp-OutputArea-output >> text=best jfactor here", timeout=150_000)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    error_text = "\n".join(errors.nth(i).inner_text() for i in range(errors.count()))
    assert "Traceback" not in error_text and "Error" not in error_text, error_text

    # The explorer shows mm_relu after the four steps applied from Python cells.
    explorer = page.locator(".mlc-explorer").first
    explorer.scroll_into_view_if_needed()
    code_has(page, "def mm_relu(")
    code_has(page, 'T.sblock("Y_init")')
    state = lab.kernel_json("[session.current.primitive, len(session.steps), explorer.session is session]")
    assert state == ["decompose_reduction", 5, True]
    lab.shot("walkthrough", explorer)

    # A click on undo reaches the session in the kernel, and the script follows.
    page.locator(".mlc-explorer .mlc-undo").first.click()
    code_has(page, 'T.sblock("Y_init")', present=False)
    assert lab.kernel_json("session.current.primitive") == "reverse_compute_at"

    # A primitive by click: parallel on the outer loop i.
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="i"]').first.click()
    page.locator('.mlc-explorer .mlc-prim[data-primitive="parallel"]').first.click()
    form = page.locator('.mlc-explorer .mlc-form[data-primitive="parallel"]')
    if form.count():  # primitives without arguments may apply at once
        form.locator(".mlc-apply").click()
    code_has(page, "T.parallel(128)")
    after = lab.kernel_json("[session.current.primitive, 'T.parallel(128)' in session.script]")
    assert after == ["parallel", True]
    lab.shot("parallel-by-click", explorer)

    # Figures: two footprints and the sweep are drawn by plotly in the page.
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=30_000)

    # The access view, when this mlc_lab has it, renders too.
    if lab.kernel_json("view is not None"):
        view = page.locator(".mlc-access-view").first
        view.wait_for(state="visible", timeout=30_000)
        view.scroll_into_view_if_needed()
        lab.shot("access-view", view)

    (artifacts / "notebook1-timing.json").write_text(json.dumps({"seconds": time.monotonic() - t0}))
