"""A unit iterator the target binds to a constant under a padding predicate, read as a unit loop here
fused alone first (its variable goes: the binding becomes ``0``) and then split past its extent.

dlight's reductions do this to an epilogue moved under a thread-bound loop: ``fuse`` of the one unit
loop, ``split`` by the thread count. Splitting the unit loop directly would bind the iterator to the
pieces (``v0 = ax0_0 * 1024 + ax0_1``), which the target does not.
"""

from __future__ import annotations

from mlc_lab.tvm.path.ir import Block, FuncView, IterMaps, const
from mlc_lab.tvm.path.work import Work


def fuse_then_pad(work: Work, view: FuncView, cblock: Block, cmaps: IterMaps, tblock: Block, tmaps: IterMaps) -> int:
    """Make the target's padded unit iterators from unit loops here; returns the loops added."""
    added = 0
    for k, (iv, value) in enumerate(zip(tblock.block.iter_vars, tblock.values)):
        want = tmaps.terms[k]
        if const(iv.dom.extent) != 1 or const(value) != 0 or len(want) < 2:
            continue
        if const(cblock.values[k]) == 0 or len(cmaps.terms[k]) != 1:
            continue
        term = cmaps.terms[k][0]
        if term.leaf is None or const(term.extent) != 1:
            continue
        extents = [const(t.extent) for t in sorted(want, key=lambda t: -(const(t.scale) or 0))]
        if any(e is None for e in extents):
            continue
        loop = view.loops[term.leaf]
        why = (
            f"the target binds {iv.var} of block {tblock.name} to 0 under loops split past its extent: "
            f"{loop.name} is fused alone (its variable goes), then split"
        )
        fused = work.apply("fuse", why, loops=[work.loop_rv(loop.order)])
        work.apply("split", why, loop=fused, factors=extents)
        return len(extents) - 1
    return added
