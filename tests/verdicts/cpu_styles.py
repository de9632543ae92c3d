"""CPU schedules for the corpus over ``tvm.s_tir.Schedule``: the course's chapter-2 recipe (split the
output's inner loop and the reduction, reorder, fuse the epilogue under the output tile, parallel
outer loop, packed B, vectorized inner loop, unrolled reduction tile, decomposed init) with each
optimisation a knob that a mutant turns off."""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir


@dataclass(frozen=True)
class CpuProgram:
    block: str  # the reduction
    batch: int  # leading spatial loops (bmm's n)
    epilogue: str | None  # the elementwise block after it


@dataclass(frozen=True)
class CpuKnobs:
    jf: int = 8
    kf: int = 4
    vectorize: str = "out"  # "out": the reduction's inner j loop; "epilogue": the epilogue's inner loop
    ti: int = 0  # > 0: the output's rows split too, ti of them under the reduction tile
    # mutants
    order: str = "k_inside"  # "k_last": the reduction tile innermost, under the vector loop
    parallel: bool = True
    vector: bool = True
    unroll: bool = True
    decompose: bool = True
    pack: bool = True


def cpu(sch: s_tir.Schedule, p: CpuProgram, k: CpuKnobs) -> None:
    blk = sch.get_sblock(p.block)
    *outer, i, j, kk = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, k.jf])
    k0, k1 = sch.split(kk, [None, k.kf])
    inner_i = []
    if k.ti:  # a 2-D register block: ti rows of the output under the reduction tile
        i, i1 = sch.split(i, [None, k.ti])
        inner_i = [i1]
    if k.order == "k_inside":
        sch.reorder(i, j0, k0, k1, *inner_i, j1)
    else:
        sch.reorder(i, j0, k0, *inner_i, j1, k1)
    epi = None
    if p.epilogue:
        epi = sch.get_sblock(p.epilogue)
        sch.reverse_compute_at(epi, j0)
    if k.parallel:
        sch.parallel(sch.fuse(*outer, i) if outer else i)
    if k.pack:
        packed = sch.cache_read(blk, 1, "global")
        jf = k.jf
        if p.batch:
            sch.transform_layout(blk, ("read", 1), lambda n, r, c: (n, c // jf, r, c % jf))
        else:
            sch.transform_layout(blk, ("read", 1), lambda r, c: (c // jf, r, c % jf))
        del packed
    if k.vector:
        if k.vectorize == "epilogue" and epi is not None:
            sch.vectorize(sch.get_loops(epi)[-1])
        else:
            sch.vectorize(j1)
    if k.decompose:
        sch.decompose_reduction(blk, k0)
    if k.unroll:
        sch.unroll(k1)
