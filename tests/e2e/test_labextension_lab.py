"""mlc_lab's JupyterLab extension in a real JupyterLab: the Launcher tile writes a new exploration
notebook from a course program; a trace file opens as a document (read-only at once, then live in
the same tab through a kernel of its own: the explorer with the trace replayed, answering clicks;
"Read-only" shuts that kernel down; "Open as notebook" writes a notebook that does the same); a
tuning run's records open as the dashboard with no kernel. No console errors."""

from __future__ import annotations

import json
import time
import urllib.request

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


def lab_setting(url: str, **values) -> None:
    """Set mlc_lab's JupyterLab settings for the pages opened after this (the settings REST API)."""
    body = json.dumps({"raw": json.dumps(values)}).encode()
    req = urllib.request.Request(
        f"{url}/lab/api/settings/mlc-lab-jupyterlab:plugin",
        data=body,
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status in (200, 204)


def sessions(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/sessions", timeout=10) as r:
        return json.loads(r.read())


def ten_trials(path) -> None:
    """A tuning run's folder: 10 of 12 trials measured, the fourth one failed."""
    wd = WorkDir(path, total=12)
    for i in range(10):
        wd.add(None if i == 3 else 1e-4 * (10 - i), RUN_ERROR if i == 3 else None)


def test_launcher_tile_writes_an_exploration(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    page.goto(f"{url}/lab?reset")
    tile = page.locator(
        ".jp-LauncherCard[title*='schedule explorer'], .jp-LauncherCard:has-text('New schedule exploration')"
    ).first
    tile.wait_for(timeout=60_000)
    page.locator(".jp-Launcher").screenshot(path=str(artifacts / "launcher.png"))
    # Each tile carries its own icon (the theme-coloured LabIcon), not JupyterLab's blank square.
    assert tile.locator("svg[data-icon='mlc-lab:explore']").count() == 1
    run_tile = page.locator(".jp-LauncherCard:has-text('Open tuning run')").first
    assert run_tile.locator("svg[data-icon='mlc-lab:tuning-run']").count() == 1
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


LIVE_CODE = ".mlc-lab-doc .mlc-lab-live .mlc-explorer .mlc-code-main .cm-content"


def test_trace_document_live_through_its_own_kernel(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    lab_setting(url)  # the default: documents start a kernel of their own
    (root / "mm.py").write_text(MM_RELU)
    (root / "mm.trace").write_text(TRACE)
    page.goto(f"{url}/lab/tree/mm.trace?reset")
    steps = page.locator(".mlc-lab-trace-doc .mlc-lab-trace-steps li")
    steps.first.wait_for(timeout=60_000)  # read-only at once, from the file
    assert steps.count() == 4 and "sch.split" in steps.nth(2).inner_text()
    # then live in the same tab: the explorer, the trace replayed by the document's kernel
    page.wait_for_function(
        f"() => (document.querySelector({LIVE_CODE!r})?.innerText || '').includes('j_1')", timeout=180_000
    )
    assert page.locator(".mlc-lab-doc-status").first.get_attribute("data-state") == "live"
    assert page.locator(".mlc-lab-trace-doc").is_hidden()
    assert page.locator(".mlc-lab-doc .mlc-offline-banner").count() == 0
    assert page.locator(".jp-NotebookPanel").count() == 0  # no notebook was written or opened
    (ours,) = [s for s in sessions(url) if s["path"].endswith("mm.trace")]
    assert ours["type"] == "mlc_lab" and ours["kernel"]["name"]
    assert [p.name for p in root.glob("mm-explore*.ipynb")] == []
    # a click goes to the kernel and back: the original program, then the history's last step
    rows = page.locator(".mlc-lab-doc .mlc-explorer .mlc-history-list [data-step]")
    assert rows.count() == 3  # the original, the split and the reorder (get_sblock/get_loops are no steps)
    rows.first.click()
    page.wait_for_function(
        f"() => (document.querySelector({LIVE_CODE!r})?.innerText || '').includes('for i, j, k in T.grid(128, 128, 128)')",
        timeout=60_000,
    )
    page.locator(".mlc-lab-doc .mlc-explorer").first.screenshot(path=str(artifacts / "trace-document-live.png"))
    # "Read-only": the kernel the document started goes away, the read-only view comes back
    page.locator(".jp-Toolbar .mlc-lab-doc-kernel").click()
    page.locator(".mlc-lab-trace-doc").wait_for(state="visible", timeout=30_000)
    page.wait_for_function(
        "() => document.querySelector('.mlc-lab-doc-status')?.dataset.state === 'idle'", timeout=30_000
    )
    page.wait_for_function(f"() => !document.querySelector({LIVE_CODE!r})", timeout=30_000)
    deadline = time.time() + 30
    while any(s["path"].endswith("mm.trace") for s in sessions(url)) and time.time() < deadline:
        page.wait_for_timeout(300)
    assert not any(s["path"].endswith("mm.trace") for s in sessions(url))
    # "Open as notebook": the notebook beside it runs mlc_lab.open_trace, a live explorer there too
    page.locator(".jp-Toolbar >> text=Open as notebook").click()
    page.wait_for_function(KERNEL_READY_JS, timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer", timeout=120_000)
    page.wait_for_function(
        "() => (document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer .mlc-code-main .cm-content')?.innerText || '').includes('j_1')",
        timeout=60_000,
    )
    assert page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-offline-banner").count() == 0  # live
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mlc-explorer").first.screenshot(
        path=str(artifacts / "trace-explorer.png")
    )
    assert (root / "mm-explore.ipynb").exists()
    assert not errors, errors


def test_tuning_run_document_without_kernel(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    lab_setting(url, documentKernel=False)  # documents stay read-only until "Open with kernel"
    ten_trials(root / "runs" / "mm")
    page.goto(f"{url}/lab/tree/runs/mm/database_tuning_record.json?reset")
    board = page.locator(".mlc-lab-run-doc .mlc-tuning")
    board.wait_for(timeout=60_000)
    page.wait_for_selector(".mlc-lab-run-doc .js-plotly-plot .scatterlayer .trace", timeout=30_000)
    assert page.locator(".mlc-lab-run-doc .mlc-t-failure").count() == 1
    assert "10" in board.inner_text()  # trials done
    board.screenshot(path=str(artifacts / "tuning-run-document.png"))
    assert page.locator(".mlc-lab-doc-status").first.get_attribute("data-state") == "idle"
    assert not any(s["path"].endswith("database_tuning_record.json") for s in sessions(url))
    lab_setting(url)
    assert not errors, errors


def test_tuning_run_document_live_through_its_own_kernel(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    lab_setting(url)  # documents start a kernel of their own
    ten_trials(root / "runs" / "live")
    page.goto(f"{url}/lab/tree/runs/live/database_tuning_record.json?reset")
    # live: the dashboard made by mlc_lab.open_tuning_run in the document's kernel (its folder)
    board = page.locator(".mlc-lab-doc .mlc-lab-live .mlc-tuning")
    board.wait_for(timeout=180_000)
    page.wait_for_function(
        "() => document.querySelector('.mlc-lab-doc-status')?.dataset.state === 'live'", timeout=30_000
    )
    page.wait_for_selector(".mlc-lab-live .js-plotly-plot .scatterlayer .trace", timeout=30_000)
    assert page.locator(".mlc-lab-live .mlc-t-failure").count() == 1 and "10" in board.inner_text()
    assert (
        page.locator(".mlc-lab-run-doc").is_hidden() and page.locator(".mlc-lab-live .mlc-offline-banner").count() == 0
    )
    (ours,) = [s for s in sessions(url) if s["path"].endswith("runs/live/database_tuning_record.json")]
    assert ours["type"] == "mlc_lab"
    board.screenshot(path=str(artifacts / "tuning-run-document-live.png"))
    page.locator(".jp-Toolbar .mlc-lab-doc-kernel").click()  # back to read-only: its kernel goes
    page.locator(".mlc-lab-run-doc .mlc-tuning").wait_for(state="visible", timeout=30_000)
    deadline = time.time() + 30
    while (
        any(s["path"].endswith("runs/live/database_tuning_record.json") for s in sessions(url))
        and time.time() < deadline
    ):
        page.wait_for_timeout(300)
    assert not any(s["path"].endswith("runs/live/database_tuning_record.json") for s in sessions(url))
    assert not errors, errors
