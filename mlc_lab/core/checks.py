"""Named checks of a schedule (is thread-block tiling applied? is the reduction's init decomposed?) and
the hazards of a GPU schedule (races, out-of-bounds accesses, spills, limits), as plain data.

A check reads what the schedule does, never a reference's loop extents: which memory a tile lives in,
which thread writes which element, whether a warp's loads are contiguous. The facts come from
``mlc_lab.tvm.schedule_facts`` (blocks, loops, bindings, compacted buffers) and the access analysis;
the judging here is numpy over those facts (``mlc_lab.core.check_facts``).

Every verdict is one sentence that names the loop or block it is about, with the figure behind it in
``evidence``. ``check_session`` runs the checks that apply to a target; ``step_hazards`` gives the
hazards of one step (cached per step) so the history can mark the step that created them.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from mlc_lab.errors import MlcLabError

__all__ = ["CHECKS", "Check", "CheckReport", "CheckResult", "Hazard", "Target", "check_session", "step_hazards"]


@dataclass(frozen=True)
class CheckResult:
    """The verdict of one named check: ``where`` is the loop or block it is about (a name as printed)."""

    name: str
    ok: bool
    message: str
    where: str | None = None
    evidence: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "message": self.message, "where": self.where,
                "evidence": _jsonable(self.evidence)}


@dataclass(frozen=True)
class Hazard:
    """Something that makes a kernel wrong or unlaunchable: ``kind`` is one of ``HAZARD_KINDS``."""

    kind: str
    message: str
    where: str | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "message": self.message, "where": self.where}


HAZARD_KINDS = ("race", "out_of_bounds", "thread_extent", "spill", "limit")


@dataclass(frozen=True)
class CheckReport:
    checks: list
    hazards: list
    numeric: dict | None = None      # {"ok", "max_error", "shape"} when a numeric check ran

    @property
    def ok(self) -> bool:
        return (all(c.ok for c in self.checks) and not self.hazards
                and (self.numeric is None or bool(self.numeric.get("ok"))))

    def failed(self) -> list:
        return [c for c in self.checks if not c.ok]

    def to_json(self) -> dict:
        numeric = None
        if self.numeric is not None:
            numeric = {"ok": bool(self.numeric.get("ok")), "max_error": self.numeric.get("max_error"),
                       "shape": self.numeric.get("shape")}
        return {"checks": [c.to_json() for c in self.checks], "hazards": [h.to_json() for h in self.hazards],
                "numeric": _jsonable(numeric)}

    def __str__(self) -> str:
        lines = [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.message}" for c in self.checks]
        lines += [f"HAZARD {h.kind}: {h.message}" for h in self.hazards]
        if self.numeric is not None:
            lines.append(f"{'ok  ' if self.numeric.get('ok') else 'FAIL'} numeric: max error "
                         f"{self.numeric.get('max_error')} at shape {self.numeric.get('shape')}")
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
        """"cpu", "cuda", an arch such as "sm_75", or a dict like ``{"kind": "cuda", "arch": "sm_75"}``."""
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
            return cls("cuda", arch=str(arch) if arch else None,
                       max_threads_per_block=int(target.get("max_threads_per_block", 1024)),
                       max_shared_memory_per_block=int(target.get("max_shared_memory_per_block", 48 * 1024)),
                       registers_per_thread=int(target.get("registers_per_thread", 255)),
                       warp_size=int(target.get("thread_warp_size", 32)))
        raise MlcLabError(f"the target must be 'cpu', 'cuda', a CUDA arch or a dict, not {type(target).__name__}")

    @property
    def gpu(self) -> bool:
        return self.kind == "cuda"


# --- the registry -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """A named check: ``target`` is the kind of target it applies to ("cuda" or "cpu"); ``run`` takes
    the facts of a step (``mlc_lab.core.check_facts.StepFacts``) and returns a CheckResult, or None when
    the program has nothing it could apply to (no reduction, no epilogue)."""

    name: str
    target: str
    title: str
    run: Callable[[Any], CheckResult | None]


CHECKS: dict[str, Check] = {}


def register(name: str, target: str, title: str):
    def deco(fn: Callable[[Any], CheckResult | None]) -> Callable[[Any], CheckResult | None]:
        CHECKS[name] = Check(name, target, title, fn)
        return fn

    return deco


def check_session(session: Any, names: list[str] | None = None, *, target: Any = "cpu",
                  step: int | None = None) -> CheckReport:
    """Run the named checks (default: every one that applies to ``target``) on a step of ``session``
    (default: the current one), with the hazards of that step for a GPU target."""
    from mlc_lab.core import check_facts
    from mlc_lab.core import check_rules  # noqa: F401  (registers the checks)

    tgt = Target.of(target)
    if names is not None:
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            raise MlcLabError(f"there is no check named {', '.join(map(repr, unknown))}; "
                              f"the checks are {', '.join(sorted(CHECKS))}")
        wrong = [n for n in names if CHECKS[n].target != tgt.kind]
        if wrong:
            raise MlcLabError(f"{', '.join(wrong)} {'is a check' if len(wrong) == 1 else 'are checks'} for "
                              f"{CHECKS[wrong[0]].target} targets, not {tgt.kind}")
    facts = check_facts.step_facts(session, step, tgt)
    results = []
    for check in CHECKS.values():
        if check.target != tgt.kind or (names is not None and check.name not in names):
            continue
        result = _run_check(check, facts)
        if result is None and names is not None and check.name in names:
            result = CheckResult(check.name, False, f"{check.title} does not apply to this program: "
                                 f"{facts.why_not(check.name)}", None, {})
        if result is not None:
            results.append(result)
    return CheckReport(results, list(step_hazards(session, step, tgt)), None)


def _run_check(check: Check, facts: Any) -> CheckResult | None:
    """A check's verdict; a program it cannot read (symbolic shapes, a construct it does not know) is a
    failed verdict that says so, never an exception out of the report."""
    try:
        return check.run(facts)
    except MlcLabError as exc:
        reason = str(exc).splitlines()[0]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    symbolic = _symbolic_shapes(facts)
    why = (f"the program has symbolic shapes ({', '.join(symbolic)}) and the check needs their values"
           if symbolic else f"it reads a construct the check does not handle ({reason})")
    return CheckResult(check.name, False, f"{check.title} could not be judged on this program: {why}", None,
                       {"error": reason})


def _symbolic_shapes(facts: Any) -> list:
    try:
        return sorted(facts.prog.shape_vars)
    except AttributeError:
        return []


_HAZARDS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def step_hazards(session: Any, step: int | None = None, target: Any = "cuda") -> tuple:
    """The hazards of one step (default: the current one) for ``target``, computed once per step
    (a step never changes). A program that binds no thread has none."""
    from mlc_lab.core import check_facts

    tgt = Target.of(target)
    sid = session.current.id if step is None else step
    cache = _HAZARDS.setdefault(session, {})
    key = (sid, tgt)
    if key not in cache:
        cache[key] = tuple(check_facts.hazards(check_facts.step_facts(session, sid, tgt)))
    return cache[key]


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


from mlc_lab.core import check_rules as _rules  # noqa: E402,F401  (fills CHECKS; it imports this module)
