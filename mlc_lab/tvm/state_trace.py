"""A step's trace, read and written for the Session in plain data: the trace as text (printed, as a
function to paste, as a submission), a trace replayed from a state as new states, and a user's own
schedule function run on a copy of a state and read back as steps.

The Session holds schedule states (``schedule.State``) as opaque handles and hands them here; what
comes back is text, names and ``Replayed`` records, never a TVM object. The trace's variables
(``l3``, ``b0``) are kept by their place in the trace (``schedule.Handle``) and turned into the live
handles of the schedule being replayed only when a call needs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mlc_lab.errors import MlcLabError, ScheduleStepError, TraceParseError
from mlc_lab.tvm import program, trace_exprs, trace_io
from mlc_lab.tvm.primitives import LOOKUPS
from mlc_lab.tvm.schedule import Handle, Output, State


@dataclass
class Replayed:
    """One real call of a replayed trace: the state after it, and the step it reads as."""

    state: State
    primitive: str
    label: str
    outputs: list[Output]


# --- the trace as text -------------------------------------------------------------------------
def printed(state: State) -> str:
    """TVM's printed trace of the state (written from its JSON where TVM's printer fails)."""
    return trace_io.printed_trace(state.trace)


def submission(state: State) -> str:
    """The state's schedule as ``def apply_trace(sch: s_tir.Schedule) -> None:`` with its import."""
    return trace_io.apply_trace_source(state.trace)


def schedule_function(state: State) -> str:
    """The state's schedule as a function to paste into a notebook."""
    body = state.trace.as_python(remove_postproc=False)
    lines = ["from tvm import s_tir", "", "", "def schedule(sch: s_tir.Schedule) -> s_tir.Schedule:"]
    lines += [f"    {stmt}" for stmt in body] or ["    pass"]
    lines.append("    return sch")
    return "\n".join(lines) + "\n"


def index_lambda(text: str) -> trace_io.IndexLambda:
    """``"lambda i, j: (j // 32, i, j % 32)"`` as an index map TVM calls, read by the trace's safe
    parser (arithmetic on the arguments only; nothing is evaluated by Python); TraceParseError else."""
    import ast

    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise TraceParseError(f"the index map {text!r} is not Python: {exc.msg}", line=1) from None
    if not isinstance(node, ast.Lambda):
        raise TraceParseError("an index map is a lambda, as lambda i, j: (j // 32, i, j % 32)", line=1)
    return trace_io.IndexLambda.from_ast(node, 1)


# --- replaying a trace -------------------------------------------------------------------------
def parse(trace: Any) -> list[trace_io.TraceCall]:
    """A trace in any form a user holds (text, a pasted ``apply_trace`` function, JSON, ``sch.trace``,
    a tuning record) as calls, read by a whitelist and never run."""
    data = trace_io.trace_data(trace)
    if isinstance(data, str):
        return trace_io.parse_trace_text(data)
    return trace_io.calls_from_json(data)


def replay(
    state: State,
    calls: list[trace_io.TraceCall],
    func_names: set[str],
    env: dict[str, Handle | None] | None = None,
) -> list[Replayed]:
    """Apply ``calls`` from ``state`` one by one; look-ups are folded into the next real call's step.
    ``func_names``: the functions of the program (a ``get_sblock`` naming another one, as
    meta_schedule's copy called "main", is pointed at ours); ``env``: trace variables defined
    before the first call.

    Every failure is a ``TraceParseError`` naming the line (text) or instruction (JSON); the states
    built are new objects, so nothing the caller holds changes."""
    env = dict(env or {})
    current = state

    def lookup(name: str) -> Any:
        if name not in env:
            raise ScheduleStepError(f"{name} is not defined", primitive="?")
        handle = env[name]
        return None if handle is None else current.rv_of(handle)

    def resolve(value: Any) -> Any:
        if isinstance(value, trace_io.Ref):
            return lookup(value.name)
        return trace_exprs.bind_value(value, lookup)

    built = []
    for call in calls:
        if call.primitive == "get_sblock" and call.kwargs.get("func_name") not in func_names | {None}:
            call.kwargs["func_name"] = state.func
        label = call.text
        try:
            if call.primitive not in LOOKUPS:
                label = current.describe(call.primitive, tuple(call.args), dict(call.kwargs), resolve)
            current, outputs = current.apply(call.primitive, tuple(call.args), dict(call.kwargs), resolve)
        except TraceParseError as exc:
            if exc.line is not None:  # an index map of this line refused when TVM called it: said already
                raise
            raise replay_error(call, str(exc)) from None
        except MlcLabError as exc:
            raise replay_error(call, str(exc)) from None
        except Exception as exc:  # noqa: BLE001  (TVM or our conversion failed in a way not foreseen)
            raise replay_error(call, f"{call.primitive} failed: {type(exc).__name__}: {exc}".strip()) from None
        _define(env, call, outputs)
        if call.primitive not in LOOKUPS:
            built.append(Replayed(current, call.primitive, label or call.text, outputs))
    return built


def replay_source(state: State, trace: Any, func_names: set[str]) -> list[Replayed]:
    """``replay`` of a trace in any form ``parse`` reads, or a path to a file holding one (read,
    never run): an error in a file names the file before the line."""
    trace, path = trace_io.read_trace_source(trace)
    try:
        return replay(state, parse(trace), func_names)
    except TraceParseError as exc:
        if path is None:
            raise
        named = TraceParseError(f"{path}: {exc}")
        named.line = exc.line
        raise named from None


def replayed_module(module: Any, trace: Any, func: str | None = None) -> Any:
    """``module`` (anything ``program.load`` takes) with ``trace`` replayed on function ``func``
    (default: "main", else the first): ``Session.from_trace(module, trace, func).module`` without a
    Session. Raises TraceParseError naming the line that failed."""
    mod = program.load(module, func)
    names = program.prim_func_names(mod)
    state = State.initial(mod, func or ("main" if "main" in names else names[0]))
    built = replay_source(state, trace, set(names))
    return built[-1].state.mod if built else state.mod


def _define(env: dict[str, Handle | None], call: trace_io.TraceCall, outputs: list[Output]) -> None:
    """The trace variables a call defines, by their place in the trace."""
    if not call.targets:
        return
    if len(call.targets) != len(outputs):
        raise replay_error(
            call, f"{call.primitive} gives {len(outputs)} value(s) but the trace names {len(call.targets)}"
        )
    for name, out in zip(call.targets, outputs):
        if name != "_":  # a dynamic sample_perfect_tile's outer factor is no handle: None, left to split
            env[name] = None if out.kind == "value" and out.value is None else out.handle


def replay_error(call: trace_io.TraceCall, message: str) -> TraceParseError:
    """``line 4: sch.split(...)`` / ``instruction 7 (Split): ...`` then what went wrong."""
    first, _, rest = message.partition("\n")
    text = first + (f"\n  {call.text}" if call.text else "") + (f"\n{rest}" if rest else "")
    if call.where.startswith("instruction"):
        return TraceParseError(f"{call.where}: {text}")
    return TraceParseError(text, line=call.line)


# --- a user's schedule function ----------------------------------------------------------------
def run_function(state: State, fn: Callable[[Any], Any], func_names: set[str]) -> tuple[State, list[Replayed]]:
    """Run ``fn(sch)`` on a copy of ``state``'s schedule; return the copy and what the function did
    as replayed calls (none when it cannot be read back: then the copy is one step). Raises
    ``ScheduleStepError`` when the function raises."""
    work = state.fork()
    name = getattr(fn, "__name__", "run")
    try:
        fn(work.sch)
    except AttributeError as exc:
        raise ScheduleStepError(
            _legacy_attribute_hint(exc), primitive=name, detail=f"{type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise ScheduleStepError(f"the schedule function raised {type(exc).__name__}: {exc}", primitive=name) from exc
    old_len = state.trace_length()
    work.took_changes(old_len)
    try:
        # Read what the function did from TVM's JSON (its printer fails on some primitives).
        calls = trace_io.calls_from_json(trace_io.trace_data(work.trace))
        env: dict[str, Handle | None] = {
            target: Handle(pos, k)
            for pos, call in enumerate(calls[:old_len])
            for k, target in enumerate(call.targets)
            if target != "_"
        }
        return work, replay(state, calls[old_len:], func_names, env)
    except (TraceParseError, ScheduleStepError):
        return work, []


# Schedule methods the course's TVM had under other names (TVM 0.27 renamed them).
_RENAMED_METHODS = {"get_block": "get_sblock"}


def _legacy_attribute_hint(exc: AttributeError) -> str:
    """The plain sentence for a schedule function that uses a name TVM 0.27 no longer has."""
    name = getattr(exc, "name", None) or ""
    if name in _RENAMED_METHODS:
        return (
            f"the schedule function calls sch.{name}, which TVM 0.27 calls {_RENAMED_METHODS[name]}: "
            f"use sch.{_RENAMED_METHODS[name]}, or pass the course's code through mlc_lab.convert"
        )
    return f"the schedule function raised AttributeError: {exc}"
