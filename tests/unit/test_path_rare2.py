"""The way to targets one rarer step away that the plan does not read (issue 33, ``path/rare.py``):
``decompose_reduction`` of a block that holds blocks, ``rfactor`` at a loop as it is,
``decompose_padding``, and loops reordered or fused around a block whose bindings are not affine.
TVM is the oracle: its own replay of the ``apply_trace`` gives the target, and so do the steps applied
one by one through ``Session.apply``.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir

from mlc_lab import Session
from tests.unit.test_path import assert_way

NESTED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 96), "float32"), B: T.Buffer((4,), "float32")):
    for i, ko in T.grid(4, 3):
        with T.sblock("outer"):
            vi, vko = T.axis.remap("SR", [i, ko])
            T.reads(A[vi, vko * 32:vko * 32 + 32])
            T.writes(B[vi])
            C = T.sblock_alloc_buffer((32,))
            with T.init():
                B[vi] = T.float32(0.0)
            for ki in range(32):
                with T.sblock("copy"):
                    vki = T.axis.spatial(32, ki)
                    C[vki] = A[vi, vko * 32 + vki] * T.float32(2.0)
            for ki in range(32):
                with T.sblock("sum"):
                    vki = T.axis.reduce(32, ki)
                    B[vi] = B[vi] + C[vki]
"""

SQUARES = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 24, 16), "float32"), B: T.Buffer((8,), "float32")):
    for b, f, g in T.grid(8, 24, 16):
        with T.sblock("B"):
            vb = T.axis.spatial(8, b)
            vf, vg = T.axis.remap("RR", [f, g])
            with T.init():
                B[vb] = T.float32(0.0)
            B[vb] = B[vb] + A[vb, vf, vg] * A[vb, vf, vg]
"""

PADDED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((12, 20), "float32"), C: T.Buffer((16, 24), "float32")):
    for i, j in T.grid(16, 24):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.if_then_else(
                1 <= vi and vi < 13 and 3 <= vj and vj < 23, A[vi - 1, vj - 3], T.float32(0.0)
            )
"""

NOT_AFFINE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((30, 8, 4), "float32"), B: T.Buffer((30, 8, 4), "float32")):
    for a, b, c, d in T.grid(5, 6, 8, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(30, a * a + b)
            vj = T.axis.spatial(8, c)
            vk = T.axis.spatial(4, d)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(3.0)
"""

RAGGED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((90, 64), "float32"), B: T.Buffer((90, 64), "float32")):
    for i in range(3):
        for j, k in T.grid(T.min(31, 89 - i * 32) + 1, 64):
            with T.sblock("B"):
                vi = T.axis.spatial(90, i * 32 + j)
                vj = T.axis.spatial(64, k)
                B[vi, vj] = A[vi, vj] + T.float32(1.0)
"""


def _sch(text: str) -> s_tir.Schedule:
    return s_tir.Schedule(tvm.script.from_source(text), debug_mask="all")


@pytest.mark.parametrize("place", [0, 1])
def test_a_block_that_holds_blocks_is_decomposed_at_the_loop_the_target_shows(place):
    sch = _sch(NESTED)
    sch.decompose_reduction(sch.get_sblock("outer"), sch.get_loops(sch.get_sblock("outer"))[place])
    answer = Session(NESTED).path_to(sch.mod)
    assert_way(NESTED, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["decompose_reduction"]


@pytest.mark.parametrize(("loop", "axis"), [(1, 0), (1, 1), (2, 0), (2, 1)])
def test_rfactor_at_a_loop_as_it_is_takes_its_axis_from_the_partial_sums(loop, axis):
    sch = _sch(SQUARES)
    sch.rfactor(sch.get_loops(sch.get_sblock("B"))[loop], factor_axis=axis)
    answer = Session(SQUARES).path_to(sch.mod)
    assert_way(SQUARES, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["rfactor"]
    assert answer.steps[0].arguments["factor_axis"] == axis


@pytest.mark.parametrize("place", [0, 1])
def test_the_padding_filled_in_a_block_of_its_own_is_decompose_padding(place):
    sch = _sch(PADDED)
    sch.decompose_padding(sch.get_sblock("C"), sch.get_loops(sch.get_sblock("C"))[place])
    answer = Session(PADDED).path_to(sch.mod)
    assert_way(PADDED, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["decompose_padding"]


# two of the orders of its four loops TVM makes (TVM refuses those that move loop a, not affine)
@pytest.mark.parametrize("order", [(0, 1, 3, 2), (0, 3, 1, 2)])
def test_loops_around_a_block_not_affine_in_them_are_reordered_as_the_target_has_them(order):
    sch = _sch(NOT_AFFINE)
    loops = sch.get_loops(sch.get_sblock("B"))
    sch.reorder(*[loops[k] for i, k in enumerate(order) if k != i])
    answer = Session(NOT_AFFINE).path_to(sch.mod)
    assert_way(NOT_AFFINE, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["reorder"]


def test_loops_of_a_ragged_nest_are_fused_as_the_target_has_them():
    sch = _sch(RAGGED)
    _, j, k = sch.get_loops(sch.get_sblock("B"))
    sch.fuse(j, k)
    answer = Session(RAGGED).path_to(sch.mod)
    assert_way(RAGGED, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["fuse"]


def test_partial_sums_of_another_computation_are_not_reached():
    sch = _sch(SQUARES)
    sch.rfactor(sch.get_loops(sch.get_sblock("B"))[2], factor_axis=0)
    other = SQUARES.replace("A[vb, vf, vg] * A[vb, vf, vg]", "A[vb, vf, vg] + A[vb, vf, vg]")
    answer = Session(other).path_to(sch.mod)
    assert not answer.reached
    assert answer.why


SCALE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((20, 20), "float32"), B: T.Buffer((20, 20), "float32")):
    for i, j in T.grid(20, 20):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
"""


@pytest.mark.parametrize(("factor", "pad"), [(8, 0.0), (3, 4.0)])
def test_a_buffer_laid_out_in_a_padded_shape_is_transform_layout_with_its_pad_value(factor, pad):
    sch = _sch(SCALE)
    sch.transform_layout(
        sch.get_sblock("B"),
        ("write", 0),
        lambda i, j: (i // factor, j // factor, i % factor, j % factor),
        pad_value=pad,
    )
    answer = Session(SCALE).path_to(sch.mod)
    assert_way(SCALE, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["transform_layout"]


CAST_TWICE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(X: T.Buffer((8, 64), "float16"), Y: T.Buffer((8, 64), "float32"), Z: T.Buffer((8, 64), "float32")):
    W = T.sblock_alloc_buffer((8, 64))
    for i, j in T.grid(8, 64):
        with T.sblock("cast"):
            vi, vj = T.axis.remap("SS", [i, j])
            W[vi, vj] = T.Cast("float32", X[vi, vj])
    for i, j in T.grid(8, 64):
        with T.sblock("square"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = W[vi, vj] * W[vi, vj]
    for i, j in T.grid(8, 64):
        with T.sblock("twice"):
            vi, vj = T.axis.remap("SS", [i, j])
            Z[vi, vj] = W[vi, vj] + W[vi, vj]
"""


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_a_copy_made_for_a_block_inlined_later_is_read_by_the_blocks_it_is_inlined_into(scope):
    sch = _sch(CAST_TWICE)
    sch.cache_read(sch.get_sblock("cast"), 0, scope)
    sch.compute_inline(sch.get_sblock("cast"))
    answer = Session(CAST_TWICE).path_to(sch.mod)
    assert_way(CAST_TWICE, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["cache_read", "compute_inline"]


@pytest.mark.parametrize(("split", "cut"), [([2, 4], 5), ([1, 8], 11)])
def test_a_loop_split_inside_a_partitioned_loop_is_split_once_before_the_partition(split, cut):
    program = SCALE.replace("(20, 20)", "(12, 8)").replace("T.grid(20, 20)", "T.grid(12, 8)")
    sch = _sch(program)
    i, j = sch.get_loops(sch.get_sblock("B"))
    sch.split(j, split)
    sch.loop_partition(i, [cut, None])
    answer = Session(program).path_to(sch.mod)
    assert_way(program, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["split", "loop_partition"]


def test_the_engine_goes_on_from_a_named_step_to_what_the_plan_reads():
    sch = _sch(PADDED)
    sch.decompose_padding(sch.get_sblock("C"), sch.get_loops(sch.get_sblock("C"))[0])
    sch.split(sch.get_loops(sch.get_sblock("C"))[1], [None, 4])
    answer = Session(PADDED).path_to(sch.mod)
    assert_way(PADDED, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["decompose_padding", "split"]


TRANSPOSED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(X: T.Buffer((8, 16), "float32"), Y: T.Buffer((16, 8), "float32")):
    XT = T.sblock_alloc_buffer((16, 8))
    for i, j in T.grid(16, 8):
        with T.sblock("xt"):
            vi, vj = T.axis.remap("SS", [i, j])
            XT[vi, vj] = X[vj, vi]
    for i, j in T.grid(16, 8):
        with T.sblock("y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = XT[vi, vj] * T.float32(2.0)
"""


def test_a_copy_of_a_block_that_only_moves_data_is_made_of_its_output_and_the_move_inlined_into_it():
    sch = _sch(TRANSPOSED)
    sch.cache_read(sch.get_sblock("y"), 0, "shared")
    sch.compute_inline(sch.get_sblock("xt"))
    answer = Session(TRANSPOSED).path_to(sch.mod)
    assert_way(TRANSPOSED, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["cache_read", "compute_inline"]
