"""The explorer's way to a target program in a real JupyterLab (Debian chromium): chapter 2's
exercise 3 opened with its target (the course's TargetModule), reached by Hint and Apply alone
until the explorer says it is at the target, with TVM's assert_structural_equal holding in the
kernel; and a wrong step (decompose_reduction before parallel, which TVM then refuses) answered
with the way back and a button that goes there."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from mlc_lab.exercises import BMM_RELU, BMM_RELU_TARGET
from tests.e2e.lab import run_notebook

pytestmark = pytest.mark.e2e

# The exercise as a student's notebook has it: the two programs as TVMScript, then the explorer.
CELLS = [
    BMM_RELU.strip(),
    BMM_RELU_TARGET.strip(),
    "import mlc_lab\nex = mlc_lab.explore(MyBmmRelu, target=TargetModule, height='760px')\nex",
]
STATUS = ".mlc-explorer .mlc-way-status"


def _status(page) -> str:
    return page.locator(STATUS).inner_text()


def _wait_status(page, pattern: str, timeout: int = 120_000) -> str:
    page.wait_for_function(
        "(p) => new RegExp(p).test(document.querySelector('.mlc-explorer .mlc-way-status')?.innerText ?? '')",
        arg=pattern,
        timeout=timeout,
    )
    return _status(page)


def _shots(artifacts: Path) -> Path:
    shots = Path(os.environ.get("MLC_LAB_SHOTS", artifacts))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def test_exercise_3_reached_by_hints_alone(lab_server, page, artifacts):
    lab = run_notebook(page, lab_server, artifacts, "way_hints.ipynb", CELLS, prefix="way")
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=90_000)
    page.locator(".mlc-explorer").scroll_into_view_if_needed()
    assert page.locator(".mlc-explorer .mlc-way-target").inner_text() == "→ TargetModule:"
    left = int(re.match(r"(\d+) steps? to the target", _wait_status(page, r"^\d+ steps? to the target")).group(1))
    assert left == 9
    shots = _shots(artifacts)
    for n in range(left):
        page.locator(".mlc-explorer .mlc-way-hint:not([disabled])").click()
        form = page.locator(".mlc-explorer .mlc-form")
        form.locator(".mlc-form-hint").wait_for(timeout=10_000)
        if n == 0:
            assert form.get_attribute("data-primitive") == "split"
            factors = [f.input_value() for f in form.locator(".mlc-factor").all()]
            assert factors == ["16", "8"], factors
            shutil.copy(lab.shot("hint-form", page.locator(".mlc-explorer")), shots / "way-01-hint-form-filled.png")
        assert lab.kernel_json("len(ex.session.steps)") == n + 1  # nothing applied before Apply
        form.locator(".mlc-apply").click()
        remaining = left - n - 1
        _wait_status(page, rf"^{remaining} steps? to the target" if remaining else "^At the target")
        assert lab.kernel_json("ex.session.current.id") == n + 1
    assert page.locator(f"{STATUS}[data-state='at']").count() == 1
    assert page.locator(".mlc-explorer .mlc-tab-way").inner_text() == "Way ✓"
    assert page.locator(".mlc-explorer .mlc-way-hint").is_disabled()
    out = lab.kernel("import tvm\ntvm.ir.assert_structural_equal(ex.session.module, TargetModule)\nprint('equal')")
    assert out.strip() == "equal"
    # each step made is the hint's own call (a reorder of the loops the hint names, as it names them)
    made = lab.kernel_json("[s.label for s in ex.session.steps[1:]]")
    assert made == lab.kernel_json("[s.label for s in ex.path_to(0).steps]"), made
    shutil.copy(lab.shot("at-target", page.locator(".mlc-explorer")), shots / "way-02-at-the-target.png")


def test_a_wrong_step_shows_the_way_back_and_goes_there(lab_server, page, artifacts):
    cells = [
        *CELLS[:2],
        "import mlc_lab\nex = mlc_lab.explore(MyBmmRelu, target=TargetModule, height='760px')\ns = ex.session\n"
        "s.apply('split', 'Y/j', factors=[16, 8])\ns.apply('split', 'k', factors=[32, 4])\n"
        "s.apply('reorder', 'k_0', 'k_1', 'j_1')\nex",
    ]
    lab = run_notebook(page, lab_server, artifacts, "way_back.ipynb", cells, prefix="wayback")
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=90_000)
    page.locator(".mlc-explorer").scroll_into_view_if_needed()
    _wait_status(page, r"^6 steps to the target")
    # the wrong step, clicked: decompose_reduction of Y above k_0, before parallel
    page.locator('.mlc-explorer .mlc-row[data-kind="block"][data-name="Y"]').first.click()
    page.locator('.mlc-explorer .mlc-prim[data-primitive="decompose_reduction"]').click()
    form = page.locator('.mlc-explorer .mlc-form[data-primitive="decompose_reduction"]')
    loop = form.locator('select[name="loop"]')
    value = next(
        o.get_attribute("value") for o in loop.locator("option").all() if o.get_attribute("value").endswith("k_0")
    )
    loop.select_option(value)
    form.locator(".mlc-apply").click()
    text = _wait_status(page, r"^Not reachable from step 4: go back to step 3")
    assert "(reorder(k_0, k_1, j_1))" in text and text.endswith("then 6 steps")
    assert page.locator(".mlc-explorer .mlc-way-hint").is_disabled()
    page.locator(".mlc-explorer .mlc-way-show").click()
    undo = page.locator(".mlc-explorer .mlc-way-undo")
    undo.wait_for(timeout=10_000)
    assert "go back to step 3" in undo.inner_text()
    assert page.locator(".mlc-explorer .mlc-way-step:not(.mlc-way-undo)").count() == 6
    shutil.copy(lab.shot("way-back", page.locator(".mlc-explorer")), _shots(artifacts) / "way-03-the-way-back.png")
    page.locator(".mlc-explorer .mlc-way-back").click()
    _wait_status(page, r"^6 steps to the target")
    assert lab.kernel_json("ex.session.current.id") == 3  # the kernel followed the page
    # from there the hint is parallel, as the way back said
    page.locator(".mlc-explorer .mlc-way-hint:not([disabled])").click()
    page.locator('.mlc-explorer .mlc-form[data-primitive="parallel"] .mlc-apply').click()
    _wait_status(page, r"^5 steps to the target")
    assert lab.kernel_json("ex.session.current.primitive") == "parallel"
