"""mlc_lab's JupyterLab extension in a real JupyterLab: the Launcher tile writes a new exploration
notebook from a course program; a trace file opens as a document (read-only, then "Open with
kernel" replays it in a live explorer); a tuning run's records open as the dashboard with no
kernel. No console errors."""

from __future__ import annotations

import pytest

from tests.e2e.lab import KERNEL_READY_JS
from tests.fixtures.programs import MM_RELU
from tests.widgets.test_tuning_dashboard import RUN_ERROR, WorkDir

pytestmark = pytest.mark.e2e

TRACE = """\
b0 = sch.get_sblock(name="Y", func_name="mm_relu")
l1, l2, l3 = sch.get_loops(block=b0)
l4, l5 = sch.split(loop=l2, factors=[None, 4])
sch.reorder(l1, l4, l3, l5)
"""


@pytest.fixture()
def lab_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 950})
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    yield page, errors
    context.close()


def test_launcher_tile_writes_an_exploration(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    page.goto(f"{url}/lab?reset")
    tile = page.locator(".jp-LauncherCard[title*='schedule explorer'], .jp-LauncherCard:has-text('New schedule exploration')").first
    tile.wait_for(timeout=60_000)
    page.locator(".jp-Launcher").screenshot(path=str(artifacts / "launcher.png"))
    tile.click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("select").select_option("mm_relu")
    dialog.locator(".jp-mod-accept").click()
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell >> text=course_program", timeout=60_000)
    written = sorted(p.name for p in root.glob("explore-mm_relu*.ipynb"))
    assert written, list(root.iterdir())
    text = (root / written[-1]).read_text()
    assert 'mlc_lab.explore(mlc_lab.course_program(\\"mm_relu\\"))' in text
    assert "trials=64" in text  # the setting's default
    assert not errors, errors


def test_trace_document_and_open_with_kernel(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    (root / "mm.py").write_text(MM_RELU)
    (root / "mm.trace").write_text(TRACE)
    page.goto(f"{url}/lab/tree/mm.trace?reset")
    steps = page.locator(".mlc-lab-trace-doc .mlc-lab-trace-steps li")
    steps.first.wait_for(timeout=60_000)
    assert steps.count() == 4 and "sch.split" in steps.nth(2).inner_text()
    page.locator(".jp-Toolbar >> text=Open with kernel").click()
    # the notebook beside it runs mlc_lab.open_trace: a live explorer with the trace replayed
    page.wait_for_function(KERNEL_READY_JS, timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer", timeout=120_000)
    page.wait_for_function(
        "() => (document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer .mlc-code-main .cm-content')?.innerText || '').includes('j_1')",
        timeout=60_000)
    assert page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-offline-banner").count() == 0  # live
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer").first.screenshot(path=str(artifacts / "trace-explorer.png"))
    assert (root / "mm-explore.ipynb").exists()
    assert not errors, errors


def test_tuning_run_document_without_kernel(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    wd = WorkDir(root / "runs" / "mm", total=12)
    for i in range(10):
        wd.add(None if i == 3 else 1e-4 * (10 - i), RUN_ERROR if i == 3 else None)
    page.goto(f"{url}/lab/tree/runs/mm/database_tuning_record.json?reset")
    board = page.locator(".mlc-lab-run-doc .mlc-tuning")
    board.wait_for(timeout=60_000)
    page.wait_for_selector(".mlc-lab-run-doc .js-plotly-plot .scatterlayer .trace", timeout=30_000)
    assert page.locator(".mlc-lab-run-doc .mlc-t-failure").count() == 1
    assert "10" in board.inner_text()  # trials done
    board.screenshot(path=str(artifacts / "tuning-run-document.png"))
    assert not errors, errors
