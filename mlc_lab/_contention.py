"""How much of the machine *other* processes used while we timed something.

On a shared machine the load average cannot say whether one particular measurement was disturbed:
it is a 1-minute mean, and it counts our own threads. What matters is the CPU time other processes
(and the hypervisor: "steal") took *during* the timed interval. Linux gives both halves exactly:
/proc/stat has the busy time of every CPU, /proc/self/stat this process's own (all its threads).

    with OthersCpu() as probe:
        ... time a kernel ...
    probe.cores   # e.g. 0.02 on a quiet machine, 1.0 when another process kept one core busy

The figure is in cores (CPU-seconds per second of wall time). Its resolution is the kernel's clock
tick (10 ms): over a 200 ms measurement, about 0.05 cores. Where /proc is missing (not Linux),
`cores` is None.
"""

from __future__ import annotations

import os
import time
from typing import Callable

# The thresholds and the rule (quiet, spread) are part of the measurement: mlc_lab.model.measure.
from mlc_lab.model.measure import PARALLEL_FLOOR, QUIET_CORES, STEADY_SPREAD, quiet, spread  # noqa: F401

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_ticks() -> int | None:
    """Busy ticks of all CPUs together (user, nice, system, irq, softirq, steal)."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    user, nice, system, _idle, _iowait, irq, softirq, steal = values + [0] * (8 - len(values))
    return user + nice + system + irq + softirq + steal


def _own_ticks() -> int | None:
    """This process's CPU ticks, all threads (utime + stime)."""
    try:
        with open("/proc/self/stat") as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(rest[11]) + int(rest[12])


class OthersCpu:
    """A context manager: `cores` = CPU time used by other processes per second of wall time."""

    def __init__(self) -> None:
        self.cores: float | None = None
        self.wall_s: float = 0.0

    def __enter__(self) -> "OthersCpu":
        self._busy0, self._own0, self._t0 = _machine_busy_ticks(), _own_ticks(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, own = _machine_busy_ticks(), _own_ticks()
        self.wall_s = time.perf_counter() - self._t0
        if None in (busy, own, self._busy0, self._own0) or self.wall_s <= 0:
            return
        others = (busy - self._busy0) - (own - self._own0)
        self.cores = round(max(0.0, others / _TICK) / self.wall_s, 3)


def describe(cores: float | None, parallel_speed: float | None = None, spread: float | None = None) -> str:
    """How busy the machine was while something was timed, in words (`parallel_speed`: see
    `mlc_lab.tvm.machine.parallel_speed`; `spread`: see `spread`)."""
    if cores is None:
        text = "other processes' CPU use unknown"
    elif cores < QUIET_CORES:
        text = f"quiet machine (other processes used {cores:.2f} cores meanwhile)"
    else:
        text = f"busy machine: other processes used {cores:.2f} cores meanwhile"
    if parallel_speed is not None and parallel_speed < PARALLEL_FLOOR:
        text += (
            f"; shared cores: the process got {100 * parallel_speed:.0f}% of its cores' speed "
            "(the host ran them on fewer physical cores)"
        )
    if spread is not None and spread > STEADY_SPREAD:
        text += f"; unsteady: the repeats spread {100 * spread:.0f}% of their median (something disturbed them)"
    return text


def _round_is_quiet(r: dict) -> bool:
    return bool(quiet(r.get("others_cores"), r.get("parallel_speed"), spread(r.get("iqr_s"), r.get("latency_s"))))


def quietest_round(take: Callable[[], dict], rounds: int) -> dict:
    """Call `take()` (one round of repeats: a dict with latency_s, iqr_s, others_cores and maybe
    parallel_speed) until a round is quiet or `rounds` were taken. Returns the first quiet round,
    or else the steadiest (rounds another process or a shared core slowed last, then the smallest
    spread), with `rounds` = how many were taken. Never the fastest of several: that would pick
    the luckiest and bias the figure low."""
    taken: list[dict] = []
    for _ in range(max(1, rounds)):
        taken.append(take())
        if _round_is_quiet(taken[-1]):
            return {**taken[-1], "rounds": len(taken)}

    def disturbed(r: dict) -> tuple:
        calm = quiet(r.get("others_cores"), r.get("parallel_speed"))
        return (calm is False, spread(r.get("iqr_s"), r.get("latency_s")) or 0.0)

    return {**min(taken, key=disturbed), "rounds": len(taken)}
