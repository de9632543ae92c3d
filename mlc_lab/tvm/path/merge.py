"""Reading ``merge`` off a target: TVM merges loops of the same extent at the same depth of separate
nests into one loop named after the first with ``_m`` (their outer loops merged alike), the blocks
of every nest beneath it in order. Where the target has such a loop over blocks that the program
keeps under separate loops of that depth, the engine merges those loops first and goes on from there;
TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlc_lab.tvm.path.ir import FuncView, Loop
from mlc_lab.tvm.path.work import Unreachable, Work


@dataclass(frozen=True)
class Merge:
    """The merged loop of the target (``name``), its depth, and the blocks whose loops of that depth
    the program keeps apart (the first of each nest, in the target's order)."""

    name: str
    depth: int
    blocks: tuple[str, ...]


def merges(cur: FuncView, tgt: FuncView) -> list[Merge]:
    """Every innermost merged loop of the target whose nests are apart in the program."""
    out = []
    merged = [lp for lp in tgt.loops if lp.name.endswith("_m") and len(lp.blocks) > 1]
    for loop in merged:
        if any(other.parent == loop.order for other in merged):
            continue  # an outer loop of a merge of deeper loops: that merge makes it too
        firsts = _nest_firsts(tgt, loop)
        if len(firsts) < 2 or any(cur.block(b) is None for b in firsts):
            continue
        here = [cur.chain(cur.block(b))[loop.depth] for b in firsts if len(cur.block(b).chain) > loop.depth]  # type: ignore[union-attr]
        apart = len(here) == len(firsts) and len({lp.order for lp in here}) == len(here)
        if apart and f"{here[0].name}_m" == loop.name:
            out.append(Merge(loop.name, loop.depth, tuple(firsts)))
    return out


def _nest_firsts(view: FuncView, loop: Loop) -> list[str]:
    """The first block of each loop nest right under ``loop`` (a block right under it counts alone)."""
    out = []
    seen: set[int] = set()
    for name in loop.blocks:
        block = view.block(name)
        if block is None or loop.order not in block.chain:
            continue  # a block nested in another block of the nest
        at = block.chain.index(loop.order)
        key = block.chain[at + 1] if at + 1 < len(block.chain) else -(block.order + 1)
        if key not in seen:
            seen.add(key)
            out.append(name)
    return out


def apply(work: Work, merge: Merge) -> None:
    """Merge the loops of depth ``merge.depth`` around the nests' first blocks."""
    loops = []
    for name in merge.blocks:
        rvs = work.loop_rvs(name)
        if len(rvs) <= merge.depth:
            raise Unreachable(f"block {name} has no loop here for the target's merged loop {merge.name}", "here")
        loops.append(rvs[merge.depth])
    first = str(work.get(loops[0]).loop_var.name)
    if f"{first}_m" != merge.name:
        raise Unreachable(
            f"the target's merged loop {merge.name} is not loop {first} of block {merge.blocks[0]}", "unread"
        )
    why = f"the target runs the nests of {', '.join(merge.blocks)} under one loop {merge.name}"
    work.apply("merge", why, loops=loops)
