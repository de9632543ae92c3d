"""The way to meta_schedule's CUDA sketches whose outer reduction loops are fused after the shared
copies move in (issue 33, ``mlc_lab/tvm/path/late.py``): TVM's ``fuse`` writes each piece into the
copies' bindings as it substitutes it, so the engine leaves the pieces apart, moves the copies under
the innermost one and fuses then. TVM is the oracle: its own replay of the ``apply_trace`` gives the
target, and the way is no longer than the trace that made the target.
"""

from __future__ import annotations

import pytest
import tvm

from mlc_lab import Session
from mlc_lab.tvm.path import late
from mlc_lab.tvm.path.ir import read
from tests.conformance import path_pairs
from tests.unit.test_path import assert_way, reach_corpus_entry


@pytest.mark.parametrize(
    "entry_id",
    [
        # a transposed conv: the padded copy's extent depends on the fused loop (fused // 1024 % 2 * 3 + 12)
        pytest.param("T2D/cuda/sketch1/seed1", marks=pytest.mark.full),
        # a padded conv3d: the fused loop is one piece of 7 and unit pieces; the copy reads it as fused % 7
        "C3D/cuda/sketch1",
        # a unit loop fused away beside its neighbour's piece: no reorder the trace does not have
        pytest.param("T2D/cuda/sketch0/seed1", marks=pytest.mark.full),
        # winograd: data_pack's threadIdx loop is a fuse-then-split that input_tile (set_scope local) moves into
        pytest.param(
            "tvm-tests/meta_schedule/test_meta_schedule_trace_apply.py::test_winograd_gpu/370", marks=pytest.mark.full
        ),
    ],
)
def test_cuda_sketches_with_copies_under_loops_fused_later_are_reached_no_longer_than_their_trace(entry_id):
    entry, target, answer = reach_corpus_entry(entry_id)
    func = entry.get("func") or "main"
    assert len(answer.steps) <= len(path_pairs.transforming(entry["json"])), answer.trace
    if entry_id == "C3D/cuda/sketch1":  # the copies read the pipeline's loop as ``fused % 7``, not the block loop
        view = read(target[func])
        by_name = {lp.name: lp.order for lp in view.loops}
        assert late.wraps(view, by_name["rd_0_rh_0_rw_0_rc_0_fused"])
        assert not late.wraps(view, by_name["n_0_d_0_h_0_w_0_co_0_fused"])
    if entry_id != "T2D/cuda/sketch0/seed1":
        fuses = [n for n, st in enumerate(answer.steps) if st.primitive == "fuse"]
        placed = [n for n, st in enumerate(answer.steps) if st.primitive == "compute_at"]
        assert fuses[-1] > placed[-1], "the outer reduction loops are fused after the copies move in"


def test_places_below_a_fuse_move_up_and_the_pieces_become_the_first():
    # loops 0 1 [2 3 4] 5: the three pieces from place 2 fuse into one
    assert [late.shifted(p, 2, 3) for p in range(6)] == [0, 1, 2, 2, 2, 3]
    # fused, then split into two (a fuse-then-split): the loops below move up by one
    assert [late.shifted(p, 2, 3, made=2) for p in range(6)] == [0, 1, 2, 2, 2, 4]


_SUM_OF_DOUBLES = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16, 16))
    for i, k in T.grid(16, 16):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SS", [i, k])
            B[vi, vk] = A[vi, vk] * T.float32(2.0)
    for i, k in T.grid(16, 16):
        with T.sblock("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0.0)
            C[vi] = C[vi] + B[vi, vk]
"""


def test_a_buffer_read_only_by_a_decomposed_reduction_is_put_in_local_by_set_scope():
    """winograd's input_tile: the buffer goes to local memory under its own block (``set_scope``),
    read by the reduction's update block once decomposed; no cache_write's copy back."""
    from tvm import s_tir

    sch = s_tir.Schedule(tvm.script.from_source(_SUM_OF_DOUBLES), debug_mask="all")
    b, c = sch.get_sblock("B"), sch.get_sblock("C")
    i, k = sch.get_loops(c)
    sch.compute_at(b, i)
    sch.set_scope(b, 0, "local")
    sch.decompose_reduction(c, k)
    answer = Session(_SUM_OF_DOUBLES).path_to(sch.mod)
    assert_way(_SUM_OF_DOUBLES, sch.mod, answer, "main")
    assert [st.primitive for st in answer.steps].count("set_scope") == 1
    assert not any(st.primitive == "cache_write" for st in answer.steps)
