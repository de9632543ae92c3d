"""Where a program still differs from the target, in one sentence: the first block (in the target's
order) whose computation, loops, bindings or annotations are not the target's, and how.

A block that computes something else (its statement, its initial value) is a difference no schedule
primitive makes; anything else is how far the way got.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from mlc_lab.tvm.path.ir import Block, FuncView, read


def _same(a: Any, b: Any) -> bool:
    return bool(tvm_ffi.structural_equal(a, b, map_free_vars=True))


def _text(node: Any, limit: int = 120) -> str:
    text = " ".join(str(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _stmt(block: Block) -> str:
    body = block.block.body
    if hasattr(body, "value") and hasattr(body, "buffer"):
        indices = ", ".join(str(i) for i in body.indices)
        return _text(f"{body.buffer.name}[{indices}] = {body.value}")
    return _text(body)


def difference(ours: Any, target: Any) -> tuple[str, str]:
    """(kind, sentence) of the first difference: kind "computes" when a block computes something
    else, "partial" otherwise; ("", "") when none is found (then TVM sees it outside the blocks)."""
    here, there = read(ours), read(target)
    names = {b.name for b in here.blocks}
    for tb in there.blocks:
        if tb.name not in names:
            return "partial", f"the target has a block {tb.name} that the program here does not"
        found = block_difference(here, here.block(tb.name), there, tb)  # type: ignore[arg-type]
        if found:
            return found
    gone = [b.name for b in here.blocks if there.block(b.name) is None]
    if gone:
        return "partial", f"block {gone[0]} is here and not in the target"
    if len(here.allocs()) != len(there.allocs()):
        return "partial", "the buffers allocated differ from the target's"
    return "", ""


def block_difference(here: FuncView, hb: Block, there: FuncView, tb: Block) -> tuple[str, str] | None:
    if not _same(hb.block.body, tb.block.body) and _is_leaf(tb, there):
        if skeleton(hb.block.body) == skeleton(tb.block.body):  # what primitives make: a layout, a type
            return "unread", (
                f"block {tb.name} computes the same values with its buffers indexed or typed otherwise in the "
                f"target ({_stmt(tb)}), as transform_layout, reindex or set_dtype make"
            )
        return "computes", f"block {tb.name} computes {_stmt(tb)} in the target but {_stmt(hb)} here"
    if (hb.block.init is None) != (tb.block.init is None) or (
        tb.block.init is not None and not _same(hb.block.init, tb.block.init)
    ):
        return "computes", f"block {tb.name} starts from another value in the target"
    hchain, tchain = here.chain(hb), there.chain(tb)
    extents = [lp.extent for lp in hchain], [lp.extent for lp in tchain]
    if [str(e) for e in extents[0]] != [str(e) for e in extents[1]]:
        return "partial", (
            f"the loops around block {tb.name} run {_extents(extents[1])} in the target, {_extents(extents[0])} here"
        )
    kinds = [(lp.kind, lp.thread) for lp in hchain], [(lp.kind, lp.thread) for lp in tchain]
    if kinds[0] != kinds[1]:
        n = next(i for i in range(len(tchain)) if kinds[0][i] != kinds[1][i])
        return (
            "partial",
            f"loop {tchain[n].name} around block {tb.name} is {_kind(kinds[1][n])} in the target, {_kind(kinds[0][n])} here",
        )
    mine = [[lp.var for lp in hchain], hb.values, hb.realize.predicate]
    theirs = [[lp.var for lp in tchain], tb.values, tb.realize.predicate]
    if not _same(mine, theirs):
        return (
            "partial",
            f"block {tb.name} reads its loops otherwise in the target ({_text(', '.join(map(str, tb.values)), 90)})",
        )
    if hb.annotations != tb.annotations:
        return "partial", f"block {tb.name} carries other annotations in the target ({_text(tb.annotations, 80)})"
    return None


def _is_leaf(block: Block, view: FuncView) -> bool:
    """A block with no block inside (an outer block's difference is said at the blocks it holds)."""
    if any(b.scope == block.name for b in view.blocks):
        return False
    return "SBlockRealize" not in type(block.block.body).__name__ and not hasattr(block.block.body, "seq")


def skeleton(node: Any) -> Any:
    """What a block's statement computes, with the indices of its buffers and its casts left out:
    equal for a statement a layout or type change makes of another (transform_layout, reindex,
    set_dtype), unequal for another operation, buffer or constant."""
    if isinstance(node, tirx.Cast):
        return skeleton(node.value)
    if isinstance(node, tirx.BufferStore):
        return ("store", str(node.buffer.name), skeleton(node.value))
    if isinstance(node, tvm.ir.TensorLoad):
        return ("load", str(node.source.name))
    if isinstance(node, (tirx.IntImm, tirx.FloatImm)):
        return ("const", float(node.value))
    if isinstance(node, tvm.ir.Call):
        return ("call", str(node.op), tuple(skeleton(a) for a in node.args))
    parts = [getattr(node, f, None) for f in ("a", "b", "value", "condition", "true_value", "false_value")]
    if any(p is not None and hasattr(p, "same_as") for p in parts):
        return (type(node).__name__, tuple(skeleton(p) for p in parts if p is not None and hasattr(p, "same_as")))
    return (type(node).__name__, " ".join(str(node).split()))


def _extents(values: list[Any]) -> str:
    return " x ".join(str(v) for v in values) or "no loops"


def _kind(kind: tuple[str, str | None]) -> str:
    return f"bound to {kind[1]}" if kind[0] == "thread_binding" else kind[0]
