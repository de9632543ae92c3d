"""The machine's roofline, measured with kernels TVM generates (worker request "machine").

- peak fp32 FLOP/s: a parallel loop over all cores, each iteration a chain of independent fused
  multiply-adds on `ACCUMULATORS` vector registers of the target's vector width (unrolled, so that
  the FMA latency is hidden and nothing but FMAs is in the loop);
- memory bandwidth: a parallel, vectorised STREAM triad ``a[i] = b[i] + s * c[i]`` on arrays far
  larger than the last-level cache, counted as 12 bytes per element (STREAM's convention);
- caches from the OS (/sys), the CPU's name, its vector ISA from LLVM's view of the target.

Peaks are the *fastest* of many short calls (about a millisecond each): a peak is what the
machine can do, and on a shared machine a short call has a fair chance to run while nobody else
does, where a 50 ms repeat never has. The CPU time other processes used meanwhile is recorded
(`others_cores`), and the FMA kernel is also run on one core alone (`peak_one_core_gflops`): on a
quiet machine the all-core peak is close to threads x that figure; far below it says the all-core
figure was taken while another process held a core, and threads x the one-core figure is the peak
(`peak_source` says which). Runs generated code: call only in the
worker process.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from mlc_lab._threads import cpu_name, ensure_tvm_threads
from mlc_lab.model.machine import Machine

ensure_tvm_threads()

import tvm  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from mlc_lab.tvm import measure  # noqa: E402
from mlc_lab.tvm.measure.probe import (  # noqa: E402,F401  (the probe's FMA kernel is the peak's; parallel_speed re-exported)
    ACCUMULATORS,
    FMA_ITERS,
    fma_kernel as _fma_kernel,
    parallel_speed,
    vector_isa,
)
from mlc_lab.tvm.targets import cpu_target, gpu_present  # noqa: E402

FMA_CALLS = 500  # short calls; the peak is the fastest
FMA_BURSTS = 5
SCALING_FLOOR = 0.8  # an all-core peak below this fraction of threads x one-core was disturbed
STREAM_ELEMENTS = 1 << 24  # 64 MB per array: well beyond any last-level cache we run on
STREAM_CALLS = 20


def _triad_kernel(n: int, lanes: int, parallel: bool = True) -> Any:
    @T.prim_func
    def triad(a: T.Buffer((n,), "float32"), b: T.Buffer((n,), "float32"), c: T.Buffer((n,), "float32"), s: T.float32):
        T.func_attr({"global_symbol": "triad", "tirx.noalias": True})
        for o in T.parallel(n // (lanes * 16)) if parallel else T.serial(n // (lanes * 16)):
            for i in T.unroll(16):
                for v in T.vectorized(lanes):
                    idx = (o * 16 + i) * lanes + v
                    a[idx] = b[idx] + s * c[idx]

    return tvm.IRModule({"triad": triad})


def _fastest(ex: Any, name: str, args: list, calls: int, bursts: int = 1) -> tuple[list[float], float | None]:
    """`mlc_lab.tvm.measure.fastest` on a compiled program, on the CPU."""
    return measure.fastest(ex.mod, name, tvm.cpu(), args, calls, bursts)


def peak_gflops(threads: int, lanes: int, calls: int = FMA_CALLS) -> dict:
    """All-core and one-core fp32 peak: one chunk of independent FMA chains per thread."""
    target = cpu_target()
    out: dict = {}
    for label, chunks in (("all", max(1, threads)), ("one", 1)):
        ex = tvm.compile(_fma_kernel(chunks, lanes), target=target)
        buf = tvm.runtime.empty((chunks, ACCUMULATORS * lanes), "float32", tvm.cpu())
        flops = 2.0 * chunks * FMA_ITERS * ACCUMULATORS * lanes
        secs, others = _fastest(ex, "fma", [buf, 0.999, 0.001], calls if label == "all" else calls // 3, FMA_BURSTS)
        out[label] = {
            "gflops": flops / min(secs) / 1e9,
            "gflops_median": flops / float(np.median(secs)) / 1e9,
            "others_cores": others,
        }
    # FMA units are per core: on a quiet machine all cores do `threads` x what one does (measured
    # here: 225.4 against 2 x 114.6). An all-core figure far below that was taken while another
    # process held a core during every call (seen with 1.5 cores of others' load); one free core
    # is far easier to find, so the one-core figure times the threads is then the better peak.
    all_cores, one_core = out["all"]["gflops"], out["one"]["gflops"]
    scaled = max(1, threads) * one_core
    if all_cores >= SCALING_FLOOR * scaled:
        peak, source = all_cores, "all cores at once"
    else:
        peak, source = (
            scaled,
            (
                f"{max(1, threads)} x the one-core figure: the all-core run reached only "
                f"{all_cores:.1f} GFLOP/s, another process held a core"
            ),
        )
    return {
        "gflops": peak,
        "gflops_median": out["all"]["gflops_median"],
        "all_cores_gflops": all_cores,
        "one_core_gflops": one_core,
        "others_cores": out["all"]["others_cores"],
        "source": source,
        "kernel": f"{max(1, threads)} parallel chunk(s) x {FMA_ITERS} iterations x {ACCUMULATORS} independent "
        f"FMA chains x {lanes} lanes; the fastest of {calls} calls in {FMA_BURSTS} bursts",
    }


def stream_gbs(lanes: int, calls: int = STREAM_CALLS) -> dict:
    """Bandwidth of the triad on all cores, and on one core: one core rarely saturates memory, but
    it needs only one free core, so on a busy machine it can be the higher of the two. The
    bandwidth is the higher (both are rates the machine reached)."""
    target = cpu_target()
    n = STREAM_ELEMENTS
    dev = tvm.cpu()
    arrays = [tvm.runtime.tensor(np.full(n, v, dtype="float32"), dev) for v in (0.0, 1.0, 2.0)]
    nbytes = 12.0 * n
    out: dict = {}
    for label, parallel, count in (("all", True, calls), ("one", False, max(2, calls // 4))):
        ex = tvm.compile(_triad_kernel(n, lanes, parallel), target=target)
        secs, others = _fastest(ex, "triad", [*arrays, 3.0], count, 2)
        out[label] = {
            "gbs": nbytes / min(secs) / 1e9,
            "gbs_median": nbytes / float(np.median(secs)) / 1e9,
            "others_cores": others,
        }
    return {
        "gbs": max(out["all"]["gbs"], out["one"]["gbs"]),
        "gbs_median": out["all"]["gbs_median"],
        "all_cores_gbs": out["all"]["gbs"],
        "one_core_gbs": out["one"]["gbs"],
        "others_cores": out["all"]["others_cores"],
        "kernel": f"STREAM triad, {n} float32 per array, 12 bytes per element; the fastest of {calls} calls "
        f"on all cores and of {max(2, calls // 4)} on one core, the higher",
    }


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
                with open(os.path.join(base, name, field)) as fh:  # noqa: B023  (called in this pass)
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
        out.append(
            {"level": int(read("level") or 0), "type": read("type").lower(), "bytes": nbytes, "shared_cpu_list": shared}
        )
    return out


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


def machine_request(req: dict) -> Machine:
    target = cpu_target()
    threads = int(os.environ.get("TVM_NUM_THREADS") or 1)
    isa, lanes = vector_isa(target)
    t0 = time.perf_counter()
    peak = peak_gflops(threads, lanes, int(req.get("calls", FMA_CALLS)))
    stream = stream_gbs(lanes, int(req.get("stream_calls", STREAM_CALLS)))
    return Machine.from_json(  # the working figures (medians, the time it took) stay here
        {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "threads": threads,
            "target": str(target),
            "vector_isa": isa,
            "fp32_lanes": lanes,
            "peak_gflops": peak["gflops"],
            "peak_gflops_median": peak["gflops_median"],
            "peak_kernel": peak["kernel"],
            "peak_one_core_gflops": peak["one_core_gflops"],
            "peak_all_cores_gflops": peak["all_cores_gflops"],
            "peak_source": peak["source"],
            "others_cores": max(x for x in (peak["others_cores"], stream["others_cores"], 0.0) if x is not None),
            "bandwidth_gbs": stream["gbs"],
            "bandwidth_gbs_median": stream["gbs_median"],
            "bandwidth_kernel": stream["kernel"],
            "bandwidth_one_core_gbs": stream["one_core_gbs"],
            "bandwidth_all_cores_gbs": stream["all_cores_gbs"],
            "caches": os_caches(),
            "gpu": gpu_facts(),
            "tvm": tvm.__version__,
            "measured_in_s": round(time.perf_counter() - t0, 2),
            "measured_at": time.time(),
        }
    )
