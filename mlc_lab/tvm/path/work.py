"""The schedule the path engine works on: every primitive it applies is recorded with its arguments
named as in the program it was applied to, and TVM says what it refuses.

The engine finds loops and blocks by what they are (a loop's place in the function, a block's
name), never by handles kept across steps: a handle can go stale when a primitive replaces a loop.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from tvm import s_tir

from mlc_lab.tvm.block_names import get_block
from mlc_lab.tvm.path.ir import FuncView, read

LoopRV = s_tir.schedule.LoopRV
SBlockRV = s_tir.schedule.SBlockRV


class Refused(Exception):
    """TVM refused a primitive: ``primitive`` and TVM's own last line."""

    def __init__(self, primitive: str, message: str):
        super().__init__(f"{primitive}: {message}")
        self.primitive = primitive
        self.message = message


class Unreachable(Exception):
    """The target cannot be reached from here: one sentence saying why (``kind``: "computes",
    "no_primitive", "stage" (a copy the engine does not read yet) or "here": reachable from an
    earlier step perhaps)."""

    def __init__(self, sentence: str, kind: str = "here"):
        super().__init__(sentence)
        self.sentence = sentence
        self.kind = kind


@dataclass
class Op:
    """One primitive applied: TVM's name, its arguments with loops as ("loop", pre-order place) and
    blocks as ("block", name) in the program before it, and the one sentence that says why."""

    primitive: str
    args: dict[str, Any]
    reason: str = ""
    outputs: list[Any] = field(default_factory=list)


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    for line in reversed(text):
        if line.strip().startswith("Error message:"):
            return line.strip()[len("Error message:") :].strip()
    return text[-1].strip() if text else type(exc).__name__


_RAW: dict[str, Any] = {}
_VARIADIC = {"reorder": "ordered_loops", "fuse": "loops", "merge": "loops"}  # TVM's *args parameters


def _raw(name: str) -> Any:
    fn = _RAW.get(name)
    if fn is None:
        fn = _RAW[name] = inspect.unwrap(getattr(s_tir.Schedule, name))
    return fn


class Work:
    def __init__(self, sch: s_tir.Schedule, func: str):
        self.sch = sch
        self.func = func
        self.ops: list[Op] = []
        self._view: FuncView | None = None

    @property
    def view(self) -> FuncView:
        if self._view is None:
            self._view = read(self.sch.mod[self.func])
        return self._view

    @property
    def mod(self) -> Any:
        return self.sch.mod

    # --- handles by what things are ---------------------------------------------------------------
    def get(self, rv: Any) -> Any:
        """The loop or block behind a handle (TVM's ``Schedule.get`` without its type checker)."""
        return _raw("get")(self.sch, rv)

    def block_rv(self, name: str) -> Any:
        """The handle of block ``name`` as the view names it (``X#k``: the k-th block called X)."""
        return get_block(self.sch, name, self.func)

    def loop_rvs(self, block: str) -> list[Any]:
        return list(_raw("get_loops")(self.sch, self.block_rv(block)))

    def loop_rv(self, order: int) -> Any:
        """The handle of the loop at pre-order place ``order`` of the current program."""
        loop = self.view.loops[order]
        if not loop.blocks:
            raise Unreachable(f"loop {loop.name} holds no block, so no primitive can reach it", "no_primitive")
        for rv in self.loop_rvs(loop.blocks[0]):
            if self.get(rv).same_as(loop.node):
                return rv
        raise Unreachable(f"loop {loop.name} could not be found from block {loop.blocks[0]}", "no_primitive")

    def order_of(self, rv: Any) -> int:
        node = self.get(rv)
        for loop in self.view.loops:
            if loop.node.same_as(node):
                return loop.order
        raise KeyError("loop not in the program")

    # --- trying -----------------------------------------------------------------------------------
    def checkpoint(self) -> tuple[Any, int]:
        """A copy of the schedule as it is now, to come back to (``restore``)."""
        return self.sch.copy(), len(self.ops)

    def restore(self, point: tuple[Any, int]) -> None:
        sch, length = point
        self.sch = sch.copy()
        del self.ops[length:]
        self._view = None

    # --- applying ---------------------------------------------------------------------------------
    def apply(self, primitive: str, reason: str = "", **kwargs: Any) -> Any:
        """Apply ``primitive`` (TVM's argument names); record it; ``Refused`` when TVM refuses it
        (the schedule is then unchanged)."""
        named = {k: self._describe(v) for k, v in kwargs.items()}
        before = self.sch.mod
        try:
            if primitive in _VARIADIC:
                rest = dict(kwargs)
                loops = rest.pop(_VARIADIC[primitive])
                result = _raw(primitive)(self.sch, *loops, **rest)
            else:
                result = _raw(primitive)(self.sch, **kwargs)
        except Exception as exc:  # noqa: BLE001  (TVM raises many types; each is a refusal)
            if not self.sch.mod.same_as(before):
                raise Unreachable(f"{primitive} failed half-way: {_message(exc)}", "no_primitive") from None
            raise Refused(primitive, _message(exc)) from None
        self._view = None
        self.ops.append(Op(primitive, named, reason))
        return result

    def _describe(self, value: Any) -> Any:
        if isinstance(value, LoopRV):
            return ("loop", self.order_of(value))
        if isinstance(value, SBlockRV):
            node = self.get(value)
            try:  # TVM finds the name: no other block has it (the view is not read again for it)
                _raw("get_sblock")(self.sch, str(node.name_hint), self.func)
                return ("block", str(node.name_hint))
            except Exception:  # noqa: BLE001  (several blocks have it: the view says which one this is)
                named = next((b.name for b in self.view.blocks if b.block.same_as(node)), None)
                return ("block", named or str(node.name_hint))
        if isinstance(value, list):
            return [self._describe(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._describe(v) for v in value)
        return value
