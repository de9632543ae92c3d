"""Each widget's synced traits, as the page reads them: one TypedDict per widget class.

A widget class names its traits here (``RpcWidget.traits_type``); tests/widgets/test_requests.py fails
when a widget syncs a trait its TypedDict does not declare or declares one it does not sync, and under
the test suite's strict wire (``MLC_LAB_STRICT_WIRE``) every value a trait takes is checked against
its type. The page's ``AnyModel<...>`` types are generated from these (js/lib/model.ts).

``bytes`` is a Bytes trait (the page gets a DataView); :class:`Empty` is the ``{}`` a dict trait holds
while there is nothing to show.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from mlc_lab.model.checks import ChecksSetup, StepChecks, StepHazards
from mlc_lab.model.classroom import Board, ClassSubmission, ClassSummary
from mlc_lab.model.errors import ErrorInfo
from mlc_lab.model.measure import Measurement
from mlc_lab.model.path import PathSetup, StepPath
from mlc_lab.model.steps import FailedAttempt, HistoryResult
from mlc_lab.model.tuning import BestTrial, FailureItem, Machines, Roof, TrialDetail

__all__ = [
    "AccessError",
    "AccessViewTraits",
    "ClassDashboardTraits",
    "ClassroomInfo",
    "ClassroomTask",
    "Empty",
    "ExplorerError",
    "ExplorerTraits",
    "LeaderboardTraits",
    "MeasuringInfo",
    "PolledTraits",
    "RecordCut",
    "RpcTraits",
    "Selection",
    "TuningTraits",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = __all__


class Empty(TypedDict):
    """``{}``: a dict trait with nothing to show yet."""


class RpcTraits(TypedDict):
    """What every mlc_lab widget syncs: which view draws it, where its code is, its saved records."""

    _mlc_entry: str
    _mlc_front_end: str  # "anywidget:<model id>" of the FrontEnd model holding the code
    _mlc_recorded: dict[str, str]  # record key -> "IPY_MODEL_<id>" of a Recorded model


# --- the explorer (mlc_lab.widgets.explorer) --------------------------------------------------------


class Selection(TypedDict):
    """The loop or block picked (qualified name when it has one)."""

    kind: Literal["loop", "block", "func"]
    name: str


class ExplorerError(ErrorInfo):
    """The explorer's banner: the last failed click, with what it was (``source``) and a fresh ``id``."""

    id: int
    source: str  # "apply", "replay", "decision", "history", "measure"
    label: NotRequired[str]  # the failed call as the history would label it


class MeasuringInfo(TypedDict):
    """The measurement in flight: its step and target."""

    step: int | str
    target: str


class RecordCut(TypedDict):
    """What the saved record leaves out (steps beyond ``max_steps``, replies dropped for room)."""

    max_steps: int
    steps: int
    steps_recorded: int
    replies_dropped: int


class ClassroomTask(TypedDict):
    """One task of the class's assignment as the Submit bar lists it."""

    name: str
    title: str
    points: float
    checks: list[str]


class ClassroomInfo(TypedDict):
    """The class server the Submit bar hands steps in to (``identified``: the kernel holds a class
    token, so the bar asks for no pseudonym: the server knows who hands in)."""

    server: str
    identified: NotRequired[bool]
    title: NotRequired[str]  # the class's assignment, as the server's /api/assignment gives it
    tasks: NotRequired[list[ClassroomTask]]
    assignment_error: NotRequired[str]  # why the assignment could not be read


class ExplorerTraits(RpcTraits):
    """mlc_lab.widgets.Explorer."""

    func: str
    step: bytes  # UTF-8 JSON of the current StepView
    history: HistoryResult | Empty  # the steps' summaries (the history request's result)
    selection: Selection | Empty
    error: ExplorerError | Empty
    failures: list[FailedAttempt]
    height: str
    record_cut: RecordCut | Empty
    measurements: dict[str, Measurement]  # by step id
    measuring: MeasuringInfo | Empty
    checks_setup: ChecksSetup
    checks: StepChecks | Empty
    hazards: dict[str, StepHazards]  # by step id, the steps that created one
    classroom: ClassroomInfo | Empty
    class_submission: ClassSubmission
    compiler_target: str
    target: str  # "cpu", "cuda", or "" (each step's): Measure's target and the checks' (from step 0)
    path_setup: PathSetup | Empty  # the way's target program ({}: none)
    path: StepPath | Empty  # the way from the current step to it (after the step's own state)


# --- the memory view (mlc_lab.widgets.access.view) --------------------------------------------------


class AccessError(ErrorInfo):
    """Why the memory view shows no footprint of ``loop``."""

    loop: str


class AccessViewTraits(RpcTraits):
    """mlc_lab.widgets.AccessView."""

    loop_tree_json: bytes
    current: int | str | None  # the step shown
    loop: str
    at: dict[str, int]
    color_by: Literal["access", "order", "thread", "block"]
    warp: int  # -1: none picked
    block: int  # -1: none picked
    time: int  # -1: the whole footprint
    region: Literal["auto", "buffer", "touched"]
    sweep_threads: bool
    shape_vars: dict[str, int]
    height: str
    error: AccessError | Empty


# --- the tuning dashboard (mlc_lab.widgets.tuning) --------------------------------------------------


class TuningTraits(RpcTraits):
    """mlc_lab.widgets.TuningDashboard."""

    work_dir: str
    func: str
    target: str
    settings: str
    status: str
    job_error: str
    done: int
    total: int
    latency: bytes  # float64 seconds per trial (NaN: failed)
    elapsed: bytes  # float64 seconds since the start, per trial
    phase: str  # what the job does now ("" when not running)
    pending: bytes  # the current batch's candidates measured so far
    stopped_early: str
    roof: Roof
    flops: float
    best: BestTrial
    failed_count: int
    failures: list[FailureItem]
    machines: Machines  # where it measures when not here, and what happened to those machines
    selected: int
    detail: TrialDetail | Empty
    notice: str
    explorer: str | None  # "IPY_MODEL_<id>" of the explorer opened on a trial
    updated_at: float
    height: str


# --- the class widgets (mlc_lab.widgets.classroom) --------------------------------------------------


class PolledTraits(RpcTraits):
    """What a class widget refreshed from the class server syncs."""

    server: str
    error: str  # why the last refresh failed ("" when it worked)
    updated: float  # time.time() of the last refresh that worked
    refresh_s: float


class LeaderboardTraits(PolledTraits):
    """mlc_lab.widgets.classroom.Leaderboard."""

    board: Board | Empty
    highlight: str


class ClassDashboardTraits(PolledTraits):
    """mlc_lab.widgets.classroom.ClassDashboard."""

    summary: ClassSummary | Empty
    board: Board | Empty
