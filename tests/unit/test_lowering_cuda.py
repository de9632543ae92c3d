"""Session.lower for CUDA (issue 19, item 4, the compiler's half): any architecture, target dict
or tag; per-kernel facts (registers, stack frame, shared memory, spills from ptxas when nvcc is
there, the arrays of the source otherwise); per-loop facts (what each loop became); a verdict that
names a large per-thread stack frame."""

from __future__ import annotations

import json
import shutil

import pytest

import mlc_lab
from mlc_lab import Session
from mlc_lab.core.lowering import cuda_kernel_arrays, cuda_loop_facts, target_info
from mlc_lab.errors import MlcLabError
from mlc_lab.tvm.course_programs import matmul
from tests.unit.test_cuda import blocking_with_shared

HAS_PTXAS = bool(shutil.which("nvcc") and shutil.which("ptxas"))


@pytest.fixture(scope="module")
def big_tile():
    """Each thread computes a 64 x 64 tile of C (2 x 2 threads per block): a 16 KB accumulator."""
    return blocking_with_shared(Session(matmul(1024)), local=64, block=2, tile_k=8)


@pytest.fixture(scope="module")
def course():
    return blocking_with_shared(Session(matmul(1024)))


def test_any_cuda_architecture_dict_or_tag_is_a_target():
    assert target_info("sm_75")["arch"] == "sm_75" and target_info("sm_75")["kind"] == "cuda"
    assert target_info({"kind": "cuda", "arch": "sm_80"})["arch"] == "sm_80"
    assert target_info("nvidia/geforce-rtx-3080")["arch"] == "sm_86"
    assert target_info("cpu")["kind"] == "cpu"
    assert target_info("sm_75")["key"] == target_info({"kind": "cuda", "arch": "sm_75"})["key"]
    with pytest.raises(MlcLabError, match="not for 'opencl'"):
        target_info("opencl")
    with pytest.raises(MlcLabError, match="'sm75' is not a target"):
        target_info("sm75")


def test_lower_for_a_given_architecture(course):
    low = course.lower(target="sm_75")
    assert low.ok and low.kind == "cuda" and low.arch == "sm_75" and '"arch":"sm_75"' in low.target
    assert course.lower(target={"kind": "cuda", "arch": "sm_75"}) is low  # the same target, cached
    if HAS_PTXAS:
        assert ".target sm_75" in low.ptx and "for 'sm_75'" in low.ptxas_report
    assert course.lower(target="cuda").arch == "sm_90"


def test_a_64x64_accumulator_per_thread_is_named_with_its_stack_frame(big_tile):
    low = big_tile.lower(target="sm_75")
    (kernel,) = low.kernels
    assert {
        "name": "C_local",
        "scope": "local",
        "shape": [64, 64],
        "dtype": "float32",
        "bytes": 16384,
    } in low.gpu_buffers
    assert low.kernel_arrays["main_kernel"][0] == {
        "name": "C_local",
        "scope": "local",
        "elements": 4096,
        "dtype": "float",
        "bytes": 16384,
    }
    assert low.verdict.startswith("main_kernel: each thread keeps a 64x64 float32 accumulator (C_local, 16 KB)")
    if HAS_PTXAS:
        assert kernel.stack_bytes >= 16384 and kernel.registers and kernel.shared_bytes == 8192
        assert "a 16 KB stack frame per thread (ptxas)" in low.verdict
    else:
        assert "will live on the stack" in low.verdict


def test_without_ptxas_the_source_gives_the_arrays_and_the_verdict(big_tile):
    low = big_tile.lower(target="sm_80", ptx=False)
    assert low.ptx is None and not low.ptxas_report
    (kernel,) = low.kernels
    assert kernel.name == "main_kernel" and kernel.registers is None and kernel.shared_bytes == 8192
    assert "more than a thread's 255 registers hold, so it will live on the stack" in low.verdict
    assert "registers unknown" in low.verdict


def test_a_small_tile_has_no_stack_sentence(course):
    low = course.lower(target="sm_75")
    assert "stack" not in low.verdict and low.verdict.startswith("main_kernel: ")
    if HAS_PTXAS:
        assert low.kernels[0].stack_bytes == 0 and "registers" in low.verdict


def test_each_loop_says_what_it_became(course):
    course.apply("unroll", "k_1")
    try:
        low = course.lower(target="sm_75", ptx=False)
    finally:
        course.undo()
    became = {f.loop: f.verdict for f in low.loops}
    assert became["i_0"] == "blockIdx.y: 16 thread blocks, each runs one iteration"
    assert became["i_1_j_1_fused"] == "threadIdx.x: 64 threads of a block, each runs one iteration"
    assert became["A_shared/ax0_ax1_fused_2"] == "one 4-wide access (float4) per statement, no loop"
    assert became["k_1"] == "unrolled by TVM: 8 copies of its body, no loop"
    assert became["k_0"].startswith("a loop of 128 iterations in every thread (CUDA lines ")
    assert became["i_2"].endswith(", 8 copies (an enclosing loop was unrolled)")
    assert "copies" not in became["k_0"]
    # two copy loops of one name: each is found at its own lines (TVM calls the second `_1`)
    a_lines, b_lines = became["A_shared/ax0_ax1_fused_0"], became["B_shared/ax0_ax1_fused_0"]
    assert a_lines != b_lines and all(v.startswith("a loop of 2 iterations") for v in (a_lines, b_lines))
    assert {f["loop"]: f["verdict"] for f in low.to_json(texts=False)["loops"]} == became


def test_loop_facts_and_arrays_from_plain_text():
    source = (
        'extern "C" __global__ void __launch_bounds__(32) k(float* __restrict__ A) {\n'
        "  alignas(64) float acc_local[16];\n  __shared__ alignas(64) float A_shared[128];\n"
        "  #pragma unroll\n  for (int i = 0; i < 4; ++i) {\n    acc_local[i] = 0.0f;\n  }\n}\n"
    )
    arrays = cuda_kernel_arrays(source)
    assert arrays == {
        "k": [
            {"name": "acc_local", "scope": "local", "elements": 16, "dtype": "float", "bytes": 64},
            {"name": "A_shared", "scope": "shared", "elements": 128, "dtype": "float", "bytes": 512},
        ]
    }
    loops = [
        {"name": "i", "loop_kind": "unrolled", "extent": 4, "line": 3, "end_line": 4},
        {"name": "j", "loop_kind": "serial", "extent": 1, "line": 5, "end_line": 6},
    ]
    facts = cuda_loop_facts(loops, source, {"i": [5, 6, 7]})
    assert facts[0].verdict == "a loop with #pragma unroll (nvcc unrolls it) in every thread (CUDA lines 5-7)"
    assert facts[1].verdict == "extent 1: no loop in the code"


def test_the_cpu_path_is_unchanged():
    s = mlc_lab.Session(matmul(64))
    low = s.lower(target="cpu")
    assert low.ok and low.kind == "cpu" and low.arch == "" and low.loops


def test_the_cli_lowers_for_any_arch_tag_or_target_json(course, tmp_path):
    from tests.unit.test_cli import mlc_lab as cli

    prog = tmp_path / "mm.py"
    prog.write_text(course.script_at(0))
    trace = tmp_path / "mm.trace"
    trace.write_text(course.trace)
    for target, arch in (
        ("sm_75", "sm_75"),
        ('{"kind": "cuda", "arch": "sm_80"}', "sm_80"),
        ("nvidia/geforce-rtx-3080", "sm_86"),
    ):
        r = cli("lower", str(prog), "--trace", str(trace), "--target", target, "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["kind"] == "cuda" and out["arch"] == arch, (target, out["target"])
    r = cli("lower", str(prog), "--trace", str(trace), "--target", "sm_75", "--source")
    assert r.returncode == 0 and "__global__" in r.stdout
    r = cli("lower", str(prog), "--target", "sm75")
    assert r.returncode == 2 and "'sm75' is not a target" in r.stderr and "Traceback" not in r.stderr
    r = cli("lower", str(prog), "--target", '{"kind": cuda}')
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    r = cli("lower", str(prog), "--target", "sm_75", "--llvm")
    assert r.returncode == 2 and "--llvm" in r.stderr


def test_an_unbound_program_for_cuda_says_why_each_loop_has_no_code():
    """No CUDA kernel (the loops are not bound to threads): the step's verdict says so, and each loop
    points at it, instead of calling every loop "merged by TVM's passes"."""
    low = mlc_lab.Session(matmul(64)).lower(target="cuda")
    assert low.kind == "cuda" and not low.cuda_source.strip()
    assert low.loops and "bound" in low.verdict
    for f in low.loops:  # the reason is said once, in the verdict, not again in every row
        assert f.verdict == "no CUDA code to look in: the verdict above says why", f.verdict
        assert "no loop of its own" not in f.verdict and "bind" not in f.verdict.lower()
