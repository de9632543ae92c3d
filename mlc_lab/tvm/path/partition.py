"""Reading ``loop_partition`` off a target: TVM wraps the pieces of a partitioned loop ``i`` of block
``B`` in a block ``B_i_common`` holding one block ``B_i<k>_partition`` per piece, each around the
piece's loop ``i<k>`` (its range the piece). The engine partitions the same loop of the start with
those pieces' extents, outer partitions first (a nested one names a block the outer one made), and
goes on from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from mlc_lab.tvm.path.ir import FuncView
from mlc_lab.tvm.path.work import Unreachable, Work


def partitions(tgt: FuncView) -> list[tuple[str, list[int]]]:
    """(common block, the extents of its pieces) for every partition of the target, outer first."""
    out = []
    for common in tgt.blocks:
        if not common.name.endswith("_common"):
            continue
        pieces = [b for b in tgt.blocks if b.scope == common.name and b.name.endswith("_partition")]
        extents = [_first_loop_extent(p.block.body) for p in pieces]
        if pieces and all(e is not None for e in extents):
            out.append((common.name, [int(e) for e in extents if e is not None]))
    return out


def _first_loop_extent(stmt: Any) -> int | None:
    while stmt is not None:
        if isinstance(stmt, tirx.For):
            return int(stmt.extent) if isinstance(stmt.extent, tirx.IntImm) else None
        if isinstance(stmt, tirx.SeqStmt):
            stmt = stmt.seq[0] if len(stmt.seq) else None
        else:
            stmt = getattr(stmt, "body", None)
    return None


def apply(work: Work, common: str, extents: list[int]) -> None:
    """Partition the loop that ``common`` names (``<block>_<loop>_common``) into ``extents`` (the
    last one is the rest, which TVM infers)."""
    stem = common[: -len("_common")]
    blocks = {b.name for b in work.view.blocks}
    parts = stem.split("_")
    for n in range(len(parts) - 1, 0, -1):
        block, loop = "_".join(parts[:n]), "_".join(parts[n:])
        if block not in blocks:
            continue
        for rv in work.loop_rvs(block):
            if str(work.get(rv).loop_var.name) == loop:
                why = f"the target runs loop {loop} of block {block} in pieces of {' + '.join(map(str, extents))}"
                work.apply("loop_partition", why, loop=rv, factors=list(extents[:-1]), preserve_unit_iters=True)
                return
    raise Unreachable(f"the target's block {common} partitions a loop the engine does not find here", "unread")
