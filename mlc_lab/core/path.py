"""The way from a step of a Session to a target program (``Session.path_to``, ``Session.hint``).

The engine (``mlc_lab.tvm.path``) reads the way off the target with TVM as the oracle and claims it
only when TVM's structural equality holds at its end. Here the Session's history decides where the
way starts: from the step asked about when the target is reachable from it, else from the deepest
step before it from which it is ("undo to step 3, then ..."), and the answer is said in one
sentence when there is none.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from mlc_lab.core.step_calls import call_label
from mlc_lab.model.path import Hint, PathAnswer, PathStep
from mlc_lab.tvm import schedule
from mlc_lab.tvm.path.through import way_through
from mlc_lab.tvm.path.way import Way, find_way, reaches, target_function

# Each session's loaded targets, by target text or object (gone with the session).
_TARGETS: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()

# Searching for the step to go back to stops after this long; the original program is the answer then.
BACK_BUDGET_S = 10.0


def path_to(session: Any, target: Any, *, step: int | None = None) -> PathAnswer:
    """See ``Session.path_to``."""
    started = time.perf_counter()
    sid = session.current.id if step is None else step
    state = session.state_at(sid)  # an unknown step is refused here, by name
    tfunc = _target(session, target)
    way = find_way(state, tfunc)
    if way.status != "unreached" or sid == 0:
        return _answer(session, way, sid, None, started)
    root = find_way(session.state_at(0), tfunc)
    if root.status == "unreached":
        return _answer(session, root, sid, None, started)
    through = way_through(session.state_at(0), root, state, tfunc)  # the way from the start passes here
    if through is not None:
        return _answer(session, through, sid, None, started)
    back, back_way = _deepest(session, session.path(sid)[1:-1], tfunc, started)
    if back is None or back_way is None:
        back, back_way = 0, root
    return _answer(session, back_way, sid, back, started)


def _deepest(session: Any, between: list[int], tfunc: Any, started: float) -> tuple[int | None, Way | None]:
    """The deepest step of ``between`` (root side first) from which the target is reachable: each
    asked the quick question, the one found named."""
    for sid in reversed(between):
        if time.perf_counter() - started > BACK_BUDGET_S:
            break
        if reaches(session.state_at(sid), tfunc):
            way = find_way(session.state_at(sid), tfunc)
            if way.status != "unreached":
                return sid, way
    return None, None


def _target(session: Any, target: Any) -> Any:
    """The target's PrimFunc, loaded once per target text or object (the object is kept with it, so
    that its id stays its own)."""
    cache = _TARGETS.setdefault(session, {})
    key: Any = target if isinstance(target, str) else id(target)
    if hasattr(target, "module") and hasattr(target, "loop_tree"):  # a Session: its program changes
        key = (id(target), target.current.id)
    found = cache.get(key)
    if found is not None and (isinstance(target, str) or found[0] is target):
        return found[1]
    given = target
    if hasattr(target, "module") and hasattr(target, "loop_tree"):  # another Session: its current program
        target = target.module
    elif getattr(target, "reference", None) is not None:
        target = target.reference  # an assignment with a reference program
    func = target_function(target, session.func_name, session.original)
    if len(cache) > 16:
        cache.clear()
    cache[key] = (given, func)
    return func


def target_binds_threads(session: Any, target: Any) -> bool:
    """Whether the target program binds loops to GPU threads (then its checks are CUDA's). The target
    is loaded as ``path_to`` loads it, once: bad input raises ``LoadError`` (or ``TraceParseError``)."""
    from mlc_lab.tvm import program
    from mlc_lab.tvm.measure import build

    return bool(build.thread_bound_loops(program.load(_target(session, target)), None))


def _answer(session: Any, way: Way, sid: int, back: int | None, started: float) -> PathAnswer:
    steps = tuple(_step(s) for s in way.steps)
    for named, step in zip(way.steps, steps):
        if named.past_loop:  # Session.apply takes this split past its loop, on this program only
            session.allow_way_split(named.past_loop, step.label)
    why = way.sentence()
    return PathAnswer(
        status=way.status,  # type: ignore[arg-type]  # one of PathStatus
        steps=steps,
        trace=way.trace,
        why=why,
        seconds=time.perf_counter() - started,
        start=sid,
        undo_to=back,
        renamed=dict(way.renamed),
    )


def _step(named: Any) -> PathStep:
    call = schedule.bind_call(named.primitive, *_split_call(named.primitive, named.arguments))
    return PathStep(named.primitive, dict(named.arguments), named.reason, call_label(named.primitive, call))


def _split_call(primitive: str, arguments: dict[str, Any]) -> tuple[tuple, dict]:
    step = PathStep(primitive, dict(arguments), "", "")
    args, kwargs = step.call()
    return tuple(args), kwargs


def hint(session: Any, target: Any, *, step: int | None = None) -> Hint:
    """See ``Session.hint``."""
    answer = path_to(session, target, step=step)
    return hint_of(answer, session)


def hint_of(answer: PathAnswer, session: Any = None) -> Hint:
    """The next step of ``answer`` and its sentence."""
    if answer.status == "unreached":
        return Hint(None, answer.why, 0, "unreached", None)
    if not answer.steps:
        said = "the program is the target" if answer.reached else answer.why
        return Hint(None, said, 0, answer.status, answer.undo_to)
    first = answer.steps[0]
    sentence = f"{first.label}: {first.reason}"
    if answer.undo_to is not None:
        label = ""
        if session is not None:
            label = "".join(f" ({s.label})" for s in session.steps if s.id == answer.undo_to)
        sentence = (
            f"the target cannot be reached from step {answer.start}: go back to step {answer.undo_to}{label}, "
            f"then {sentence}"
        )
    if answer.status == "names":
        sentence += f" ({answer.why})"
    return Hint(first, sentence, len(answer.steps), answer.status, answer.undo_to)
