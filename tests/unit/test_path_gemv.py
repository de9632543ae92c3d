"""The way to dlight's GPU gemv (issue 33): the reduction factored twice, the weight copied into
local memory for the first partial sums after both rfactors (the copy read through the partial
block's fused reduction index), and the copy's last loops fused, then split by the vector width.
TVM is the oracle: its replay of the ``apply_trace`` gives the target, and so do the steps applied
one by one through ``Session.apply``.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir

from mlc_lab import Session
from tests.unit.test_path_lowbatch import assert_way_here

GEMV = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(x: T.Buffer((4, 128), "float16"), w: T.Buffer((4, 8, 128), "float16"), y: T.Buffer((4, 8), "float16")):
    for i, j, k in T.grid(4, 8, 128):
        with T.sblock("gemv"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                y[vi, vj] = T.float16(0.0)
            y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vi, vj, vk]
"""


def _dlight_gemv(vec: int, threads: int):
    """dlight's gemv rule in small: partial sums over a split of the reduction (pieces 1 and 3 fused),
    summed in parts again, the weight copied per thread after both rfactors, the copy's last two
    loops fused and split by the vector width, the sums moved under the block's loop, local memory."""
    sch = s_tir.Schedule(tvm.script.from_source(GEMV), debug_mask="all")
    block = sch.get_sblock("gemv")
    i, j, k = sch.get_loops(block)
    sch.fuse(i, j)
    k0, k1, k2, k3 = sch.split(k, [None, threads, 1, vec])
    sch.reorder(k0, k2, k1, k3)
    rf = sch.rfactor(sch.fuse(k1, k3), 0)
    outer, _ = sch.split(sch.get_loops(block)[-1], [threads, None])
    rf2 = sch.rfactor(outer, 0)
    s, r0, r2, f = sch.get_loops(rf)
    sch.bind(s, "blockIdx.x")
    f0, f1 = sch.split(f, [threads, None])
    sch.reorder(f0, r0, r2, f1)
    sch.bind(f0, "threadIdx.x")
    sch.vectorize(f1)
    copy = sch.cache_read(rf, 1, "local")
    sch.compute_at(copy, r0, preserve_unit_loops=True)
    _, lanes = sch.split(sch.fuse(*sch.get_loops(copy)[-2:]), [None, vec])
    sch.vectorize(lanes)
    sch.reverse_compute_at(rf2, s, preserve_unit_loops=True)
    sch.reverse_compute_at(block, s, preserve_unit_loops=True)
    sch.set_scope(rf, 0, "local")
    sch.set_scope(rf2, 0, "local")
    return sch.mod


@pytest.mark.parametrize(("vec", "threads"), [(2, 32)])
def test_dlight_gemv_weight_copy_fused_then_split_after_two_rfactors_is_reached(vec, threads):
    target = _dlight_gemv(vec, threads)
    session = Session(GEMV)
    answer = session.path_to(target)
    assert_way_here(session, GEMV, target, answer)
    kinds = [s.primitive for s in answer.steps]
    assert kinds.count("rfactor") == 2
    assert kinds.index("cache_read") > max(i for i, k in enumerate(kinds) if k == "rfactor")
    at = kinds.index("compute_at")
    assert kinds[at + 1 : at + 3] == ["fuse", "split"]  # the copy's loops fused first, as the target was made


COPY = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
"""


@pytest.mark.parametrize("threads", [4])
def test_a_split_whose_last_factor_is_one_moved_outside_is_reached(threads):
    """dlight's gemv on its last block: ``split(j, [None, 4, 1])``, the first two fused, the unit piece
    moved outermost: it binds j as ``fused + unit``, the unit piece of the scale of the fused one."""
    sch = s_tir.Schedule(tvm.script.from_source(COPY), debug_mask="all")
    i, j = sch.get_loops(sch.get_sblock("B"))
    j0, j1, j2 = sch.split(j, [None, threads, 1])
    fused = sch.fuse(j0, j1)
    sch.reorder(j2, fused, i)
    sch.bind(fused, "threadIdx.x")
    session = Session(COPY)
    answer = session.path_to(sch.mod)
    assert_way_here(session, COPY, sch.mod, answer)
