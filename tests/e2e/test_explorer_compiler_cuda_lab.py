"""The explorer's Compiler view for a CUDA architecture in a real JupyterLab (Debian chromium), on
the course's 1024^3 GPU matmul with a 64x64 accumulator per thread (issue 19, item 4): type sm_75
in the target field, see the kernel table (registers, a 16 KB stack frame, shared memory, from
ptxas) under the verdict that names the stack frame, see what each loop became, click a loop's row
and the loop nest selects it; a bad target says so in one sentence and the view stays."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from tests.e2e.lab import run_notebook
from tests.e2e.test_explorer_compiler_lab import compiler_view
from tests.unit.test_cuda import blocking_with_shared

pytestmark = pytest.mark.e2e

SHOT = Path("/work/notes/shots/compiler_cuda.png")


def test_compiler_view_for_sm_75_names_the_stack_frame_and_links_loops(lab_server, page, artifacts):
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "explorer_compiler_cuda.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab import Session\nfrom mlc_lab.widgets import explore\n"
            "from mlc_lab.tvm.course_programs import matmul\n" + inspect.getsource(blocking_with_shared),
            "s = blocking_with_shared(Session(matmul(1024)), local=64, block=2, tile_k=8)\n"
            'ex = explore(s, height="760px")\nex',
        ],
        prefix="explorer-compiler-cuda",
    )
    ex = compiler_view(page)
    field = ex.locator(".mlc-compiler-target")
    assert field.input_value() == "cpu"
    # the field's list offers the common archs; sm_75 picked (typed, then Enter)
    offered = ex.locator("datalist option").evaluate_all("os => os.map(o => o.value)")
    assert offered == ["cpu", "cuda", "sm_75", "sm_80", "sm_86", "sm_90"]
    field.fill("sm_75")
    field.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('.mlc-compiler-kernel[data-kernel=\"main_kernel\"]') !== null",
        timeout=180_000,  # the first lowering starts the worker; nvcc and ptxas run
    )
    verdict = ex.locator(".mlc-compiler-verdict").inner_text()
    assert verdict.startswith("main_kernel: each thread keeps a 64x64 float32 accumulator (C_local, 16 KB)"), verdict
    # ptxas's figure where nvcc is installed; without it, the source's array says where it will live
    stack_said = "a 16 KB stack frame per thread (ptxas)" if shutil.which("ptxas") else "so it will live on the stack"
    assert stack_said in verdict, verdict
    kernel = ex.locator('.mlc-compiler-kernel[data-kernel="main_kernel"]')
    if shutil.which("ptxas"):
        assert kernel.get_attribute("data-from") == "ptxas"
        assert kernel.locator('td[data-fact="stack"]').inner_text() == "16 KB"
        assert int(kernel.locator('td[data-fact="registers"]').inner_text()) > 0
        assert ex.locator(".mlc-compiler-kernel-source").inner_text() == "figures from ptxas -v for sm_75"
    assert kernel.locator('td[data-fact="shared"]').inner_text() == "8 KB"
    assert kernel.locator('td[data-fact="local"]').inner_text() == "16 KB (C_local)"
    assert ": CUDA sm_75, " in ex.locator(".mlc-compiler-status").inner_text()
    assert lab.kernel_json("ex.compiler_target") == "sm_75"  # kept per explorer

    # what each loop became
    became = ex.locator('.mlc-compiler-cuda-loop[data-loop="i_0"] .mlc-compiler-became').inner_text()
    assert became == "blockIdx.y: 8 thread blocks, each runs one iteration"
    assert ex.locator(".mlc-compiler-cuda-loop").count() >= 15

    # a loop's row selects the loop in the loop nest, and its CUDA lines are marked
    ex.locator('.mlc-compiler-cuda-loop[data-loop="k_0"]').click()
    page.wait_for_function(
        "() => document.querySelector('.mlc-explorer .mlc-row.mlc-selected')?.dataset.name === 'k_0'", timeout=30_000
    )
    page.wait_for_function(
        "() => document.querySelector('.mlc-compiler-cuda-loop.mlc-active')?.dataset.loop === 'k_0' && "
        "Number(document.querySelector('.mlc-compiler')?.dataset.highlighted ?? 0) > 0",
        timeout=30_000,
    )
    assert lab.kernel_json("ex.selection") == {"kind": "loop", "name": "k_0"}
    assert any("for (int k_0 = 0" in line for line in ex.locator(".mlc-compiler .mlc-asm-hit").all_inner_texts())
    shot = lab.shot("sm_75", ex)
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, SHOT)

    # a bad target: one sentence under the field; the sm_75 view stays
    field.fill("sm75")
    field.press("Enter")
    error = ex.locator(".mlc-compiler-target-error")
    error.wait_for(state="visible", timeout=60_000)
    assert error.inner_text() == (
        "'sm75' is not a target the Compiler view knows: give 'cpu', 'cuda', a CUDA "
        "architecture such as 'sm_75', a target dict or a TVM target tag"
    )
    assert stack_said in ex.locator(".mlc-compiler-verdict").inner_text()
    assert ex.locator('.mlc-compiler-kernel[data-kernel="main_kernel"]').count() == 1
    assert lab.kernel_json("ex.compiler_target") == "sm_75"
    lab.shot("bad-target", ex)
