"""A tuning job as plain data: its folder, and what the tuning dashboard shows of it (one encoding each).

The job's folder (its work directory) is declared here once, for the kernel's side that writes the job and
reads it back (``mlc_lab.core.tuning``: `TuneJob`) and for the job's own processes (``mlc_lab.tvm.tuning``,
its runners and measuring process): the names of its files, and the one median rule a trial's latency is
taken by.

``mlc_lab.widgets.tuning`` fills the dashboard's types (``job_snapshot``, ``TuningDashboard._detail``) from
a tuning job; the TypeScript types in ``js/lib/model.ts`` are generated from those (``python -m
mlc_lab.core.model_ts``) and read by ``js/tuning``. Per-trial series (latencies, elapsed times) travel as
float64 binary buffers beside them, not here.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = [
    "BEST_FILE",
    "CONTENTION_FILE",
    "JOB_FILE",
    "LIVE_FILE",
    "LOG_FILE",
    "MODULE_FILE",
    "PENDING_FILE",
    "RECORDS_FILE",
    "SPACE_PICKLE",
    "STATUS_FILE",
    "TRIALS_FILE",
    "WORKLOADS_FILE",
    "BestTrial",
    "FailureItem",
    "MachineLine",
    "Machines",
    "Roof",
    "TrialDetail",
    "median",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = (
    "BestTrial",
    "Roof",
    "FailureItem",
    "TrialDetail",
    "MachineLine",
    "Machines",
)


# ----------------------------------------------------------------------------------------- the job's folder
# Every file of a tuning job's work directory besides meta_schedule's logs/.

JOB_FILE = "mlc_lab_job.json"  # what to tune: function, target, trials, space, runner, ... (written by the kernel)
MODULE_FILE = "mlc_lab_module.json"  # the workload: tvm.ir.save_json of a one-function module
SPACE_PICKLE = "mlc_lab_space.pkl"  # a user's space function (cloudpickle), for space=callable
STATUS_FILE = "mlc_lab_status.json"  # the job's state: starting, running, done, failed, cancelled
TRIALS_FILE = "mlc_lab_trials.jsonl"  # one line per measured candidate: its database line, latency, error, trace
BEST_FILE = "mlc_lab_best.json"  # the best so far (the runner stops clearly slow candidates by it), then confirmed
LIVE_FILE = "mlc_lab_live.jsonl"  # phases, each candidate as measured, what happened to the machines elsewhere
LOG_FILE = "mlc_lab.log"  # the job's output
CONTENTION_FILE = "mlc_lab_contention.txt"  # the measuring process: other processes' cores per candidate
PENDING_FILE = "mlc_lab_batch_jobs.json"  # the batch runner's Slurm jobs still queued or running
# meta_schedule's JSON database (the class's shared database is one too: mlc_lab.tvm.classroom)
WORKLOADS_FILE = "database_workload.json"
RECORDS_FILE = "database_tuning_record.json"


def median(values: list[float]) -> float:
    """The median of a candidate's repeats (the mean of the two middle ones for an even count): a trial's
    latency, wherever it is taken (the job's lines, the live log, a database line read back alone)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# ----------------------------------------------------------------------------------------- the dashboard


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
