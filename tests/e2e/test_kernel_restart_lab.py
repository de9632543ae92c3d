"""An explorer whose kernel restarts, in a real JupyterLab (Debian chromium).

Before: the explorer called itself "a saved view (no kernel behind it)" and the first key press got
no answer. Now the first request refused for want of a kernel (Measure, key m) puts a notice above
the explorer that says the kernel was restarted, and nothing calls the view a saved one.
"""

from __future__ import annotations

import pytest

from tests.e2e.lab import KERNEL_READY_JS, Lab, write_notebook
from tests.e2e.test_access_view_lab import leave_no_trace  # noqa: F401  (a fixture)
from tests.e2e.test_explorer_lab import MM_RELU

pytestmark = pytest.mark.e2e

CELLS = ["from mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU), "ex = explore(MM_RELU)\nex"]

RESTART_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()"


def test_the_first_key_after_a_kernel_restart_is_answered(lab_server, page, artifacts, leave_no_trace):  # noqa: F811
    url, root = lab_server
    write_notebook(root / "access.ipynb", CELLS)  # the name leave_no_trace cleans up after
    lab = Lab(page, url, artifacts, prefix="restart")
    lab.open("access.ipynb")
    lab.run_all()
    row = page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="k"]')
    row.wait_for(timeout=60_000)
    assert page.locator(".mlc-offline-banner").count() == 0
    page.evaluate(RESTART_JS)
    page.wait_for_function(KERNEL_READY_JS, timeout=60_000)
    row.click()
    page.keyboard.press("m")  # measure: needs the kernel
    banner = page.locator(".mlc-offline-banner")
    banner.wait_for(timeout=10_000)
    text = banner.inner_text()
    assert "the kernel behind this view was restarted or shut down" in text, text
    assert "saved view" not in page.locator(".mlc-explorer").inner_text()
    lab.shot("notice", page.locator(".jp-OutputArea-output").last)
