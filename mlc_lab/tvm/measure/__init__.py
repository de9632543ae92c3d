"""How mlc_lab times a kernel: the one method behind `measure`, the tuner's runner, `bench`,
`sweep`, the explorer and the dashboard.

    threads   TVM_NUM_THREADS = the cores this process may use, fixed before TVM starts (TVM's own
              default is one thread per *physical* core: 1 on a 2-vCPU VM). Stated in every result.
              The pool's threads spin 10,000 yields between calls, then sleep
              (TVM_THREAD_POOL_SPIN_COUNT; TVM's default of 300,000 kept an idle worker burning a
              core for up to a second after each measurement: see `mlc_lab._threads`).
    warm-up   one untimed call (page faults, lazy initialisation, the thread pool waking up), then
              TVM's `time_evaluator`, which makes one more untimed call itself.
    repeats   `repeats` timed repeats (10 for `measure`, 3 while tuning); each repeat runs the
              kernel `number` times back to back, `number` grown until the repeat lasts at least
              `min_repeat_ms`, and reports the mean of those calls.
    figure    the median of the repeats; the spread is min/max and the interquartile range.
    rounds    `measure` takes the repeats again, up to 3 rounds in all, while a round was not quiet
              (`mlc_lab._contention.quiet`: another process held a core, the cores ran shared, or
              the repeats spread over 10% of their median), and reports the first quiet round, or
              else the steadiest (docs/measuring.md: a round no other probe flagged whose
              repeats spread 57% of their median).
    others    the CPU time other processes used while the repeats ran, in cores
              (`mlc_lab._contention`): ~0 on a quiet machine, 1 when another process kept a core
              busy. The load average cannot say this about one measurement; this figure can.
    cache     "warm" (default): inputs stay in cache from one call to the next, which is what a
              kernel inside a model usually sees for small tensors. "cold": every call is preceded
              by flushing every argument out of the CPU caches (clflush), number = 1: what a kernel
              sees when its inputs were just evicted. Both are labelled in the result.
    tuning    the same, with 3 repeats; a candidate whose first repeat is more than
              `EARLY_STOP_FACTOR` times slower than the best so far stops there (its figure is
              that one repeat: enough to rank it, and no time wasted on it).

Why the tuner's figures and `measure`'s used to differ, and what was done: docs/measuring.md
("One timing method"). In short: the build is the same (byte-identical code), the job's re-timing
now calls `measure`'s own function, and a figure taken while another process held a core says so
(`others_cores`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from mlc_lab import _contention
from mlc_lab._contention import OthersCpu

EARLY_STOP_FACTOR = 3.0


@dataclass(frozen=True)
class TimingMethod:
    cache: str = "warm"  # "warm" or "cold"
    repeats: int = 10
    min_repeat_ms: float = 20.0
    warmup: int = 1
    early_stop_factor: float | None = None  # tuning only: see the module's docstring
    rounds: int = 3  # at most; see the module's docstring

    def describe(self, threads: int | None) -> str:
        where = "cold cache (arguments flushed before every call)" if self.cache == "cold" else "warm cache"
        per = "1 call per repeat" if self.cache == "cold" else f"repeats of at least {self.min_repeat_ms:g} ms"
        again = f", taken again (up to {self.rounds} rounds) while not quiet" if self.rounds > 1 else ""
        return (
            f"median of {self.repeats} {per}, {where}, after {self.warmup} warm-up call(s), "
            f"{threads or '?'} thread(s){again}"
        )

    def to_json(self) -> dict:
        return asdict(self)


MEASURE = TimingMethod()
TUNING = TimingMethod(repeats=3, min_repeat_ms=10.0, early_stop_factor=EARLY_STOP_FACTOR, rounds=1)


def threads() -> int:
    return int(os.environ.get("TVM_NUM_THREADS") or 1)


_FLUSH = "mlc_lab.cache_flush_all"


def _flush_function() -> str:
    """A preprocessing function for time_evaluator that flushes *every* argument (TVM's own
    `cache_flush_cpu_non_first_arg` spares the first one, which for a matmul is an input)."""
    import tvm

    if tvm.get_global_func(_FLUSH, allow_missing=True) is None:
        flush_rest = tvm.get_global_func("cache_flush_cpu_non_first_arg")
        dummy = tvm.runtime.empty((1,), "float32", tvm.cpu())

        def flush_all(*args: Any) -> None:
            flush_rest(dummy, *args)

        tvm.register_global_func(_FLUSH, flush_all, override=True)
    return _FLUSH


def time_function(
    mod: Any, func_name: str, dev: Any, args: list, method: TimingMethod = MEASURE, best_s: float | None = None
) -> list[float]:
    """Seconds per call, one figure per repeat, by `method` (see the module's docstring)."""
    fn = mod.get_function(func_name)
    for _ in range(method.warmup):
        fn(*args)
    dev.sync()
    cold = method.cache == "cold"
    kwargs: dict = {"number": 1}
    if cold:
        kwargs.update(min_repeat_ms=0, f_preproc=_flush_function())
    else:
        kwargs.update(min_repeat_ms=int(round(method.min_repeat_ms)))
    repeats = max(1, int(method.repeats))
    results: list[float] = []
    if method.early_stop_factor and best_s and repeats > 1:
        first = [float(x) for x in mod.time_evaluator(func_name, dev, repeat=1, **kwargs)(*args).results]
        results += first
        if first[0] > method.early_stop_factor * best_s:
            return results
        repeats -= 1
    results += [float(x) for x in mod.time_evaluator(func_name, dev, repeat=repeats, **kwargs)(*args).results]
    return results


def timed(
    mod: Any,
    func_name: str,
    dev: Any,
    args: list,
    method: TimingMethod = MEASURE,
    speed_probe: Callable[[], float] | None = None,
) -> dict:
    """`time_function` and its `summary`, with the cores other processes used meanwhile
    (`others_cores`): the one call behind `measure`, the measuring side (`runside`), the tuner's
    end-of-run confirmation and the machine's peaks. With `speed_probe` (for a CPU kernel on more
    than one thread), also the share of its cores' speed the process got right after
    (`parallel_speed`): what `others_cores` cannot see on a VM. The probe is
    `mlc_lab.tvm.measure.probe.parallel_speed` where TVM's compiler is at hand, `probe_speed` on a
    library built elsewhere where it is not (the measuring side)."""

    def one_round() -> dict:
        with OthersCpu() as probe:
            results = time_function(mod, func_name, dev, args, method)
        out = {**summary(results), "others_cores": probe.cores}
        if speed_probe is not None and threads() > 1:
            out["parallel_speed"] = speed_probe()
        return out

    return _contention.quietest_round(one_round, method.rounds)


def fastest(mod: Any, name: str, dev: Any, args: list, calls: int, bursts: int = 1) -> tuple[list[float], float | None]:
    """Seconds of `calls` single calls of `name` (after a warm-up call), in `bursts` bursts 50 ms
    apart (so that one process holding a core for a while cannot spoil all of them), and the cores
    other processes used meanwhile: how the machine's peaks and the speed probe time a kernel."""
    import time

    mod.get_function(name)(*args)
    per = max(1, calls // bursts)
    timer = mod.time_evaluator(name, dev, number=1, repeat=per, min_repeat_ms=0)
    secs: list[float] = []
    with OthersCpu() as probe:
        for b in range(bursts):
            if b:
                time.sleep(0.05)
            secs += [float(x) for x in timer(*args).results]
    return secs, probe.cores


PROBE_CALLS = 12  # short calls of each probe kernel (~0.2 ms each): a few milliseconds in all


def probe_speed(lib: Any, threads: int, width: int, calls: int = PROBE_CALLS) -> dict:
    """`mlc_lab.tvm.measure.probe.parallel_speed`'s measurement, on a library that holds its two FMA kernels
    (``fma_all``: `threads` chunks, ``fma_one``: one chunk, each `width` floats; built by
    `mlc_lab.tvm.measure.probe.speed_probe_library`): the all-thread kernel's speed over `threads` x the
    one-thread kernel's, each the fastest of `calls` calls. Runtime only: the measuring side runs it."""
    import tvm

    dev = tvm.cpu()
    buf_all = tvm.runtime.empty((max(1, threads), width), "float32", dev)
    buf_one = tvm.runtime.empty((1, width), "float32", dev)
    all_secs, _ = fastest(lib, "fma_all", dev, [buf_all, 0.999, 0.001], calls)
    one_secs, _ = fastest(lib, "fma_one", dev, [buf_one, 0.999, 0.001], calls)
    # the all-thread kernel does `threads` times the one-thread kernel's work
    all_rate, one_rate = max(1, threads) / min(all_secs), 1.0 / min(one_secs)
    return {
        "all_cores_rate": all_rate,
        "one_core_rate": one_rate,
        "parallel_speed": round(all_rate / (max(1, threads) * one_rate), 3),
    }


def summary(results: list[float]) -> dict:
    arr = np.asarray(results, dtype=np.float64)
    q1, med, q3 = (float(x) for x in np.percentile(arr, [25, 50, 75]))
    return {
        "latency_s": med,
        "min_s": float(arr.min()),
        "max_s": float(arr.max()),
        "iqr_s": q3 - q1,
        "std_s": float(arr.std()),
        "results_s": [float(x) for x in arr],
        "repeats": int(arr.size),
    }


# ----------------------------------------------------------------------------------------- tuning


def run_evaluator(rt_mod: Any, device: Any, evaluator_config: Any, repeated_args: list) -> list[float]:
    """meta_schedule's `f_run_evaluator` (LocalRunner), timing by the TUNING method.
    The best latency so far is read from the file named by $MLC_LAB_BEST_FILE (written by the
    tuning job), so clearly slow candidates stop after one repeat; the cores other processes used
    meanwhile are appended to $MLC_LAB_CONTENTION_FILE (one line per candidate) when it is set."""
    best = None
    path = os.environ.get("MLC_LAB_BEST_FILE")
    if path:
        import json

        from mlc_lab.model.tuning import BestSoFar

        try:
            with open(path) as fh:
                best = BestSoFar.from_json(json.load(fh)).latency_s
        except (OSError, ValueError):  # none yet, or not a BestSoFar (WireError)
            best = None
    method = TimingMethod(
        repeats=int(evaluator_config.repeat) or TUNING.repeats,
        min_repeat_ms=float(evaluator_config.min_repeat_ms),
        cache="cold" if evaluator_config.enable_cpu_cache_flush else "warm",
        early_stop_factor=TUNING.early_stop_factor,
    )
    from mlc_lab import timeline

    out: list[float] = []
    with timeline.span("evaluate"), OthersCpu() as probe:
        for args in repeated_args:
            device.sync()
            out += time_function(rt_mod, rt_mod.entry_name, device, list(args), method, best_s=best)
    report = os.environ.get("MLC_LAB_CONTENTION_FILE")
    if report:  # the tuning job reads it back for this candidate (LiveRunner)
        with open(report, "a") as fh:
            fh.write(f"{probe.cores}\n")
    return out
