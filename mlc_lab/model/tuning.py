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

from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from mlc_lab.model.conform import WireData

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
    "BestSoFar",
    "BestTrial",
    "ConfirmedBest",
    "FailureItem",
    "ImportedRecords",
    "JobStatus",
    "MachineLine",
    "Machines",
    "Roof",
    "SharedRecords",
    "StoppedEarly",
    "TrialDetail",
    "TrialLine",
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
# meta_schedule's JSON database (the class's shared database is one too: mlc_lab.tvm.tuning.shared_db)
WORKLOADS_FILE = "database_workload.json"
RECORDS_FILE = "database_tuning_record.json"


def median(values: list[float]) -> float:
    """The median of a candidate's repeats (the mean of the two middle ones for an even count): a trial's
    latency, wherever it is taken (the job's lines, the live log, a database line read back alone)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass
class TrialLine(WireData):
    """One line of `TRIALS_FILE`, written by the job as a candidate's batch is committed (right after
    meta_schedule wrote its database line): what the job knows of it beyond that line."""

    line: int  # its line in RECORDS_FILE
    latency_s: float | None  # the `median` of run_secs; None: it failed (``error`` says why)
    run_secs: list[float]
    error: str | None
    trace: str | None  # TVM's printed trace (Python)
    others_cores: float | None = None  # cores other processes used while it was timed (local runner)
    where: str | None = None  # measured elsewhere: the server (host:port), or the batch round and its machine
    waited_s: float | None = None  # ... and how long it waited for that machine
    t: float | None = None  # seconds since the run started, as the live log's lines say it


# What a job imported from a class's shared database: from where, how many, which lines of its own
# database hold them (they are not its trials).
ImportedRecords = TypedDict("ImportedRecords", {"from": str, "count": int, "lines": list[int]}, total=False)


class SharedRecords(TypedDict):
    """What a job gave back to the class's shared database at its end: to where, how many."""

    to: str
    count: int


class StoppedEarly(TypedDict):
    """A run that ended before its trial count: the search space had no new candidate left."""

    measured: int
    requested: int
    reason: str


@dataclass
class JobStatus(WireData):
    """`STATUS_FILE`: the job's state as it writes it (``starting`` is written by the kernel that starts it,
    ``cancelled`` by the one that stops it; None: no status written yet), its process, its workload's
    line in the database (``workload_index``, which its records carry), how many of its trials were
    there before this run, and how it ended."""

    state: Literal["starting", "running", "done", "failed", "cancelled"] | None = None
    pid: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    workload_index: int | None = None
    done_before: int = 0  # this job's records in the database as the run started
    trials: int | None = None
    imported: ImportedRecords = field(default_factory=lambda: ImportedRecords())
    stopped_early: StoppedEarly | None = None
    shared: SharedRecords | None = None
    builds_reused: int | None = None  # libraries one stage reused from another
    error: str | None = None  # failed: the exception in one line
    detail: str | None = None  # ... and its traceback


@dataclass
class ConfirmedBest(WireData):
    """The best candidates re-timed at the end of a run by ``measure``'s method: the winner's figures as its
    `Measurement` gives them, the tuner's own figure for it (``tuner_latency_s``, ``run_secs``), and,
    when several were re-timed, the figure it was chosen by (``selection_latency_s``: the fresh one is
    ``latency_s``)."""

    latency_s: float | None
    min_s: float | None
    max_s: float | None
    iqr_s: float | None
    results_s: list[float] | None
    tuner_latency_s: float | None
    run_secs: list[float] | None
    method: str | None
    threads: int | None
    others_cores: float | None
    parallel_speed: float | None
    rounds: int | None
    load: float | None
    correct: bool | None
    target: str | None
    cache: str | None
    selection_latency_s: float | None
    candidates: int  # how many were re-timed


@dataclass
class BestSoFar(WireData):
    """`BEST_FILE`: the fastest candidate so far as the tuner measured it (its latency, database line,
    trace and TVMScript), and at the end of a run its `ConfirmedBest` (``latency_s_confirmed``: that
    figure, and ``trace`` and ``script`` then the confirmed winner's)."""

    latency_s: float
    line: int
    trace: str
    script: str | None
    confirmed: ConfirmedBest | None = None
    latency_s_confirmed: float | None = None


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
