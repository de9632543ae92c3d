"""The way to dlight's GPU matmul schedules (issue 33): dlight first rewrites a matmul as
``C[S, I, J] += A[S, I, K] * B[S, J, K]`` (reindex x3, transform_layout x3, transform_block_layout,
pad_einsum), then tiles it, caches it and inlines the consumer chain into the local copy of the
result. The engine reads that prelude off the target (``path/gemm.py``) and goes on from there, with
TVM as the oracle: its own replay of the ``apply_trace`` gives the target, and so do the steps
applied one by one through ``Session.apply``.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir
from tvm.s_tir.dlight.gpu.matmul import Matmul, get_index_map
from tvm.target import Target

from mlc_lab import Session
from tests.unit.test_path import assert_way

MATMUL = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((M, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((M, 64), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i, j, k in T.grid(M, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

# a matmul with an epilogue whose consumer chain dlight inlines into the local copy of the result
MATMUL_RELU = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer(("n", 64), "float32"), B: T.Buffer((64, 64), "float32"), D: T.Buffer((n, 64), "float32")):
    n = T.int32()
    T.func_attr({"tirx.noalias": True})
    C = T.sblock_alloc_buffer((n, 64), "float32")
    for i, j, k in T.grid(n, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(n, 64):
        with T.sblock("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0.0))
"""


def _normal_form(program: str, padding: list[int]):
    """dlight's prelude by hand: the three reindexes laid out as [S, I, K], [S, J, K], [S, I, J],
    the block's iterators as (S, I, J, K), then padded."""
    sch = s_tir.Schedule(tvm.script.from_source(program), debug_mask="all")
    block = sch.get_sblock("C")
    made = [sch.reindex(block, ("read", 0)), sch.reindex(block, ("read", 1)), sch.reindex(block, ("write", 0))]
    block_map, a_map, b_map, c_map = get_index_map(sch.get(block))
    sch.transform_layout(made[0], ("write", 0), a_map)
    sch.transform_layout(made[1], ("write", 0), b_map)
    sch.transform_layout(made[2], ("read", 0), c_map)
    sch.transform_block_layout(block, block_map)
    sch.pad_einsum(block, padding)
    return sch.mod


@pytest.mark.parametrize("rows, padded", [(64, False), (100, True)])
def test_dlights_normal_form_of_a_matmul_is_read_off_the_target(rows, padded):
    program = MATMUL.replace("M", str(rows))
    target = _normal_form(program, [1, 32, 1, 1])
    answer = Session(program).path_to(target)
    assert_way(program, target, answer, "main")
    kinds = ["reindex"] * 3 + ["transform_layout"] * 3 + ["transform_block_layout"] + ["pad_einsum"] * padded
    assert [s.primitive for s in answer.steps] == kinds
    assert "transform_block_layout" in answer.trace


def test_dlights_whole_matmul_schedule_with_a_dynamic_row_count_and_an_epilogue_is_reached():
    func = tvm.script.from_source(MATMUL_RELU)
    gpu = Target({"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024, "thread_warp_size": 32})
    with gpu:
        scheduled = Matmul().apply(func, gpu, False)
    assert scheduled is not None
    target = scheduled.mod
    answer = Session(MATMUL_RELU).path_to(target)
    assert_way(MATMUL_RELU, target, answer, "main")
    steps = [s.primitive for s in answer.steps]
    assert steps[:7] == ["reindex"] * 3 + ["transform_layout"] * 3 + ["transform_block_layout"]
    assert "pad_einsum" in steps and "reverse_compute_inline" in steps
    assert len(steps) <= len([i for i in scheduled.trace.insts if not i.kind.name.startswith(("Get", "Sample"))])


def test_the_normal_form_of_another_computation_is_not_reached():
    program = MATMUL.replace("M", "64")
    target = _normal_form(program, [1, 32, 1, 1])
    other = program.replace("A[vi, vk] * B[vk, vj]", "A[vi, vk] + B[vk, vj]")
    answer = Session(other).path_to(target)
    assert not answer.reached
    assert answer.why.startswith("the target computes something else: block C computes"), answer.why


def test_an_outer_reduction_reads_its_first_operand_through_a_padded_copy_laid_out_in_tiles():
    program = MATMUL.replace("M", "100")
    sch = s_tir.Schedule(tvm.script.from_source(program), debug_mask="all")
    block = sch.get_sblock("C")
    copy = sch.reindex(block, ("read", 0))
    sch.pad_einsum(block, [16, 1, 1])
    sch.compute_inline(copy)
    padded = sch.get_producers(block)[0]
    sch.transform_layout(padded, ("write", 0), lambda i, k: (i // 16, k, i % 16))
    answer = Session(program).path_to(sch.mod)
    assert_way(program, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["reindex", "pad_einsum", "compute_inline", "transform_layout"]


BATCHED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((1, "m", 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((1, m, 64), "float32")):
    m = T.int32()
    T.func_attr({"tirx.noalias": True})
    for b, i, j, k in T.grid(1, m, 64, 64):
        with T.sblock("C"):
            vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
            with T.init():
                C[vb, vi, vj] = T.float32(0.0)
            C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vk, vj]
"""


def test_an_outer_reduction_over_a_symbolic_row_count_fuses_its_unit_batch_before_splitting():
    sch = s_tir.Schedule(tvm.script.from_source(BATCHED), debug_mask="all")
    block = sch.get_sblock("C")
    copy = sch.reindex(block, ("read", 0))
    sch.pad_einsum(block, [1, 16, 1, 1])
    sch.compute_inline(copy)
    sch.transform_layout(sch.get_producers(block)[0], ("write", 0), lambda b, i, k: (b, i // 16, k, i % 16))
    b, i, _, _ = sch.get_loops(block)
    sch.split(sch.fuse(b, i), [None, 4, 16])  # fused first: the padded symbolic extent's predicate
    answer = Session(BATCHED).path_to(sch.mod)
    assert_way(BATCHED, sch.mod, answer, "main")
    steps = [s.primitive for s in answer.steps]
    assert steps[:4] == ["reindex", "pad_einsum", "compute_inline", "transform_layout"]
    assert steps[4:] == ["fuse", "split"], steps


def test_from_the_middle_of_dlights_matmul_schedule_the_way_is_found_not_raised():
    # at step 37 the start refuses TVM's normal form of its blocks (engine._normalized)
    from tests.conformance import harness, path_pairs

    entry = next(iter(harness.entries("dlight/Matmul/matmul_dyn/0")))
    target = path_pairs.tvm_target(entry)
    s = Session.from_trace(entry["module"], entry["json"], entry.get("func"))
    answer = s.path_to(target, step=s.path()[1:][36])
    assert answer.reached, answer.why
