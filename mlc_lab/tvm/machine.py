"""The machine's roofline, measured with kernels TVM generates (worker request "machine").

- peak fp32 FLOP/s: a parallel loop over all cores, each iteration a chain of independent fused
  multiply-adds on `ACCUMULATORS` vector registers of the target's vector width (unrolled, so that
  the FMA latency is hidden and nothing but FMAs is in the loop);
- memory bandwidth: a parallel, vectorised STREAM triad ``a[i] = b[i] + s * c[i]`` on arrays far
  larger than the last-level cache, counted as 12 bytes per element (STREAM's convention);
- caches from the OS (/sys), the CPU's name, its vector ISA from LLVM's view of the target.

Peaks are the *fastest* repeat (a peak is what the machine can do; a busy neighbour only slows
some repeats down). Runs generated code: call only in the worker process.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import numpy as np

from mlc_lab._threads import ensure_tvm_threads

ensure_tvm_threads()

import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from mlc_lab.tvm.build import cpu_target, gpu_present  # noqa: E402

ACCUMULATORS = 16  # independent FMA chains per thread: latency (4 cycles) x 2 FMA ports, doubled
FMA_ITERS = 20000
STREAM_ELEMENTS = 1 << 24  # 64 MB per array: well beyond any last-level cache we run on
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


def _fma_kernel(chunks: int, lanes: int) -> Any:
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


def _triad_kernel(n: int, lanes: int) -> Any:
    @T.prim_func
    def triad(a: T.Buffer((n,), "float32"), b: T.Buffer((n,), "float32"), c: T.Buffer((n,), "float32"), s: T.float32):
        T.func_attr({"global_symbol": "triad", "tirx.noalias": True})
        for o in T.parallel(n // (lanes * 16)):
            for i in T.unroll(16):
                for v in T.vectorized(lanes):
                    idx = (o * 16 + i) * lanes + v
                    a[idx] = b[idx] + s * c[idx]

    return tvm.IRModule({"triad": triad})


def peak_gflops(threads: int, lanes: int, repeats: int = 7) -> dict:
    target = cpu_target()
    chunks = max(1, threads) * 4
    ex = tvm.compile(_fma_kernel(chunks, lanes), target=target)
    dev = tvm.cpu()
    out = tvm.runtime.empty((chunks, ACCUMULATORS * lanes), "float32", dev)
    flops = 2.0 * chunks * FMA_ITERS * ACCUMULATORS * lanes
    timer = ex.mod.time_evaluator("fma", dev, number=1, repeat=repeats, min_repeat_ms=50)
    secs = [float(x) for x in timer(out, 0.999, 0.001).results]
    return {"gflops": flops / min(secs) / 1e9, "gflops_median": flops / float(np.median(secs)) / 1e9,
            "kernel": f"{chunks} parallel chunks x {FMA_ITERS} iterations x {ACCUMULATORS} FMA chains x {lanes} lanes"}


def stream_gbs(lanes: int, repeats: int = 7) -> dict:
    target = cpu_target()
    n = STREAM_ELEMENTS
    ex = tvm.compile(_triad_kernel(n, lanes), target=target)
    dev = tvm.cpu()
    arrays = [tvm.runtime.tensor(np.full(n, v, dtype="float32"), dev) for v in (0.0, 1.0, 2.0)]
    timer = ex.mod.time_evaluator("triad", dev, number=1, repeat=repeats)
    secs = [float(x) for x in timer(*arrays, 3.0).results]
    nbytes = 12.0 * n
    return {"gbs": nbytes / min(secs) / 1e9, "gbs_median": nbytes / float(np.median(secs)) / 1e9,
            "kernel": f"STREAM triad, {n} float32 per array, 12 bytes per element"}


def os_caches() -> list[dict]:
    """[{level, type, bytes, shared_by}] of cpu0, from /sys (empty where the OS does not say)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    out = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return out
    for name in names:
        if not name.startswith("index"):
            continue

        def read(field: str) -> str:
            try:
                with open(os.path.join(base, name, field)) as fh:
                    return fh.read().strip()
            except OSError:
                return ""

        size = read("size")
        mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(size[-1:], 1)
        try:
            nbytes = int(size.rstrip("KMG")) * mult
        except ValueError:
            continue
        shared = read("shared_cpu_list")
        out.append({"level": int(read("level") or 0), "type": read("type").lower(), "bytes": nbytes, "shared_cpu_list": shared})
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_facts() -> dict:
    if not gpu_present():
        return {"present": False, "note": "no CUDA GPU found: the GPU roofline is not available on this machine"}
    dev = tvm.cuda(0)
    facts: dict = {"present": True}
    for name in ("device_name", "compute_version", "multi_processor_count", "max_clock_rate", "total_global_memory"):
        try:
            value = getattr(dev, name)
            facts[name] = value if isinstance(value, (int, float, str)) else str(value)
        except Exception:  # noqa: BLE001 - older drivers lack some attributes
            continue
    facts["note"] = "GPU present; its roofline is not measured by mlc_lab yet"
    return facts


def machine_request(req: dict) -> dict:
    target = cpu_target()
    threads = int(os.environ.get("TVM_NUM_THREADS") or 1)
    isa, lanes = vector_isa(target)
    t0 = time.perf_counter()
    peak = peak_gflops(threads, lanes, int(req.get("repeats", 7)))
    stream = stream_gbs(lanes, int(req.get("repeats", 7)))
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "threads": threads,
        "target": str(target),
        "vector_isa": isa,
        "fp32_lanes": lanes,
        "peak_gflops": peak["gflops"],
        "peak_gflops_median": peak["gflops_median"],
        "peak_kernel": peak["kernel"],
        "bandwidth_gbs": stream["gbs"],
        "bandwidth_gbs_median": stream["gbs_median"],
        "bandwidth_kernel": stream["kernel"],
        "caches": os_caches(),
        "gpu": gpu_facts(),
        "tvm": tvm.__version__,
        "measured_in_s": round(time.perf_counter() - t0, 2),
        "measured_at": time.time(),
    }
