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
from dataclasses import asdict, dataclass, field
from typing import Any

from mlc_lab._contention import QUIET_CORES
from mlc_lab._threads import cpu_name, usable_cores
from mlc_lab.model.worker_ops import WORKER_OPS

MEASURE_TIMEOUT_S = WORKER_OPS["machine"].timeout_s
STALE_BUSY_S = 600.0  # a figure taken on a busy machine is re-measured when older than this


@dataclass(frozen=True)
class Machine:
    cpu: str
    cores: int
    threads: int
    vector_isa: str
    fp32_lanes: int
    peak_gflops: float
    bandwidth_gbs: float
    caches: list = field(default_factory=list)  # [{level, type, bytes, shared_cpu_list}]
    gpu: dict = field(default_factory=dict)  # {"present": False, "note": ...} without a GPU
    target: str = ""
    peak_kernel: str = ""
    bandwidth_kernel: str = ""
    load: float | None = None  # 1-minute load average while it was measured
    tvm: str = ""
    peak_one_core_gflops: float | None = None  # the FMA kernel on one core alone
    peak_all_cores_gflops: float | None = None  # the FMA kernel on all cores at once, as measured
    peak_source: str = ""  # "all cores at once", or why threads x the one-core figure was taken
    bandwidth_one_core_gbs: float | None = None  # the triad on one core
    bandwidth_all_cores_gbs: float | None = None  # the triad on all cores (bandwidth_gbs: the higher)
    others_cores: float | None = None  # cores other processes used while it was measured
    measured_at: float | None = None  # time.time() of the measurement
    peak_note: str = ""  # set when the peak was raised to a figure a real kernel reached

    @property
    def measured_quiet(self) -> bool:
        return self.others_cores is not None and self.others_cores < QUIET_CORES

    def when(self) -> str:
        """When and under what load the figures were measured, in words."""
        import time as _time

        at = (
            _time.strftime("%Y-%m-%d %H:%M UTC", _time.gmtime(self.measured_at))
            if self.measured_at
            else "an unknown time"
        )
        busy = (
            "other processes' CPU use unknown"
            if self.others_cores is None
            else f"other processes used {self.others_cores:.2f} cores meanwhile"
        )
        return f"measured {at} ({busy}; load {self.load})"

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the roofline bends: below it a kernel is bound by memory."""
        return self.peak_gflops / self.bandwidth_gbs if self.bandwidth_gbs else float("inf")

    def roof_gflops(self, intensity: float) -> float:
        """The attainable GFLOP/s at `intensity` FLOPs per byte."""
        return min(self.peak_gflops, self.bandwidth_gbs * intensity)

    def cache_bytes(self, level: int) -> int | None:
        return next((c["bytes"] for c in self.caches if c["level"] == level and c["type"] != "instruction"), None)

    def to_json(self) -> dict:
        out = asdict(self)
        out["ridge_intensity"] = self.ridge_intensity
        return out

    def __str__(self) -> str:
        l3 = self.cache_bytes(3)
        gpu = "no GPU" if not self.gpu.get("present") else str(self.gpu.get("device_name", "GPU"))
        return (
            f"{self.cpu}: {self.threads} threads, {self.vector_isa} ({self.fp32_lanes} fp32 lanes), "
            f"peak {self.peak_gflops:.0f} GFLOP/s, {self.bandwidth_gbs:.1f} GB/s"
            + (f", L3 {l3 / 2**20:.0f} MiB" if l3 else "")
            + f"; {gpu}; {self.when()}"
        )


_FIELDS = set(Machine.__dataclass_fields__)
_cached: Machine | None = None


def cache_path() -> str:
    base = os.environ.get("MLC_LAB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mlc_lab")
    key = f"{platform.node()}|{cpu_name()}|{os.cpu_count()}|{os.environ.get('TVM_NUM_THREADS') or usable_cores()}"
    return os.path.join(base, f"machine-{hashlib.sha1(key.encode()).hexdigest()[:12]}.json")


def _from_json(data: dict) -> Machine:
    return Machine(**{k: v for k, v in data.items() if k in _FIELDS})


_rechecked = False  # this process has already re-measured a figure it did not believe


def _read_cache(path: str) -> Machine | None:
    try:
        with open(path) as fh:
            return _from_json(json.load(fh))
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

    raw: dict[str, Any] = worker().call("machine", timeout=timeout)
    raw["load"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    new = _from_json(raw)
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
