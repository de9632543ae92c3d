"""Reading ``loop_partition`` off a target: TVM wraps the pieces of a partitioned loop ``i`` of block
``B`` in a block ``B_i_common`` holding one block ``B_i<k>_partition`` per piece, each around the
piece's loop ``i<k>`` (its range the piece). The engine partitions the same loop of the start with
those pieces' extents, outer partitions first (a nested one names a block the outer one made), and
goes on from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from mlc_lab.tvm.path.ir import FuncView, read
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


def unpartitioned(start: Any, target: Any, tgt: FuncView) -> Any:
    """The target as it was before its one partition (for a way that tiles first and partitions
    last): the first piece's loops around the program's block, the partitioned loop over all the
    pieces' range; None where the target has another form (several partitions, a piece with loops
    of its own around other blocks)."""
    from tvm import s_tir

    parts = partitions(tgt)
    if len(parts) != 1:
        return None
    common, extents = parts[0]
    pieces = [b for b in tgt.blocks if b.scope == common]
    inner = [b for b in tgt.blocks if pieces and b.scope == pieces[0].name]
    block = _partitioned_block(common, {b.name for b in read(start).blocks})
    mine = read(start).block(block) if block is not None else None
    nest = pieces[0].block.body if pieces else None
    if len(inner) != 1 or mine is None or not isinstance(nest, tirx.For) or not _zero(nest.min):
        return None
    stmts, body = [], nest
    while isinstance(body, tirx.For):
        stmts.append(body)
        body = body.body
    if not isinstance(body, s_tir.SBlockRealize) or str(body.block.name_hint) != inner[0].name:
        return None
    new: Any = s_tir.SBlockRealize(list(body.iter_values), body.predicate, mine.block)
    for k, loop in enumerate(reversed(stmts)):
        extent = tirx.IntImm(_dtype(loop.extent), sum(extents)) if k == len(stmts) - 1 else loop.extent
        new = tirx.For(loop.loop_var, loop.min, extent, loop.kind, new, loop.thread_binding, loop.annotations)
    outer = tgt.block(common)
    if outer is None or outer.chain or not mine.chain:  # loops above the partition: not rebuilt here
        return None
    top = read(start).loops[mine.chain[0]].node
    replaced = _replace(start.body, top, new)  # the program's own buffers: its block is the program's
    return None if replaced is None else start.with_body(replaced)


def _zero(expr: Any) -> bool:
    return isinstance(expr, tirx.IntImm) and int(expr.value) == 0


def _dtype(expr: Any) -> str:
    return str(getattr(expr, "dtype", None) or expr.ty.dtype)


def _partitioned_block(common: str, blocks: set[str]) -> str | None:
    parts = common[: -len("_common")].split("_")
    for n in range(len(parts) - 1, 0, -1):
        if "_".join(parts[:n]) in blocks:
            return "_".join(parts[:n])
    return None


def _replace(stmt: Any, old: Any, new: Any) -> Any:
    """``stmt`` with the statement ``old`` replaced by ``new`` (through loops, sequences and the root
    block); None when it is not found."""
    from tvm import s_tir

    if stmt.same_as(old):
        return new
    if isinstance(stmt, s_tir.SBlockRealize):
        b = stmt.block
        body = _replace(b.body, old, new)
        if body is None:
            return None
        block = s_tir.SBlock(
            list(b.iter_vars), list(b.reads), list(b.writes), str(b.name_hint), body, b.init,
            list(b.alloc_buffers), list(b.match_buffers), b.annotations,
        )  # fmt: skip
        return s_tir.SBlockRealize(list(stmt.iter_values), stmt.predicate, block)
    if isinstance(stmt, tirx.For):
        body = _replace(stmt.body, old, new)
        if body is None:
            return None
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations)
    if isinstance(stmt, tirx.SeqStmt):
        seq = list(stmt.seq)
        for k, s in enumerate(seq):
            got = _replace(s, old, new)
            if got is not None:
                seq[k] = got
                return tirx.SeqStmt(seq)
    return None
