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

from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import tirx

from mlc_lab.tvm.path.blocks import Placement
from mlc_lab.tvm.path.ir import FuncView, const
from mlc_lab.tvm.path.tiling import Apart


@dataclass
class Pending:
    """Loops of ``block`` left apart from ``first`` on: ``count`` of them, fused (and split by
    ``factors``) into the target's loops ``leaves`` once the blocks sit inside."""

    block: str
    first: int
    count: int
    leaves: list[int]
    factors: list[Any] | None = None
    made: list[int] = field(default_factory=list)


def hosts(tgt: FuncView, placement: Placement) -> frozenset[int]:
    """The target's loops that a ``compute_at`` moves a block into (``tile`` leaves the serial
    ones' pieces apart, and the slices of a fuse-then-split whatever its loops' kinds)."""
    return frozenset(a.loop for a in placement.order if a.loop is not None and a.primitive == "compute_at")


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


def shifted(place: int, first: int, count: int, made: int = 1) -> int:
    """A place in a chain once the ``count`` loops from ``first`` on become ``made`` loops (fused
    into one; split again into several); a place among them goes to the first."""
    if place >= first + count:
        return place - count + made
    return min(place, first)


def places_of(pending: list[Pending], view: FuncView, name: str, own: list[int]) -> list[int]:
    """The place in the block's chain of each of its own target loops: of a loop left apart, its
    innermost piece (where the blocks inside it go)."""
    counts = {o: 1 for o in own}
    for p in pending:
        if p.block == name and p.leaves[0] in counts:
            for leaf in p.leaves:
                counts[leaf] = 0
            counts[p.leaves[0]] = p.count
    chain = view.chain(view.block(name))  # type: ignore[arg-type]
    place = len(chain) - sum(counts.values())
    out = []
    for o in own:
        out.append(place + max(counts[o], 1) - 1 if counts[o] else place - 1)
        place += counts[o]
    return out


def leave_apart(run: Any, name: str, own: list[int], left: dict[int, Apart]) -> None:
    """Note the loops ``tile`` left apart (``run.pending``); a serial loop of one piece that the
    target's blocks read modulo its extent gets the unit loop it was fused with first."""
    work, tgt = run.work, run.tgt
    covered = {leaf for a in left.values() for leaf in a.leaves[1:]}
    chain = work.view.chain(work.view.block(name))
    place = len(chain) - sum(0 if o in covered else left[o].count if o in left else 1 for o in own)
    for o in own:
        if o in covered:
            continue
        got = left.get(o)
        if got is None and o in run.apart and tgt.loops[o].kind == "serial" and wraps(tgt, o):
            loop = tgt.loops[o]
            why = f"the blocks inside the target's loop {loop.name} read it modulo {loop.extent}: a unit loop fused with it"
            work.apply("add_unit_loop", why, block_or_loop=work.loop_rvs(name)[place])
            got = Apart(2)
        if got is not None:
            run.pending.append(Pending(name, place, got.count, list(got.leaves) or [o], got.factors))
        place += got.count if got is not None else 1


def fuse_pending(run: Any) -> None:
    """Fuse (and split) the loops left apart, now that the blocks sit inside them, as meta_schedule
    fuses the outer reduction loops after the shared copies' ``compute_at``."""
    work, tgt = run.work, run.tgt
    for p in sorted(run.pending, key=lambda p: -p.first):
        view = work.view
        pieces = view.block(p.block).chain[p.first : p.first + p.count]
        names = ", ".join(f"{tgt.loops[o].name} ({tgt.loops[o].extent})" for o in p.leaves)
        why = f"the target's loop {names} runs over these loops as one, fused once blocks sit inside"
        if p.factors:
            why = f"the target's loops {names} split these loops run as one, fused once blocks sit inside"
        fused = work.apply("fuse", why, loops=work.loop_rvs(p.block)[p.first : p.first + p.count])
        made = 1
        if p.factors:
            parts = " x ".join("*" if f is None else str(f) for f in p.factors)
            work.apply(
                "split", f"the fused loop runs {parts} in the target: its loops {names}", loop=fused, factors=p.factors
            )
            made = len(p.factors)
        for key, (blk, place) in list(run.where.items()):
            b = view.block(blk)
            if b is not None and b.chain[p.first : p.first + p.count] == pieces:
                run.where[key] = (blk, shifted(place, p.first, p.count, made))
        for n, (blk, place, loop) in enumerate(run.deferred):
            b = view.block(blk)
            if b is not None and b.chain[p.first : p.first + p.count] == pieces:
                run.deferred[n] = (blk, shifted(place, p.first, p.count, made), loop)
        for i, leaf in enumerate(p.leaves):
            run.where[leaf] = (p.block, p.first + i)
            run._kind(p.block, p.first + i, tgt.loops[leaf])  # noqa: SLF001  (the run's own step)
    run.pending = []
