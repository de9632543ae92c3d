"""The explorer's Checks panel in a real JupyterLab (Debian chromium): the GPU lab's gemm + relu + add
at 2048^3 with the assignment's tasks; a click binds a copy loop to 8 threads where the compute has 16,
and the panel shows the hazards it creates, the history marks that step with a ⚠, and a click on a line
of the panel selects its loop or block."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.lab import Lab, write_notebook
from tests.labs import gpu_matmul

pytestmark = pytest.mark.e2e

ASSIGNMENT = Path(__file__).resolve().parents[1] / "labs" / "grading" / "assignment.toml"
# The copy of A into shared memory, fused and split 8 x 32 x 4, up to (not including) its thread bindings
_, _STEPS = gpu_matmul.SUBMISSIONS["copy_8x32_threads"]
BEFORE_BIND = next(i for i, (p, a, _k) in enumerate(_STEPS) if p == "bind" and str(a[0]).startswith("A_shared"))


def test_checks_panel_follows_a_step_that_creates_hazards(lab_server, page, artifacts):
    url, root = lab_server
    write_notebook(
        root / "checks.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab.core.session import Session\nfrom tests.labs import gpu_matmul as g\n"
            f"program, steps = g.SUBMISSIONS['copy_8x32_threads']\ns = Session(program)\ng.apply(s, steps[:{BEFORE_BIND}])",
            f"ex = mlc_lab.explore(s, assignment={str(ASSIGNMENT)!r}, height='720px')\nex",
        ],
    )
    lab = Lab(page, url, artifacts, prefix="checks")
    lab.open("checks.ipynb")
    lab.run_all()
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=90_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    page.locator(".mlc-explorer .mlc-tab-checks").click()
    start = lab.kernel_json("ex.session.current.id")
    # the current step's checks arrive after its state: wait for the report of this step
    page.wait_for_selector(".mlc-explorer .mlc-checks .mlc-task", timeout=120_000)
    page.wait_for_function("(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
                           arg=start, timeout=120_000)
    assert page.locator(".mlc-explorer .mlc-checks-title").inner_text().startswith("Lab 3")
    assert page.locator(".mlc-explorer .mlc-task").count() == 4
    assert page.locator(".mlc-explorer .mlc-hazard").count() == 0
    assert page.locator(".mlc-explorer .mlc-hrow.mlc-current .mlc-hhazard").count() == 0
    # earlier steps made hazards of their own (blocks bound before the accumulator was cached: a spill)
    marks_before = page.locator(".mlc-explorer .mlc-hhazard").count()

    # bind the copy's 8-wide loop to threadIdx.y (the compute binds 16 to it): a thread-extent hazard
    # and a race on A_shared
    page.evaluate("() => { window.__mlcLab = { latencies: [] }; }")
    copy_loop = page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name$="ax0_ax1_fused_1"]').first
    copy_loop.click()
    page.locator('.mlc-explorer .mlc-prim[data-primitive="bind"]').click()
    form = page.locator('.mlc-form[data-primitive="bind"]')
    form.locator('select[name="thread_axis"]').select_option("threadIdx.y")
    form.locator(".mlc-apply").click()
    page.wait_for_function("(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
                           arg=start + 1, timeout=120_000)
    assert lab.kernel_json("ex.session.current.primitive") == "bind"
    kinds = sorted({h.get_attribute("data-hazard") for h in page.locator(".mlc-explorer .mlc-hazard").all()})
    assert "thread_extent" in kinds, kinds
    assert page.locator(".mlc-explorer .mlc-tab-checks").inner_text().count("⚠") == 1
    # the history marks the step that created them, with the sentences on hover
    page.locator(".mlc-explorer .mlc-tab-history").click()
    mark = page.locator(".mlc-explorer .mlc-hrow.mlc-current .mlc-hhazard")
    mark.wait_for(timeout=60_000)
    assert "thread extent: threadIdx.y is bound to loops with different extents" in mark.get_attribute("title")
    assert page.locator(".mlc-explorer .mlc-hhazard").count() == marks_before + 1  # that step, no other
    page.locator(".mlc-explorer .mlc-tab-checks").click()
    page.locator(".mlc-explorer .mlc-maximize").click()  # the whole window: every task in view
    page.wait_for_selector(".mlc-explorer.mlc-maximized")
    shot = lab.shot("panel", explorer)
    page.locator(".mlc-explorer .mlc-maximize").click()
    shots = Path(os.environ.get("MLC_LAB_SHOTS", artifacts))
    shots.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, shots / "checks_panel.png")

    # a click on a line selects its loop or block in the tree (and in Python)
    line = page.locator('.mlc-explorer .mlc-check[data-check="thread_block_tiling"]')
    where = line.get_attribute("data-where")
    line.click()
    page.wait_for_selector(f'.mlc-explorer .mlc-row.mlc-selected[data-name="{where}"]', timeout=10_000)
    hazard = page.locator('.mlc-explorer .mlc-hazard[data-hazard="thread_extent"]').first
    hazard_where = hazard.get_attribute("data-where")
    hazard.click()
    page.wait_for_selector(f'.mlc-explorer .mlc-row.mlc-selected[data-name$="{hazard_where}"]', timeout=10_000)
    assert lab.kernel_json("ex.selection")["name"].endswith(hazard_where)

    # undo: the step before has no hazard; its checks come from the worker's cache at once
    page.locator(".mlc-explorer .mlc-undo").click()
    page.wait_for_function("(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
                           arg=start, timeout=60_000)
    assert page.locator(".mlc-explorer .mlc-hazard").count() == 0
    samples = page.evaluate("() => window.__mlcLab.latencies")
    report_ms = lab.kernel_json(f"ex.check_report({start + 1})['ms']")
    print(f"\nchecks panel, GPU lab 2048^3: click-to-render {json.dumps([round(s['ms'], 1) for s in samples])} ms, "
          f"the bind step's checks took {report_ms} ms in the kernel (after the state)")
