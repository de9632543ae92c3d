"""GPU schedules for the corpus, written over ``tvm.s_tir.Schedule``: correct styles as parameters, and
single-mistake mutants as one changed knob (``Knobs``) of a style.

``tiled`` schedules a reduction (matmul, gemm + relu + add, batched matmul, conv2d) as the course
does: the output tiled over thread blocks and threads, a register tile per thread, the operands
staged in shared memory under the reduction's outer loop and fetched cooperatively, a local write
cache, the elementwise ops after it fused into the write-back. ``transpose`` and ``softmax`` have
schedules of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tvm import s_tir

SHARED_LIMIT = 48 * 1024  # bytes of shared memory per block a CUDA target allows by default
# A reduction tile that divides none of the corpus's reduction extents (1024, 512, 16, and 64
# at the numeric check's sizes). Without its guard the last tile reads past the reduction's end: the
# shared copies are clipped to the buffer, so the compute reads elements never copied.
GUARDLESS_TK = 20


@dataclass(frozen=True)
class Reduction:
    """Where a reduction program's loops go: ``batch`` leading spatial loops (bound to blockIdx.z),
    the spatial loops after them fused into rows but the last (the columns), the last reduction loop
    tiled (the others stay whole, above it); ``operands``: the read indices staged in shared memory; ``epilogue``: the
    elementwise blocks after the reduction, in order."""

    block: str
    batch: int
    spatial: int
    operands: tuple = (0, 1)
    epilogue: tuple = ()


@dataclass(frozen=True)
class Knobs:
    """One schedule of a reduction. The first group is a style; each mutant changes one knob."""

    ty: int = 16
    tx: int = 16
    ly: int = 4
    lx: int = 4
    tk: int = 16
    vec: int = 4
    regcopy: bool = False  # a local copy of each shared tile under the thread loops
    epilogue: str = "inline"  # "inline": fused into the write-back; "at": its own block at the thread loops
    # mutants
    compute_at: bool = True  # False: the first operand's shared copy is left at the root (its own kernel)
    copy_swap: bool = False  # the cooperative copy binds threadIdx.x to the slower axis
    copy_threads: tuple | None = None  # the copy's (threadIdx.y, threadIdx.x) when not the compute's
    write_back: str = "threads"  # "reduction": the write-back inside the reduction loop
    epilogue_kernel: bool = False  # the last elementwise op in a kernel of its own
    blocks: bool = True  # False: no loop bound to blockIdx
    guard: bool = True  # False: the reduction split by GUARDLESS_TK (no divisor) with its guard disabled


def _loops_below(sch: s_tir.Schedule, block, above: int) -> list:
    return list(sch.get_loops(block))[above:]


def _depth(sch: s_tir.Schedule, block, loop) -> int:
    """How many loops of ``block`` are ``loop`` and those above it."""
    target = sch.get(loop)
    return next(n for n, lp in enumerate(sch.get_loops(block), 1) if sch.get(lp).same_as(target))


def tiled(sch: s_tir.Schedule, r: Reduction, k: Knobs) -> None:
    blk = sch.get_sblock(r.block)
    local = sch.cache_write(blk, 0, "local")
    loops = list(sch.get_loops(blk))
    batch, rows, col, red = loops[: r.batch], loops[r.batch : r.spatial - 1], loops[r.spatial - 1], loops[r.spatial :]
    bz = (sch.fuse(*batch) if len(batch) > 1 else batch[0]) if batch else None
    row = sch.fuse(*rows) if len(rows) > 1 else rows[0]
    *red_outer, kk = red  # a conv's (rh, rw) stay whole; its rc is tiled like a matmul's k
    i0, i1, i2 = sch.split(row, [None, k.ty, k.ly])
    j0, j1, j2 = sch.split(col, [None, k.tx, k.lx])
    k0, k1 = sch.split(kk, [None, k.tk if k.guard else GUARDLESS_TK], disable_predication=not k.guard)
    if k.blocks:
        sch.reorder(i0, j0, i1, j1, *red_outer, k0, k1, i2, j2)
        if bz is not None:
            sch.bind(bz, "blockIdx.z")
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
    else:  # one thread block walks every tile in turn
        sch.reorder(i1, j1, *([bz] if bz is not None else []), i0, j0, *red_outer, k0, k1, i2, j2)
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    above_k0 = _depth(sch, blk, k0)
    if k.write_back == "reduction":
        sch.reverse_compute_at(local, k0)
    else:
        sch.reverse_compute_at(local, j1 if k.blocks else j0)
    _epilogue(sch, r, k, local, j1 if k.blocks else j0)
    for n, idx in enumerate(r.operands):
        shared = sch.cache_read(blk, idx, "shared")
        if k.regcopy:
            reg = sch.cache_read(blk, idx, "local")
            sch.compute_at(reg, k1)
        if n == 0 and not k.compute_at:
            fused = sch.fuse(*sch.get_loops(shared))
            bx, tx = sch.split(fused, [None, 256])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            continue
        sch.compute_at(shared, k0)
        fused = sch.fuse(*_loops_below(sch, shared, above_k0))
        cy, cx = k.copy_threads or (k.ty, k.tx)
        _copy(sch, fused, cy, cx, k.vec, k.copy_swap)
    sch.decompose_reduction(blk, red_outer[0] if red_outer else k0)
    sch.unroll(k1)


def _epilogue(sch: s_tir.Schedule, r: Reduction, k: Knobs, local, thread_loop) -> None:
    if not r.epilogue:
        return
    *fused, last = r.epilogue
    for name in fused:
        sch.reverse_compute_inline(sch.get_sblock(name))
    blk = sch.get_sblock(last)
    if k.epilogue_kernel:
        f = sch.fuse(*sch.get_loops(blk))
        bx, tx = sch.split(f, [None, 256])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    elif k.epilogue == "at":  # the write-back keeps its result in registers; the op reads it there
        sch.set_scope(local, 0, "local")
        sch.reverse_compute_at(blk, thread_loop)
    else:
        sch.reverse_compute_inline(blk)


def _copy(sch: s_tir.Schedule, fused, ty: int, tx: int, vec: int, swap: bool) -> None:
    """A cooperative copy: the fused copy loop split over ty x tx threads and a vector of ``vec``.
    ``swap``: the same thread counts, with threadIdx.x on the slower axis (the mutant)."""
    if swap:
        _, f1, f2, f3 = sch.split(fused, [None, tx, ty, vec])
        sch.bind(f1, "threadIdx.x")
        sch.bind(f2, "threadIdx.y")
    else:
        _, f1, f2, f3 = sch.split(fused, [None, ty, tx, vec])
        sch.bind(f1, "threadIdx.y")
        sch.bind(f2, "threadIdx.x")
    sch.vectorize(f3)


def shared_over_limit(k: Knobs, reduction_extent: int) -> Knobs | None:
    """The style with the reduction tile widened until its shared tiles pass the limit (None: no
    tile of the reduction does)."""
    rows, cols = k.ty * k.ly, k.tx * k.lx
    for tk in range(k.tk, reduction_extent + 1):
        if reduction_extent % tk == 0 and 4 * tk * (rows + cols) > SHARED_LIMIT:
            return replace(k, tk=tk)
    return None


# --- transpose -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransposeKnobs:
    tile: int = 32
    rows: int = 8  # threadIdx.y extent: each thread moves tile / rows elements
    shared: bool = True  # through a shared tile (both sides coalesced)
    vec: int = 1
    threads: int = 256  # threads per block of the direct style
    # mutants
    copy_swap: bool = False
    blocks: bool = True
    guard: bool = True
    compute_at: bool = True


def transpose(sch: s_tir.Schedule, k: TransposeKnobs) -> None:
    blk = sch.get_sblock("transpose")
    i, j = sch.get_loops(blk)
    if not k.shared:  # each thread writes its elements of B along j: reads coalesced, writes strided
        f = sch.fuse(i, j)
        if not k.blocks:
            _, tx = sch.split(f, [None, 1024])
            sch.bind(tx, "threadIdx.x")
            return
        bx, tx, v = sch.split(f, [None, k.threads, k.vec], disable_predication=not k.guard)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        if k.vec > 1:
            sch.vectorize(v)
        return
    # the write B[vj, vi] is coalesced along i: tile over (j, i) with i innermost
    j0, j1, j2 = sch.split(j, [None, k.rows, k.tile // k.rows])
    i0, i1 = sch.split(i, [None, k.tile], disable_predication=not k.guard)
    if k.blocks:
        sch.reorder(j0, i0, j1, i1, j2)
        sch.bind(j0, "blockIdx.y")
        sch.bind(i0, "blockIdx.x")
    else:
        sch.reorder(j1, i1, j0, i0, j2)
    sch.bind(j1, "threadIdx.y")
    sch.bind(i1, "threadIdx.x")
    shared = sch.cache_read(blk, 0, "shared")
    if not k.compute_at:
        f = sch.fuse(*sch.get_loops(shared))
        bx, tx = sch.split(f, [None, 256])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        return
    sch.compute_at(shared, i0)
    above = _depth(sch, blk, i0)
    f = sch.fuse(*_loops_below(sch, shared, above))
    _copy(sch, f, k.rows, k.tile, k.vec, k.copy_swap)


# --- softmax ---------------------------------------------------------------------------------------

SOFTMAX_BLOCKS = ("row_max", "exp", "row_sum", "norm")


@dataclass(frozen=True)
class SoftmaxKnobs:
    threads: int = 128  # threads per row ("row"), or rows per block ("thread_per_row")
    mode: str = "row"  # "row": one block per row, its threads reduce together; "thread_per_row"
    # mutants
    blocks: bool = True
    epilogue_kernel: bool = False  # norm in a kernel of its own
    guard: bool = True


def softmax(sch: s_tir.Schedule, k: SoftmaxKnobs) -> None:
    sch.compute_inline(sch.get_sblock("exp"))  # recomputed in row_sum and norm
    if k.epilogue_kernel:  # each of row_max, row_sum, norm in a kernel of its own
        for name in ("row_max", "row_sum", "norm"):
            _softmax_rows(sch, sch.get_sblock(name), k)
        return
    norm = sch.get_sblock("norm")
    it = _softmax_rows(sch, norm, k)
    for name in ("row_sum", "row_max"):
        b = sch.get_sblock(name)
        sch.compute_at(b, it)
        # the row's max and sum live in the block (its threads share them) or in the thread's registers
        sch.set_scope(b, 0, "shared" if k.mode == "row" else "local")
        if k.mode == "row":  # the row's threads reduce it together (TVM's cross-thread reduction)
            _, rt = sch.split(sch.get_loops(b)[-1], [None, k.threads])
            sch.bind(rt, "threadIdx.x")


def _softmax_rows(sch: s_tir.Schedule, blk, k: SoftmaxKnobs):
    """Bind one block's rows (and, for "row", its columns to the threads); the loop of one row."""
    i, j = sch.get_loops(blk)
    if k.mode == "row":
        if k.blocks:
            sch.bind(i, "blockIdx.x")
        _, ji = sch.split(j, [None, k.threads], disable_predication=not k.guard)
        sch.bind(ji, "threadIdx.x")
        return i
    if k.blocks:
        io, it = sch.split(i, [None, k.threads], disable_predication=not k.guard)
        sch.bind(io, "blockIdx.x")
    else:
        io, it = sch.split(i, [None, k.threads])
        sch.reorder(it, io)
    sch.bind(it, "threadIdx.x")
    return it if k.blocks else io
