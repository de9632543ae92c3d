"""GPU schedules checked without a GPU (issue 19, item 3): TVM's OpenCL code for the schedule run on
the CPU (pocl, or the Oclgrind simulator) against the unscheduled program, at a smaller size the
trace is replayed on. Right schedules give 0 wrong; a racing write-back, an out-of-bounds copy, a
crash and a hang each come back as a verdict, and the test process goes on.

The tests hold on either engine (pocl where its compiler knows the CPU, Oclgrind elsewhere); run them
with one forced: ``MLC_LAB_OPENCL_ENGINE=pocl`` or ``=oclgrind``. A test that needs a slow or a
crashing kernel makes one (`SPIN`, a worker killed while it runs). Where the forced engine cannot run
kernels on this machine, the tests that run one are skipped with the engine's own reason."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

import mlc_lab
from mlc_lab import exercises
from mlc_lab.core.checks import numeric_gpu
from mlc_lab.core.checks.numeric_gpu import NumericCheckError, numeric_check
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
def engine():
    """The OpenCL engine kernels run on here. pocl and Oclgrind are installed with mlc_lab (Oclgrind runs
    on any CPU), so finding neither fails; only an engine forced by MLC_LAB_OPENCL_ENGINE that cannot run
    on this machine skips the tests that run a kernel, with the reason."""
    import os

    from mlc_lab.tvm.measure import opencl_run as opencl

    try:
        return opencl.opencl_device()[1]
    except opencl.OpenCLProgramError as exc:
        if os.environ.get("MLC_LAB_OPENCL_ENGINE"):
            pytest.skip(str(exc))
        pytest.fail(f"no OpenCL engine can run a kernel, though pocl and Oclgrind come with mlc_lab: {exc}")


@pytest.fixture(scope="module")
def reference():
    return blocking_with_shared(mlc_lab.Session(matmul(1024)))


# A kernel that runs for minutes on any engine: 64 threads, each 2^32 dependent multiply-adds (no
# fast-math: nothing folds them). The kernel runs before the reference, so a kill or a timeout
# always lands in it.
SPIN = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Spin:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for b in T.thread_binding(2, thread="blockIdx.x"):
            for t in T.thread_binding(32, thread="threadIdx.x"):
                for k0, k1 in T.grid(65536, 65536):
                    with T.sblock("B"):
                        vi = T.axis.spatial(64, b * 32 + t)
                        vk0, vk1 = T.axis.remap("RR", [k0, k1])
                        with T.init():
                            B[vi] = T.float32(0)
                        B[vi] = B[vi] * T.float32(0.5) + A[vi]
"""


def test_the_course_schedule_at_1024_is_checked_at_128_with_no_wrong_element(reference, engine):
    r = numeric_check(reference)
    assert r.ok and r.verdict == "match", r.message
    assert r.wrong == 0 and r.total == 128 * 128 and r.max_error is not None and r.max_error < 1e-3
    assert r.sizes == {1024: 128} and r.shape == {"A": [128, 128], "B": [128, 128], "C": [128, 128]}
    assert r.engine in ("pocl", "oclgrind") and "1024 -> 128" in r.message
    data = r.to_json()
    assert data["ok"] is True and data["shape"]["C"] == [128, 128] and data["sizes"] == {"1024": 128}


def test_a_correct_variant_with_other_tiles_and_2d_threads_passes(engine):
    s = tiled_2d(mlc_lab.Session(matmul(1024)), tile=8, local=8, tile_k=16, copy_threads=(8, 8))
    r = numeric_check(s, sizes=64)
    assert r.ok and r.wrong == 0 and r.total == 64 * 64, r.message


def test_a_racing_write_back_is_wrong_in_most_elements(engine):
    # The write-back under the thread block's loop, outside the thread loops: every thread of the
    # block writes the block's whole tile from its own accumulator.
    s = tiled_2d(mlc_lab.Session(matmul(1024)), write_back_at="j0")
    r = numeric_check(s, sizes=64)
    assert not r.ok and r.verdict == "mismatch"
    assert r.wrong > r.total // 2 and r.total == 64 * 64, r.message
    assert f"{r.wrong} of {r.total} elements of C are wrong" in r.message
    if r.engine == "oclgrind":
        assert any("two threads write the same element" in d for d in r.diagnostics), r.diagnostics


def test_an_out_of_bounds_copy_is_a_crash_every_time_and_the_caller_goes_on(reference, engine):
    # The copies bound to 32x32 threads while the compute uses 16x16: the kernel is launched with
    # 32x32 threads, and the compute's extra threads write rows past the end of C (on pocl into the
    # guard band after C; Oclgrind sees them, and the reads past the shared tiles, itself).
    s = tiled_2d(mlc_lab.Session(matmul(1024)), copy_threads=(32, 32))
    for _ in range(2):
        t0 = time.perf_counter()
        r = numeric_check(s, sizes=64)
        assert r.verdict == "crash" and not r.ok and time.perf_counter() - t0 < 60, r.message
        assert r.message.startswith("the kernel accesses memory outside a buffer") and "illegal address" in r.message
    assert numeric_check(reference, sizes=64).ok  # the caller, and the next check, are fine


ADD_100 = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Add:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in range(100):
            with T.sblock("B"):
                vi = T.axis.spatial(100, i)
                B[vi] = A[vi] * T.float32(2)
"""


def test_a_split_without_its_guard_is_a_crash(engine):
    # 100 elements in blocks of 32 with the bounds check turned off: the last block's 28 extra
    # threads read A and write B past their end.
    s = mlc_lab.Session(ADD_100)
    i0, i1 = s.apply("split", "i", factors=[None, 32], disable_predication=True)
    s.apply("bind", i0, "blockIdx.x")
    s.apply("bind", i1, "threadIdx.x")
    r = numeric_check(s)
    assert r.verdict == "crash" and "outside" in r.message and "illegal address" in r.message, r.message


def test_a_process_that_dies_of_a_bad_access_reads_as_an_access_outside_a_buffer():
    # How the process running the kernel ended decides the sentence: a signal of a bad access, or the C
    # library aborting it on memory a kernel overwrote, is the guard band's family (an illegal address
    # on a GPU); any other end (a kill, a worker that died, an abort of another cause) is not.
    from mlc_lab.errors import MeasureError

    def said(summary: str, detail: str = "") -> str:
        return numeric_gpu._failure(MeasureError(summary, kind="crash", detail=detail), {1024: 64}, {}, 60).message

    family = "the kernel accesses memory outside a buffer (the process running it died of "
    segv = said("the process running the kernel on the CPU died (SIGSEGV)")
    assert segv.startswith(family + "SIGSEGV, a segmentation fault) (run at 1024 -> 64)"), segv
    assert "illegal address" in segv
    assert said("the kernel was killed by SIGBUS (its memory: 12 MB)").startswith(family + "SIGBUS, a bus error")
    heap = said("the process running the kernel on the CPU died (SIGABRT)", "x\ndouble free or corruption (!prev)\n")
    assert heap.startswith(family + 'SIGABRT: the C library found its memory overwritten, "double free or corruption')
    for summary, detail in (
        ("the process running the kernel on the CPU died (SIGABRT)", "Assertion failed in the compiler"),
        ("the process running the kernel on the CPU died (SIGKILL)", ""),
        ("the process running the kernel on the CPU died (exit status 3)", ""),
        ("the generated code crashed the worker process (SIGSEGV) while checking", ""),
    ):
        assert said(summary, detail).startswith("the kernel crashed (out-of-bounds access?)"), summary


def test_a_copy_from_one_guard_band_into_another_is_seen(engine):
    # Each buffer's guards hold a value of their own (on pocl, the engine without its own checks): a
    # kernel that copies what lies past A into what lies past B changes B's guard, NaN into NaN.
    import pyopencl as cl

    from mlc_lab.tvm.measure import opencl_run as opencl

    source = (
        "__kernel void copy(__global float* A, __global float* B) { B[get_global_id(0)] = A[get_global_id(0)] * 2.0f; }"
    )
    prog = {
        "source": source,
        "allocs": [],
        "params": [
            {"name": "A", "shape": [100], "dtype": "float32"},
            {"name": "B", "shape": [100], "dtype": "float32"},
        ],
        "launches": [
            {"kernel": "copy", "args": [{"buffer": "A"}, {"buffer": "B"}], "grid": [4, 1, 1], "block": [32, 1, 1]}
        ],
    }
    dev, _ = opencl.opencl_device()
    ctx = cl.Context([dev])
    program = cl.Program(ctx, source).build()
    arrays = {"A": np.ones(100, "float32"), "B": np.zeros(100, "float32")}
    outputs, guard_writes = opencl._launch_all(
        cl, ctx, cl.CommandQueue(ctx), program, prog, arrays, "pocl", guard_bytes=opencl.GUARD_BYTES, max_group=64
    )
    assert guard_writes == {"B": 28} and (outputs["B"] == 2.0).all()
    for dtype in ("float16", "float32", "float64", "int32", "uint8"):
        a, b = opencl._fill(np.empty(4, dtype), 1), opencl._fill(np.empty(4, dtype), 2)
        assert a.tobytes() != b.tobytes() and (np.isnan(a).all() if a.dtype.kind == "f" else True)


ROWNORM = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class RowNorm:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((32, 128), "float32"), S: T.Buffer((32, 128), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Z = T.sblock_alloc_buffer((32,), "float32")
        for i, k in T.grid(32, 128):
            with T.sblock("Z"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    Z[vi] = T.float32(0)
                Z[vi] = Z[vi] + A[vi, vk]
        for i, j in T.grid(32, 128):
            with T.sblock("S"):
                vi, vj = T.axis.remap("SS", [i, j])
                S[vi, vj] = A[vi, vj] / Z[vi]
"""


def test_a_per_thread_partial_that_tvm_allocates_outside_the_kernel_is_a_race_on_every_engine(engine):
    # A cross-thread row sum under the row loop, which no blockIdx binds: TVM allocates the reduction's
    # per-thread partial in_thread_Z_shared on the host, one element in global memory that all 128 threads
    # write and read back. pocl's compiler keeps each thread's store in a register, so the numbers
    # match there; on a GPU any thread may read another's. Bound to blockIdx, it is each thread's own.
    def schedule(blocks: bool) -> mlc_lab.Session:
        s = mlc_lab.Session(ROWNORM)
        s.apply("compute_at", "Z", "S/i")
        s.apply("set_scope", "Z", 0, "shared")
        if blocks:
            s.apply("bind", "S/i", "blockIdx.x")
        s.apply("bind", "S/j", "threadIdx.x")
        _, t = s.apply("split", "ax0", factors=[None, 128])
        s.apply("bind", t, "threadIdx.x")
        return s

    racy = numeric_check(schedule(False))
    assert racy.verdict == "mismatch" and not racy.ok and racy.wrong == 0, racy.message
    assert racy.message.startswith("the numbers match, but all 128 threads of a block of kernel main_kernel write ")
    assert "in_thread_Z_shared[0] with no barrier between (a race)" in racy.message
    right = numeric_check(schedule(True))
    assert right.ok and right.verdict == "match", right.message


def _kill_while_the_kernel_runs(pid: int, killed: list) -> None:
    """Kill the worker `pid` once the process running the kernel has started under it."""
    import psutil

    worker_proc = psutil.Process(pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        kernels = [
            c for c in worker_proc.children(recursive=True) if "mlc_lab.tvm.measure.opencl_run" in " ".join(c.cmdline())
        ]
        if kernels:
            killed.extend(kernels)
            time.sleep(0.5)
            os.kill(pid, 9)
            return
        time.sleep(0.05)


def test_a_worker_that_dies_mid_run_is_a_crash_verdict(reference, engine):
    import psutil

    w = worker()
    w.start()
    kernels: list = []
    killer = threading.Thread(target=_kill_while_the_kernel_runs, args=(w.pid, kernels))
    killer.start()  # SPIN runs for minutes: the kill lands while it runs, every time
    t0 = time.perf_counter()
    r = numeric_check(SPIN, timeout_s=300)
    killer.join()
    assert kernels and r.verdict == "crash" and not r.ok and time.perf_counter() - t0 < 150, r.message
    assert r.message.startswith("the kernel crashed (out-of-bounds access?)")
    _, alive = psutil.wait_procs(kernels, timeout=10)
    assert not alive  # the process running the kernel died with the worker
    assert numeric_check(reference, sizes=64).ok  # a fresh worker


def test_a_kernel_that_runs_too_long_is_stopped(engine):
    worker().start()
    t0 = time.perf_counter()
    r = numeric_check(SPIN, timeout_s=3.0)
    assert r.verdict == "timeout" and not r.ok and "more than 3 s" in r.message, r.message
    assert time.perf_counter() - t0 < 30


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


def test_a_bound_program_without_a_trace_runs_at_its_own_size(engine):
    r = numeric_check(GPU_TWO_BLOCKS)
    assert r.ok and r.total == 1024 and r.sizes == {} and r.shape["C"] == [1024], r.message


def test_exercises_numeric_check_runs_a_gpu_schedule(engine):
    """It used to fail with TVM's "Unknown device id in current IR" on every bound program."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, 1024).astype("float32"), rng.uniform(-1, 1, 1024).astype("float32")
    rep = exercises.numeric_check(GPU_TWO_BLOCKS, "main", [a, b, np.zeros(1024, "float32")], np.maximum(a + b, 0))
    assert rep.passed, rep.text()
    assert rep.check("runs as a GPU kernel").ok and "OpenCL" in rep.check("runs as a GPU kernel").message
    assert "Unknown device" not in rep.text()
    wrong = exercises.numeric_check(GPU_TWO_BLOCKS, "main", [a, b, np.zeros(1024, "float32")], a + b)
    assert not wrong.passed and "elements differ" in wrong.text()


def test_the_check_at_128_takes_seconds(reference, engine):
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


def test_two_kernels_and_a_global_intermediate_between_them(engine):
    s = mlc_lab.Session(MM_RELU)
    _bind_2d(s, "Y")
    _bind_2d(s, "C")
    r = numeric_check(s, sizes={128: 32})
    assert r.ok and r.total == 32 * 32 and r.shape["C"] == [32, 32], r.message


def test_an_intermediate_left_inside_the_kernel_is_explained():
    # Read from TVM's lowered kernel, before any OpenCL compiler sees it: the same words on every engine.
    s = mlc_lab.Session(MM_RELU)
    *_, j1 = _bind_2d(s, "Y")
    s.apply("reverse_compute_at", "C", j1)  # Y stays a global buffer, now allocated inside the kernel
    r = numeric_check(s, sizes={128: 32})
    assert r.verdict == "does_not_build" and not r.ok
    assert (
        "allocates Y in global memory, which a GPU kernel cannot do" in r.message and "(run at 128 -> 32)" in r.message
    )


def test_a_program_and_a_trace_file(reference, engine, tmp_path):
    (tmp_path / "mm.py").write_text(matmul(1024))
    (tmp_path / "mm.trace").write_text(reference.trace)
    r = numeric_check(str(tmp_path / "mm.py"), str(tmp_path / "mm.trace"), sizes=64)
    assert r.ok and r.sizes == {1024: 64} and r.total == 64 * 64, r.message
    with pytest.raises(NumericCheckError, match="no trace file"):
        numeric_check(str(tmp_path / "mm.py"), str(tmp_path / "missing.trace"))


def test_guard_bands_see_writes_past_a_buffer_and_reads_of_nan(engine):
    """The guard bands that catch out-of-bounds accesses on pocl (whose kernels are not checked),
    exercised on whichever engine this machine has: a kernel that writes 8 elements past the end of
    X, and one that reads 4 before the start of X into Y."""
    import pyopencl as cl

    from mlc_lab.tvm.measure import opencl_run as opencl

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


def test_symbolic_shapes_run_at_the_values_given(engine):
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


def test_gemm_relu_add_at_2048_with_the_epilogue_fused_into_the_write_back(engine):
    s = blocking_with_shared(mlc_lab.Session(GEMM_RELU_ADD))
    s.apply("reverse_compute_inline", "D")  # relu + bias applied as C leaves the local accumulator
    r = numeric_check(s)
    assert r.ok and r.sizes == {2048: 128} and r.shape["bias"] == [128] and r.total == 128 * 128, r.message


def test_a_block_left_unbound_is_named():
    s = mlc_lab.Session(MM_RELU)
    _bind_2d(s, "C")
    r = numeric_check(s, sizes={128: 32})
    assert r.verdict == "does_not_build" and not r.ok
    assert "block 'Y' is not inside a blockIdx/threadIdx loop (loops above it: i, j, k)" in r.message
    assert "block 'C'" not in r.message


# ----------------------------------------------------------------------------------------- host code


def _copies_never_compute_at(s: mlc_lab.Session, scope: str = "shared", at: bool = False) -> mlc_lab.Session:
    """A 128^3 matmul on 8x8 threads whose A and B stages are copied by 8x8 threads, 4 floats each,
    and never compute_at'd (``at``: they are): TVM then fills each whole stage in a kernel of its own,
    launched by a host loop that passes the loop's value to the kernel, into a global workspace."""
    c_local = s.apply("cache_write", "C", 0, "local")
    i0, i1, i2 = s.apply("split", "C/i", factors=[None, 8, 4])
    j0, j1, j2 = s.apply("split", "C/j", factors=[None, 8, 4])
    k0, k1 = s.apply("split", "C/k", factors=[None, 8])
    s.apply("reorder", i0, j0, i1, j1, k0, k1, i2, j2)
    s.apply("reverse_compute_at", c_local, j1)
    for loop, axis in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"), (j1, "threadIdx.x")):
        s.apply("bind", loop, axis)
    for index in (0, 1):
        cache = s.apply("cache_read", "C", index, scope)
        if at:
            s.apply("compute_at", cache, k0)
        a, b = s.apply("get_loops", cache)[-2:]
        _, ty, tx, vec = s.apply("split", s.apply("fuse", a, b), factors=[None, 8, 8, 4])
        s.apply("vectorize", vec)
        s.apply("bind", ty, "threadIdx.y")
        s.apply("bind", tx, "threadIdx.x")
    s.apply("decompose_reduction", "C", k0)
    return s


def test_a_host_loop_over_kernel_launches_with_host_computed_arguments_runs():
    from mlc_lab.tvm.checks import opencl

    s = _copies_never_compute_at(mlc_lab.Session(matmul(128)))
    prog = opencl.opencl_program(s.module, "main")
    # 64 launches of each copy kernel, each given the host loop's value, then the compute kernel
    assert [x["kernel"] for x in prog["launches"]] == ["main_kernel"] * 64 + ["main_kernel_1"] * 64 + ["main_kernel_2"]
    assert [x["args"][2] for x in prog["launches"][:3]] == [{"scalar": i, "dtype": "int32"} for i in range(3)]
    assert prog["launches"][63]["args"][2]["scalar"] == 63 and prog["launches"][0]["block"] == [8, 8, 1]
    assert sorted(a["name"] for a in prog["allocs"]) == ["A_shared", "B_shared"]  # global workspaces
    assert all(a["shape"] == [16384] for a in prog["allocs"])


def test_a_host_loop_past_the_launch_limit_is_refused_with_the_count(monkeypatch):
    from mlc_lab.tvm.checks import opencl

    monkeypatch.setattr(opencl, "MAX_LAUNCHES", 100)  # the copies alone take 128 launches
    with pytest.raises(opencl.OpenCLProgramError, match="the host code launches more than 100 kernels") as info:
        opencl.opencl_program(_copies_never_compute_at(mlc_lab.Session(matmul(128))).module, "main")
    assert info.value.verdict == "could_not_run"


def test_a_cache_stage_never_compute_at_is_checked_number_by_number(engine):
    r = numeric_check(_copies_never_compute_at(mlc_lab.Session(matmul(128))))
    assert r.ok and r.verdict == "match" and r.total == 128 * 128 and r.engine == engine, r.message


def test_a_launch_the_cpu_run_cannot_make_is_could_not_run_never_wrong_numbers(engine):
    # Dynamic shared memory: TVM's OpenCL code declares it as a private array and drops its barriers
    # (run as it is, every block would race): the numbers cannot be judged on the CPU.
    s = _copies_never_compute_at(mlc_lab.Session(matmul(128)), "shared.dyn", at=True)
    r = numeric_check(s)
    assert r.verdict == "could_not_run" and not r.ok and r.wrong == 0 and r.max_error is None
    assert r.message.startswith("the numbers were not checked: kernel main_kernel uses dynamic shared memory")
    assert "the CPU run cannot run it" in r.message and "wrong" not in r.message
    data = r.to_check()
    assert data["verdict"] == "could_not_run" and data["ok"] is False and data["message"] == r.message


def test_when_no_size_fits_the_tiles_the_verdict_is_could_not_run(reference, monkeypatch):
    monkeypatch.setattr(numeric_gpu, "_shrinkings", lambda dims, target: [{1024: 96}])
    r = numeric_check(reference)
    assert r.verdict == "could_not_run" and not r.ok
    assert "the numbers were not checked: at 1024 -> 96 the schedule's tiles no longer divide the loops" in r.message


# ----------------------------------------------------------------------------------------- engines


def _engine_works_here(name: str) -> str:
    """'' when `name` compiles a kernel on this machine, else the compiler's reason (in this process)."""
    import pyopencl as cl

    for platform in cl.get_platforms():
        key = "oclgrind" if "oclgrind" in platform.name.lower() else "pocl"
        if key == name and platform.get_devices():
            try:
                cl.Program(
                    cl.Context(platform.get_devices()[:1]), "__kernel void k(__global int* x) { x[0] = 1; }"
                ).build()
                return ""
            except Exception as exc:  # noqa: BLE001 - its reason is the answer
                return str(exc)
    return "not installed"


@pytest.mark.parametrize("name", ["pocl", "oclgrind"])
def test_the_engine_can_be_forced(name, monkeypatch):
    monkeypatch.setenv("MLC_LAB_OPENCL_ENGINE", name)
    worker().close()  # the worker reads the variable when it starts
    try:
        r = numeric_check(GPU_TWO_BLOCKS)
    finally:
        monkeypatch.undo()
        worker().close()
    problem = _engine_works_here(name)
    if problem:
        assert r.verdict == "could_not_run" and not r.ok, r.message
        assert f"the OpenCL engine {name} (MLC_LAB_OPENCL_ENGINE) cannot run kernels on this machine" in r.message
    else:
        assert r.ok and r.engine == name, r.message


def test_an_engine_that_does_not_exist_is_refused_by_name(monkeypatch):
    from mlc_lab.tvm.measure import opencl_run as opencl

    monkeypatch.setenv("MLC_LAB_OPENCL_ENGINE", "cuda")
    with pytest.raises(
        opencl.OpenCLProgramError, match="MLC_LAB_OPENCL_ENGINE='cuda' names no OpenCL engine: use pocl or oclgrind"
    ):
        opencl.opencl_device()


# ----------------------------------------------------------------------------------------- reports


def test_a_report_whose_numbers_could_not_be_checked_never_reads_as_wrong_numbers(engine, tmp_path, capsys):
    from mlc_lab.cli import main

    s = _copies_never_compute_at(mlc_lab.Session(matmul(128)), "shared.dyn", at=True)
    (tmp_path / "mm.py").write_text(matmul(128))
    (tmp_path / "mm.trace").write_text(s.trace)
    argv = ["check", str(tmp_path / "mm.py"), "--trace", str(tmp_path / "mm.trace"), "--numeric"]
    rc = main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    numeric = data["numeric"]
    assert set(numeric) == {"ok", "verdict", "message", "max_error", "shape", "sizes", "engine"}
    assert (
        numeric["verdict"] == "could_not_run"
        and numeric["ok"] is False
        and "dynamic shared memory" in numeric["message"]
    )
    failing = [c for c in data["checks"] if c["verdict"] == "fail"] or data["hazards"]  # unjudged fails nothing
    assert rc == (1 if failing else 0)  # the numbers not checked fail nothing by themselves
    main(argv)
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "numeric" in x)
    assert line.startswith("--    numeric (could not run)") and "wrong numbers" not in text
