"""The way from the middle of a schedule that the way from the original program passes through.

Where the engine reads no way off the target from a step (a tensor-core schedule it finds only by
regenerating the design space from the original program, a step the target takes further), the way
from the original program may still pass through that step's very program: its steps replayed one by
one from the original program reach, after the k-th, a program structurally equal to the step's. The
rest of that way, applied to the step's own state (names as its script prints them), is the way from
the step; it is claimed only when TVM's ``structural_equal`` holds at its end and its printed trace
replays to the target, as every way is.
"""

from __future__ import annotations

from typing import Any

from mlc_lab.errors import MlcLabError
from mlc_lab.model.path import VARIADIC
from mlc_lab.tvm import program, state_trace
from mlc_lab.tvm.path.engine import same_function
from mlc_lab.tvm.path.way import Named, Way, trace_replays
from mlc_lab.tvm.schedule import State


def apply_named(state: State, step: Named) -> State:
    """``state`` after the named step (raises ``MlcLabError`` where the Session refuses it)."""
    kwargs = dict(step.arguments)
    for key in ("index_map", "gen_new_ranges"):
        if isinstance(kwargs.get(key), str):
            kwargs[key] = state_trace.index_lambda(kwargs[key])
    args: tuple = ()
    loops = VARIADIC.get(step.primitive)
    if loops:
        args = tuple(kwargs.pop(loops))
    new, _ = state.apply(step.primitive, args, kwargs, past_loop=bool(step.past_loop))
    return new


def way_through(root: State, root_way: Way, here: State, target: Any) -> Way | None:
    """The rest of ``root_way`` (a way reached from ``root``, the original program) from the step whose
    state is ``here``, where that way passes through ``here``'s program; None where it does not."""
    if root_way.status != "reached" or not root_way.steps:
        return None
    mine = here.mod[here.func]
    state = root.fork()
    for k, step in enumerate(root_way.steps):
        try:
            state = apply_named(state, step)
        except MlcLabError:
            return None
        if program.structural_equal(state.mod[state.func], mine):
            return _rest(here, root_way.steps[k + 1 :], target)
    return None


def _rest(here: State, steps: list[Named], target: Any) -> Way | None:
    state = here.fork()
    done: list[Named] = []
    for step in steps:
        past = program.structural_hash(state.mod) if step.past_loop else ""  # the program it applies to
        try:
            state = apply_named(state, step)
        except MlcLabError:  # the step's script names a loop otherwise: no claim
            return None
        done.append(Named(step.primitive, dict(step.arguments), step.reason, past))
    if not same_function(state.mod[state.func], target):
        return None
    trace = state_trace.submission(state)
    if not trace_replays(here, trace, target):
        return None
    return Way("reached", steps=done, trace=trace, applied=len(done))
