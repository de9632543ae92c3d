"""Build, verify and time a schedule, out of the kernel's process.

Generated code runs in the worker process (`mlc_lab.core.worker`), in its own process group. A
segfault there, or a kernel that runs past the time limit (30 s by default), costs the worker,
never the Jupyter kernel: the caller gets a `MeasureError` and the next call starts a fresh worker.
Modules travel to the worker as `tvm.ir.save_json` text.

How a kernel is timed (warm-up, repeats, median and spread, threads, warm or cold cache) is written
down once, in `mlc_lab.tvm.measure`; `measure`, `sweep`, `bench`, the explorer, the dashboard and
the tuner's runner all time that way. Each `Measurement` also places the program on the machine's
roofline (`mlc_lab.machine()`): its arithmetic intensity and its fraction of the peak.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from mlc_lab.core.worker import DEFAULT_TIMEOUT_S, shutdown_worker, worker
from mlc_lab.errors import MeasureError
from mlc_lab.model.lowering import CudaBuild
from mlc_lab.model.measure import Measurement
from mlc_lab.model.worker_ops import WORKER_OPS

__all__ = ["Measurement", "CudaBuild", "measure", "cuda_source", "sweep", "time_callable", "worker", "shutdown_worker"]


# ----------------------------------------------------------------------------------------- API


def _module_text(module: Any) -> str:
    if isinstance(module, str):
        return module
    from mlc_lab.tvm.measure.build import module_to_text

    return module_to_text(module)


def measure(
    module: Any,
    reference: Any = None,
    func_name: str | None = None,
    target: Any = "cpu",
    repeats: int = 10,
    *,
    cache: str = "warm",
    timeout: float = DEFAULT_TIMEOUT_S,
    min_repeat_ms: float = 20.0,
    seed: int = 0,
    raise_errors: bool = True,
    roofline: bool = True,
    runner: str = "local",
    sandboxed_only: bool = False,
) -> Measurement:
    """Build `module` for `target` ("cpu" = native CPU with all cores, "cuda", or a TVM target dict),
    check its output against `reference` (the original program) on random inputs, and time it
    by the method of `mlc_lab.tvm.measure`: after a warm-up, the median of `repeats` repeats, each
    at least `min_repeat_ms` long; `cache="cold"` flushes the arguments out of the caches before
    every call instead. `roofline=True` places it on `mlc_lab.machine()`'s roofline (the first
    call on a machine measures the machine: some seconds, then cached on disk).

    `runner` measures it elsewhere, built here: "rpc://HOST:PORT/KEY" on a server of a TVM RPC
    tracker (which may run TVM's runtime alone), "batch:slurm[:PARTITION]" as a Slurm job, or
    "batch:COMMAND" by `COMMAND FOLDER` (docs/measuring.md); `timeout` then includes the wait for a
    machine (its default means 600 s there), and the result's `where` says which one.
    `sandboxed_only` (a hand-in's program) times it only on servers whose sessions run in mlc_lab's
    sandbox (`python -m mlc_lab.core.server_sandbox`).

    Failures raise `MeasureError` (`NoGPUError` for CUDA without a GPU), or, with
    `raise_errors=False`, come back as a `Measurement` whose `error` says what went wrong.
    """
    payload = {
        "module": _module_text(module),
        "reference": _module_text(reference) if reference is not None else None,
        "func_name": func_name,
        "target": target,
        "repeats": int(repeats),
        "cache": cache,
        "min_repeat_ms": float(min_repeat_ms),
        "seed": int(seed),
    }
    elsewhere = runner not in (None, "", "local")
    if elsewhere:
        extra = 60.0  # the far side's limit first, then the worker's
        far = WORKER_OPS["measure_elsewhere"].timeout_s - extra if timeout == DEFAULT_TIMEOUT_S else float(timeout)
        payload.update(runner=str(runner), timeout_s=far, sandboxed_only=bool(sandboxed_only))
        timeout = far + extra
    try:  # each operation named as written: tests/unit/kernel_paths.py reads which one runs a kernel here
        if elsewhere:
            m: Measurement = worker().call("measure_elsewhere", timeout=timeout, **payload)
        else:
            m = worker().call("measure", timeout=timeout, **payload)
    except MeasureError as exc:
        if raise_errors:
            raise
        return Measurement(target=str(target), error=str(exc), error_kind=exc.kind, func_name=func_name, cache=cache)
    if roofline and m.threads is not None and not elsewhere:  # this machine's roofline
        place_on_roofline(m)
    return m


def place_on_roofline(m: Measurement) -> None:
    """Fill `peak_gflops` (the roof at the measurement's intensity) and `fraction_of_peak`."""
    from mlc_lab.core.machine import machine, observed

    try:
        mach = machine()
        if m.gflops and m.gflops > mach.peak_gflops:  # the peak was wrong: see machine.observed
            mach = observed(m.gflops, f"a measured kernel ({m.func_name})")
    except MeasureError:
        return  # the roofline is a nicety; the timing stands
    m.machine_peak_gflops, m.machine_bandwidth_gbs = mach.peak_gflops, mach.bandwidth_gbs
    if m.intensity:
        m.peak_gflops = mach.roof_gflops(m.intensity)
    else:
        m.peak_gflops = mach.peak_gflops
    if m.gflops and m.peak_gflops:
        m.fraction_of_peak = m.gflops / m.peak_gflops


def time_callable(
    fn: Callable[[], Any], repeats: int = 10, min_repeat_ms: float = 20.0, warmup: int = 1, rounds: int = 3
) -> dict:
    """Time a Python callable (numpy's `a @ b`, say) by the same method as `measure`: `warmup`
    untimed calls, then the median of `repeats` repeats, each running `fn` back to back until it
    lasts at least `min_repeat_ms`, with the spread and the cores other processes used meanwhile
    (`others_cores`), taken again (up to `rounds` in all) while a round was not quiet. Runs here,
    in this process: compare it with `measure` only when both say the machine was quiet. Returns
    a dict of seconds (latency_s, min_s, max_s, iqr_s, results_s) and `rounds`."""
    import time

    import numpy as np

    from mlc_lab._contention import OthersCpu, quietest_round

    for _ in range(max(0, int(warmup))):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    number = max(1, int(np.ceil(min_repeat_ms / 1e3 / one)))

    def one_round() -> dict:
        results = []
        with OthersCpu() as probe:
            for _ in range(max(1, int(repeats))):
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                results.append((time.perf_counter() - t0) / number)
        arr = np.asarray(results)
        q1, med, q3 = np.percentile(arr, [25, 50, 75])
        return {
            "latency_s": float(med),
            "min_s": float(arr.min()),
            "max_s": float(arr.max()),
            "iqr_s": float(q3 - q1),
            "results_s": [float(x) for x in arr],
            "repeats": int(arr.size),
            "number": number,
            "others_cores": probe.cores,
        }

    out = quietest_round(one_round, rounds)
    out["method"] = (
        f"median of {out['repeats']} repeats of at least {min_repeat_ms:g} ms, after {warmup} warm-up call(s)"
        + (f", taken again (up to {rounds} rounds) while not quiet" if rounds > 1 else "")
    )
    return out


def cuda_source(
    module: Any,
    func_name: str | None = None,
    target: Any = "cuda",
    *,
    ptx: bool = False,
    timeout: float = WORKER_OPS["cuda"].timeout_s,
) -> CudaBuild:
    """Compile a GPU schedule for CUDA (no GPU needed) and return its kernels' source.

    Raises `MeasureError(kind="gpu_check")` naming the unbound blocks and loops, or the kernel that
    exceeds the GPU's threads-per-block or shared-memory limit, before anything is built.
    `ptx=True` also runs nvcc when it is installed (`ptx_error` says why not otherwise).
    """
    r: CudaBuild = worker().call(
        "cuda", timeout=timeout, module=_module_text(module), func_name=func_name, target=target, ptx=ptx
    )
    if r.problems:
        raise MeasureError(r.problems[0], kind="gpu_check", detail="\n".join(r.problems[1:]))
    return r


def _session_parts(obj: Any) -> tuple[Any, Any, str | None]:
    """(module, reference, func_name) from a Session-like object, or (module, None, None)."""
    if hasattr(obj, "module") and hasattr(obj, "original"):
        return obj.module, obj.original, getattr(obj, "func_name", None)
    return obj, None, None


def sweep(
    make_session: Callable[[Any], Any],
    values: Iterable[Any],
    target: Any = "cpu",
    repeats: int = 10,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_result: Callable[[Any, Measurement], None] | None = None,
) -> list[tuple[Any, Measurement]]:
    """Measure a family of schedules: `make_session(value)` returns a Session (or an IRModule) for
    each value. A value whose schedule fails, or whose program fails, gets a Measurement with
    `error` set; the sweep goes on."""
    out: list[tuple[Any, Measurement]] = []
    for value in values:
        try:
            made = make_session(value)
        except Exception as exc:  # noqa: BLE001 - a failing schedule is one point of the sweep
            m = Measurement(
                target=str(target), error=f"the schedule failed for {value!r}: {exc}", error_kind="schedule"
            )
        else:
            module, reference, func_name = _session_parts(made)
            m = measure(module, reference, func_name, target, repeats, timeout=timeout, raise_errors=False)
        out.append((value, m))
        if on_result is not None:
            on_result(value, m)
    return out
