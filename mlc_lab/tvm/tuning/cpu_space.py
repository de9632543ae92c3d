"""A search space for matrix products on CPUs with wide vectors, added to meta_schedule's own.

meta_schedule's default CPU space (multi-level tiling "SSRSRS", then parallel / vectorize /
unroll annotations) reads B straight from its row-major layout: the register tile's inner loop
loads B[k, j:j+16] from a new row, 2 KB apart for a 512-wide matrix, so L1 keeps only a few
dozen k rows of a panel (the rows fall into the same cache sets). Measured on a 2-core
Skylake-AVX512 VM, its best of 64 trials reaches about 0.7x numpy's speed on the 512^3 fp32
matmul. The classic CPU GEMM structure (BLIS / OpenBLAS) is not in that space:

    for j0 in parallel(N / NR):              # one column panel of B and C per task
        Bc[K, NR] = B[:, j0*NR : j0*NR+NR]   # pack the panel: contiguous NR-wide rows
        for i0 in range(M / MR):
            C_local[MR, NR] = 0              # the register tile: MR x NR/lanes vector registers
            for k0 in range(K / UK):
                for k1 in unroll(UK):        # UK steps of k unrolled
                    for i1 in unroll(MR):
                        for j1 in unroll(NR / lanes):
                            for jv in vectorized(lanes):   # one vector register
                                C_local[i1, j1*lanes + jv] += A[i, k] * Bc[k, j]
            C[i0*MR : ..., j0*NR : ...] = C_local

The packed panel (K x NR floats) stays in L2 while every row block of A streams past it, and
each k step reads NR contiguous floats. Hand-written, this reaches numpy's speed on that machine
(1.0-1.16x, single-thread CPU time). `PackedPanelSketch` is that structure with MR, NR / lanes
and UK sampled (`sample_perfect_tile`, so meta_schedule's tile-size mutator explores them), for
one block of the form C[..., i, j] += A[..., i, k] * B[..., k, j]. `auto_space` adds it to
meta_schedule's default space when a function has such a block, so the search still sees every
default candidate and the cost model chooses between the two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.s_tir import meta_schedule as ms

# The register tile holds MR x NR/lanes accumulators: at most 8 x 4 = 32 vector registers (AVX-512
# has 32; 16 x 2 tiles spill and measured 0.8x the 8 x 4 ones).
MAX_MR = 8  # rows of the register tile
MAX_NR_VECTORS = 4  # vectors across the register tile
MAX_K_UNROLL = 4  # 8 was no faster on 512^3 (single-thread CPU time) and is twice the code to compile
SPATIAL, REDUCE = 0, 2  # tirx.IterVar.DataPar, .CommReduce


@dataclass(frozen=True)
class MatmulBlock:
    """A block C[b..., i, j] += A[b..., i, k] * B[b..., k, j] (b: batch axes, shared)."""

    name: str
    batch: int  # leading spatial axes
    lanes: int  # vector lanes for C's dtype on the target
    a_index: int  # position of A and B among the block's reads
    b_index: int


def vector_bits(target: Any) -> int:
    """Width of one vector register of an LLVM CPU target, from its features (`mcpu`); LLVM's own
    `llvm_get_vector_width` answers for the host whatever the target says."""
    has = tvm.target.codegen.target_has_features
    try:
        if has("avx512f", target):
            return 512
        if has("avx", target) or has("sve", target):
            return 256
    except Exception:  # noqa: BLE001 - an LLVM that cannot answer: the SSE / NEON width
        pass
    return 128


def vector_lanes(target: Any, dtype: str) -> int:
    """Lanes of one vector register for `dtype` (16 fp32 on AVX-512, 8 on AVX2, 4 on SSE)."""
    return max(1, vector_bits(target) // tvm.runtime.DataType(dtype).bits)


def _var_of(expr: Any) -> Any:
    return expr if isinstance(expr, tirx.Var) else None


def _same_vars(xs: list, ys: list) -> bool:
    return len(xs) == len(ys) and all(x is not None and x.same_as(y) for x, y in zip(xs, ys))


def _blocks(stmt: Any) -> list:
    """Every block under `stmt`, outermost first."""
    out: list = []
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, SBlockRealize):
            node = node.block
        if isinstance(node, SBlock):
            out.append(node)
            todo.append(node.body)
            if node.init is not None:
                todo.append(node.init)
        elif isinstance(node, tirx.SeqStmt):
            todo.extend(reversed(list(node.seq)))
        elif isinstance(node, (tirx.For, tirx.LetStmt, tirx.AttrStmt)):
            todo.append(node.body)
        elif isinstance(node, tirx.IfThenElse):
            todo.append(node.then_case)
            if node.else_case is not None:
                todo.append(node.else_case)
    return out


def find_matmul_block(func: Any, target: Any) -> MatmulBlock | None:
    """The one block of `func` that is a (batched) matrix product with B indexed [k, j], or None.

    Only the plain form is recognised: every index is an iteration variable of the block, the
    reduction axis is the block's last, the output is indexed by the spatial axes in order. A
    function with more than one reduction block gets None (the default space handles it)."""
    found = [b for b in _blocks(func.body) if any(int(iv.iter_type) == REDUCE for iv in b.iter_vars)]
    if len(found) != 1:
        return None
    block = found[0]
    ivs = list(block.iter_vars)
    kinds = [int(iv.iter_type) for iv in ivs]
    if len(ivs) < 3 or kinds[-1] != REDUCE or any(k != SPATIAL for k in kinds[:-1]):
        return None
    if block.init is None or len(block.writes) != 1 or len(block.reads) < 2:
        return None
    spatial = [iv.var for iv in ivs[:-1]]
    k = ivs[-1].var
    out = block.writes[0]
    if not _same_vars([_var_of(r.min) for r in out.region], spatial) or any(int(r.extent) != 1 for r in out.region):
        return None
    batch = spatial[:-2]
    i, j = spatial[-2], spatial[-1]
    a_index = b_index = None
    for n, read in enumerate(block.reads):
        if read.source.same_as(out.source):
            continue
        idx = [_var_of(r.min) for r in read.region]
        if any(int(r.extent) != 1 for r in read.region) or None in idx:
            return None
        if _same_vars(idx, [*batch, i, k]) and a_index is None:
            a_index = n
        elif _same_vars(idx, [*batch, k, j]) and b_index is None:
            b_index = n
        else:
            return None
    if a_index is None or b_index is None:
        return None
    dtype = str(out.source.dtype)
    if not dtype.startswith("float"):
        return None
    lanes = vector_lanes(target, dtype)
    j_extent = int(ivs[-2].dom.extent)
    while lanes > 1 and j_extent % lanes:
        lanes //= 2
    if lanes < 4:
        return None  # no useful vector across j
    return MatmulBlock(str(block.name_hint), len(batch), lanes, a_index, b_index)


class PackedPanelSketch:
    """meta_schedule space function (`ScheduleFn`): the packed-panel GEMM structure above for one
    matrix-product block, MR / NR / UK sampled. Elementwise consumers of C (a ReLU, a bias) are
    computed inside the row block, while the tile is still in cache."""

    def __init__(self, block: MatmulBlock, func_name: str = "main") -> None:
        self.block = block
        self.func_name = func_name

    def __call__(self, sch: Any) -> Any:
        info = self.block
        C = sch.get_sblock(info.name, self.func_name)
        loops = sch.get_loops(C)
        batch, (i, j, k) = loops[: info.batch], loops[info.batch :]
        jo, jv = sch.split(j, [None, info.lanes])
        j0, j1 = sch.split(jo, sch.sample_perfect_tile(jo, n=2, max_innermost_factor=MAX_NR_VECTORS))
        i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=MAX_MR))
        k0, k1 = sch.split(k, sch.sample_perfect_tile(k, n=2, max_innermost_factor=MAX_K_UNROLL))
        sch.reorder(*batch, j0, i0, k0, k1, i1, j1, jv)
        c_local = sch.cache_write(C, 0, "local")
        sch.reverse_compute_at(c_local, i0, preserve_unit_loops=True)
        b_panel = sch.cache_read(C, info.b_index, "global")
        sch.compute_at(b_panel, j0, preserve_unit_loops=True)
        outer = sch.fuse(*batch, j0) if batch else j0
        sch.parallel(outer)
        sch.unroll(k1)
        sch.unroll(i1)
        sch.unroll(j1)
        sch.vectorize(jv)
        sch.decompose_reduction(C, k0)
        sch.vectorize(sch.get_loops(c_local)[-1])
        sch.vectorize(sch.get_loops(b_panel)[-1])
        self._fuse_consumers(sch, c_local, i0)
        return sch

    @staticmethod
    def _fuse_consumers(sch: Any, producer: Any, loop: Any) -> None:
        for consumer in sch.get_consumers(producer):
            try:
                sch.reverse_compute_at(consumer, loop, preserve_unit_loops=True)
                sch.vectorize(sch.get_loops(consumer)[-1])
            except tvm.error.TVMError:
                continue  # not elementwise over the tile: it stays a separate loop nest


def packed_panel_space(func: Any, target: Any, func_name: str = "main") -> Any | None:
    """`PackedPanelSketch` as a meta_schedule space for `func`, or None when the target is not a
    CPU or `func` holds no matrix product."""
    if target.kind.name != "llvm":
        return None
    block = find_matmul_block(func, target)
    if block is None:
        return None
    return ms.space_generator.ScheduleFn(PackedPanelSketch(block, func_name))


def auto_space(func: Any, target: Any, func_name: str = "main") -> Any:
    """meta_schedule's default space, plus `PackedPanelSketch` when `func` holds a matrix product
    and the target is a CPU (see the module's docstring)."""
    default = ms.space_generator.PostOrderApply()
    sketch = packed_panel_space(func, target, func_name)
    if sketch is None:
        return default
    return ms.space_generator.SpaceGeneratorUnion([default, sketch])
