"""Reading ``read_at`` / ``write_at`` off a target: each makes a block named ``<buffer>_<scope>``,
annotated ``auto_copy``, right under one loop of the block it serves, whose own body copies the tile
that loop's iterations touch (its copy loops live inside the block, not around it). ``read_at``
copies a buffer the block reads into a new buffer of the scope; ``write_at`` has the block write a
new buffer and copies it back. The engine makes those copies first, under the loop of the same
name, and goes on from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlc_lab.tvm.path.ir import FuncView
from mlc_lab.tvm.path.work import Unreachable, Work


@dataclass(frozen=True)
class CopyAt:
    """One ``read_at`` (``reads`` True) or ``write_at``: the block it serves, the loop it sits
    under, the buffer of the program it copies (``buffer``) and the new buffer's scope."""

    reads: bool
    block: str
    loop: str
    buffer: str
    scope: str


def copies(cur: FuncView, tgt: FuncView) -> list[CopyAt]:
    """The target's ``auto_copy`` blocks the program does not have yet, in the target's order."""
    have = {b.name for b in cur.blocks}
    out = []
    for copy in tgt.blocks:
        if not copy.annotations.get("auto_copy") or copy.name in have or not copy.chain:
            continue
        moved = copy.stage_copy()
        if moved is None:
            continue
        dst, src = moved
        loop = tgt.loops[copy.chain[-1]].name
        new_dst, new_src = cur.buffer(dst) is None, cur.buffer(src) is None
        if new_dst and not new_src:  # read_at: the block that reads the copy read src before
            users = [b for b in tgt.blocks if b.name != copy.name and dst in b.reads()]
            if len(users) == 1:
                out.append(CopyAt(True, users[0].name, loop, src, _scope(tgt, dst)))
        elif new_src and not new_dst:  # write_at: the block that writes the copy wrote dst before
            users = [b for b in tgt.blocks if b.name != copy.name and src in b.writes()]
            if len(users) == 1:
                out.append(CopyAt(False, users[0].name, loop, dst, _scope(tgt, src)))
    return out


def _scope(view: FuncView, buffer: str) -> str:
    return str(view.buffer(buffer).scope())


def apply(work: Work, at: CopyAt) -> None:
    """Make the copy under the block's loop of the target's name."""
    block = work.view.block(at.block)
    regions = None if block is None else (block.reads() if at.reads else block.writes())
    if block is None or regions is None or at.buffer not in regions:
        raise Unreachable(
            f"the target copies {at.buffer} for a block {at.block} the engine does not find here", "unread"
        )
    for rv in work.loop_rvs(at.block):
        if str(work.get(rv).loop_var.name) == at.loop:
            index = regions.index(at.buffer)
            if at.reads:
                primitive, index_key = "read_at", "read_buffer_index"
                why = f"the target copies the tile of {at.buffer} that {at.block} reads under loop {at.loop} to {at.scope} memory"
            else:
                primitive, index_key = "write_at", "write_buffer_index"
                why = f"the target has {at.block} write its tile under loop {at.loop} to {at.scope} memory, then copies it to {at.buffer}"
            where = {"loop": rv, "block": work.block_rv(at.block), index_key: index, "storage_scope": at.scope}
            work.apply(primitive, why, **where)
            return
    raise Unreachable(
        f"the target copies {at.buffer} under a loop {at.loop} that {at.block} does not have here", "here"
    )
