"""Targets whose blocks are named otherwise than TVM's primitives name them.

Block names count in TVM's structural equality. A teacher's target may call a block ``init`` where
``decompose_reduction`` makes ``Y_init``, or ``A_smem`` where ``cache_read`` makes ``A_shared``. The
blocks are matched by what they compute, the target is renamed to TVM's names, and a way to that
renamed target is "equal up to block names" (never "reached").
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import s_tir

from mlc_lab.tvm.path.ir import Block, FuncView, read


def rename(func: Any, mapping: dict[str, str]) -> Any:
    """``func`` with its blocks renamed (old name -> new name), nothing else changed."""
    sch = s_tir.Schedule(tvm_ffi_module(func), debug_mask="none")
    for old, new in mapping.items():
        rv = sch.get_sblock(old, "main")
        sref = sch.get_sref(rv)
        b = sref.stmt
        fresh = s_tir.SBlock(
            b.iter_vars, b.reads, b.writes, new, b.body, b.init, b.alloc_buffers, b.match_buffers, b.annotations
        )
        sch.state.replace(sref, fresh, {b: fresh})
    return sch.mod["main"]


def tvm_ffi_module(func: Any) -> Any:
    import tvm

    return tvm.IRModule({"main": func})


def renamed_target(start: Any, target: Any) -> tuple[Any, dict[str, str]] | None:
    """The target renamed to the names TVM's primitives give its blocks, and the renaming (target
    name -> TVM's), or None when every block already has such a name or none matches."""
    cur, tgt = read(start), read(target)
    mapping = _guess(cur, tgt)
    if not mapping:
        return None
    taken = {b.name for b in tgt.blocks} - set(mapping)
    if len(set(mapping.values())) != len(mapping) or set(mapping.values()) & taken:
        return None
    try:
        return rename(target, mapping), mapping
    except Exception:  # noqa: BLE001  (a block TVM will not rename: no guess then)
        return None


def _guess(cur: FuncView, tgt: FuncView) -> dict[str, str]:
    names = {b.name for b in cur.blocks}
    mapping: dict[str, str] = {}
    for tb in tgt.blocks:
        if tb.name in names or tb.name == "root":
            continue
        guess = _same_computation(cur, tb) or _copy_name(tb) or _decomposed_name(cur, tgt, tb)
        if guess and guess != tb.name:
            mapping[tb.name] = guess
    return mapping


def _kinds(block: Block) -> list[tuple[int, Any]]:
    return list(zip(block.iter_kinds, block.iter_extents))


def _same_computation(cur: FuncView, tb: Block) -> str | None:
    """The program's block that computes what ``tb`` computes (same iterators, same body)."""
    for cb in cur.blocks:
        if _kinds(cb) != _kinds(tb) or cb.has_init != tb.has_init:
            continue
        if bool(tvm_ffi.structural_equal(cb.block.body, tb.block.body, map_free_vars=True)):
            return cb.name
    return None


def _copy_name(tb: Block) -> str | None:
    """A copy between buffers is a cache stage: TVM names its block after the cache buffer."""
    copy = tb.copy()
    if copy is None:
        return None
    dst, src = copy
    for name in (dst, src):
        if "_" in name and name.rsplit("_", 1)[1] in ("shared", "local", "global") or ".dyn" in name:
            return name
    return None


def _decomposed_name(cur: FuncView, tgt: FuncView, tb: Block) -> str | None:
    """An initialisation or update of a reduction the program computes in one block: X_init / X_update."""
    for cb in cur.blocks:
        if not cb.has_init or set(cb.writes()) != set(tb.writes()):
            continue
        init = cb.block.init
        if not tb.has_init and bool(tvm_ffi.structural_equal(init, tb.block.body, map_free_vars=True)):
            return f"{cb.name}_init"
        if not tb.has_init and _kinds(cb) == _kinds(tb):
            if bool(tvm_ffi.structural_equal(cb.block.body, tb.block.body, map_free_vars=True)):
                return f"{cb.name}_update"
    return None
