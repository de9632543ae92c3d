"""An explorer whose kernel restarts during a long measurement, in a real JupyterLab (Debian chromium).

Before: the explorer called itself "a saved view (no kernel behind it)" and the first key press got
no answer; a measurement had no Cancel; a restart during one left its worker running (53% CPU minutes
later) and the history row said "measuring..." for good. Now Cancel stops the worker; a restart kills
it with the kernel, a notice above the view says at once that the kernel went and how to go on, and
the first key press after it is answered.
"""

from __future__ import annotations

import pytest

from tests.e2e.lab import KERNEL_READY_JS, Lab, write_notebook
from tests.e2e.test_access_view_lab import leave_no_trace  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e

RESTART_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()"
LONG_CELLS = [
    "import mlc_lab\nfrom tests.fixtures.programs import matmul\n"
    "ex = mlc_lab.explore(matmul(1024))  # unscheduled: a measurement takes tens of seconds\nex",
]
WORKER_PID = "from mlc_lab.core.worker import worker\nprint(worker().pid)"


def _pid_gone(pid: int, within_s: float) -> bool:
    import time

    import psutil

    from mlc_lab.core.processes import alive

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if not alive(psutil.Process(pid)):
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _measuring_worker(page, lab) -> int:
    """Press m in the explorer; the pid of the worker process measuring (once it is)."""
    page.locator(".mlc-explorer").first.click(position={"x": 400, "y": 8})  # the toolbar: focus, no button
    page.keyboard.press("m")
    page.locator(".mlc-explorer .mlc-hmeasuring").wait_for(timeout=30_000)
    for _ in range(100):
        out = lab.kernel(WORKER_PID).strip()
        if out and out != "None":
            return int(out)
        page.wait_for_timeout(200)
    raise AssertionError("no worker process started for the measurement")


def test_a_long_measurement_cancels_and_dies_with_its_kernel(lab_server, page, artifacts, leave_no_trace):  # noqa: F811
    # Before: a kernel restarted during a long measurement left its worker running (53% CPU, minutes
    # later), the history row said "measuring..." for good, and a measurement had no Cancel.
    url, root = lab_server
    write_notebook(root / "access.ipynb", LONG_CELLS)  # the name leave_no_trace cleans up after
    lab = Lab(page, url, artifacts, prefix="long-measure")
    lab.open("access.ipynb")
    lab.run_all()
    page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="k"]').wait_for(timeout=90_000)
    explorer = page.locator(".mlc-explorer").first
    explorer.scroll_into_view_if_needed()

    # 1. Cancel: the worker is stopped, the row and the toolbar stop saying measuring, no error banner
    pid = _measuring_worker(page, lab)
    cancel = explorer.locator(".mlc-measure-cancel")
    assert cancel.is_visible()
    lab.shot("measuring-with-cancel", explorer.locator(".mlc-toolbar"))
    cancel.click()
    assert _pid_gone(pid, within_s=10), "Cancel left the worker running"
    page.wait_for_function("() => !document.querySelector('.mlc-explorer .mlc-hmeasuring')", timeout=15_000)
    assert cancel.is_hidden() and explorer.locator(".mlc-measure").is_enabled()
    assert explorer.locator(".mlc-banner").is_hidden()
    assert lab.kernel_json("ex.measuring") == {}

    # 2. a kernel restart mid-measurement: the worker dies with the kernel, every view says so at
    #    once and how to go on, and the next key press is answered
    pid = _measuring_worker(page, lab)
    page.evaluate(RESTART_JS)
    assert _pid_gone(pid, within_s=15), "the worker outlived its kernel"
    notice = page.locator(".mlc-offline-banner")
    notice.wait_for(timeout=15_000)  # before any click
    text = notice.inner_text()
    assert "restarted or shut down" in text and "Re-run the notebook cell that made it" in text, text
    page.wait_for_function("() => !document.querySelector('.mlc-explorer .mlc-hmeasuring')", timeout=15_000)
    assert explorer.locator(".mlc-banner").is_hidden()  # said once, above the view, not again in it
    lab.shot("restarted-mid-measurement", page.locator(".jp-OutputArea-output").first)
    page.wait_for_function(KERNEL_READY_JS, timeout=60_000)
    explorer.locator('.mlc-row[data-kind="loop"][data-name="k"]').click()
    page.keyboard.press("m")
    page.wait_for_function("() => document.querySelector('.mlc-offline-banner')?.dataset.refused === 'measure'")
    assert "the kernel behind this view was restarted or shut down" in notice.inner_text()
    assert "saved view" not in explorer.inner_text()
