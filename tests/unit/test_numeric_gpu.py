"""GPU schedules checked without a GPU (issue 19, item 3): TVM's OpenCL code for the schedule run on
the CPU (pocl, or the Oclgrind simulator) against the unscheduled program, at a smaller size the
trace is replayed on. Right schedules give 0 wrong; a racing write-back, an out-of-bounds copy, a
crash and a hang each come back as a verdict, and the test process goes on."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import mlc_lab
from mlc_lab import exercises
from mlc_lab.core import numeric_gpu
from mlc_lab.core.numeric_gpu import NumericCheckError, numeric_check
from mlc_lab.core.worker import worker
from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU, matmul
from tests.unit.test_cuda import blocking_with_shared


def tiled_2d(s: mlc_lab.Session, *, tile=16, local=4, tile_k=8, copy_threads=(16, 16), write_back_at="j1"):
    """Thread-block tiling on 2-D threads (tile x tile), a local accumulator written back at
    `write_back_at`, A and B staged in shared memory by copies bound to `copy_threads`."""
    c_local = s.apply("cache_write", "C", 0, "local")
    i0, i1, i2 = s.apply("split", "C/i", factors=[None, tile, local])
    j0, j1, j2 = s.apply("split", "C/j", factors=[None, tile, local])
    k0, k1 = s.apply("split", "C/k", factors=[None, tile_k])
    s.apply("reorder", i0, j0, i1, j1, k0, k1, i2, j2)
    s.apply("reverse_compute_at", c_local, {"j1": j1, "j0": j0, "k0": k0}[write_back_at])
    s.apply("bind", i0, "blockIdx.y")
    s.apply("bind", j0, "blockIdx.x")
    s.apply("bind", i1, "threadIdx.y")
    s.apply("bind", j1, "threadIdx.x")
    for index in (0, 1):
        cache = s.apply("cache_read", "C", index, "shared")
        s.apply("compute_at", cache, k0)
        a, b = s.apply("get_loops", cache)[-2:]
        fused = s.apply("fuse", a, b)
        _, ty, tx = s.apply("split", fused, factors=[None, *copy_threads])
        s.apply("bind", ty, "threadIdx.y")
        s.apply("bind", tx, "threadIdx.x")
    s.apply("decompose_reduction", "C", k0)
    return s


@pytest.fixture(scope="module")
def reference():
    return blocking_with_shared(mlc_lab.Session(matmul(1024)))


def test_the_course_schedule_at_1024_is_checked_at_128_with_no_wrong_element(reference):
    r = numeric_check(reference)
    assert r.ok and r.verdict == "match", r.message
    assert r.wrong == 0 and r.total == 128 * 128 and r.max_error is not None and r.max_error < 1e-3
    assert r.sizes == {1024: 128} and r.shape == {"A": [128, 128], "B": [128, 128], "C": [128, 128]}
    assert r.engine in ("pocl", "oclgrind") and "1024 -> 128" in r.message
    data = r.to_json()
    assert data["ok"] is True and data["shape"]["C"] == [128, 128] and data["sizes"] == {"1024": 128}


def test_a_correct_variant_with_other_tiles_and_2d_threads_passes():
    s = tiled_2d(mlc_lab.Session(matmul(1024)), tile=8, local=8, tile_k=16, copy_threads=(8, 8))
    r = numeric_check(s, sizes=64)
    assert r.ok and r.wrong == 0 and r.total == 64 * 64, r.message


def test_a_racing_write_back_is_wrong_in_most_elements():
    # The write-back under the thread block's loop, outside the thread loops: every thread of the
    # block writes the block's whole tile from its own accumulator.
    s = tiled_2d(mlc_lab.Session(matmul(1024)), write_back_at="j0")
    r = numeric_check(s, sizes=64)
    assert not r.ok and r.verdict == "mismatch"
    assert r.wrong > r.total // 2 and r.total == 64 * 64, r.message
    assert f"{r.wrong} of {r.total} elements of C are wrong" in r.message
    if r.engine == "oclgrind":
        assert any("two threads write the same element" in d for d in r.diagnostics), r.diagnostics


def test_an_out_of_bounds_copy_is_caught_and_the_caller_goes_on(reference):
    # The copies bound to 32x32 threads while the compute uses 16x16: the kernel is launched with
    # 32x32 threads, and the compute's extra threads write rows past the end of C.
    s = tiled_2d(mlc_lab.Session(matmul(1024)), copy_threads=(32, 32))
    r = numeric_check(s, sizes=64)
    assert not r.ok and r.verdict in ("crash", "mismatch"), r.message
    if r.verdict == "crash":
        assert r.message.startswith("the kernel crashed (out-of-bounds access?)")
    else:
        assert any("outside" in d for d in r.diagnostics), r.diagnostics
    assert numeric_check(reference, sizes=64).ok  # the caller, and the next check, are fine


def test_a_worker_that_dies_mid_run_is_a_crash_verdict(reference):
    w = worker()
    w.start()
    pid = w.pid
    killer = threading.Timer(1.0, lambda: __import__("os").kill(pid, 9))
    killer.start()
    try:
        r = numeric_check(reference)
    finally:
        killer.cancel()
    assert r.verdict == "crash" and not r.ok
    assert r.message.startswith("the kernel crashed (out-of-bounds access?)") and "1024 -> 128" in r.message
    assert numeric_check(reference, sizes=64).ok  # a fresh worker


def test_a_kernel_that_runs_too_long_is_stopped(reference):
    worker().start()
    r = numeric_check(reference, timeout_s=0.2)
    assert r.verdict == "timeout" and not r.ok and "more than 0.2 s" in r.message


def test_sizes_that_are_not_dimensions_are_refused_by_name(reference):
    with pytest.raises(NumericCheckError) as info:
        numeric_check(reference, sizes={1000: 100})
    assert "no parameter of main has a dimension of 1000" in str(info.value) and "1024" in str(info.value)


def test_a_size_the_tiles_do_not_divide_is_refused_with_the_reason(reference):
    # The course's schedule tiles C by 64 x 64 per block: 96 is not a multiple of 64.
    with pytest.raises(NumericCheckError) as info:
        numeric_check(reference, sizes={1024: 96})
    text = str(info.value)
    assert "at 1024 -> 96 the schedule's tiles no longer divide the loops" in text and "multiples" in text
    with pytest.raises(NumericCheckError) as info:
        numeric_check(reference, sizes=0)
    assert "positive" in str(info.value)


def test_without_a_size_a_larger_one_is_tried_when_the_tiles_need_it():
    # 16 x 16 threads with 16 x 16 elements each: a block covers 256 x 256, more than 128.
    s = tiled_2d(mlc_lab.Session(matmul(1024)), tile=16, local=16, copy_threads=(16, 16))
    _, _, used = numeric_gpu._at_size(s.original, s.trace, "main", None, {})
    assert used == {1024: 256}


def test_shrinkings_divide_every_dimension_by_one_factor():
    assert numeric_gpu._shrinkings([1024], 128) == [{1024: 128}, {1024: 256}, {1024: 512}, {}]
    assert numeric_gpu._shrinkings([2048, 1024, 3], 128)[0] == {2048: 128, 1024: 64}
    assert numeric_gpu._shrinkings([128, 64], 128) == [{}]


def test_a_bound_program_without_a_trace_runs_at_its_own_size():
    r = numeric_check(GPU_TWO_BLOCKS)
    assert r.ok and r.total == 1024 and r.sizes == {} and r.shape["C"] == [1024], r.message


def test_exercises_numeric_check_runs_a_gpu_schedule():
    """It used to fail with TVM's "Unknown device id in current IR" on every bound program."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, 1024).astype("float32"), rng.uniform(-1, 1, 1024).astype("float32")
    rep = exercises.numeric_check(GPU_TWO_BLOCKS, "main", [a, b, np.zeros(1024, "float32")], np.maximum(a + b, 0))
    assert rep.passed, rep.text()
    assert rep.check("runs as a GPU kernel").ok and "OpenCL" in rep.check("runs as a GPU kernel").message
    assert "Unknown device" not in rep.text()
    wrong = exercises.numeric_check(GPU_TWO_BLOCKS, "main", [a, b, np.zeros(1024, "float32")], a + b)
    assert not wrong.passed and "elements differ" in wrong.text()


def test_the_check_at_128_takes_seconds(reference):
    numeric_check(reference, sizes=64)  # the worker and the engine started
    t0 = time.perf_counter()
    assert numeric_check(reference).ok
    assert time.perf_counter() - t0 < 30  # 3-6 s measured on 2 shared cores (benchmarks/numeric_gpu.py)


def _bind_2d(s: mlc_lab.Session, block: str, tile: int = 16) -> tuple:
    i0, i1 = s.apply("split", f"{block}/i", factors=[None, tile])
    j0, j1 = s.apply("split", f"{block}/j", factors=[None, tile])
    s.apply("reorder", i0, j0, i1, j1)
    for loop, axis in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"), (j1, "threadIdx.x")):
        s.apply("bind", loop, axis)
    return i0, j0, i1, j1


def test_two_kernels_and_a_global_intermediate_between_them():
    s = mlc_lab.Session(MM_RELU)
    _bind_2d(s, "Y")
    _bind_2d(s, "C")
    r = numeric_check(s, sizes={128: 32})
    assert r.ok and r.total == 32 * 32 and r.shape["C"] == [32, 32], r.message


def test_an_intermediate_left_inside_the_kernel_is_explained():
    s = mlc_lab.Session(MM_RELU)
    *_, j1 = _bind_2d(s, "Y")
    s.apply("reverse_compute_at", "C", j1)  # Y stays a global buffer, now allocated inside the kernel
    r = numeric_check(s, sizes={128: 32})
    assert r.verdict == "error" and not r.ok
    assert "global address space (Y: a global buffer allocated inside the kernel" in r.message


def test_a_program_and_a_trace_file(reference, tmp_path):
    (tmp_path / "mm.py").write_text(matmul(1024))
    (tmp_path / "mm.trace").write_text(reference.trace)
    r = numeric_check(str(tmp_path / "mm.py"), str(tmp_path / "mm.trace"), sizes=64)
    assert r.ok and r.sizes == {1024: 64} and r.total == 64 * 64, r.message
    with pytest.raises(NumericCheckError, match="no trace file"):
        numeric_check(str(tmp_path / "mm.py"), str(tmp_path / "missing.trace"))


def test_guard_bands_see_writes_past_a_buffer_and_reads_of_nan():
    """The guard bands that catch out-of-bounds accesses on pocl (whose kernels are not checked),
    exercised on whichever engine this machine has: a kernel that writes 8 elements past the end of
    X, and one that reads 4 before the start of X into Y."""
    import pyopencl as cl

    from mlc_lab.tvm import opencl

    source = (
        "__kernel void over(__global float* X) { X[get_global_id(0)] = 1.0f; }\n"
        "__kernel void under(__global float* X, __global float* Y) { Y[get_global_id(0)] = "
        "X[(int)get_global_id(0) - 4]; }\n"
    )
    prog = {
        "source": source,
        "allocs": [],
        "params": [{"name": "X", "shape": [16], "dtype": "float32"}, {"name": "Y", "shape": [16], "dtype": "float32"}],
        "launches": [
            {"kernel": "over", "args": [{"buffer": "X"}], "grid": [3, 1, 1], "block": [8, 1, 1]},
            {"kernel": "under", "args": [{"buffer": "X"}, {"buffer": "Y"}], "grid": [2, 1, 1], "block": [8, 1, 1]},
        ],
    }
    dev, engine = opencl.opencl_device()
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, source).build()
    arrays = {"X": np.zeros(16, "float32"), "Y": np.zeros(16, "float32")}
    outputs, guard_writes = opencl._launch_all(
        cl, ctx, queue, program, prog, arrays, engine, guard_bytes=opencl.GUARD_BYTES, max_group=64
    )
    assert guard_writes == {"X": 8}
    assert np.isnan(outputs["Y"][:4]).all() and (outputs["Y"][4:] == 1.0).all()
    assert (outputs["X"] == 1.0).all()


SYMBOLIC = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(a: T.handle, b: T.handle):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.sblock("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] * T.float32(2)
"""


def test_symbolic_shapes_run_at_the_values_given():
    s = mlc_lab.Session(SYMBOLIC)
    i0, i1 = s.apply("split", "i", factors=[None, 64])
    s.apply("bind", i0, "blockIdx.x")
    s.apply("bind", i1, "threadIdx.x")
    r = numeric_check(s, shape_vars={"n": 192})
    assert r.ok and r.shape == {"A": [192], "B": [192]} and r.sizes == {"n": 192} and "n = 192" in r.message
    with pytest.raises(NumericCheckError, match=r"symbolic \(n\): give their values, e.g. shape_vars=\{'n': 128\}"):
        numeric_check(s)
    with pytest.raises(NumericCheckError, match="no shape variable 'm' \\(it has: n\\)"):
        numeric_check(s, shape_vars={"m": 3})


GEMM_RELU_ADD = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Lab:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((2048, 2048), "float32"), B: T.Buffer((2048, 2048), "float32"),
             bias: T.Buffer((2048,), "float32"), D: T.Buffer((2048, 2048), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        C = T.sblock_alloc_buffer((2048, 2048), "float32")
        for i, j, k in T.grid(2048, 2048, 2048):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(2048, 2048):
            with T.sblock("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = T.max(C[vi, vj], T.float32(0)) + bias[vj]
"""


def test_gemm_relu_add_at_2048_with_the_epilogue_fused_into_the_write_back():
    s = blocking_with_shared(mlc_lab.Session(GEMM_RELU_ADD))
    s.apply("reverse_compute_inline", "D")  # relu + bias applied as C leaves the local accumulator
    r = numeric_check(s)
    assert r.ok and r.sizes == {2048: 128} and r.shape["bias"] == [128] and r.total == 128 * 128, r.message


def test_a_block_left_unbound_is_named():
    s = mlc_lab.Session(MM_RELU)
    _bind_2d(s, "C")
    r = numeric_check(s, sizes={128: 32})
    assert r.verdict == "error" and not r.ok
    assert "block 'Y' is not inside a blockIdx/threadIdx loop (loops above it: i, j, k)" in r.message
    assert "block 'C'" not in r.message
