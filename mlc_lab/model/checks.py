"""What a check says, as plain data: a named check's verdict, a GPU kernel's hazard, the report of a
step, and the Checks panel's wire (what it lists, one step's report, the hazards each step made).

The verdicts are made by ``mlc_lab.core.checks`` (``Session.check``); the explorer's Checks panel
(``mlc_lab.widgets.checks_panel``) sends them to the page as :class:`StepChecks`, and the grader and
the class server keep them in their results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

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

    kind: HazardKind
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
        return {"kind": self.kind, "message": self.message, "where": self.where}  # type: ignore[typeddict-item]


class NumericCheck(TypedDict):
    """The numeric check's outcome: the largest error against the reference, at which shape."""

    ok: bool
    max_error: float | None
    shape: Any


@dataclass(frozen=True)
class CheckReport:
    """The named checks' verdicts of one step, its hazards, and the numeric check when one ran."""

    checks: list[CheckResult]
    hazards: list[Hazard]
    numeric: dict | None = None  # {"ok", "max_error", "shape"} when a numeric check ran

    @property
    def ok(self) -> bool:
        return not self.failed() and not self.hazards and (self.numeric is None or bool(self.numeric.get("ok")))

    def failed(self) -> list[CheckResult]:
        """The checks that failed (a check that could not judge is not among them: see ``unjudged``)."""
        return [c for c in self.checks if c.verdict == "fail"]

    def unjudged(self) -> list[CheckResult]:
        return [c for c in self.checks if c.verdict == "unjudged"]

    def to_json(self) -> dict:
        numeric = None
        if self.numeric is not None:
            numeric = {
                "ok": bool(self.numeric.get("ok")),
                "max_error": self.numeric.get("max_error"),
                "shape": self.numeric.get("shape"),
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
            lines.append(
                f"{'ok  ' if self.numeric.get('ok') else 'FAIL'} numeric: max error "
                f"{self.numeric.get('max_error')} at shape {self.numeric.get('shape')}"
            )
        return "\n".join(lines)


# --- the Checks panel's wire (mlc_lab.widgets.checks_panel) ------------------------------------------


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
