"""The engine's way, as a Session takes it: each step named as in the printed script of the step it
applies to, replayed through the Session's own machinery (``schedule.State``), checked once more
against the target, and the whole schedule as an ``apply_trace`` function.

What leaves this module is plain data (``Way``); the states stay behind the door to TVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlc_lab.model.path import VARIADIC
from mlc_lab.tvm import program, state_trace
from mlc_lab.tvm.path.engine import Found, find, same_function
from mlc_lab.tvm.path.names import renamed_target
from mlc_lab.tvm.schedule import State


@dataclass
class Named:
    """One step of the way: TVM's primitive, its arguments by TVM's names (loops and blocks by the
    names the script before it shows), and why it is there."""

    primitive: str
    arguments: dict[str, Any]
    reason: str
    # a split whose factor is larger than its loop (TVM adds a predicate): the structural hash of the
    # program it applies to, so that the Session takes this very step from a person (``Session.allow_way_split``)
    past_loop: str = ""


@dataclass
class Way:
    """``status`` "reached" / "names" / "unreached"; ``kind`` of an unreached one: "computes" (the
    target computes something else), "no_primitive" (no primitive makes what it has), "stage" (a copy
    stage the engine does not read yet: the target may compute the same thing), "unread" (a change
    the engine does not follow yet), "partial" (the engine got part of the way: ``applied`` steps)
    or "here" (not from this step)."""

    status: str
    steps: list[Named] = field(default_factory=list)
    trace: str = ""
    why: str = ""
    kind: str = ""
    applied: int = 0
    renamed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def sentence(self) -> str:
        """Why the target is not reached, in one sentence (empty when it is)."""
        if self.status == "reached":
            return ""
        if self.status == "names":
            pairs = ", ".join(f"{t!r} is TVM's {o!r}" for t, o in sorted(self.renamed.items()))
            return f"equal up to block names: {pairs}"
        if self.kind == "computes":
            return f"the target computes something else: {self.why}"
        if self.kind == "stage":
            return f"the target has a stage the path engine does not read yet: {self.why}"
        if self.kind == "unread":
            return f"the path engine does not follow this change of the target yet: {self.why}"
        if self.kind == "no_primitive":
            return f"the target needs a transformation no primitive makes: {self.why}"
        if self.kind == "trace":
            return self.why
        return f"reached up to step {self.applied}; still different: {self.why}"


def target_function(target: Any, func: str, original: Any) -> Any:
    """The target's PrimFunc: of an IRModule, a PrimFunc, TVMScript text or a .py file (the
    function called ``func``, else its only one), or of a trace (text or JSON) replayed on
    ``original`` (the program the session started from)."""
    from mlc_lab.errors import LoadError, TraceParseError
    from mlc_lab.tvm import trace_io

    if isinstance(target, (str, list, dict)) and not program.looks_like_program(target):
        try:
            return state_trace.replayed_module(original, target, func)[func]
        except TraceParseError:
            if isinstance(target, (list, dict)) or trace_io.looks_like_json(str(target)):
                raise
    mod = program.load(target)
    names = program.prim_func_names(mod)
    if func in names:
        return mod[func]
    if len(names) == 1:
        return mod[names[0]]
    raise LoadError(f"the target has no function {func!r} and several others: {', '.join(names)}")


def reaches(start: State, target: Any, deadline_s: float = 5.0) -> bool:
    """Whether the engine finds a way from ``start`` (no naming, no trace: the quick question asked
    of each step a way may go back to)."""
    return find(lambda: start.fork().sch, start.func, target, deadline_s=deadline_s).status == "reached"


def find_way(start: State, target: Any, deadline_s: float = 20.0) -> Way:
    """The way from ``start`` to the target PrimFunc, named and checked."""
    found = find(lambda: start.fork().sch, start.func, target, deadline_s=deadline_s)
    renamed: dict[str, str] = {}
    if found.status != "reached" and found.kind in ("computes", "stage", "partial"):
        guess = renamed_target(start.mod[start.func], target)
        if guess is not None:
            alias, mapping = guess
            again = find(lambda: start.fork().sch, start.func, alias, deadline_s=deadline_s)
            if again.status == "reached":
                found, renamed = again, mapping
                found.status = "names"
    return _named(start, found, target, renamed)


def _named(start: State, found: Found, target: Any, renamed: dict[str, str]) -> Way:
    way = Way(found.status, why=found.why, kind=found.kind, applied=len(found.ops), seconds=found.seconds)
    if found.status == "unreached":
        return way
    from mlc_lab.errors import MlcLabError, SplitPastLoopError

    state = start.fork()
    for op in found.ops:
        named = {k: _name(state, v) for k, v in op.args.items()}
        if "index_map" in named and not isinstance(named["index_map"], str):
            named["index_map"] = lambda_text(named["index_map"])
        if "gen_new_ranges" in named and not isinstance(named["gen_new_ranges"], str):
            named["gen_new_ranges"] = named["gen_new_ranges"].source  # the lambda's text (regions.py)
        args: tuple = ()
        kwargs = dict(named)
        for key in ("index_map", "gen_new_ranges"):
            if isinstance(kwargs.get(key), str):
                kwargs[key] = state_trace.index_lambda(kwargs[key])
        loops = VARIADIC.get(op.primitive)
        if loops:
            args = tuple(kwargs.pop(loops))
        past = ""
        try:
            try:
                new, _ = state.apply(op.primitive, args, kwargs)
            except SplitPastLoopError:  # refused to a person; TVM's own way has it (confirmed below)
                past = program.structural_hash(state.mod)
                new, _ = state.apply(op.primitive, args, kwargs, past_loop=True)
        except MlcLabError as exc:  # the session's naming of the step does not give TVM's step back
            said = str(exc).strip().splitlines()[0]
            why = f"the way needs a step the session cannot apply: {said}"
            return Way("unreached", why=why, kind="trace", applied=len(way.steps))
        state = new
        way.steps.append(Named(op.primitive, named, op.reason, past))
    ours = state.mod[state.func]
    if found.status == "reached" and not same_function(ours, target):
        return Way("unreached", why="the steps, named, do not replay to the target", kind="partial")
    way.trace = state_trace.submission(state)
    way.renamed = renamed
    if found.status == "reached" and not trace_replays(start, way.trace, target):
        why = (
            "the steps reach the target, but TVM prints their trace so that it replays to another program "
            "(an annotation value it writes otherwise, such as True as 1)"
        )
        return Way("unreached", why=why, kind="trace", applied=len(way.steps))
    return way


def trace_replays(start: State, trace: str, target: Any) -> bool:
    """The printed trace, read back by the safe parser and replayed on the original program, gives
    the target: the ``apply_trace`` said to reach it does."""
    from mlc_lab.errors import MlcLabError

    if start._make is None:  # noqa: SLF001
        return True
    original = State(start._make(), start.func, make=start._make)  # noqa: SLF001
    try:
        built = state_trace.replay_source(original, trace, {start.func})
    except MlcLabError:
        return False
    end = built[-1].state if built else original
    return same_function(end.mod[start.func], target)


def _name(state: State, value: Any) -> Any:
    """An engine argument as the script names it: ("loop", place) -> "j" / "Y/j"; ("block", name)."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "loop":
        for info in state.index.loops:
            if info.func == state.func and info.order == value[1]:
                return info.qualified or info.name
        raise KeyError(f"no loop at place {value[1]}")
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "block":
        return value[1]
    if isinstance(value, list):
        return [_name(state, v) for v in value]
    return value


def lambda_text(index_map: Any) -> str:
    """An index map as the lambda a person writes: ``lambda vi, vj: (vj // 32, vi, vj % 32)``."""
    params = ", ".join(str(v.name) for v in index_map.initial_indices)
    items = [str(e) for e in index_map.final_indices]
    return f"lambda {params}: ({', '.join(items)}{',' if len(items) == 1 else ''})"
