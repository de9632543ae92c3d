"""What a check says, as plain data: a named check's verdict, a GPU kernel's hazard, the report of a
step, and the Checks panel's wire (what it lists, one step's report, the hazards each step made).

The verdicts are made by ``mlc_lab.core.checks`` (``Session.check``); the explorer's Checks panel
(``mlc_lab.widgets.checks``) sends them to the page as :class:`StepChecks`, and the grader and
the class server keep them in their results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from mlc_lab.model.classroom import TaskVerdict  # a task as the grader scores it (also a class verdict's)

__all__ = [
    "HAZARD_CLASS",
    "HAZARD_KINDS",
    "HazardClass",
    "Verdict",
    "CheckLine",
    "CheckReport",
    "CheckResult",
    "ChecksSetup",
    "ChecksTask",
    "Hazard",
    "HazardInfo",
    "NumericCheck",
    "NumericVerdict",
    "numeric_failure",
    "numeric_line",
    "StepChecks",
    "StepHazards",
]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = ("CheckLine", "HazardInfo", "StepChecks", "ChecksTask", "ChecksSetup", "StepHazards")

# Every kind of hazard, and what the page calls it.
HAZARD_KINDS = {
    "race": "race",
    "out_of_bounds": "out of bounds",
    "thread_extent": "thread extent",
    "spill": "spill",
    "limit": "limit",
    "allocation": "allocation",
    "aliasing": "aliasing layout",
}
HazardKind = Literal[tuple(HAZARD_KINDS)]  # type: ignore[valid-type]

# What a hazard costs. "correctness": the kernel computes a wrong result or cannot build or launch
# (a race, an out-of-bounds access, a thread extent or allocation the hardware refuses). "performance":
# it runs right, only slower (a spill to local memory). An assignment fails its tasks on the classes
# it names (correctness only by default).
HazardClass = Literal["correctness", "performance"]
HAZARD_CLASS: dict[str, HazardClass] = {
    "race": "correctness",
    "out_of_bounds": "correctness",
    "thread_extent": "correctness",
    "limit": "correctness",
    "allocation": "correctness",
    "aliasing": "correctness",
    "spill": "performance",
}

# A named check's verdict: passed, failed, or could not be judged on this program (its message says
# why, in one sentence). "unjudged" is neither a pass nor a failure; no summary counts it as either.
Verdict = Literal["pass", "fail", "unjudged"]


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one named check: ``where`` is the loop or block it is about (a name as printed)."""

    name: str
    ok: bool
    message: str
    where: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    judged: bool = True  # False: the check could not judge this program (``message`` says why); ok is False

    def __post_init__(self) -> None:
        if not self.judged and self.ok:
            raise ValueError(f"check {self.name}: a verdict that was not judged cannot pass")

    @property
    def verdict(self) -> Verdict:
        return "unjudged" if not self.judged else ("pass" if self.ok else "fail")

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "ok": self.ok,
            "verdict": self.verdict,
            "message": self.message,
            "where": self.where,
            "evidence": _jsonable(self.evidence),
        }


class HazardInfo(TypedDict):
    """A hazard as it crosses to the page (``Hazard.to_json``)."""

    kind: HazardKind  # type: ignore[valid-type]  # a Literal made at run time: str to mypy
    message: str
    where: str | None


@dataclass(frozen=True)
class Hazard:
    """Something that makes a kernel wrong or unlaunchable: ``kind`` is one of ``HAZARD_KINDS``."""

    kind: str
    message: str
    where: str | None = None

    @property
    def severity(self) -> HazardClass:
        return HAZARD_CLASS.get(self.kind, "correctness")

    def to_json(self) -> HazardInfo:
        return {"kind": self.kind, "message": self.message, "where": self.where}


# The numeric check's verdict (``mlc_lab.core.checks.numeric_gpu``): "could_not_run" means the numbers were
# not judged (the CPU run cannot run the program, or no size fits its tiles): not ok, and never read
# as wrong numbers; "does_not_build": TVM or the OpenCL compiler refuses the schedule, as a GPU would.
NumericVerdict = Literal["match", "mismatch", "crash", "timeout", "does_not_build", "could_not_run"]


class NumericCheck(TypedDict):
    """The numeric check's outcome (``NumericResult.to_check``): its verdict and the sentence that
    says it, the largest error against the reference, each parameter's shape as it ran, the sizes
    the program was run at ({"1024": 128}: a dimension changed) and the OpenCL engine."""

    ok: bool
    verdict: NumericVerdict
    message: str
    max_error: float | None
    shape: Any
    sizes: dict[str, int]
    engine: str


@dataclass(frozen=True)
class CheckReport:
    """The named checks' verdicts of one step, its hazards, and the numeric check when one ran."""

    checks: list[CheckResult]
    hazards: list[Hazard]
    numeric: NumericCheck | None = None  # when a numeric check ran

    @property
    def numeric_judged(self) -> bool:
        """Whether a numeric check ran and judged the numbers (its verdict is not could_not_run)."""
        return self.numeric is not None and self.numeric.get("verdict") != "could_not_run"

    @property
    def ok(self) -> bool:
        """No check failed (one that could not judge is not a failure), no hazard, and the numbers
        right where they were judged (a numeric check that could not run judged nothing)."""
        return (
            not self.failed()
            and not self.hazards
            and (not self.numeric_judged or bool(self.numeric and self.numeric.get("ok")))
        )

    def failed(self) -> list[CheckResult]:
        """The checks that failed (a check that could not judge is not among them: see ``unjudged``)."""
        return [c for c in self.checks if c.verdict == "fail"]

    def unjudged(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict == "unjudged"]

    def to_json(self) -> dict:
        numeric = None
        if self.numeric is not None:
            n = self.numeric
            ok = bool(n.get("ok"))
            numeric = {
                "ok": ok,
                "verdict": n.get("verdict") or ("match" if ok else "mismatch"),
                "message": n.get("message", ""),
                "max_error": n.get("max_error"),
                "shape": n.get("shape"),
                "sizes": n.get("sizes") or {},
                "engine": n.get("engine", ""),
            }
        return {
            "checks": [c.to_json() for c in self.checks],
            "hazards": [h.to_json() for h in self.hazards],
            "numeric": _jsonable(numeric),
        }

    def __str__(self) -> str:
        mark = {"pass": "ok  ", "fail": "FAIL", "unjudged": "--  "}
        lines = [f"{mark[c.verdict]} {c.name}: {c.message}" for c in self.checks]
        lines += [f"HAZARD {h.kind}: {h.message}" for h in self.hazards]
        if self.numeric is not None:
            lines.append(numeric_line(self.numeric))
        return "\n".join(lines)


def numeric_failure(numeric: NumericCheck | dict) -> str | None:
    """The sentence that fails a task for the numeric check, or None: a match passes, and a check that
    could not run judged nothing (it is never read as wrong numbers)."""
    verdict = numeric.get("verdict") or ("match" if numeric.get("ok") else "mismatch")
    if verdict in ("match", "could_not_run"):
        return None
    text = numeric.get("message") or f"max error {numeric.get('max_error')} at shape {numeric.get('shape')}"
    lead = {
        "mismatch": "wrong result at a smaller size",
        "crash": "the kernel crashed at a smaller size",
        "timeout": "the kernel did not finish at a smaller size",
        "does_not_build": "the schedule does not build for the GPU",
    }.get(verdict, f"the numeric check failed ({verdict})")
    return f"{lead}: {text}"


def numeric_line(numeric: NumericCheck, width: int = 0) -> str:
    """The numeric check as one line of a report: ``ok``, ``FAIL`` or ``--`` (not judged), its
    verdict and its sentence (or, without one, the largest error and the shape)."""
    verdict = numeric.get("verdict") or ("match" if numeric.get("ok") else "mismatch")
    mark = "ok  " if numeric.get("ok") else ("--  " if verdict == "could_not_run" else "FAIL")
    text = numeric.get("message") or f"max error {numeric.get('max_error')} at shape {numeric.get('shape')}"
    label = f"numeric ({verdict.replace('_', ' ')})"
    return f"{mark}  {label:<{width}} {text}" if width else f"{mark} {label}: {text}"


# --- the Checks panel's wire (mlc_lab.widgets.checks) ------------------------------------------


class CheckLine(TypedDict):
    """One line of the Checks panel: a verdict (``CheckResult.to_json``) and the check's title."""

    name: str
    title: str
    ok: bool
    verdict: Verdict
    message: str
    where: str | None
    evidence: dict[str, Any]


class StepChecks(TypedDict):
    """The Checks panel's report of one step (or why it could not be computed: ``error``)."""

    step: int | str
    target: NotRequired[Literal["cpu", "cuda"] | None]
    checks: NotRequired[list[CheckLine]]
    hazards: NotRequired[list[HazardInfo]]
    tasks: NotRequired[list[TaskVerdict]]  # with an assignment: each task as mlc-lab grade scores the step
    ms: NotRequired[float]
    error: NotRequired[str]


class ChecksTask(TypedDict):
    """A group of checks the panel lists under one title (an assignment's task)."""

    title: str
    checks: list[str]
    points: NotRequired[float | None]


class ChecksSetup(TypedDict, total=False):
    """What the Checks panel lists (``{"available": False}``: the session cannot check)."""

    available: bool
    title: str | None
    target: str | None
    names: list[str] | None
    tasks: list[ChecksTask]


class StepHazards(TypedDict):
    """The hazards a step created (its parent did not have them), how many it has, and the hazards of its
    parent it resolved: the history's mark, and where a hazard went away."""

    new: list[HazardInfo]
    count: int
    resolved: NotRequired[list[HazardInfo]]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    try:  # numpy scalars
        return value.item()
    except AttributeError:
        return str(value)
