"""The schedule primitives mlc_lab applies by name, and a call of one bound to TVM's parameters once.

``bind_call`` checks a call against ``tvm.s_tir.Schedule``'s own signature and keeps its arguments
by parameter name (``Call``); the Session labels the step from that binding and ``schedule.State``
converts and applies the same binding, so a call is bound once however it is spelled.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable

from tvm import s_tir

from mlc_lab.errors import ScheduleStepError

# The primitives a user may apply by name (TVM's own method names and argument names).
# Every primitive of tvm.s_tir.Schedule 0.27 that a trace can record (one instruction kind each, see
# src/s_tir/schedule/primitive/*.cc); tests/unit/test_trace_forms.py checks the list against TVM's.
PRIMITIVES = frozenset(
    """split reorder fuse merge loop_partition add_unit_loop parallel vectorize unroll bind
    compute_at reverse_compute_at compute_inline reverse_compute_inline fuse_reduction_epilogue
    cache_read cache_write cache_inplace cache_index reindex reindex_cache_read reindex_cache_write
    read_at write_at set_scope storage_align unsafe_set_dtype
    decompose_reduction rfactor decompose_padding pad_einsum rolling_buffer
    blockize tensorize annotate unannotate annotate_buffer_access unsafe_hide_buffer_access
    transform_layout transform_block_layout reorder_block_iter_var
    sample_perfect_tile sample_partitioned_tile sample_categorical sample_compute_location
    get_sblock get_loops get_child_blocks get_producers get_consumers get_output_blocks
    enter_postproc""".split()
)
ALIASES = {"get_block": "get_sblock"}
# Instructions that only look things up: they are folded into the next real step.
LOOKUPS = frozenset(
    {"get_sblock", "get_loops", "get_child_blocks", "get_producers", "get_consumers", "get_output_blocks"}
)

# What each parameter name of a primitive takes, beyond literals.
LOOP_PARAMS = {"loop"}
LOOP_LIST_PARAMS = {"ordered_loops", "loops"}
BLOCK_PARAMS = {"block", "reduction_block", "epilogue_block", "scope_block"}
BLOCK_LIST_PARAMS = {"consumer_blocks"}
EITHER_PARAMS = {"block_or_loop"}

SUBJECT_PARAMS = {"loop", "block", "block_or_loop", "target"}


_SIGNATURES: dict[str, inspect.Signature] = {}
_RAW: dict[str, Any] = {}


def raw_method(name: str) -> Any:
    fn = _RAW.get(name)
    if fn is None:
        fn = _RAW[name] = inspect.unwrap(getattr(s_tir.Schedule, name))
    return fn


def _signature(name: str) -> inspect.Signature:
    sig = _SIGNATURES.get(name)
    if sig is None:
        sig = inspect.signature(inspect.unwrap(getattr(s_tir.Schedule, name)))
        _SIGNATURES[name] = sig
    return sig


_PARAMS: dict[str, list[inspect.Parameter]] = {}


def _bind(name: str, args: tuple, kwargs: dict) -> list[tuple[str, Any, Any]]:
    """``Signature.bind`` without its cost: [(param name, kind, value)] for the given arguments."""
    params = _PARAMS.get(name)
    if params is None:
        params = _PARAMS[name] = list(_signature(name).parameters.values())[1:]
    out, rest, used = [], list(args), set()
    for p in params:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out.append((p.name, p.kind, tuple(rest)))
            rest = []
        elif p.kind is inspect.Parameter.KEYWORD_ONLY:
            if p.name in kwargs:
                out.append((p.name, p.kind, kwargs[p.name]))
                used.add(p.name)
        elif rest:
            if p.name in kwargs:
                raise TypeError(f"multiple values for argument '{p.name}'")
            out.append((p.name, p.kind, rest.pop(0)))
        elif p.name in kwargs:
            out.append((p.name, p.kind, kwargs[p.name]))
            used.add(p.name)
        elif p.default is inspect.Parameter.empty:
            raise TypeError(f"missing a required argument: '{p.name}'")
    if rest:
        raise TypeError(f"too many positional arguments ({len(args)} given)")
    unknown = set(kwargs) - used
    if unknown:
        raise TypeError(f"got an unexpected keyword argument '{sorted(unknown)[0]}'")
    return out


# Parameters a label shows bare, as a person writes them: split(j, factors=...), compute_at(C, j_0).
BARE_PARAMS = SUBJECT_PARAMS | BLOCK_PARAMS


@dataclass(frozen=True)
class Call:
    """A primitive (TVM's name, aliases resolved) with its arguments bound to TVM's parameters:
    (parameter name, kind, value) in signature order; a ``*args`` parameter holds a tuple."""

    primitive: str
    bound: tuple[tuple[str, Any, Any], ...]

    def map(self, fn: Callable[[Any], Any]) -> "Call":
        """The same call with ``fn`` applied to every argument (each item of a ``*args`` tuple)."""
        return Call(
            self.primitive,
            tuple(
                (p, k, tuple(fn(v) for v in value) if k is inspect.Parameter.VAR_POSITIONAL else fn(value))
                for p, k, value in self.bound
            ),
        )

    def parts(self) -> list[tuple[str | None, Any]]:
        """The arguments as (parameter name or None for bare, value), in signature order.

        However a call was spelled (``split("j", [None, 4])``, ``split(loop="j", factors=[None, 4])``),
        the parts are the same: subjects (loops, blocks) bare, the rest by name, parameters given at
        their default value left out."""
        params = {p.name: p for p in _PARAMS[self.primitive]}
        out: list[tuple[str | None, Any]] = []
        keyword = False
        for pname, kind, value in self.bound:
            if kind is inspect.Parameter.VAR_POSITIONAL:
                out.extend((None, v) for v in value)
                continue
            default = params[pname].default
            if default is not inspect.Parameter.empty and type(value) is type(default) and value == default:
                continue
            keyword = keyword or pname not in BARE_PARAMS
            out.append((pname if keyword else None, value))
        return out


def bind_call(primitive: str, args: tuple, kwargs: dict) -> Call:
    """``primitive(*args, **kwargs)`` bound to TVM's signature; ScheduleStepError when ``primitive``
    is not one mlc_lab applies or the arguments do not fit it."""
    name = ALIASES.get(primitive, primitive)
    if name not in PRIMITIVES:
        raise ScheduleStepError(
            f"{primitive!r} is not a schedule primitive mlc_lab can apply",
            primitive=primitive,
            detail="known primitives: " + ", ".join(sorted(PRIMITIVES)),
        )
    try:
        bound = _bind(name, args, kwargs)
    except TypeError as exc:
        raise ScheduleStepError(
            f"wrong arguments for {name}: {exc}", primitive=name, detail=f"{name}{signature_text(name)}"
        ) from None
    return Call(name, tuple(bound))


def type_check(method: Any, sch: Any, args: list, kwargs: dict) -> None:
    """TVM's Python type checker on a call, without the call: raises its TypeError, or nothing."""
    from tvm.s_tir.schedule import _type_checker  # noqa: PLC0415  (only on this error path)

    raw = inspect.unwrap(method)
    sig = inspect.signature(raw)
    try:
        hints = typing.get_type_hints(raw)
    except Exception:  # noqa: BLE001  (as TVM's checker: no hints, no check)
        return
    bound = sig.bind(sch, *args, **kwargs)
    bound.apply_defaults()
    for param in sig.parameters.values():
        hint = hints.get(param.name, inspect.Parameter.empty)
        if hint is not inspect.Parameter.empty:
            message = _type_checker._type_check(bound.arguments[param.name], param.name, hint)  # noqa: SLF001  (TVM's own wording)
            if message is not None:
                raise TypeError(f'In "{raw.__qualname__}", {message}')


def parameter_names(name: str) -> list[str]:
    """The parameters of primitive ``name`` after ``self``, in order (``split``: loop, factors, ...)."""
    return list(_signature(ALIASES.get(name, name)).parameters)[1:]


def signature_text(name: str) -> str:
    return str(_signature(ALIASES.get(name, name))).replace("self, ", "").replace("(self)", "()")
