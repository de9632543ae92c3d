"""A target block whose iterators are the program's in another order (``transform_block_layout``)
rather than buffers laid out otherwise: every access of the block reads the same once the
program's iterators are renamed to the target's, and the target's iterator extents come in another
order (where they come in the same order, a buffer layout is the plainer reading and is kept).
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.sym import Analyzer

from mlc_lab.tvm.path.ir import Block, accesses, all_accesses, const, read_as, substitute


def iterators_permuted(cb: Block, tb: Block) -> bool:
    if len(cb.block.iter_vars) != len(tb.block.iter_vars):
        return False
    try:
        reads = read_as(cb, tb)
    except LookupError:
        return False
    tvars = [iv.var for iv in tb.block.iter_vars]
    if not all(isinstance(r, tirx.Var) and any(r.same_as(v) for v in tvars) for r in reads):
        return False
    if len({id(_which(r, tvars)) for r in reads}) != len(reads):
        return False
    extents = [const(iv.dom.extent) for iv in cb.block.iter_vars]
    theirs = [const(iv.dom.extent) for iv in tb.block.iter_vars]
    if None in extents or None in theirs or extents == theirs:
        return False
    mapping = [(iv.var, r) for iv, r in zip(cb.block.iter_vars, reads)]
    mine = [(name, [substitute(i, mapping) for i in ix]) for name, ix in all_accesses(cb)]
    there = all_accesses(tb)
    if [n for n, _ in mine] != [n for n, _ in there]:
        return False
    return bool(tvm_ffi.structural_equal([ix for _, ix in mine], [ix for _, ix in there]))


def _which(r: Any, tvars: list[Any]) -> Any:
    return next(v for v in tvars if r.same_as(v))


def reindexed_read(cb: Block, tb: Block | None, source: str, copy: str, made: Block | None = None) -> Any:
    """The index map of ``reindex_cache_read`` / ``_write`` (from the block's iterators to the copy's
    indices) where the target's block indexes its copy otherwise than the program's reads or writes
    ``source`` (a plain ``cache_read`` keeps the source's indices), or where the copy block ``made``
    iterates over the block's own iterators, as only the reindexing copies do; None when the plain
    copy does."""
    if tb is None or len(cb.block.iter_vars) != len(tb.block.iter_vars):
        return None
    mine, theirs = _one_index(accesses(cb, source)), _one_index(accesses(tb, copy))
    if mine is None or theirs is None:
        return None
    mapping = [(t.var, c.var) for t, c in zip(tb.block.iter_vars, cb.block.iter_vars)]
    indices = [substitute(i, mapping) for i in theirs]
    if _same_indices(list(mine), indices) and not _iterates_as(made, tb):
        return None
    return tirx.IndexMap([iv.var for iv in cb.block.iter_vars], indices, None)


def _same_indices(mine: list[Any], theirs: list[Any]) -> bool:
    """Whether two index lists are the same expressions, up to the order of a sum's terms (an
    rfactor's fused reduction reads ``k0 * 128 + f + k2 * 2`` where the target prints ``k0 * 128 +
    k2 * 2 + f``): a plain ``cache_read`` then makes the copy the target has."""
    if bool(tvm_ffi.structural_equal(mine, theirs)):
        return True
    analyzer = Analyzer()
    return len(mine) == len(theirs) and all(bool(analyzer.can_prove_equal(a, b)) for a, b in zip(mine, theirs))


def _one_index(found: list[tuple[str, list[Any]]]) -> list[Any] | None:
    """The indices of every access, where they are all the same (a reduction reads what it writes)."""
    if not found or any(not tvm_ffi.structural_equal(list(ix), list(found[0][1])) for _, ix in found[1:]):
        return None
    return list(found[0][1])


def _iterates_as(made: Block | None, tb: Block) -> bool:
    """Whether the copy block's iterators carry names of the target block's own (``cache_read`` names
    its copy's ``v0``, ``v1``, ...; ``reindex_cache_read`` keeps the reader's)."""
    if made is None or not made.block.iter_vars:
        return False
    mine = [str(iv.var.name) for iv in made.block.iter_vars]
    if mine == [f"v{n}" for n in range(len(mine))]:
        return False  # cache_read's own names, whatever the block's iterators are called
    names = {str(iv.var.name) for iv in tb.block.iter_vars}
    return all(name in names for name in mine)
