"""A loop split past its extent whose outer unit piece is fused with the next (dlight's gemv rules:
``split(j, [None, 16, 2])`` of a loop of 8, then ``fuse`` of the first two pieces into the loop
bound to the threads). The target gives it away in its predicate, ``(0 * 16 + f % 16) * 2 + ...``:
the fused loop ``f`` taken modulo its own extent. Made here the same way, the loops are tiled on.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from mlc_lab.tvm.path.ir import Block, FuncView, IterMaps, const
from mlc_lab.tvm.path.work import Work


def split_then_fuse(
    work: Work, view: FuncView, cblock: Block, cmaps: IterMaps, tgt: FuncView, tblock: Block, tmaps: IterMaps
) -> int:
    """Split a loop here as the target's padded pieces, fusing the unit outer piece with the next
    where the target's predicate takes that loop modulo its extent; returns the loops added."""
    for k, want in enumerate(tmaps.terms):
        cur = cmaps.terms[k]
        if len(cur) != 1 or cur[0].leaf is None or const(cur[0].extent) is None:
            continue
        pieces = sorted((t for t in want if const(t.extent) != 1), key=lambda t: -(const(t.scale) or 0))
        extents = [const(t.extent) for t in pieces]
        if len(pieces) < 2 or None in extents or pieces[0].leaf is None:
            continue
        total = 1
        for e in extents:
            total *= e  # type: ignore[operator]
        whole = const(cur[0].extent)
        if total <= whole or -(-whole // total) != 1:  # type: ignore[operator]
            continue  # not padded, or more than one outer piece: not this pattern
        outer = tgt.loops[pieces[0].leaf]
        if not _taken_modulo(tblock.realize.predicate, outer.var, extents[0]):
            continue
        loop = view.loops[cur[0].leaf]
        why = (
            f"the target's loop {outer.name} ({extents[0]}) is the unit outer piece of {loop.name} split past its "
            "extent, fused with the next"
        )
        rvs = work.apply("split", why, loop=work.loop_rv(loop.order), factors=[None, *extents])
        work.apply("fuse", why, loops=rvs[:2])
        units = [t for t in want if const(t.extent) == 1 and t.leaf is not None]
        added = len(extents) - 1
        for piece, rv in zip(pieces[1:], rvs[2:]):
            if _unit_outer(tblock.realize.predicate, tgt, piece, units):
                said = f"the target splits a unit loop off the piece of {const(piece.extent)} as well"
                work.apply("split", said, loop=rv, factors=[None, const(piece.extent)])
                added += 1
        return added
    return 0


def _unit_outer(predicate: Any, tgt: FuncView, piece: Any, units: list[Any]) -> bool:
    """Whether one of the target's unit loops is the outer piece of a split of ``piece``: the
    predicate adds them as ``u * extent + p``."""
    if piece.leaf is None:
        return False
    p_var, extent = tgt.loops[piece.leaf].var, const(piece.extent)
    return any(_holds_pair(predicate, tgt.loops[u.leaf].var, extent, p_var) for u in units)


def _holds_pair(expr: Any, u: Any, extent: Any, p: Any) -> bool:
    if isinstance(expr, tirx.Add) and isinstance(expr.b, tirx.Var) and expr.b.same_as(p):
        m = expr.a
        if isinstance(m, tirx.Mul) and isinstance(m.a, tirx.Var) and m.a.same_as(u) and const(m.b) == extent:
            return True
    subs = [getattr(expr, a, None) for a in ("a", "b", "value", "condition")] + list(getattr(expr, "args", None) or [])
    return any(_holds_pair(x, u, extent, p) for x in subs if x is not None and hasattr(x, "same_as"))


def _taken_modulo(expr: Any, var: Any, extent: Any) -> bool:
    """Whether ``expr`` holds ``var % extent``."""
    if isinstance(expr, tirx.FloorMod) and isinstance(expr.a, tirx.Var) and expr.a.same_as(var):
        return const(expr.b) == extent
    subs = [getattr(expr, a, None) for a in ("a", "b", "value", "condition")] + list(getattr(expr, "args", None) or [])
    return any(_taken_modulo(x, var, extent) for x in subs if x is not None and hasattr(x, "same_as"))
