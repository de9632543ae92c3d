"""Reading ``cache_inplace`` off a target: a block that reads and writes one buffer in place works
on a copy of it in another scope instead, copied in right before it and back right after it (two
blocks that TVM names alike, ``<buffer>_<scope>``). The engine makes that cache first and goes on
from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlc_lab.tvm.path.ir import FuncView
from mlc_lab.tvm.path.work import Unreachable, Work


@dataclass(frozen=True)
class Inplace:
    block: str  # the block that works in place
    buffer: str  # the program's buffer it reads and writes
    scope: str  # the copy's scope in the target


def caches(cur: FuncView, tgt: FuncView) -> list[Inplace]:
    """Every in-place cache of the target that the program does not have yet."""
    have = {str(b.name) for b in cur.allocs()}
    out = []
    for buf in tgt.allocs():
        copy = str(buf.name)
        if copy in have:
            continue
        moves = [b.stage_copy() for b in tgt.blocks]
        users = [b for b in tgt.blocks if copy in b.reads() and copy in b.writes() and b.stage_copy() is None]
        if len(users) != 1:
            continue
        here = cur.block(users[0].name)
        sources = {src for m in moves if m is not None and m[0] == copy for src in [m[1]]}
        for source in sorted(sources):
            back = (source, copy) in moves
            if back and here is not None and source in here.reads() and source in here.writes():
                out.append(Inplace(here.name, source, str(buf.scope())))
    return out


def apply(work: Work, cache: Inplace) -> None:
    block = work.view.block(cache.block)
    if block is None or cache.buffer not in block.reads():
        raise Unreachable(
            f"the target caches {cache.buffer} in place for a block {cache.block} not found here", "unread"
        )
    why = (
        f"the target has {cache.block} work on a {cache.scope} copy of {cache.buffer}, "
        "copied in before it and back after it"
    )
    work.apply(
        "cache_inplace",
        why,
        block=work.block_rv(cache.block),
        read_buffer_index=block.reads().index(cache.buffer),
        storage_scope=cache.scope,
    )
