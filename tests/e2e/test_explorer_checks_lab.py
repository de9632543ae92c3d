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

from tests.e2e.lab import run_notebook
from tests.labs import gpu_matmul

pytestmark = pytest.mark.e2e

ASSIGNMENT = Path(__file__).resolve().parents[1] / "labs" / "grading" / "assignment.toml"
# The copy of A into shared memory, fused and split 8 x 32 x 4, up to (not including) its thread bindings
_, _STEPS = gpu_matmul.SUBMISSIONS["copy_8x32_threads"]
BEFORE_BIND = next(i for i, (p, a, _k) in enumerate(_STEPS) if p == "bind" and str(a[0]).startswith("A_shared"))


def test_checks_panel_follows_a_step_that_creates_hazards(lab_server, page, artifacts):
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "checks.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab.core.session import Session\nfrom tests.labs import gpu_matmul as g\n"
            f"program, steps = g.SUBMISSIONS['copy_8x32_threads']\ns = Session(program)\ng.apply(s, steps[:{BEFORE_BIND}])",
            f"ex = mlc_lab.explore(s, assignment={str(ASSIGNMENT)!r}, height='720px')\nex",
        ],
        prefix="checks",
    )
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=90_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    page.locator(".mlc-explorer .mlc-tab-checks").click()
    start = lab.kernel_json("ex.session.current.id")
    # the current step's checks arrive after its state: wait for the report of this step
    page.wait_for_selector(".mlc-explorer .mlc-checks .mlc-task", timeout=120_000)
    page.wait_for_function(
        "(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
        arg=start,
        timeout=120_000,
    )
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
    page.wait_for_function(
        "(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
        arg=start + 1,
        timeout=120_000,
    )
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
    page.wait_for_function(
        "(s) => document.querySelector('.mlc-explorer .mlc-checks-head')?.innerText.includes('of step ' + s)",
        arg=start,
        timeout=60_000,
    )
    assert page.locator(".mlc-explorer .mlc-hazard").count() == 0
    samples = page.evaluate("() => window.__mlcLab.latencies")
    report_ms = lab.kernel_json(f"ex.check_report({start + 1})['ms']")
    print(
        f"\nchecks panel, GPU lab 2048^3: click-to-render {json.dumps([round(s['ms'], 1) for s in samples])} ms "
        f"(drawing the Checks panel in the click's frame: {[round((s.get('panels') or {}).get('checks', 0), 1) for s in samples]} ms), "
        f"the bind step's checks took {report_ms} ms in the kernel (after the state)"
    )


SAVED_CELL = f"""import mlc_lab
from mlc_lab.core.session import Session
from tests.labs import gpu_matmul as g
program, steps = g.SUBMISSIONS["copy_8x32_threads"]
ex = mlc_lab.explore(Session(program), assignment={str(ASSIGNMENT)!r})
assert ex.wait(300)                       # step 0 checked
g.apply(ex.session, steps[:{BEFORE_BIND}])  # steps from Python, faster than their checks: some are skipped
assert ex.wait(300)
g.apply(ex.session, steps[{BEFORE_BIND}:{BEFORE_BIND + 1}])  # the bind that creates the hazards
assert ex.wait(300)
ex"""


def test_saved_checks_panel_offline(browser, artifacts, tmp_path):
    """Saved with its widget state and exported (`mlc-lab export`), opened from file:// without a
    kernel: the recorded report of a step, the history's ⚠, and for a step whose checks were never
    computed a sentence that they need a kernel; no console errors."""

    from tests.e2e.lab import console_errors, write_notebook
    from tests.e2e.saved import execute_saving_widgets, export_offline, widget_state

    src = tmp_path / "checks_src.ipynb"
    write_notebook(src, [SAVED_CELL])
    saved = tmp_path / "checks.ipynb"
    execute_saving_widgets(src, saved)
    state = widget_state(json.loads(saved.read_text()))
    recorded = {
        int(json.loads(m["state"]["key"].split(" ", 1)[1])["step"])
        for m in state.values()
        if m["state"].get("key", "").startswith("checks ")
    }
    last = BEFORE_BIND + 1
    assert {0, BEFORE_BIND, last} <= recorded, recorded
    never = min(set(range(1, last)) - recorded)
    context = export_offline(browser, saved, tmp_path / "site")
    page = context.new_page()
    errors = console_errors(page)
    try:
        page.goto((tmp_path / "site" / "checks.html").as_uri())
        page.wait_for_function("() => document.body.dataset.mlcLabReady === 'true'", timeout=60_000)
        ex = page.locator(".mlc-explorer").first
        head = ".mlc-explorer .mlc-checks-head"
        ex.locator(".mlc-tab-checks").click()
        page.wait_for_function(
            "([h, s]) => document.querySelector(h)?.innerText.includes('of step ' + s)",
            arg=[head, last],
            timeout=20_000,
        )
        assert ex.locator(".mlc-hazard[data-hazard='thread_extent']").count() == 1
        # the history's marks come with the saved state
        ex.locator(".mlc-tab-history").click()
        assert ex.locator(f".mlc-hrow[data-step='{last}'] .mlc-hhazard").count() == 1
        # a step whose checks were recorded, then one whose checks never ran
        ex.locator(f".mlc-history-list [data-step='{BEFORE_BIND}']").click()
        ex.locator(".mlc-tab-checks").click()
        page.wait_for_function(
            "([h, s]) => document.querySelector(h)?.innerText.includes('of step ' + s)",
            arg=[head, BEFORE_BIND],
            timeout=20_000,
        )
        assert ex.locator(".mlc-hazard").count() == 0 and ex.locator(".mlc-check").count() == 6
        ex.locator(".mlc-tab-history").click()
        ex.locator(f".mlc-history-list [data-step='{never}']").click()
        ex.locator(".mlc-tab-checks").click()
        note = ex.locator(".mlc-checks-nokernel")
        note.wait_for(timeout=20_000)
        assert f"The checks of step {never} need a running kernel" in note.inner_text()
        ex.screenshot(path=str(artifacts / "saved-checks-panel.png"))
        assert not errors, errors
    finally:
        context.close()
