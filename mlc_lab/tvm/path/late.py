"""Loops fused after blocks were moved into them: meta_schedule's CUDA sketches put the shared copies
under the innermost outer reduction loop (``compute_at``) and fuse the outer reduction loops only then
(the software pipeline's loop). TVM's ``fuse`` writes each piece into the copies' bindings as it
substitutes it (``fused // 1024 % 2``, ``fused % 7``), where a ``compute_at`` under the loop fused
first would write the region TVM infers: the two programs differ, and only the order tells.

``hosts``: the target's serial loops a block is moved into (the engine's variant leaves their pieces
unfused, moves the blocks under the innermost piece and fuses then); ``wraps``: a loop made of one
piece that the blocks under it read modulo its extent, the trace of a unit piece fused with it (the
engine adds that unit loop above it first).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from mlc_lab.tvm.path.blocks import Placement
from mlc_lab.tvm.path.ir import FuncView, const


def hosts(tgt: FuncView, placement: Placement) -> frozenset[int]:
    """The target's serial (not bound) loops that a ``compute_at`` moves a block into."""
    out = set()
    for attach in placement.order:
        if attach.loop is not None and attach.primitive == "compute_at":
            if tgt.loops[attach.loop].kind == "serial":
                out.add(attach.loop)
    return frozenset(out)


def wraps(tgt: FuncView, order: int) -> bool:
    """Whether a block under the target's loop ``order`` reads its variable modulo its extent."""
    loop = tgt.loops[order]
    extent = const(loop.extent)
    if extent is None or extent < 2:
        return False
    return any(_wrapped(value, loop.var, extent) for block in tgt.blocks_under(loop) for value in block.values)


def _wrapped(expr: Any, var: Any, extent: int) -> bool:
    if isinstance(expr, tirx.FloorMod) and const(expr.b) == extent and expr.a.same_as(var):
        return True
    subs = [getattr(expr, attr, None) for attr in ("a", "b", "value", "condition", "true_value", "false_value")]
    subs += list(getattr(expr, "args", None) or [])
    return any(isinstance(sub, tvm.ir.expr.Expr) and _wrapped(sub, var, extent) for sub in subs)


def shifted(place: int, first: int, count: int) -> int:
    """A place in a chain once the ``count`` loops from ``first`` on are fused into one."""
    if place >= first + count:
        return place - count + 1
    return min(place, first)
