"""`mlc_lab.machine()`: what this machine can do, measured once and cached on disk.

Peak fp32 FLOP/s and memory bandwidth come from kernels TVM generates (see
`mlc_lab.tvm.machine`), run in the worker process with the same thread count as every other
measurement. The result is cached per machine (CPU name, core count, TVM version, threads) in
``$MLC_LAB_CACHE_DIR`` (default ``~/.cache/mlc_lab``); `machine(refresh=True)` measures again and
keeps the higher peaks (a peak measured on a busy machine is only ever too low).

A cached figure is not believed blindly:
- it says when it was measured and how busy the machine was (`measured_at`, `others_cores`: the
  cores other processes used meanwhile); one taken on a busy machine (or by an older version that
  did not record it) is measured again, at most once per process and once per `STALE_BUSY_S`;
- a measurement faster than the peak contradicts it (`observed`): the machine is measured again at
  once, and if the kernel still beats the FMA kernel, the peak is raised to what was observed
  (`peak_note` says so).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, replace

from mlc_lab._threads import cpu_name, usable_cores
from mlc_lab.model.machine import Machine
from mlc_lab.model.worker_ops import WORKER_OPS

MEASURE_TIMEOUT_S = WORKER_OPS["machine"].timeout_s
STALE_BUSY_S = 600.0  # a figure taken on a busy machine is re-measured when older than this


_cached: Machine | None = None


def cache_path() -> str:
    base = os.environ.get("MLC_LAB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mlc_lab")
    key = f"{platform.node()}|{cpu_name()}|{os.cpu_count()}|{os.environ.get('TVM_NUM_THREADS') or usable_cores()}"
    return os.path.join(base, f"machine-{hashlib.sha1(key.encode()).hexdigest()[:12]}.json")


_rechecked = False  # this process has already re-measured a figure it did not believe


def _read_cache(path: str) -> Machine | None:
    try:
        with open(path) as fh:
            return Machine.from_json(json.load(fh))
    except (OSError, ValueError, TypeError):
        return None


def _write_cache(path: str, m: Machine) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(asdict(m), fh, indent=1)
    os.replace(tmp, path)


def _doubtful(m: Machine) -> bool:
    """A cached figure taken on a busy machine (or by a version that did not record how busy)."""
    if m.measured_quiet:
        return False
    return m.measured_at is None or time.time() - m.measured_at > STALE_BUSY_S


def machine(refresh: bool = False, *, timeout: float = MEASURE_TIMEOUT_S) -> Machine:
    """This machine's roofline (measured on first use, then read from the cache; see the module's
    docstring for when a cached figure is measured again)."""
    global _cached, _rechecked
    if _cached is not None and not refresh:
        return _cached
    path = cache_path()
    old = _read_cache(path)
    if old is not None and not refresh and not (_doubtful(old) and not _rechecked):
        _cached = old
        return old
    _rechecked = True
    from mlc_lab.core.worker import worker

    measured: Machine = worker().call("machine", timeout=timeout)
    new = replace(measured, load=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None)
    if old is not None:  # peaks only go up: a busy machine can only make them look lower
        better_peak = old.peak_gflops > new.peak_gflops
        new = Machine(
            **{
                **asdict(new),
                "peak_gflops": max(new.peak_gflops, old.peak_gflops),
                "bandwidth_gbs": max(new.bandwidth_gbs, old.bandwidth_gbs),
                "peak_one_core_gflops": max(new.peak_one_core_gflops or 0, old.peak_one_core_gflops or 0) or None,
                "peak_note": old.peak_note if better_peak else new.peak_note,
                "peak_source": old.peak_source if better_peak else new.peak_source,
            }
        )
    _write_cache(path, new)
    _cached = new
    return new


def observed(gflops: float, what: str) -> Machine:
    """A kernel ran at `gflops`: if that beats the peak, the peak was wrong. Measure the machine
    again (once per process); if the kernel still beats the FMA kernel, raise the peak to it."""
    global _cached
    m = machine()
    if gflops <= m.peak_gflops:
        return m
    if not _rechecked:
        m = machine(refresh=True)
    if gflops > m.peak_gflops:
        m = Machine(
            **{
                **asdict(m),
                "peak_gflops": gflops,
                "peak_note": f"raised to {gflops:.1f} GFLOP/s reached by {what}: faster than the FMA kernel ran",
            }
        )
        _write_cache(cache_path(), m)
        _cached = m
    return m


def cached_machine() -> Machine | None:
    """The machine's figures if already measured (in this process or on disk), else None."""
    if _cached is not None:
        return _cached
    return _read_cache(cache_path())
