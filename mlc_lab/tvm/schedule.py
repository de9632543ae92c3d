"""One schedule state per step, and applying a primitive to it with names from the printed script.

A ``State`` is one step's program (its IRModule, immutable) and trace. Only one state at a time
needs a live ``tvm.s_tir.Schedule`` to apply the next primitive to, and no state is ever copied
(``Schedule.copy()`` is not safe after ``tensorize``): applying a primitive runs it on the state's
own schedule and hands that schedule on to the new state; the state it came from keeps a snapshot
of its trace and rebuilds a schedule from it (replaying it on the original program) only if a
primitive is applied to it again (after an undo). A primitive that fails leaves the state as it
was: the look-ups it added to the trace are taken back, and a schedule the failure may have
changed is dropped (rebuilt from the trace when next needed).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.schedule import ScheduleError, Trace

from mlc_lab.model.steps import LEGACY_THREAD_AXES, THREAD_AXES, LoopTree, ref_of
from mlc_lab.errors import (
    DecisionError,
    MlcLabError,
    NameResolutionError,
    ScheduleStepError,
    SplitPastLoopError,
    TraceParseError,
)
from mlc_lab.tvm import looptree, program
from mlc_lab.tvm.block_names import aliases, get_block, split_alias
from mlc_lab.tvm.primitives import (
    BLOCK_LIST_PARAMS,
    BLOCK_PARAMS,
    EITHER_PARAMS,
    LOOP_LIST_PARAMS,
    LOOP_PARAMS,
    SUBJECT_PARAMS,
    Call,
    bind_call,
    raw_method,
    type_check,
)
from mlc_lab.text.step_errors import step_error as _step_error
from mlc_lab.text.trace_tables import Ref

LoopRV = s_tir.schedule.LoopRV
SBlockRV = s_tir.schedule.SBlockRV

# TVM's Python type checker costs ~0.3 ms a call; our own look-ups pass well-typed handles.
_raw_get = inspect.unwrap(s_tir.Schedule.get)
_raw_get_loops = inspect.unwrap(s_tir.Schedule.get_loops)


def _get(sch: s_tir.Schedule, rv: Any) -> Any:
    return _raw_get(sch, rv)


def _handle_of(sch: s_tir.Schedule, rv: Any) -> "Handle":
    """Where the look-up that gave ``rv`` sits in the trace (the latest instruction that outputs it)."""
    insts = sch.trace.insts
    for position in range(len(insts) - 1, -1, -1):
        for output, value in enumerate(insts[position].outputs):
            if value.same_as(rv):
                return Handle(position, output)
    return Handle(len(insts) - 1, 0)


SAMPLING_KINDS = {"SamplePerfectTile", "SampleCategorical", "SampleComputeLocation"}


@dataclass(frozen=True)
class Handle:
    """A sampled value (or other non-name output) by its place in the trace: stable across replays."""

    position: int  # index of the instruction in the trace
    output: int  # index among that instruction's outputs


# Arguments the printed trace always spells out; labels leave them out when they are the defaults.
_DEFAULT_NOISE = {
    "split": ("preserve_unit_iters", "disable_predication"),
    "fuse": ("preserve_unit_iters",),
    "compute_at": ("preserve_unit_loops", "index"),
    "reverse_compute_at": ("preserve_unit_loops", "index"),
    "blockize": ("preserve_unit_iters",),
    "get_sblock": ("func_name",),
}


@dataclass(frozen=True)
class Output:
    """One output of an applied primitive, as plain data (its live handle is ``State.rv_of(handle)``)."""

    kind: str  # "loop" | "block" | "value"
    name: str | None  # printed name for loops/blocks
    value: Any  # sampled value for "value"
    handle: Handle


class State:
    def __init__(
        self,
        sch: s_tir.Schedule,
        func: str,
        block_rvs: dict | None = None,
        *,
        make: Callable[[], s_tir.Schedule] | None = None,
        sampled_loops: dict | None = None,
    ):
        self._sch: s_tir.Schedule | None = sch  # None once handed on (rebuilt from _trace on demand)
        self.func = func
        self.mod: tvm.IRModule = sch.mod  # this step's program: immutable, whatever the schedule does next
        self._trace: Trace | None = None  # a snapshot of the trace, taken when the schedule is handed on
        self._length = len(sch.trace.insts)
        self._make = make  # () -> a fresh schedule of the original program
        # Block handles stay valid across most steps; reusing them keeps the trace short. Kept by
        # their place in the trace, so that they also hold in a schedule rebuilt from it.
        self.block_rvs: dict[tuple[str, str], Handle] = dict(block_rvs or {})
        # trace position of a sample_perfect_tile -> the loop it tiles (named while the loop exists)
        self.sampled_loops: dict[int, str] = dict(sampled_loops or {})
        self._script: str | None = None
        self._index: looptree.LoopIndex | None = None

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def initial(cls, mod: tvm.IRModule, func: str, seed: int | None = None) -> "State":
        kwargs: dict[str, Any] = {"debug_mask": "none", "error_render_level": "detail"}
        if seed is not None:
            kwargs["seed"] = seed

        def make() -> s_tir.Schedule:
            return s_tir.Schedule(mod, **kwargs)

        return cls(make(), func, make=make)

    @property
    def sch(self) -> s_tir.Schedule:
        """This step's live schedule (rebuilt from the trace if it was handed on to a later step)."""
        if self._sch is None:
            self._sch = self._replayed(self._trace)
            self.mod = self._sch.mod
            self._index = None  # the same script, but For nodes of the rebuilt module
        return self._sch

    def _replayed(self, trace: Trace) -> s_tir.Schedule:
        if self._make is None:
            raise MlcLabError("this schedule state cannot be rebuilt: it does not know its original program")
        fresh = self._make()
        trace.apply_to_schedule(fresh, remove_postproc=False)
        return fresh

    def fork(self) -> "State":
        """A state of the same step with a schedule of its own (rebuilt from the trace, never copied)."""
        return State(self._replayed(self.trace), self.func, make=self._make, sampled_loops=self.sampled_loops)

    def took_changes(self, start: int) -> None:
        """Someone worked on this state's schedule directly (``Session.run``): read the step again."""
        sch = self.sch
        self.mod = sch.mod
        self._length = len(sch.trace.insts)
        self._trace = None
        self._script = self._index = None
        self._note_samples(start)

    def _snapshot(self, sch: s_tir.Schedule) -> Trace:
        """This step's trace as a trace of its own (TVM arrays copy on write: later appends miss it)."""
        if self._trace is not None:
            return self._trace
        live = sch.trace
        if len(live.insts) == self._length:
            return Trace(live.insts, live.decisions)
        return _prefix(live, self._length)

    def _take_back(self, sch: s_tir.Schedule, block_rvs: dict, snapshot: Trace) -> None:
        """After a failed primitive: keep the schedule only if the failure left the program untouched."""
        self.block_rvs = block_rvs
        self._trace = snapshot
        if sch.mod.same_as(self.mod):
            trace = sch.trace
            while len(trace.insts) > self._length:  # the look-ups the failed call made
                trace.pop()
            self._sch = sch
        else:  # drop it; the trace snapshot rebuilds one when it is needed
            self._sch = None
        self._index = None if self._sch is None else self._index

    def block_rv(self, name: str, func: str) -> Any:
        key = (func, name)
        handle = self.block_rvs.get(key)
        if handle is not None:
            try:
                rv = self.rv_of(handle)
                if _get(self.sch, rv).name_hint == name:
                    return rv
            except Exception:  # noqa: BLE001  (the block was removed or replaced: look it up again)
                pass
        rv = get_block(self.sch, name, func)  # ``X#k``: the k-th block called X (names several share)
        if split_alias(name)[1] == 1 and name == str(_get(self.sch, rv).name_hint):
            self.block_rvs[key] = _handle_of(self.sch, rv)
        return rv

    # --- views -------------------------------------------------------------------------------
    @property
    def script(self) -> str:
        if self._script is None:
            self._script = program.script(self.mod)
        return self._script

    @property
    def index(self) -> looptree.LoopIndex:
        if self._index is None:
            self._index = looptree.build(self.mod, self.script, self.func)
        return self._index

    def loop_tree(self) -> LoopTree:
        return self.index.tree

    @property
    def trace(self) -> Trace:
        # The snapshot first: while a primitive works on the live schedule (apply_call), another
        # thread (the explorer's checks and way, off the click) still reads this step's own trace.
        if self._trace is not None:
            return self._trace
        sch = self._sch
        return sch.trace if sch is not None else self._trace  # type: ignore[return-value]

    def trace_json(self) -> list:
        return to_plain(self.trace.as_json())

    def trace_length(self) -> int:
        return len(self.trace.insts)

    def rv_of(self, handle: Handle) -> Any:
        insts = self.sch.trace.insts
        if handle.position >= len(insts):
            raise KeyError(handle)
        return insts[handle.position].outputs[handle.output]

    # --- applying ---------------------------------------------------------------------------
    def apply(
        self,
        primitive: str,
        args: tuple,
        kwargs: dict,
        resolve_extra: Callable[[Any], Any] | None = None,
        *,
        past_loop: bool = False,
    ) -> tuple["State", list[Output]]:
        """Apply ``primitive``; return the new state (which takes over this state's schedule) and the
        outputs. On failure raise ``ScheduleStepError`` and leave this state as it was. ``past_loop``:
        a split factor larger than its loop is taken as TVM takes it (a way TVM confirmed has it)."""
        return self.apply_call(bind_call(primitive, args, kwargs), resolve_extra, past_loop=past_loop)

    def apply_call(
        self, call: Call, resolve_extra: Callable[[Any], Any] | None = None, *, past_loop: bool = False
    ) -> tuple["State", list[Output]]:
        """``apply`` of a call already bound (``bind_call``): its arguments are converted, not bound again."""
        name, bound = call.primitive, call.bound
        sch = self.sch
        saved_rvs = dict(self.block_rvs)
        snapshot = self._snapshot(sch)
        mentioned: list[str] = []
        resolver = _Resolver(self, name, resolve_extra, mentioned)
        resolver.past_loop = past_loop
        call_args, call_kwargs = [], {}
        try:
            for pname, kind, value in bound:
                converted = resolver.convert(pname, value)
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    call_args.extend(converted)
                else:
                    call_kwargs[pname] = converted
        except MlcLabError:
            self._take_back(sch, saved_rvs, snapshot)
            raise
        except Exception as exc:  # noqa: BLE001  (TVM refused a look-up: e.g. a block inside an init)
            self._take_back(sch, saved_rvs, snapshot)
            raise _step_error(name, exc, mentioned, self) from None
        if name == "get_sblock" and call_kwargs.get("func_name") is None:
            call_kwargs["func_name"] = self.func
        before = len(sch.trace.insts)
        self._trace = snapshot  # what other threads read of this step while the primitive runs
        try:
            # Without TVM's Python type checker (a third of a primitive's cost): the arguments
            # were converted above. If TVM still refuses them, ask the checker for its clearer
            # wording (it refuses before TVM runs anything).
            result = raw_method(name)(sch, *call_args, **call_kwargs)
        except ScheduleError as exc:
            self._take_back(sch, saved_rvs, snapshot)
            raise _step_error(name, exc, mentioned, self) from None
        except TraceParseError:  # a trace's index map refused when TVM called it: said as it is
            self._take_back(sch, saved_rvs, snapshot)
            raise
        except Exception as exc:  # noqa: BLE001  (TVM raises many error types; all are a failed step)
            self._take_back(sch, saved_rvs, snapshot)
            try:
                type_check(getattr(s_tir.Schedule, name), sch, call_args, call_kwargs)
            except TypeError as checked:
                raise _step_error(name, checked, mentioned, self) from None
            raise _step_error(name, exc, mentioned, self) from None
        self._trace = snapshot
        self._sch = None  # handed on to the new state
        new = State(sch, self.func, self.block_rvs, make=self._make, sampled_loops=self.sampled_loops)
        if name == "sample_perfect_tile":  # the only primitive that adds a perfect-tile sample
            new._note_samples(before)
        outputs = new._outputs(result, sampled_location=name == "sample_compute_location")
        return new, outputs

    def _note_samples(self, start: int) -> None:
        """Name the loop of every sample_perfect_tile from ``start`` on, while the loop exists."""
        insts = self.trace.insts
        for pos in range(start, len(insts)):
            inst = insts[pos]
            if inst.kind.name == "SamplePerfectTile":
                try:
                    self.sampled_loops[pos] = str(_get(self.sch, inst.inputs[0]).loop_var.name)
                except Exception:  # noqa: BLE001  (not a loop of this schedule: leave it unnamed)
                    pass

    def _outputs(self, result: Any, sampled_location: bool = False) -> list[Output]:
        if result is None:
            return []
        items = list(result) if isinstance(result, (list, tuple)) or _is_array(result) else [result]
        insts = self.sch.trace.insts
        # The primitive's own instruction is the last one appended.
        position = len(insts) - 1
        out = []
        for i, rv in enumerate(items):
            handle = Handle(position, i)
            special = _special_location(self.sch, rv) if sampled_location else None
            if special:  # sample_compute_location decided -1 (the root: stay) or -2 (inline): not a loop
                out.append(Output("loop", special, None, handle))
            elif isinstance(rv, LoopRV):
                out.append(Output("loop", self._loop_name(rv), None, handle))
            elif isinstance(rv, SBlockRV):
                out.append(Output("block", _get(self.sch, rv).name_hint, None, handle))
            elif rv is None:  # a dynamic sample_perfect_tile: the outer factor is left to split (None)
                out.append(Output("value", None, None, handle))
            else:
                out.append(Output("value", None, _plain_value(_get(self.sch, rv)), handle))
        return out

    def _loop_name(self, rv: Any) -> str:
        """The name a new loop is shown under (qualified when its plain name is shared)."""
        node = _get(self.sch, rv)
        plain = str(node.loop_var.name)
        candidates = self.index.loops_named(plain)
        if len(candidates) == 1:
            return candidates[0].qualified
        for info in candidates:  # several loops share the name: find ours by position
            if self.index.for_node(info).same_as(node):
                return info.qualified
        return plain

    def describe(self, primitive: str, args: tuple, kwargs: dict, resolve: Callable[[Any], Any]) -> str:
        """``split(j, factors=[None, 4])`` for a call whose handles come from a trace being replayed."""

        def text(value: Any) -> str:
            if isinstance(value, (list, tuple)):
                inner = ", ".join(text(v) for v in value)
                return f"[{inner}]" if isinstance(value, list) else f"({inner})"
            if isinstance(value, Ref):
                try:
                    node = _get(self.sch, resolve(value))
                except Exception:  # noqa: BLE001  (an unbound name: show it as written)
                    return value.name
                loop_var = getattr(node, "loop_var", None)
                if loop_var is not None:
                    return str(loop_var.name)
                name = getattr(node, "name_hint", None)
                return str(name) if name is not None else str(_plain_value(node))
            return repr(value)

        shown = [text(a) for a in args]
        for k, v in kwargs.items():
            if k in _DEFAULT_NOISE.get(primitive, ()):
                continue
            # Loops and blocks read best bare, as a person writes them: split(j, factors=...).
            shown.append(text(v) if k in SUBJECT_PARAMS else f"{k}={text(v)}")
        return f"{primitive}({', '.join(shown)})"

    def find_loop(self, text: str) -> looptree.LoopInfo:
        """A loop by the name shown in the script (``j_0``, ``Y/j``, ``func:Y/j``)."""
        return _Resolver(self, "footprint", None, []).find_loop(text)

    def loop_node(self, info: looptree.LoopInfo) -> tuple[Any, Any]:
        """(the PrimFunc, the ``For`` node) behind a loop of the loop tree."""
        return self.mod[info.func], self.index.for_node(info)

    # --- decisions --------------------------------------------------------------------------
    def sampled(self) -> list[dict[str, Any]]:
        """Every sampling instruction of the trace, in order, as plain data: its ``position`` in the
        trace, ``kind`` (``SamplePerfectTile``...), decided ``value``, ``attrs`` and the ``loop`` it
        tiles (named when it was sampled; the loop may be split away by now)."""
        trace = self.trace
        return [
            {
                "position": pos,
                "kind": inst.kind.name,
                "value": to_plain(trace.get_decision(inst)),
                "attrs": to_plain(inst.attrs),
                "loop": self.sampled_loops.get(pos),
            }
            for pos, inst in enumerate(trace.insts)
            if inst.kind.name in SAMPLING_KINDS
        ]

    def check_decision(self, position: int, value: Any) -> Any:
        """``value`` as the decision of the sampling instruction at ``position``, checked (TVM would
        silently replace a bad one): the clean value, or DecisionError."""
        return check_decision(self.trace.insts[position], value)

    def with_decision(self, position: int, value: Any) -> "State":
        """The step's schedule replayed from the original program with the sampling instruction at
        ``position`` deciding ``value`` (checked first: ``check_decision``)."""
        trace = self.trace
        new_trace = trace.with_decision(trace.insts[position], value, remove_postproc=True)
        return State(self._replayed(new_trace), self.func, make=self._make, sampled_loops=self.sampled_loops)


def _register_tensor_intrinsics(name: str) -> None:
    """meta_schedule traces name TVM's shipped intrinsics (wmma, mma, x86, arm...): register them.

    The first call costs seconds (the package parses ~100 TVMScript descriptions at import). The
    package registers CUDA's always and the others only where TVM was built for them; dlight's Metal
    rule names Metal's (``simdgroup_*``), so a name still unknown is looked for in each platform's
    module (importing one only registers its intrinsics). A name already registered (the program's
    own intrinsic, or one an earlier call registered) costs nothing."""
    if s_tir.TensorIntrin.get(name, allow_missing=True) is not None:
        return
    import importlib

    import tvm.s_tir.tensor_intrin  # noqa: F401

    for platform in ("", "metal", "x86", "arm_cpu", "rocm", "riscv_cpu", "hexagon"):
        if platform:
            try:
                importlib.import_module(f"tvm.s_tir.tensor_intrin.{platform}")
            except Exception:  # noqa: BLE001  (a platform module that does not import here: its names stay unknown)
                continue
        try:
            s_tir.TensorIntrin.get(name)
            return
        except Exception:  # noqa: BLE001  (TVM: "is not registered")
            continue


def _special_location(sch: s_tir.Schedule, rv: Any) -> str | None:
    """``"root"`` / ``"inline"`` for the marks sample_compute_location returns instead of a loop."""
    sref = sch.get_sref(rv)
    if sref.same_as(s_tir.schedule.StmtSRef.root_mark()):
        return "root"
    if sref.same_as(s_tir.schedule.StmtSRef.inline_mark()):
        return "inline"
    return None


def _int_extent(sch: Any, loop_rv: Any) -> int | None:
    """The constant extent of a loop (a handle of ``sch``), or None (symbolic, or no loop)."""
    if loop_rv is None:
        return None
    try:
        extent = _get(sch, loop_rv).extent
    except Exception:  # noqa: BLE001  (a stale handle: TVM says so when the primitive runs)
        return None
    return int(extent.value) if hasattr(extent, "value") else None


class _Resolver:
    """Turns user arguments (names, handles, trace variables, literals) into what TVM expects."""

    def __init__(self, state: State, primitive: str, extra: Callable[[Any], Any] | None, mentioned: list[str]):
        self.state = state
        self.primitive = primitive
        self.extra = extra
        self.mentioned = mentioned
        self.loops_of: dict[tuple[str, str], Any] = {}  # TVM's array, read by index (no per-loop copy)
        self.past_loop = False  # a split factor past its loop is taken (a way TVM confirmed has it)

    def convert(self, pname: str, value: Any) -> Any:
        if pname in LOOP_LIST_PARAMS:
            items = value
            if len(items) == 1 and isinstance(items[0], (list, tuple)):
                items = items[0]
            return [self.loop(v) for v in items]
        if pname in LOOP_PARAMS:
            self.last_loop = self.loop(value)
            return self.last_loop
        if pname == "factors" and self.primitive == "split" and isinstance(value, (list, tuple)):
            self.check_factors(value)
        if pname in BLOCK_PARAMS:
            return self.block(value)
        if pname in BLOCK_LIST_PARAMS:
            return None if value is None else [self.block(v) for v in value]
        if pname in EITHER_PARAMS:
            return self.block_or_loop(value)
        if pname == "target":  # blockize: a loop or a list of blocks
            if isinstance(value, (list, tuple)):
                return [self.block(v) for v in value]
            return self.loop(value)
        if pname == "loops" and isinstance(value, (list, tuple)):
            return [self.loop(v) for v in value]
        if pname == "thread_axis" and self.primitive == "bind" and value not in THREAD_AXES + LEGACY_THREAD_AXES:
            # TVM takes any "threadIdx.*" and fails later, in the build, far from the step.
            raise ScheduleStepError(
                f"bind: {value!r} is not a GPU thread axis; the thread axes are {', '.join(THREAD_AXES)}",
                primitive="bind",
            )
        return self.literal(value)

    def check_factors(self, factors: list | tuple) -> None:
        """Split factors TVM would take badly: one past a 32-bit extent (TVM answered with its FFI's
        type error about a BigInt) or one larger than the loop (applied, with an outer loop of one
        iteration and half of the inner one skipped by a predicate, and not a word said)."""
        extent = _int_extent(self.state.sch, getattr(self, "last_loop", None))
        name = self.mentioned[-1] if self.mentioned else "the loop"
        for f in factors:
            if isinstance(f, bool) or not isinstance(f, int):
                continue
            if not -(2**31) <= f < 2**31:
                raise ScheduleStepError(
                    f"split: the factor {f} is too large: a loop's extent is a 32-bit integer (at most {2**31 - 1:,})",
                    primitive="split",
                    involved=[name] if self.mentioned else [],
                )
            # a step a person applies; a trace replays as TVM replays it (self.extra: its variables)
            if extent is not None and f > extent and self.extra is None and not self.past_loop:
                raise SplitPastLoopError(
                    f"split: the factor {f} is larger than loop {name}, which has {extent} iterations; use a "
                    f"factor of at most {extent} (a divisor of {extent} needs no predicate)",
                    primitive="split",
                    involved=[name],
                )

    def literal(self, value: Any) -> Any:
        if self.primitive == "tensorize" and isinstance(value, str):
            _register_tensor_intrinsics(value)
        if isinstance(value, list):
            return [self.literal(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.literal(v) for v in value)
        if isinstance(value, dict):
            return {k: self.literal(v) for k, v in value.items()}
        if _is_plain(value):
            return value
        return self.other(value)

    def other(self, value: Any) -> Any:
        if isinstance(value, Handle):
            try:
                return self.state.rv_of(value)
            except (KeyError, IndexError):
                raise ScheduleStepError(
                    "a sampled value from another branch of the history cannot be used here",
                    primitive=self.primitive,
                ) from None
        if self.extra is not None:
            resolved = self.extra(value)
            if resolved is not value:
                return resolved
        if isinstance(value, Ref):
            raise ScheduleStepError(f"{value.name} is not defined", primitive=self.primitive)
        return value

    def loop(self, value: Any) -> Any:
        if isinstance(value, str):
            info = self.find_loop(value)
            self.mentioned.append(info.name)
            return self.loop_rv(info)
        rv = self.other(value)
        self._mention(rv)
        return rv

    def _mention(self, rv: Any) -> None:
        """Name a loop or block handed over as a handle (trace replay), for error messages."""
        try:
            node = _get(self.state.sch, rv)
        except Exception:  # noqa: BLE001  (a stale handle: TVM will say so when the primitive runs)
            return
        name = getattr(getattr(node, "loop_var", None), "name", None) or getattr(node, "name_hint", None)
        if name:
            self.mentioned.append(str(name))

    def block(self, value: Any) -> Any:
        if isinstance(value, str):
            self.mentioned.append(value)
            func, _, name = value.rpartition(":")
            func = func or self.state.func
            names = aliases([b.name for b in self.state.index.blocks if b.func == func])
            if name not in names and name != "root":  # the function's root block has no loops to show
                raise NameResolutionError(
                    f"there is no block named {name!r}"
                    + (f" in {func}" if func else "")
                    + (f"; blocks are: {', '.join(names)}" if names else ""),
                    primitive=self.primitive,
                    candidates=names,
                )
            return self.state.block_rv(name, func)
        rv = self.other(value)
        self._mention(rv)
        return rv

    def block_or_loop(self, value: Any) -> Any:
        if isinstance(value, str):
            func, _, bare = value.rpartition(":")
            if bare == "root" and not self.state.index.loops_named("root"):
                return self.block(value)  # the function's root block (annotated by meta_schedule)
            if "/" not in bare and any(
                b.name == bare and b.func == (func or self.state.func) for b in self.state.index.blocks
            ):
                return self.block(value)
            return self.loop(value)
        return self.other(value)

    def find_loop(self, text: str) -> looptree.LoopInfo:
        index = self.state.index
        nodes = index.tree.match(text, "loop")
        if len(nodes) == 1:
            return index.info_of[id(nodes[0])]
        if not nodes:
            names = sorted({lp.qualified for lp in index.loops})
            raise NameResolutionError(
                f"there is no loop named {text!r}; loops are: {', '.join(names)}",
                primitive=self.primitive,
                candidates=names,
            )
        cands = [ref_of(n) for n in nodes]
        raise NameResolutionError(
            f"the loop name {text!r} is ambiguous: {len(nodes)} loops have it. "
            f"Qualify it with a block inside the loop, as one of: {', '.join(cands)}",
            primitive=self.primitive,
            candidates=cands,
        )

    def loop_rv(self, info: looptree.LoopInfo) -> Any:
        if info.anchor_block is None:
            raise ScheduleStepError(
                f"loop {info.name} contains no block, so it cannot be scheduled", primitive=self.primitive
            )
        key = (info.func, info.anchor_block)
        loops = self.loops_of.get(key)
        if loops is None:
            block = self.state.block_rv(info.anchor_block, info.func)
            loops = self.loops_of[key] = _raw_get_loops(self.state.sch, block)
        return loops[info.depth]


def _prefix(trace: Trace, length: int) -> Trace:
    """The first ``length`` instructions of a trace, with their decisions, as a trace of its own."""
    insts = list(trace.insts)[:length]
    decisions = trace.decisions
    return Trace(insts, {inst: decisions[inst] for inst in insts if inst in decisions})


def _is_array(obj: Any) -> bool:
    return type(obj).__name__ == "Array" or hasattr(obj, "__len__") and not isinstance(obj, (str, bytes))


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_is_plain(v) for v in value.values())
    return False


def _plain_value(v: Any) -> Any:
    if isinstance(v, tirx.IntImm):
        return int(v.value)
    if isinstance(v, tirx.FloatImm):
        return float(v.value)
    if isinstance(v, tirx.For):
        return v.loop_var.name
    return v


def to_plain(obj: Any) -> Any:
    """TVM's trace JSON holds IntImm/FloatImm and TVM containers; make it json.dumps-able."""
    if isinstance(obj, tirx.IntImm):
        return int(obj.value)
    if isinstance(obj, tirx.FloatImm):
        return float(obj.value)
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, dict) or (hasattr(obj, "items") and not isinstance(obj, (list, tuple))):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__len__"):
        return [to_plain(v) for v in obj]
    if hasattr(obj, "value"):
        return to_plain(obj.value)
    return str(obj)


def check_decision(inst: Any, value: Any) -> Any:
    """Validate a decision ourselves: TVM silently replaces invalid ones. Returns the clean value."""
    kind = inst.kind.name
    attrs = to_plain(inst.attrs)
    if kind == "SamplePerfectTile":
        n = int(attrs[0])
        if (
            not isinstance(value, (list, tuple))
            or len(value) != n
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
        ):
            raise DecisionError(f"a perfect tile decision is a list of {n} positive integers, not {value!r}")
        return [int(v) for v in value]
    if kind == "SampleCategorical":
        count = len(attrs[0])
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise DecisionError(f"a categorical decision is an index in 0..{count - 1}, not {value!r}")
        return int(value)
    if kind == "SampleComputeLocation":
        if isinstance(value, bool) or not isinstance(value, int) or value < -2:
            raise DecisionError(f"a compute-location decision is an integer >= -2, not {value!r}")
        return int(value)
    raise DecisionError(f"{kind} has no decision to set")
