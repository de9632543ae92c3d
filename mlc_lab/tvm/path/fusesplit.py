"""A copy's loops fused, then split (dlight's gemv: ``fuse`` of a cache stage's last loops, then
``split`` by the vector width): the target's loops around the block are a kept prefix of the
loops here followed by the pieces of one loop made of all the rest. The tiling reads pieces of the
block's iterators and, where a unit loop here has no iterator of its own in the target, splits
before it fuses, which TVM simplifies into other bindings; this reading fuses first, as the target
was made, and TVM's own comparison of the block's placement confirms it.
"""

from __future__ import annotations

from typing import Any

from mlc_lab.tvm.path.ir import const
from mlc_lab.tvm.path.work import Refused, Unreachable


def retile(run: Any, steps: tuple[Any, Any, Any], name: str, attach: Any, tblock: Any, keeps: tuple[bool, ...]) -> bool:
    """Whether the block ``name`` came to sit as the target's ``tblock`` by fusing its last loops
    (below where ``attach`` places it) and splitting the fused loop into the target's last loops;
    on False the work is as it was. ``steps``: the plan's move, count of own loops, and check."""
    work = run.work
    point, mark = work.checkpoint(), len(run.pending)
    for keep in keeps:
        for kept in range(len(attach.own)):
            if _attempt(run, steps, name, attach, tblock, (keep, kept)):
                return True
            work.restore(point)
            del run.pending[mark:]
    return False


def _attempt(run: Any, steps: tuple[Any, Any, Any], name: str, attach: Any, tblock: Any, way: tuple[bool, int]) -> bool:
    work, tgt = run.work, run.tgt
    move, own_count, check = steps
    keep, kept = way
    try:
        if attach.loop is not None:
            move(name, attach, keep)
        count = own_count(name, attach)
        chain = work.view.chain(work.view.block(name))
        here = chain[len(chain) - count :]
        theirs = [const(tgt.loops[o].extent) for o in attach.own]
        mine = [const(lp.extent) for lp in here]
        if None in theirs or None in mine or kept > len(here) or mine[:kept] != theirs[:kept]:
            return False
        rest, parts = mine[kept:], theirs[kept:]
        if len(rest) + len(parts) < 3 or _product(rest) != _product(parts) or not parts:
            return False  # one loop into one: the tiling's own reading
        rvs = work.loop_rvs(name)[len(chain) - count + kept :]
        names = [tgt.loops[o].name for o in attach.own[kept:]]
        fused = rvs[0]
        if len(rvs) > 1:
            why = f"the target's loops {', '.join(names)} around block {tblock.name} are one loop of these, split"
            fused = work.apply("fuse", why, loops=rvs, preserve_unit_iters=True)
        if len(parts) > 1:
            why = f"the fused loop runs {' x '.join(map(str, parts))} in the target: its loops {', '.join(names)}"
            work.apply("split", why, loop=fused, factors=[None, *parts[1:]], preserve_unit_iters=True)
        check(name, tblock)
        return True
    except (Unreachable, Refused):
        return False


def _product(values: list[Any]) -> int:
    out = 1
    for v in values:
        out *= v
    return out
