"""``pad_einsum`` read off the target when the einsum has changed shape since (dlight's low-batch
gemv pads the batch, then factors the reduction twice): the padding of each iterator comes from the
padded buffers' shapes (``X_pad``, or ``X_pad_local`` once ``set_scope`` moved it), not from the
target block's iterators; the padded copies the target no longer has are inlined at once.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from mlc_lab.tvm.path.ir import Block, FuncView, all_accesses, const
from mlc_lab.tvm.path.work import Refused, Work


def padded_name(name: str, scope: str, has: Any) -> str | None:
    """The buffer of the program that the target's ``name`` pads: ``X`` of ``X_pad_<scope>`` (a padded
    buffer moved to ``scope`` by ``set_scope``), when the program has an ``X``; else None."""
    tail = f"_pad_{scope}"
    if scope == "global" or not name.endswith(tail):
        return None
    old = name[: -len(tail)]
    return old if has(old) is not None else None


def padding(here: Block, tgt: FuncView, einsum: Block) -> list[int | None]:
    """Per iterator of ``here`` (the einsum, not padded yet), the factor its extent is padded to a
    multiple of: read where a padded buffer of the target is indexed by the iterator alone, else from
    the target block's iterator of the same place (when its iterators are as many), else 1."""
    ivars = [iv.var for iv in here.block.iter_vars]
    found: dict[int, int | None] = {}
    for name, indices in all_accesses(here):
        buf = _padded_buffer(tgt, name)
        if buf is None or len(buf.shape) != len(indices):
            continue
        mine = here_shape(here, name, indices)
        for d, e in enumerate(indices):
            k = next((n for n, v in enumerate(ivars) if isinstance(e, tirx.Var) and e.same_as(v)), None)
            if k is not None and k not in found and mine[d] is not None:
                found[k] = factor(buf.shape[d], mine[d])
    same_count = len(einsum.block.iter_vars) == len(here.block.iter_vars)
    out: list[int | None] = []
    for k, iv in enumerate(here.block.iter_vars):
        if k in found:
            out.append(found[k])
        elif const(iv.dom.extent) is not None and found:
            out.append(const(iv.dom.extent))  # no padded buffer indexed by it: kept as it is
        elif same_count:
            out.append(factor(einsum.block.iter_vars[k].dom.extent, iv.dom.extent))
        else:
            out.append(1)
    return out


def einsum_of(view: FuncView, tgt: FuncView, same: dict[str, str], old: str) -> Block | None:
    """The target's block that ``pad_einsum`` padded for ``old`` where it no longer reads the padded
    buffer itself (its reduction factored since: the partial block reads it): the one reduction here
    that reads or writes ``old`` and that the target keeps by name; None when not exactly one."""
    found = [
        b
        for b in view.blocks
        if b.name in same and 2 in b.iter_kinds and old in b.reads() + b.writes() and tgt.block(b.name) is not None
    ]
    return tgt.block(found[0].name) if len(found) == 1 else None


def here_shape(here: Block, name: str, indices: list[Any]) -> list[Any]:
    """The extents ``here``'s iterators give the indices of its access to ``name``."""
    dom = {iv.var: iv.dom.extent for iv in here.block.iter_vars}
    return [next((x for v, x in dom.items() if isinstance(e, tirx.Var) and e.same_as(v)), None) for e in indices]


def _padded_buffer(tgt: FuncView, name: str) -> Any:
    for buf in tgt.allocs():
        got = str(buf.name)
        if got == f"{name}_pad" or (got.startswith(f"{name}_pad_") and got == f"{name}_pad_{buf.scope()}"):
            return buf
    return None


def factor(theirs: Any, mine: Any) -> int | None:
    """The padding that makes extent ``mine`` into ``theirs``: the extent itself when constant, ``p``
    of ``(n + p - 1) // p * p``, 1 when it stays as it is; None otherwise."""
    if const(theirs) is not None:
        return const(theirs)
    if bool(tvm_ffi.structural_equal(theirs, mine)):
        return 1
    if isinstance(theirs, tirx.Mul) and const(theirs.b) is not None:
        return const(theirs.b)
    return None


def inline_new_copies(work: Work, before: set[str], tgt: FuncView) -> None:
    """``compute_inline`` each padded copy ``pad_einsum`` made that the target has no block for (its
    reads of ``X_pad`` become a guarded read of ``X`` in the einsum); a copy the target keeps over
    fewer iterators has its unit iterators dropped (``transform_block_layout``, as dlight does)."""
    for b in list(work.view.blocks):
        if b.name in before:
            continue
        tb = tgt.block(b.name)
        if tb is not None:
            _drop_unit_iterators(work, b, tb)
            continue
        why = f"the target has no block {b.name}: the einsum reads the unpadded buffer under a guard instead"
        try:
            work.apply("compute_inline", why, block=work.block_rv(b.name))
        except Refused:
            continue  # an output's copy back: the target has it under another name, said at the end


def _drop_unit_iterators(work: Work, here: Block, tb: Block) -> None:
    kept = [iv.var for iv in here.block.iter_vars if const(iv.dom.extent) != 1]
    if len(tb.block.iter_vars) >= len(here.block.iter_vars) or len(kept) != len(tb.block.iter_vars):
        return
    why = f"the target's block {tb.name} iterates without its unit iterators"
    index_map = tirx.IndexMap([iv.var for iv in here.block.iter_vars], kept, None)
    work.apply("transform_block_layout", why, block=work.block_rv(here.name), index_map=index_map)
