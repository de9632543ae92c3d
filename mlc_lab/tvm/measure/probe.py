"""The speed probe: how much of its cores a process gets right now, measured with a kernel of FMAs.

On a VM the host can run two virtual CPUs on one physical core (or a neighbour on the sibling
hyperthread) for minutes: no other process, no steal time, `others_cores` 0, and yet a two-thread
kernel runs at the speed of one. `parallel_speed` tells such minutes apart (docs/measuring.md); its
FMA kernel is also the machine's peak kernel (`mlc_lab.tvm.machine`). `speed_probe_library` exports
the probe for a measuring side that runs TVM's runtime alone (`runside`, which times it with
`mlc_lab.tvm.measure.probe_speed`).
"""

from __future__ import annotations

from typing import Any

from mlc_lab._threads import ensure_tvm_threads
from mlc_lab.tvm.measure import probe_speed
from mlc_lab.tvm.targets import cpu_target

ensure_tvm_threads()

import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

ACCUMULATORS = 16  # independent FMA chains per thread: latency (4 cycles) x 2 FMA ports, doubled
FMA_ITERS = 20000  # one chunk: 20000 x 16 vector FMAs, ~0.2 ms at 2 GHz with two FMA ports
ISA_ORDER = ("avx512f", "avx2", "avx", "sse4.2", "neon", "sve")


def vector_isa(target: Any) -> tuple[str, int]:
    """(widest vector extension LLVM enables for the target, fp32 lanes per register)."""
    lanes = {"avx512f": 16, "avx2": 8, "avx": 8, "sse4.2": 4, "neon": 4, "sve": 4}
    for feature in ISA_ORDER:
        try:
            if tvm.target.codegen.target_has_features(feature, target):
                return feature, lanes[feature]
        except Exception:  # noqa: BLE001 - not an LLVM target, or an unknown feature name
            continue
    return "scalar", 1


def fma_kernel(chunks: int, lanes: int) -> Any:
    """`chunks` chunks of `ACCUMULATORS` independent FMA chains, `lanes` wide, one chunk per
    parallel iteration: nothing but FMAs in the loop (the machine's peak and the speed probe)."""
    width = ACCUMULATORS * lanes

    @T.prim_func
    def fma(out: T.Buffer((chunks, width), "float32"), x: T.float32, y: T.float32):
        T.func_attr({"global_symbol": "fma", "tirx.noalias": True})
        for p in T.parallel(chunks):
            acc = T.alloc_buffer((width,), "float32", scope="local")
            for i in T.vectorized(width):
                acc[i] = T.Cast("float32", p + i)
            for _it in range(FMA_ITERS):
                for a in T.unroll(ACCUMULATORS):
                    for v in T.vectorized(lanes):
                        acc[a * lanes + v] = acc[a * lanes + v] * x + y
            for i in range(width):
                out[p, i] = acc[i]

    return tvm.IRModule({"fma": fma})


_probe_libraries: dict = {}


def _probe_module(threads: int, lanes: int) -> Any:
    """The speed probe's two FMA kernels in one module: ``fma_all`` (a chunk per thread) and ``fma_one``."""
    funcs = {}
    for name, chunks in (("fma_all", max(1, threads)), ("fma_one", 1)):
        funcs[name] = fma_kernel(chunks, lanes)["fma"].with_attr("global_symbol", name)
    return tvm.IRModule(funcs)


def _probe_library(threads: int) -> tuple[Any, int]:
    """The probe's module built for this CPU (once per process), and its chunks' width in floats."""
    target = cpu_target()
    key = (str(target), threads)
    if key not in _probe_libraries:
        _, lanes = vector_isa(target)
        _probe_libraries[key] = (tvm.compile(_probe_module(threads, lanes), target=target), ACCUMULATORS * lanes)
    return _probe_libraries[key]


def parallel_speed(threads: int) -> dict:
    """How much of its cores this process gets right now: the FMA kernel on all `threads` at once
    against `threads` x the same kernel on one thread, each the fastest of `measure.PROBE_CALLS` calls
    (`mlc_lab.tvm.measure.probe_speed`, which the measuring side runs on `speed_probe_library`).

    1.0: every core ran at full speed. Near 1/threads: the threads shared one core's FMA units. On
    a VM that happens when the host runs two virtual CPUs on one physical core (or a neighbour on
    the sibling hyperthread): the guest sees no other process and no steal time, so `others_cores`
    stays at 0 while a two-thread kernel runs at the speed of one. Measured on this project's 2-vCPU
    VM: numpy's 512^3 matmul 1.8 ms in some minutes and 2.9 ms in others, with nothing else
    running. The first call compiles the two kernels (about a second); later calls cost ~5 ms."""
    ex, width = _probe_library(threads)
    speed = probe_speed(ex.mod, threads, width)
    flops_one = 2.0 * FMA_ITERS * width
    return {
        "all_cores_gflops": speed["all_cores_rate"] * flops_one / 1e9,
        "one_core_gflops": speed["one_core_rate"] * flops_one / 1e9,
        "parallel_speed": speed["parallel_speed"],
    }


def speed_probe_library(threads: int, path: str) -> dict:
    """Export the speed probe for this CPU to `path` (a ``.so``), for a measuring side that runs TVM's
    runtime alone; the ``threads`` and ``width`` its manifest's `SpeedProbe` gives with it."""
    ex, width = _probe_library(threads)
    ex.export_library(path)
    return {"threads": max(1, threads), "width": width}
