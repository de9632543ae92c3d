"""Reading dlight's normal form of a matmul off a target: before it tiles, dlight's ``Matmul`` rule
rewrites a block ``C[..] += A[..] * B[..]`` as ``C[S, I, J] += A[S, I, K] * B[S, J, K]``: it
reindexes both operands and the result (``X_reindex`` buffers, one per access), lays each reindexed
buffer out as ``[S, I, K]``, ``[S, J, K]`` and ``[S, I, J]`` (``transform_layout``; a unit batch axis
where the program has none), maps the block's own iterators to ``(S, I, J, K)``
(``transform_block_layout``) and pads the four to the tile (``pad_einsum``, ``X_reindex_pad``).

Which iterator is S, I, J or K (and which are fused together) is TVM's own analysis of the block
(dlight's ``get_index_map``); the padding is read off the target's block. For a matmul that reduces
over the outer axis of its second operand (dlight on Adreno), only the first operand is reindexed,
padded with the block and laid out in tiles of rows (``A_reindex_pad[s, i // U, k, i % U]``, the
map read off the target's copy), after the blocks before it are inlined. The engine makes the
prelude on the start and goes on from there; TVM's ``structural_equal`` still judges the end.
"""

from __future__ import annotations

from typing import Any, Callable

from tvm import tirx
from tvm.ir.expr import Expr
from tvm.sym import Analyzer
from tvm.tirx.analysis import undefined_vars
from tvm.s_tir.dlight.gpu.matmul import get_index_map

from mlc_lab.tvm.path.ir import Block, FuncView, accesses, substitute
from mlc_lab.tvm.path.work import Refused, Unreachable, Work


def _operands(block: Block) -> list[str] | None:
    """(A, B, C) of a block that reads two buffers and writes one, as dlight's rule reads it."""
    stmt = block.block
    if len(stmt.reads) != 2 or len(stmt.writes) != 1 or 2 not in block.iter_kinds:
        return None
    return [str(stmt.reads[0].source.name), str(stmt.reads[1].source.name), str(stmt.writes[0].source.name)]


def _reindexed(view: FuncView, name: str, rank: int | None = None) -> bool:
    """Whether ``view`` holds a reindexed copy of buffer ``name`` (of ``rank`` dimensions if given)."""
    return any(
        str(buf.name).startswith(f"{name}_reindex") and (rank is None or len(buf.shape) == rank)
        for buf in view.allocs()
    )


def wanted(cur: FuncView, tgt: FuncView) -> str | None:
    """The block of the start whose operands and result the target holds reindexed as [S, I, K],
    [S, J, K] and [S, I, J] while the start does not, the block iterating as (S, I, J, K) (dlight's
    normal form of it), when TVM reads it as a matmul; None else."""
    for block in cur.blocks:
        names = _operands(block)
        if names is None or len(set(names)) != 3:
            continue
        if any(_reindexed(cur, n) for n in names) or not all(_reindexed(tgt, n, 3) for n in names):
            continue
        there = _target_block(tgt, block.name)
        if there is None or len(there.block.iter_vars) != 4 or get_index_map(block.block) is None:
            continue
        return block.name
    return None


def outer_wanted(cur: FuncView, tgt: FuncView) -> str | None:
    """The block of the start whose first operand alone the target reindexes, pads and lays out
    with another rank (dlight's rule for a matmul that reduces over the outer axis of its second
    operand, on Adreno: ``A_reindex_pad[s, i // U, k, i % U]``); None else."""
    for block in cur.blocks:
        names = _operands(block)
        if names is None or len(set(names)) != 3 or _reindexed(cur, names[0]) or _reindexed(tgt, names[1]):
            continue
        copy, source = tgt.block(f"{names[0]}_reindex_pad"), cur.buffer(names[0])
        if copy is None or source is None or _target_block(tgt, block.name) is None:
            continue
        stored = [ix for kind, ix in accesses(copy, copy.name) if kind == "write"]
        if len(stored) == 1 and len(stored[0]) != len(source.shape) == len(copy.block.iter_vars):
            return block.name
    return None


def outer_prelude(make: Callable[[], Any], func: str, name: str, tgt: FuncView) -> Callable[[], Any]:
    """A ``make`` that gives the start with block ``name``'s first operand reindexed, padded with
    the block and laid out as the target's copy of it is (``outer_wanted``)."""

    def normal() -> Any:
        work = Work(make(), func)
        _inline_before(work, name, tgt)
        a = _operands(work.view.block(name))[0]  # type: ignore[arg-type,index]
        why = f"the target reads {a} through a padded copy laid out for block {name}"
        made = work.apply("reindex", why, block=work.block_rv(name), buffer=("read", 0))
        reindexed = str(work.get(made).name_hint)
        _pad(work, name, tgt)
        why = f"the target has no block {reindexed}: the padded copy reads {a} itself"
        work.apply("compute_inline", why, block=work.block_rv(reindexed))
        copy = tgt.block(f"{a}_reindex_pad")
        assert copy is not None
        stored = next(ix for kind, ix in accesses(copy, copy.name) if kind == "write")
        params = [tirx.Var(f"i{k}", iv.var.ty) for k, iv in enumerate(copy.block.iter_vars)]
        mapping = list(zip([iv.var for iv in copy.block.iter_vars], params))
        index_map = tirx.IndexMap(params, [substitute(ix, mapping) for ix in stored], None)
        why = f"the target lays {copy.name} out as [{', '.join(str(ix) for ix in stored)}]"
        work.apply("transform_layout", why, block=work.block_rv(copy.name), buffer=("write", 0), index_map=index_map)
        _fuse_unit_batch(work, name, tgt)
        normal.ops = work.ops  # type: ignore[attr-defined]
        return work.sch

    return normal


def _inline_before(work: Work, name: str, tgt: FuncView) -> None:
    """The blocks before block ``name`` that the target no longer has, inlined into their readers
    first (a cache of what one reads then copies the buffer the target's copy does)."""
    here = work.view.block(name)
    assert here is not None
    for block in [b for b in work.view.blocks if b.order < here.order and b.scope is None]:
        if tgt.block(block.name) is not None:
            continue
        why = f"the target has no block {block.name}: its values are computed where they are used"
        try:
            work.apply("compute_inline", why, block=work.block_rv(block.name))
        except Refused:
            continue


def _fuse_unit_batch(work: Work, name: str, tgt: FuncView) -> None:
    """Fuse block ``name``'s unit batch loop into the loop after it where the target splits the
    two fused (its loops ``b_i_fused_0``, ...): split first, a padded symbolic extent would
    give another predicate."""
    chain = work.view.chain(work.view.block(name))  # type: ignore[arg-type]
    there = _target_block(tgt, name)
    if len(chain) < 2 or there is None or str(chain[0].extent) not in ("1", "T.int64(1)"):
        return
    fused = f"{chain[0].name}_{chain[1].name}_fused"
    if not any(lp.name.startswith(f"{fused}_") for lp in tgt.chain(there)):
        return
    loops = work.loop_rvs(name)[:2]
    why = f"the target splits loops {chain[0].name} and {chain[1].name} of block {name} fused ({fused})"
    work.apply("fuse", why, loops=loops)


def _target_block(tgt: FuncView, name: str) -> Block | None:
    """The target's block of ``name`` (``name_update`` once its init is decomposed)."""
    for candidate in (name, f"{name}_update"):
        tb = tgt.block(candidate)
        if tb is not None and 2 in tb.iter_kinds:
            return tb
    return None


def prelude(make: Callable[[], Any], func: str, name: str, tgt: FuncView) -> Callable[[], Any]:
    """A ``make`` that gives the start with dlight's normal form of block ``name`` made (its ops
    on the function's ``ops``); it raises Unreachable where TVM's analysis or the target disagree."""

    def normal() -> Any:
        work = Work(make(), func)
        _normalize(work, name)
        _pad(work, name, tgt)
        normal.ops = work.ops  # type: ignore[attr-defined]
        return work.sch

    return normal


def _normalize(work: Work, name: str) -> None:
    why = f"the target computes block {name} as C[S, I, J] += A[S, I, K] * B[S, J, K] through reindexed buffers"
    made = [
        work.apply("reindex", why, block=work.block_rv(name), buffer=(kind, index))
        for kind, index in (("read", 0), ("read", 1), ("write", 0))
    ]
    maps = get_index_map(work.get(work.block_rv(name)))
    if maps is None:
        raise Unreachable(f"TVM does not read block {name} as a matmul once reindexed", "unread")
    block_map, a_map, b_map, c_map = maps
    for rv, side, index_map, what in (
        (made[0], "write", a_map, "[S, I, K]"),
        (made[1], "write", b_map, "[S, J, K]"),
        (made[2], "read", c_map, "[S, I, J]"),
    ):
        buffer = work.get(rv).writes[0].source if side == "write" else work.get(rv).reads[0].source
        why = f"the target lays {buffer.name} out as {what}"
        work.apply("transform_layout", why, block=rv, buffer=(side, 0), index_map=index_map)
    why = f"the target's block {name} iterates as (S, I, J, K)"
    work.apply("transform_block_layout", why, block=work.block_rv(name), index_map=block_map)


def _pad(work: Work, name: str, tgt: FuncView) -> None:
    """``pad_einsum`` of block ``name`` to the target block's extents (none where they are the same)."""
    here = work.view.block(name)
    there = _target_block(tgt, name)
    if here is None or there is None or len(here.block.iter_vars) != len(there.block.iter_vars):
        raise Unreachable(f"the target's block {name} iterates otherwise than dlight's normal form of it", "unread")
    analyzer = Analyzer()
    padding: list[int] = []
    for mine, theirs in zip(here.block.iter_vars, there.block.iter_vars):
        factor = _factor(analyzer, mine.dom.extent, theirs.dom.extent)
        if factor is None:
            raise Unreachable(
                f"block {name} runs {theirs.dom.extent} in the target where padding {mine.dom.extent} gives no such extent",
                "unread",
            )
        padding.append(factor)
    if all(p == 1 for p in padding):
        return
    why = f"the target pads block {name}'s iterators to multiples of {padding}"
    work.apply("pad_einsum", why, block=work.block_rv(name), padding=padding)


def _factor(analyzer: Any, mine: Any, theirs: Any) -> int | None:
    """The padding that turns extent ``mine`` into ``theirs`` (1 when they are the same): the
    smallest constant ``p`` of ``theirs`` with ``ceil(mine / p) * p == theirs``; the target's
    shape variables are the start's of the same name."""
    own = {str(v.name): v for v in undefined_vars(mine)}
    theirs = substitute(theirs, [(v, own[str(v.name)]) for v in undefined_vars(theirs) if str(v.name) in own])
    if analyzer.can_prove_equal(mine, theirs):
        return 1
    for p in sorted(c for c in _constants(theirs) if c > 1):
        if analyzer.can_prove_equal(tirx.floordiv(mine + (p - 1), p) * p, theirs):
            return p
    return None


def _constants(expr: Any) -> set[int]:
    """Every integer constant in an extent's expression."""
    if isinstance(expr, tirx.IntImm):
        return {int(expr.value)}
    out: set[int] = set()
    for key in ("a", "b", "value"):
        child = getattr(expr, key, None)
        if isinstance(child, Expr):
            out |= _constants(child)
    for child in getattr(expr, "args", None) or []:
        if isinstance(child, Expr):
            out |= _constants(child)
    return out
