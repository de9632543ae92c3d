"""The way to targets that change a loop's layout (issue 33): ``loop_partition``'s pieces
(``B_i_common`` around ``B_i<k>_partition``) are read off the target and made on the start, with
TVM as the oracle: its own replay of the ``apply_trace`` gives the target, and so do the steps applied
one by one through ``Session.apply``.
"""

from __future__ import annotations

import random

import pytest
import tvm
from tvm import s_tir

from mlc_lab import Session
from tests.unit.test_path import assert_way

ELEMENTWISE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 16, 8), "float32"), B: T.Buffer((32, 16, 8), "float32")):
    for i, j, k in T.grid(32, 16, 8):
        with T.sblock("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2.0)
"""


def _partitioned(outer: list, inner: list | None):
    sch = s_tir.Schedule(tvm.script.from_source(ELEMENTWISE), debug_mask="all")
    i, _, _ = sch.get_loops(sch.get_sblock("B"))
    sch.loop_partition(i, outer)
    if inner is not None:
        _, j, _ = sch.get_loops(sch.get_sblock("B_i0"))
        sch.loop_partition(j, inner)
    return sch.mod


@pytest.mark.parametrize("seed", range(3))
def test_loop_partitions_nested_or_not_are_reached_and_replay_on_tvm(seed):
    rng = random.Random(seed)
    first = rng.randint(1, 8)
    outer = [first, rng.randint(1, 31 - first)]
    inner = [rng.randint(1, 7), rng.randint(1, 8)] if seed else None
    target = _partitioned(outer, inner)
    answer = Session(ELEMENTWISE).path_to(target)
    assert_way(ELEMENTWISE, target, answer, "main")
    assert [s.primitive for s in answer.steps] == ["loop_partition"] * (1 if inner is None else 2)


def test_a_partition_of_another_computation_is_not_reached():
    target = _partitioned([4, 8], None)
    other = ELEMENTWISE.replace("T.float32(2.0)", "T.float32(3.0)")
    answer = Session(other).path_to(target)
    assert not answer.reached
    assert answer.why


TWO_STAGES = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.sblock_alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
    for i, j in T.grid(16, 8):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1.0)
"""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_an_intermediate_kept_in_another_type_and_iterators_reordered_take_one_step_each(dtype):
    sch = s_tir.Schedule(tvm.script.from_source(TWO_STAGES), debug_mask="all")
    sch.unsafe_set_dtype(sch.get_sblock("B"), 0, dtype)
    sch.reorder_block_iter_var(sch.get_sblock("C"), [1, 0])
    answer = Session(TWO_STAGES).path_to(sch.mod)
    assert_way(TWO_STAGES, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["unsafe_set_dtype", "reorder_block_iter_var"]


def test_a_block_laid_out_otherwise_over_a_unit_iterator_is_one_transform_block_layout():
    program = TWO_STAGES.replace("(16, 8)", "(1, 8)").replace("T.grid(16, 8)", "T.grid(1, 8)")
    sch = s_tir.Schedule(tvm.script.from_source(program), debug_mask="all")
    sch.transform_block_layout(sch.get_sblock("B"), lambda i, j: (j, i))
    answer = Session(program).path_to(sch.mod)
    assert_way(program, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["transform_block_layout"]


def test_a_copy_laid_out_as_its_one_reader_reads_it_is_reindex_cache_read():
    sch = s_tir.Schedule(tvm.script.from_source(TWO_STAGES), debug_mask="all")
    sch.reindex_cache_read(sch.get_sblock("C"), 0, "shared", lambda i, j: (j, i // 2, i % 2))
    answer = Session(TWO_STAGES).path_to(sch.mod)
    assert_way(TWO_STAGES, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["reindex_cache_read"]


def test_a_cache_laid_out_as_its_writer_writes_it_is_reindex_cache_write():
    sch = s_tir.Schedule(tvm.script.from_source(TWO_STAGES), debug_mask="all")
    sch.reindex_cache_write(sch.get_sblock("B"), 0, "shared", lambda i, j: (j, i))
    answer = Session(TWO_STAGES).path_to(sch.mod)
    assert_way(TWO_STAGES, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["reindex_cache_write"]
