"""What the tuning dashboard shows of a job, as plain data (one encoding each).

``mlc_lab.widgets.tuning`` fills these (``job_snapshot``, ``TuningDashboard._detail``) from a tuning job;
the TypeScript types in ``js/lib/model.ts`` are generated from here (``python -m mlc_lab.core.model_ts``)
and read by ``js/tuning``. Per-trial series (latencies, elapsed times) travel as float64 binary buffers
beside them, not here.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = ["BestTrial", "FailureItem", "MachineLine", "Machines", "Roof", "TrialDetail"]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = (
    "BestTrial",
    "Roof",
    "FailureItem",
    "TrialDetail",
    "MachineLine",
    "Machines",
)


class BestTrial(TypedDict, total=False):
    """The fastest trial so far (empty before one succeeded), and its re-timing at the end of the run."""

    trial: int
    latency_s: float
    gflops: float | None
    confirmed_latency_s: float  # re-timed by measure()'s method at the end of the run
    confirmed_trial: int
    method: str  # how it was re-timed, and how quiet the machine was


class Roof(TypedDict, total=False):
    """The machine's roofline (when already measured) and the program's arithmetic intensity (empty: unknown)."""

    peak_gflops: float
    bandwidth_gbs: float
    intensity: float  # the program's FLOPs per byte (compulsory traffic)


class FailureItem(TypedDict):
    """A failed trial and the line of its error that says why."""

    trial: int
    summary: str


class TrialDetail(TypedDict):
    """One trial as the dashboard shows it when selected: only ``trial`` and ``problem`` when it cannot
    be read, ``{}`` while nothing is selected."""

    trial: NotRequired[int]
    ok: NotRequired[bool]
    latency_s: NotRequired[float | None]
    gflops: NotRequired[float | None]
    run_secs: NotRequired[list[float]]
    error: NotRequired[str]
    error_summary: NotRequired[str]
    trace: NotRequired[str]
    script: NotRequired[str]
    script_problem: NotRequired[str]  # why the script (or the diff against the best) is missing
    diff: NotRequired[str]  # against the best trial ("" for the best itself)
    best_trial: NotRequired[int | None]
    vs_best: NotRequired[float | None]  # latency over the best's
    problem: NotRequired[str]  # why the trial cannot be shown
    where: NotRequired[str | None]  # measured elsewhere: the server, or the batch round's job and machine
    waited_s: NotRequired[float | None]  # ... and how long it waited for that machine


class MachineLine(TypedDict):
    """One thing said of the machines that measure elsewhere: a server lost or left out of the job, a
    batch round (where it ran, how long it waited, or why it failed). ``problem``: shown as one."""

    text: str
    problem: bool


class Machines(TypedDict, total=False):
    """Where a job measures when not here (empty for the local runner): how (``via``), and what happened."""

    via: str
    lines: list[MachineLine]
