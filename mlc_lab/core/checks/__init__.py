"""Named checks of a schedule (is thread-block tiling applied? is the reduction's init decomposed?) and
the hazards of a GPU schedule (races, out-of-bounds accesses, spills, limits), as plain data.

A check reads what the schedule does, never a reference's loop extents: which memory a tile lives in,
which thread writes which element, whether a warp's loads are contiguous. The facts come from
``mlc_lab.tvm.checks.facts`` (blocks, loops, bindings, compacted buffers) and the access analysis;
the judging is numpy over those facts (``check_facts``, ``check_rules``, ``hazards``).

Every verdict is one sentence that names the loop or block it is about, with the figure behind it in
``evidence``. ``check_session`` lists every check of a target: passed, failed, or not judged
(``judged=False``, ``evidence["reason"]``: it does not apply, it is not judged yet, or it could not
read the program), each with its sentence; ``step_hazards`` gives the
hazards of one step (cached per step) so the history can mark the step that created them.
"""

from __future__ import annotations

import weakref
from typing import Any

from mlc_lab.core.checks import cpu as check_cpu
from mlc_lab.core.checks import facts as check_facts
from mlc_lab.core.checks import hazards as _hazards
from mlc_lab.core.checks.rules import CANNOT_READ, CHECKS, DOES_NOT_APPLY, reuse_dims
from mlc_lab.core.checks.base import HAZARD_KINDS, Check, CheckReport, CheckResult, Hazard, Target
from mlc_lab.errors import MlcLabError

CPU_CHECKS = check_cpu.registered()  # importing check_cpu registers the CPU checks after the GPU ones

__all__ = [
    "CHECKS",
    "HAZARD_KINDS",
    "Check",
    "CheckReport",
    "CheckResult",
    "Hazard",
    "Target",
    "check_session",
    "step_hazards",
]


def check_session(
    session: Any, names: list[str] | None = None, *, target: Any = "cpu", step: int | None = None
) -> CheckReport:
    """Run the named checks (default: every one that applies to ``target``) on a step of ``session``
    (default: the current one), with the hazards of that step for a GPU target."""
    tgt = Target.of(target)
    if names is not None:
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            raise MlcLabError(
                f"there is no check named {', '.join(map(repr, unknown))}; the checks are {', '.join(sorted(CHECKS))}"
            )
        wrong = [n for n in names if CHECKS[n].target != tgt.kind]
        if wrong:
            raise MlcLabError(
                f"{', '.join(wrong)} {'is a check' if len(wrong) == 1 else 'are checks'} for "
                f"{CHECKS[wrong[0]].target} targets, not {tgt.kind}"
            )
    facts = check_facts.step_facts(session, step, tgt)
    results = []
    for check in CHECKS.values():
        if check.target != tgt.kind or (names is not None and check.name not in names):
            continue
        result = _run_check(check, facts)
        if result is None:  # listed all the same: a report leaves no check of its target out
            result = CheckResult(
                check.name,
                False,
                f"{check.title} does not apply to this program: {_why_not(check, facts)}",
                None,
                {"reason": DOES_NOT_APPLY},
                judged=False,
            )
        results.append(result)
    return CheckReport(results, list(step_hazards(session, step, tgt)), None)


def _why_not(check: Check, facts: Any) -> str:
    if check.target == "cuda" and facts.reduction_block() is not None and not reuse_dims(facts):
        return (
            "its reduction reuses no input across its outputs (each input element feeds one output), "
            "so there is no tile whose inputs threads could share"
        )
    return facts.why_not(check.name)


def _run_check(check: Check, facts: Any) -> CheckResult | None:
    """A check's verdict; a program it cannot read (symbolic shapes, a construct it does not know) is
    "could not judge", with the reason, never an exception out of the report."""
    try:
        return check.run(facts)
    except MlcLabError as exc:
        reason = str(exc).splitlines()[0]
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    symbolic = _symbolic_shapes(facts)
    why = (
        f"the program has symbolic shapes ({', '.join(symbolic)}) and the check needs their values"
        if symbolic
        else f"it reads a construct the check does not handle ({reason})"
    )
    return CheckResult(
        check.name,
        False,
        f"{check.title} could not be judged on this program: {why}",
        None,
        {"reason": CANNOT_READ, "error": reason},
        judged=False,
    )


def _symbolic_shapes(facts: Any) -> list:
    try:
        return sorted(facts.prog.shape_vars)
    except AttributeError:
        return []


_HAZARDS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def forget(session: Any) -> None:
    """Drop what was computed for ``session`` (facts of its steps, their hazards): the next check is cold."""
    check_facts.forget(session)
    _HAZARDS.pop(session, None)


def step_hazards(session: Any, step: int | None = None, target: Any = "cuda") -> tuple:
    """The hazards of one step (default: the current one) for ``target``, computed once per step
    (a step never changes). A program that binds no thread has none."""
    tgt = Target.of(target)
    sid = session.current.id if step is None else step
    cache = _HAZARDS.setdefault(session, {})
    key = (sid, tgt)
    if key not in cache:
        cache[key] = tuple(_hazards.find(check_facts.step_facts(session, sid, tgt)))
    return cache[key]
