"""What a check says, as plain data: verdicts, hazards, the report, the target judged against.

Re-exported by ``mlc_lab.core.checks`` (the API); the checks themselves are in ``check_rules``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from mlc_lab.errors import MlcLabError


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one named check: ``where`` is the loop or block it is about (a name as printed)."""

    name: str
    ok: bool
    message: str
    where: str | None = None
    evidence: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "ok": self.ok,
            "message": self.message,
            "where": self.where,
            "evidence": _jsonable(self.evidence),
        }


@dataclass(frozen=True)
class Hazard:
    """Something that makes a kernel wrong or unlaunchable: ``kind`` is one of ``HAZARD_KINDS``."""

    kind: str
    message: str
    where: str | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self.message, "where": self.where}


HAZARD_KINDS = ("race", "out_of_bounds", "thread_extent", "spill", "limit", "allocation")


@dataclass(frozen=True)
class CheckReport:
    checks: list
    hazards: list
    numeric: dict | None = None  # {"ok", "max_error", "shape"} when a numeric check ran

    @property
    def ok(self) -> bool:
        return (
            all(c.ok for c in self.checks)
            and not self.hazards
            and (self.numeric is None or bool(self.numeric.get("ok")))
        )

    def failed(self) -> list:
        return [c for c in self.checks if not c.ok]

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
        lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.message}" for c in self.checks]
        lines += [f"HAZARD {h.kind}: {h.message}" for h in self.hazards]
        if self.numeric is not None:
            lines.append(
                f"{'ok  ' if self.numeric.get('ok') else 'FAIL'} numeric: max error "
                f"{self.numeric.get('max_error')} at shape {self.numeric.get('shape')}"
            )
        return "\n".join(lines)


# --- targets ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a check judges against: ``kind`` "cpu" or "cuda", and the limits of one thread block."""

    kind: str
    arch: str | None = None
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    registers_per_thread: int = 255
    warp_size: int = 32

    @classmethod
    def of(cls, target: Any) -> "Target":
        """ "cpu", "cuda", an arch such as "sm_75", or a dict like ``{"kind": "cuda", "arch": "sm_75"}``."""
        if isinstance(target, Target):
            return target
        if isinstance(target, str):
            t = target.strip()
            if t in ("cpu", "llvm"):
                return cls("cpu")
            if t == "cuda":
                return cls("cuda")
            if t.startswith("sm_") and t[3:].isdigit():
                return cls("cuda", arch=t)
            raise MlcLabError(f"the target must be 'cpu', 'cuda' or a CUDA arch such as 'sm_80', not {target!r}")
        if isinstance(target, dict):
            kind = str(target.get("kind", "cuda"))
            if kind in ("llvm", "cpu"):
                return cls("cpu")
            if kind != "cuda":
                raise MlcLabError(f"checks judge 'cpu' or 'cuda' targets, not kind {kind!r}")
            arch = target.get("arch")
            return cls(
                "cuda",
                arch=str(arch) if arch else None,
                max_threads_per_block=int(target.get("max_threads_per_block", 1024)),
                max_shared_memory_per_block=int(target.get("max_shared_memory_per_block", 48 * 1024)),
                registers_per_thread=int(target.get("registers_per_thread", 255)),
                warp_size=int(target.get("thread_warp_size", 32)),
            )
        raise MlcLabError(f"the target must be 'cpu', 'cuda', a CUDA arch or a dict, not {type(target).__name__}")

    @property
    def gpu(self) -> bool:
        return self.kind == "cuda"


@dataclass(frozen=True)
class Check:
    """A named check: ``target`` is the kind of target it applies to ("cuda" or "cpu"); ``run`` takes
    the facts of a step (``mlc_lab.core.check_facts.StepFacts``) and returns a CheckResult, or None when
    the program has nothing it could apply to (no reduction, no epilogue)."""

    name: str
    target: str
    title: str
    run: Callable[[Any], "CheckResult | None"]


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
