"""What the graders answer, as plain data with one encoding each.

Each of these crosses a process (a worker's answer, a sandboxed child's, a judging child's line) and is read
back by ``mlc_lab.core.worker.decode_result`` as the type its ``WORKER_OPS`` row names:

- `RunResult`: a student's function run once on given inputs (on the CPU, or as OpenCL when it is bound to
  GPU threads), or the `ErrorInfo` of why not;
- `HandinResult`: the schedule a hand-in's code made in the sandbox, or why not;
- `NumericComparison`: a GPU schedule's run on the CPU compared with its unscheduled program, which
  ``mlc_lab.core.checks.numeric_gpu`` reads into the numeric check's verdict, `NumericResult`;
- `GradeResult` and its tasks (`TaskResult`): one hand-in's grade against an assignment (``mlc_lab.grading``),
  and `ClassGrade`, that grade as the class server stores it, with the class's timing (`ClassRetimes`: close
  figures timed again).

The graders' result types, and why each stays: `GradeResult` (an assignment's points per task; its
text and Gradescope forms are ``mlc_lab.grading.report``'s), `NumericResult` (one verdict of the numeric
GPU check, which a grade carries as its ``NumericCheck``), and `ExerciseResult`, a notebook exercise's
grade (``mlc_lab.exercises``): its checks are the named checks' verdicts (``mlc_lab.model.checks.CheckResult``,
which an assignment's tasks are scored from), with the structural `Difference` s from a target and the way
there; its text and HTML forms are ``mlc_lab.exercises.report.GradeReport``'s. It never crosses a process
(numpy arrays and the way inside), so it has no encoding. The two ``numeric_check`` functions are two
checks: ``mlc_lab.exercises.numeric_check`` runs a student's function on the exercise's inputs and
compares with numpy's answer; ``mlc_lab.core.checks.numeric_gpu.numeric_check`` runs a GPU schedule
on the CPU at a smaller size and compares with its unscheduled program. Both run a kernel through
the worker, and a GPU-bound exercise runs as `RunResult` does for the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, NotRequired, TypedDict

from mlc_lab.model.checks import CheckResult, HazardClass, HazardKind, NumericCheck
from mlc_lab.model.conform import WireData
from mlc_lab.model.errors import ErrorInfo, ErrorKind
from mlc_lab.model.path import PathAnswer, PathStep

__all__ = [
    "ClassGrade",
    "ClassRetimed",
    "ClassRetimes",
    "ClassTiming",
    "Difference",
    "ExerciseResult",
    "HandinResult",
    "KernelLaunch",
    "NumericComparison",
    "NumericResult",
    "NumericWorst",
    "GradeResult",
    "GradedHazard",
    "RunResult",
    "TaskResult",
]

# How a failed run's kind reads as the stage a grader names its check by: a GPU schedule that TVM or the
# OpenCL compiler refuses did not build; one the CPU run cannot run was not checked.
_STAGES = {"does_not_build": "build", "could_not_run": "check"}


@dataclass
class RunResult(WireData):
    """A function built and called once on given inputs (the worker's ``run_function`` on the CPU, its
    ``run_opencl`` for a function bound to GPU threads, run as OpenCL on the CPU): every argument after
    the call (numpy arrays, one per parameter), the OpenCL engine and what it reported; or, ``ok``
    False, the `ErrorInfo` of why not (its ``type`` a kind: build, run, crash, timeout, does_not_build,
    could_not_run, ...)."""

    ok: bool
    outputs: list[Any] = field(default_factory=list)  # numpy arrays (mlc_lab.model.wire carries them)
    engine: str = ""  # OpenCL: pocl or Oclgrind
    diagnostics: list[str] = field(default_factory=list)  # OpenCL: writes outside a buffer, the simulator's reports
    error: ErrorInfo | None = None

    @classmethod
    def failed(cls, kind: ErrorKind, summary: str, detail: str = "") -> RunResult:
        return cls(ok=False, error={"summary": summary, "type": kind, "detail": detail})

    @property
    def stage(self) -> str:
        """Where a failed run stopped, as a grader's check is named: build, run, check, crash, timeout."""
        kind = str(self.error.get("type", "run")) if self.error is not None else "run"
        return _STAGES.get(kind, kind)

    @property
    def message(self) -> str:
        """The failure's sentence ("" when it ran)."""
        return self.error["summary"] if self.error is not None and not self.ok else ""


# ----------------------------------------------------------------------------------------- a hand-in's code


@dataclass
class HandinResult(WireData):
    """What the sandboxed child (``mlc_lab.tvm.grading``) gives of a hand-in's schedule file or
    notebook: its schedule as TVM's JSON trace (``unchanged``: it changes nothing; ``function``: the
    scheduling function that made it); or ``error``, the kind of why not (syntax, raised, memory,
    no_function, not_a_notebook, ...), with ``message`` and the hand-in's ``line`` when known."""

    trace: str | None = None
    unchanged: bool = False
    function: str | None = None
    error: str | None = None
    line: int | None = None
    message: str = ""


# ----------------------------------------------------------------------------------------- the numeric check


class NumericWorst(TypedDict):
    """The element furthest from the reference: its buffer, index, value and the reference's."""

    buffer: str
    index: list[int]
    got: float | int | bool
    expected: float | int | bool


class KernelLaunch(TypedDict):
    """One kernel as the OpenCL run launched it: its grid and block, x y z."""

    kernel: str
    grid: list[int]
    block: list[int]


@dataclass
class NumericComparison(WireData):
    """The worker's ``numeric_gpu`` (``mlc_lab.tvm.checks.opencl.numeric_gpu_compare``): a GPU schedule run
    as OpenCL on the CPU against the unscheduled program on the same random inputs, element by element:
    how many of the outputs' elements are wrong, the largest error and where, what the engine reported
    (writes outside a buffer, Oclgrind's diagnostics, accesses out of bounds), the launches, the time
    each part took. ``mlc_lab.core.checks.numeric_gpu`` reads it, with the sizes it ran at, into a
    `NumericResult`."""

    wrong: int
    total: int
    max_error: float
    worst: NumericWorst | None
    outputs: list[str]  # the parameters compared (those the kernel writes)
    shape: dict[str, list[int]]
    guard_writes: dict[str, int]  # buffer -> elements written past its end
    engine: str
    diagnostics: list[str]
    nan_read: bool  # the worst element is a NaN: read outside a buffer, or never written
    launches: list[KernelLaunch]
    out_of_bounds: list[str]
    seconds: dict[str, float]  # build, reference, the run's parts, total
    # how the run fitted its memory budget (mlc_lab.tvm.measure.opencl_fit): pocl_problem, blocks_at_once,
    # races, peak_mb, and a note the verdict repeats ("Oclgrind ran without its race detection, ...")
    fit: dict[str, Any] | None = None


@dataclass(frozen=True)
class NumericResult:
    """The outcome of running a GPU schedule on the CPU and comparing it with the unscheduled program.

    ``verdict`` is one of ``mlc_lab.core.checks.numeric_gpu.VERDICTS``: ``match``; ``mismatch`` (wrong
    numbers); ``crash`` (the process died, or the kernel accessed memory outside a buffer: an illegal
    address on a GPU); ``timeout``; ``does_not_build`` (TVM or the OpenCL compiler refuses the schedule, as a GPU
    build would: a block outside every kernel, a global buffer allocated in a kernel);
    ``could_not_run`` (the CPU run cannot run this program, or no size fits its tiles: the numbers
    are not judged, and nothing counts it as wrong). ``ok`` is True only for ``match``. ``shape``
    gives each parameter's shape at the size that ran, ``sizes`` how the program's dimensions were
    changed for it, ``engine`` the OpenCL engine that ran it."""

    ok: bool
    max_error: float | None
    shape: dict[str, list[int]]
    wrong: int
    total: int
    message: str
    verdict: str = "match"
    sizes: dict = field(default_factory=dict)  # {1024: 128}: dimensions changed; {"n": 128}: shape variables
    engine: str = ""
    worst: NumericWorst | None = None
    diagnostics: list[str] = field(default_factory=list)  # out-of-bounds writes, the simulator's reports
    seconds: float = 0.0

    def to_json(self) -> dict:
        out = asdict(self)
        out["sizes"] = {str(k): v for k, v in self.sizes.items()}
        return out

    def to_check(self) -> NumericCheck:
        """What a `CheckReport` carries of it (``mlc-lab check --numeric``)."""
        return {
            "ok": self.ok,
            "verdict": self.verdict,  # type: ignore[typeddict-item]
            "message": self.message,
            "max_error": self.max_error,
            "shape": self.shape,
            "sizes": {str(k): v for k, v in self.sizes.items()},
            "engine": self.engine,
        }

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.message


# ----------------------------------------------------------------------------------------- a hand-in's grade


@dataclass
class TaskResult(WireData):
    """One task of a hand-in's grade (``mlc_lab.grading.scoring.score_tasks``): its points and whether it
    passed, with one sentence per check (and hazard) in a student's words."""

    name: str
    title: str
    points: float
    max_points: float
    passed: bool
    messages: list[str] = field(default_factory=list)
    number: str = ""  # "1.2": Gradescope's test number
    visibility: str = "visible"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "number": self.number,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "messages": list(self.messages),
            "visibility": self.visibility,
        }


# A hazard as a grade carries it: Hazard.to_json() and its class ("correctness", "performance").
GradedHazard = TypedDict(
    "GradedHazard",
    {"kind": HazardKind, "message": str, "where": str | None, "class": HazardClass},  # type: ignore[valid-type]
)


@dataclass
class GradeResult(WireData):
    """One hand-in's grade (``mlc_lab.grading.grade``), as a judging child writes it (``grade_batch``) and the
    class server stores it: its tasks, how grading ended (``status``: graded, refused, crash, timeout,
    grader error; ``error`` why nothing could be graded), the hazards and notes said once, the schedule
    as the course's apply_trace function, the timing and the numeric check when the assignment asks.
    ``mlc_lab.grading.report.GradeResult`` adds the forms it is read in (text, Gradescope's results.json)."""

    submission: str
    kind: str  # "trace" | "schedule" | "notebook" | "folder" (a student's folder of parts)
    tasks: list[TaskResult]
    error: str | None = None  # why nothing could be graded (one sentence)
    status: str = "graded"  # "graded" | "refused" | "crash" | "timeout" | "grader error"
    hazards: list[GradedHazard] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the student should know that is no task's verdict
    trace: str | None = None  # the schedule as the course's apply_trace function
    seconds: float = 0.0
    latency_ms: float | None = None  # when the assignment times submissions
    numeric: NumericCheck | None = None  # when the assignment runs the schedule smaller
    correct: bool | None = None  # its output against the original program's, on random inputs
    visibility: str = "visible"
    overloaded: str | None = None  # set when a wall-clock limit stopped it on an overloaded machine: grade again

    __wire_properties__ = ("score", "max_score")  # sent with the fields (see to_json)

    @property
    def score(self) -> float:
        return float(sum(t.points for t in self.tasks))

    @property
    def max_score(self) -> float:
        return float(sum(t.max_points for t in self.tasks))

    def to_json(self) -> dict:
        return {
            "submission": self.submission,
            "kind": self.kind,
            "status": self.status,
            "score": self.score,
            "max_score": self.max_score,
            "error": self.error,
            "hazards": list(self.hazards),
            "notes": list(self.notes),
            "tasks": [t.to_json() for t in self.tasks],
            "trace": self.trace,
            "seconds": round(self.seconds, 3),
            "latency_ms": self.latency_ms,
            "correct": self.correct,
            "numeric": self.numeric,
            "visibility": self.visibility,
            "overloaded": self.overloaded,
        }


class ClassTiming(TypedDict):
    """How the class server timed a passing submission: where (its sandbox, or a class machine's runner),
    by which method, and how far the figure can be trusted (quiet, spread, load); a figure timed again
    says how (``retimed``: rounds, repeats, how many were interleaved)."""

    where: NotRequired[str]
    method: NotRequired[str]
    quiet: NotRequired[bool | None]
    spread_ms: NotRequired[float | None]
    load: NotRequired[float | None]
    retimed: NotRequired[dict[str, int]]


class ClassGrade(TypedDict):
    """The class server's grading child's answer (``mlc_lab.grading.judge.judge_for_class``), stored as the
    submission's verdict: `GradeResult`'s encoding with the class's timing (``latency_ms``, ``correct``,
    ``timing``, or why not: ``timing_error``); or, when the child could not grade it, only ``error``,
    ``status`` and the `ErrorInfo` (``mlc_lab.grading.report.failed_verdict``)."""

    status: str
    error: str | None
    submission: NotRequired[str]
    kind: NotRequired[str]
    score: NotRequired[float]
    max_score: NotRequired[float]
    hazards: NotRequired[list[GradedHazard]]
    notes: NotRequired[list[str]]
    tasks: NotRequired[list[TaskResult]]
    trace: NotRequired[str | None]
    seconds: NotRequired[float]
    latency_ms: NotRequired[float | None]
    correct: NotRequired[bool | None]
    numeric: NotRequired[NumericCheck | None]
    visibility: NotRequired[str]
    overloaded: NotRequired[str | None]
    timing: NotRequired[ClassTiming]
    timing_error: NotRequired[str]
    error_info: NotRequired[ErrorInfo]


class ClassRetimed(TypedDict):
    """One submission timed again (``mlc_lab.classroom.timing.retime``), or why it could not be."""

    latency_ms: NotRequired[float]
    timing: NotRequired[ClassTiming]
    error: NotRequired[str]


class ClassRetimes(TypedDict):
    """The class server's grading child's answer to ``retime``: each trace's new figure, in order."""

    timings: list[ClassRetimed]


# ----------------------------------------------------------------------------------------- a notebook exercise


@dataclass
class Difference:
    """One way a student's program differs from the target: one step of the way there.

    ``where`` names the place ("block Y_update"), ``what`` what of the target the step makes, ``yours`` and
    ``target`` describe both sides when known, ``hint`` the primitive that closes the gap, ``line`` the
    line of the student's printed script when known, ``step`` the way's step itself (for ``Session.apply``).
    """

    where: str
    what: str
    yours: str | None = None
    target: str | None = None
    hint: str | None = None
    line: int | None = None
    step: PathStep | None = None

    def text(self) -> str:
        out = f"{self.where}: {self.what}"
        if self.yours is not None or self.target is not None:
            out += f" (yours: {self.yours or '-'}; target: {self.target or '-'})"
        if self.line:
            out += f" [line {self.line}]"
        if self.hint:
            out += f"\n      hint: {self.hint}"
        return out


@dataclass
class ExerciseResult:
    """A notebook exercise's grade (``mlc_lab.exercises``): the checks it ran (the named checks' verdict
    type), the numbers against numpy's, and for a schedule exercise the structural differences from the
    target, the way there and both loop nests in outline. ``passed`` when every check held."""

    exercise: str
    checks: list[CheckResult] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    max_abs_error: float | None = None
    output: Any = None  # the student's output array (numpy), when the program ran
    expected: Any = None
    outline_yours: str | None = None
    outline_target: str | None = None
    structure_total: int = 0  # the steps of the whole way, from the exercise's program
    structurally_equal: bool | None = None
    way: PathAnswer | None = None  # the way to the target

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def distance(self) -> int:
        """How many steps separate the program from the target (0: none)."""
        return len(self.differences)

    @property
    def similarity(self) -> float | None:
        """Share of the way from the exercise's program to the target that is done (1.0: all of it)."""
        if self.structurally_equal:
            return 1.0
        if not self.structure_total:
            return None
        return max(0.0, 1.0 - len(self.differences) / self.structure_total)

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)
