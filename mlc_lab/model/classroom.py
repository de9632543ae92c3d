"""What the class server sends (``mlc_lab.classroom.store``, ``mlc_lab.classroom.server``) and what the
class widgets hold: the leaderboard, the teacher's summary, one submission's verdict, the Submit bar's
state. The server's JSON is this; ``tests/unit/test_classroom.py`` checks the store's output against it
(:func:`mlc_lab.model.conform.problems`), and the page reads the generated types.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "Board",
    "BoardRow",
    "ClassSubmission",
    "ClassSummary",
    "ClassTask",
    "ClassIdentity",
    "CommonFailure",
    "History",
    "LatencySpread",
    "RefusedHandIn",
    "StudentLatency",
    "StuckStudent",
    "TaskRate",
    "TaskVerdict",
    "Verdict",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = __all__


class ClassTask(TypedDict):
    """One task of the class's assignment."""

    name: str
    title: str
    points: float


class BoardRow(TypedDict):
    """One student on the leaderboard, by the pseudonym the teacher approved (or "student N"): the
    best score, the tasks passed, the fastest passing latency; ``you``: the asking student's row."""

    name: str
    rank: int
    score: float
    tasks_passed: list[str]
    best_latency_ms: float | None
    submissions: int
    you: NotRequired[bool]
    # how far that latency can be trusted: the repeats' interquartile range, the machine's load, and
    # whether it was quiet (mlc_lab.model.measure.quiet); ``tie``: shares its rank (within spread)
    spread_ms: NotRequired[float | None]
    load: NotRequired[float | None]
    quiet: NotRequired[bool | None]
    tie: NotRequired[bool]


class Board(TypedDict):
    """The leaderboard (``/api/leaderboard``; ``title``: the server adds the assignment's)."""

    title: NotRequired[str]
    max_score: float
    tasks: list[ClassTask]
    rows: list[BoardRow]
    submissions: int
    queued: int
    notice: NotRequired[str]  # a demo server (--open) says so in every answer


class TaskRate(TypedDict):
    """How many of the students who handed anything in passed one task."""

    name: str
    title: str
    passed: int
    students: int
    pass_rate: float


class CommonFailure(TypedDict):
    """A failure message, how often it was met and by how many students (task null: not graded at all)."""

    task: str | None
    message: str
    count: int
    students: int


class StuckStudent(TypedDict):
    """The first task a student has not passed, and how often they failed it."""

    name: str
    task: str
    failed_attempts: int
    stuck: bool
    last_message: str | None


class StudentLatency(TypedDict):
    name: str
    latency_ms: float
    spread_ms: NotRequired[float | None]
    load: NotRequired[float | None]
    quiet: NotRequired[bool | None]
    rank: NotRequired[int]
    tie: NotRequired[bool]


class RefusedHandIn(TypedDict):
    """A hand-in the grader refused, flagged for the teacher: an ``attack`` (a trace reaching for what
    no schedule does: ``why`` names it) or an honest ``mistake`` (a typo, a syntax error). ``name``:
    the student as the teacher knows them; ``pseudonym``: as the class sees them; ``file``: what the
    student called the hand-in."""

    id: int
    name: str
    pseudonym: str
    kind: Literal["attack", "mistake"]
    why: str
    file: str | None
    message: str
    at: float


class LatencySpread(TypedDict):
    """Each student's best passing latency, and their minimum, median and maximum."""

    students: list[StudentLatency]
    min: NotRequired[float]
    median: NotRequired[float]
    max: NotRequired[float]


class ClassSummary(TypedDict):
    """The teacher's view of a class (``/api/summary``)."""

    title: NotRequired[str]
    students: int
    submissions: int
    queued: int
    tasks: list[TaskRate]
    latency: LatencySpread
    common_failures: list[CommonFailure]
    stuck: list[StuckStudent]
    refused: NotRequired[list[RefusedHandIn]]
    notice: NotRequired[str]


class TaskVerdict(TypedDict):
    """One task of a graded submission."""

    name: str
    title: str | None
    points: float | None
    max_points: float | None
    passed: bool | None
    messages: list[str] | None


class Verdict(TypedDict):
    """One submission as its student sees it (no trace); the rest once it is graded. ``name``: the
    student's leaderboard name; ``student``: their id; ``client_id``: the id of the hand-in the
    client sent (a retry with it is this submission); ``retries``: how often the client had to send it."""

    id: int
    name: str
    student: NotRequired[str]
    task: str | None
    status: str  # "queued", "grading", "graded"
    submitted_at: float
    client_id: NotRequired[str | None]
    file: NotRequired[str | None]  # what the student called the hand-in (its sentences use that name)
    retries: NotRequired[int]
    notice: NotRequired[str]
    score: NotRequired[float | None]
    max_score: NotRequired[float | None]
    passing: NotRequired[bool]
    latency_ms: NotRequired[float | None]
    error: NotRequired[str | None]
    tasks: NotRequired[list[TaskVerdict]]
    hazards: NotRequired[list[Any]]
    notes: NotRequired[list[str]]
    correct: NotRequired[Any]
    timing: NotRequired[Any]
    timing_error: NotRequired[str | None]
    rank: NotRequired[int | None]
    tie: NotRequired[bool]
    students: NotRequired[int]


class History(TypedDict):
    """One student's submissions, oldest first (``/api/history``)."""

    student: str
    submissions: list[Verdict]
    notice: NotRequired[str]


class ClassIdentity(TypedDict):
    """Who the server takes a token for (``/api/me``): a student (id and leaderboard name) or the teacher."""

    teacher: bool
    student: str | None
    name: str | None
    notice: NotRequired[str]


class ClassSubmission(TypedDict, total=False):
    """The explorer's Submit bar (its ``class_submission`` trait; {} before the first submission)."""

    state: Literal["sending", "graded", "queued", "error"]
    name: str
    step: int | str
    text: str
    verdict: Verdict
    client_id: str  # the hand-in's id (one per intent: a double click reuses it)
