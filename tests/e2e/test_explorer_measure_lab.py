"""Measuring and the CUDA view of the explorer in a real JupyterLab (Debian chromium): Measure on
two steps (button, then the `m` key), the latencies in the history and the plot; CUDA on a machine
without a GPU as a banner; the CUDA view of a bound program (and of an unbound one)."""

from __future__ import annotations

import shutil

import pytest

from tests.e2e.lab import run_notebook
from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU

pytestmark = pytest.mark.e2e


def test_measure_and_cuda_view(lab_server, page, artifacts):
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "explorer_measure.ipynb",
        [
            "from mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU) + "\nGPU = " + repr(GPU_TWO_BLOCKS),
            'ex = explore(MM_RELU, height="520px")\nex',
            'gx = explore(GPU, height="520px")\ngx',
        ],
        prefix="explorer-measure",
    )
    page.wait_for_function(
        "() => document.querySelectorAll('.mlc-explorer .mlc-row').length > 0 && "
        "document.querySelectorAll('.mlc-explorer').length === 2",
        timeout=60_000,
    )
    ex = page.locator(".mlc-explorer").nth(0)
    gx = page.locator(".mlc-explorer").nth(1)
    ex.scroll_into_view_if_needed()

    # 1. Measure the original program with the button: "measuring…", then latency + GFLOP/s + ✓
    ex.locator(".mlc-measure").click()
    try:  # the first measurement starts the worker: usually long enough to catch "measuring…"
        ex.locator('.mlc-hrow[data-step="0"] .mlc-hmeasuring').wait_for(timeout=3_000)
        caught = ex.locator(".mlc-measure").inner_text()
        lab.shot("measuring", ex)
    except Exception:  # noqa: BLE001  (it was quicker: nothing to see)
        caught = None
    assert caught is None or caught.startswith("measuring")
    ex.locator('.mlc-hrow[data-step="0"] .mlc-hlatency').wait_for(timeout=90_000)  # the worker starts once
    assert "GFLOP/s" in ex.locator('.mlc-hrow[data-step="0"] .mlc-hmeasure').inner_text()
    assert ex.locator('.mlc-hrow[data-step="0"] .mlc-hcheck').inner_text() == "✓"

    # 2. a step from Python, then the `m` key in the explorer
    lab.kernel(
        'ex.session.apply("split", "Y/j", factors=[None, 4]); ex.session.apply("reorder", "Y/i", "j_0", "k", "j_1")'
    )
    ex.locator('.mlc-hrow[data-step="2"]').wait_for()
    ex.locator('.mlc-row[data-name="Y/i"]').click()
    page.keyboard.press("m")
    ex.locator('.mlc-hrow[data-step="2"] .mlc-hlatency').wait_for(timeout=60_000)
    fold = ex.locator(".mlc-plot .mlc-plot-fold")
    if fold.count() and fold.inner_text() == "show plot":  # a short History pane folds the plot to one line
        fold.click()
    assert ex.locator(".mlc-plot circle").count() == 2  # steps 0 and 2 of the current path
    assert ex.locator(".mlc-measure").is_enabled()
    measured = lab.kernel_json("{str(k): v.latency_s for k, v in ex.session.measurements.items()}")
    assert sorted(measured) == ["0", "2"]
    assert ex.locator('.mlc-plot circle[data-step="2"]').get_attribute("class").count("mlc-plot-current") == 1
    lab.shot("measured", ex)

    # 3. CUDA view of the unbound program: the message names the blocks
    ex.locator(".mlc-diff-mode").select_option("cuda")
    ex.locator(".mlc-cuda-problem").wait_for(timeout=60_000)
    assert "unbound" in ex.locator(".mlc-cuda-problem").inner_text()
    assert "block 'Y'" in ex.locator(".mlc-cuda-message").inner_text()

    # 4. the GPU program: its CUDA kernels, the launch facts; measuring on cuda without a GPU is a banner
    gx.scroll_into_view_if_needed()
    gx.locator(".mlc-diff-mode").select_option("cuda")
    page.wait_for_function(
        "() => { const el = document.querySelectorAll('.mlc-explorer')[1].querySelector('.mlc-cuda .cm-content');"
        " return !!el && el.innerText.includes('__global__'); }",
        timeout=60_000,
    )
    facts = gx.locator(".mlc-cuda-facts").inner_text()
    assert "main_kernel" in facts and "128" in facts and "8" in facts
    lab.shot("cuda-view", gx)
    if shutil.which("nvidia-smi") is None:
        gx.locator(".mlc-measure-target").select_option("cuda")
        gx.locator(".mlc-measure").click()
        gx.locator(".mlc-banner .mlc-error-summary").wait_for(timeout=60_000)
        assert "no CUDA GPU" in gx.locator(".mlc-banner .mlc-error-summary").inner_text()
        assert lab.kernel_json("len(gx.session.measurements)") == 0
        lab.shot("no-gpu", gx)
