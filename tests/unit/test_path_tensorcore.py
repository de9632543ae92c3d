"""The way to a tensor-core target (issue 33): meta_schedule's MultiLevelTilingTensorCore sketches
(reindex, shared and wmma stages, blockize of the compute and of each fragment copy) are reached from
the plain program, with TVM as the oracle: its own replay of the ``apply_trace`` gives the target,
and so do the steps applied one by one through ``Session.apply``. A target that differs from every
sketch in one sampled value is said not reached, never given a way.
"""

from __future__ import annotations

import functools
import re

import pytest
import tvm
from tvm import s_tir, te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.testing import te_workload
from tvm.target import Target

from mlc_lab import Session
from mlc_lab.tvm.path import tensorcore
from mlc_lab.tvm.program import load
from tests.unit.test_path import assert_way


def _program(workload) -> str:
    return tvm.IRModule({"main": te.create_prim_func(workload)}).script()


def _sketch(program: str, rules: list, target: dict, seed: int):
    """The rule's first sketch of ``program`` with its decisions drawn again from ``seed``."""
    mod = tvm.script.from_source(program)
    ctx = ms.TuneContext(
        mod=mod,
        target=Target(target),
        task_name="t",
        space_generator=ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=[], mutator_probs={}),
    )
    space = list(ctx.generate_design_space())[0]
    sch = s_tir.Schedule(mod, seed=seed, debug_mask="none")
    s_tir.schedule.Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=False)
    return sch.mod


@functools.cache
def _default_target(seed: int):
    return _sketch(MATMUL, _default_rules(), tensorcore._CUDA, seed=seed)


def _default_rules() -> list:
    tensorcore.register_intrinsics()  # before the rules name them
    return list(ms.ScheduleRule.create("cuda-tensorcore"))


MATMUL = _program(te_workload.matmul(32, 64, 32, "float16", "float32"))


def test_default_tensor_core_sketch_is_reached_with_blockize_and_wmma_stages():
    target = _default_target(3)
    answer = Session(MATMUL).path_to(target)
    assert_way(MATMUL, target, answer, "main")
    kinds = [s.primitive for s in answer.steps]
    assert kinds.count("blockize") == 4  # the compute, the two fragment loads, the accumulator store
    scopes = {s.arguments.get("storage_scope") for s in answer.steps if s.primitive.startswith("cache_")}
    assert {"wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator", "shared.dyn"} <= scopes
    assert not any(p.startswith("sample") for p in kinds)  # sampled values are literals in the way


@pytest.mark.full  # the default run keeps the other three (CI time)
def test_configured_rule_with_relu_and_bare_target_is_reached():
    program = _program(te_workload.matmul_relu(32, 32, 32, "float16", "float32"))
    tensorcore.register_intrinsics()
    group = tvm.s_tir.tensor_intrin.cuda.get_wmma_intrin_group("shared", "shared", "float16", "float32", False)
    rules = [tensorcore._rule(group, pipeline=False)]
    rules += [r for r in ms.ScheduleRule.create("cuda") if isinstance(r, ms.schedule_rule.AutoInline)]
    target = _sketch(program, rules, {"kind": "cuda", "arch": "sm_70"}, seed=1)
    assert_way(program, target, Session(program).path_to(target), "main")


def test_a_value_no_sketch_samples_is_not_reached():
    target = _default_target(3)
    text = re.sub(r'"meta_schedule.cooperative_fetch": \d+', '"meta_schedule.cooperative_fetch": 5', target.script())
    answer = Session(MATMUL).path_to(text)
    assert not answer.reached
    assert answer.why


def test_dp4a_sketch_of_multi_level_tiling_with_intrin_is_reached():
    x = te.placeholder((32, 32), name="X", dtype="int8")
    w = te.placeholder((32, 32), name="W", dtype="int8")
    k = te.reduce_axis((0, 32), name="k")
    dense = te.compute(
        (32, 32), lambda i, j: te.sum(x[i, k].astype("int32") * w[j, k].astype("int32"), axis=k), name="compute"
    )
    program = tvm.IRModule({"main": te.create_prim_func([x, w, dense])}).script()
    tensorcore.register_intrinsics()
    rule = ms.schedule_rule.MultiLevelTilingWithIntrin(
        "dp4a_s8s8s32",
        structure="SSSRRSRS",
        tile_binds=["blockIdx.x", "vthread.x", "threadIdx.x"],
        max_innermost_factor=64,
        vector_load_lens=[1, 2, 3, 4],
        reuse_read=ms.schedule_rule.ReuseType(req="must", levels=[4], scope="shared"),
        reuse_write=ms.schedule_rule.ReuseType(req="must", levels=[3], scope="local"),
    )
    target = _sketch(program, [rule], {"kind": "cuda", "arch": "sm_70"}, seed=2)
    answer = Session(program).path_to(target)
    assert_way(program, target, answer, "main")
    assert "blockize" in [s.primitive for s in answer.steps]


INT64 = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((T.int64(16), T.int64(128)), "float32"), B: T.Buffer((T.int64(16), T.int64(128)), "float32")):
    for i0, j0, i1, j1 in T.grid(T.int64(1), T.int64(8), T.int64(16), T.int64(16)):
        with T.sblock("B"):
            vi = T.axis.spatial(T.int64(16), i0 * T.int64(16) + i1)
            vj = T.axis.spatial(T.int64(128), j0 * T.int64(16) + j1)
            B[vi, vj] = A[vi, vj] + T.float32(1.0)
"""

TWO_NESTS = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for m in range(6):
        for i, j in T.grid(3, 1):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
        for i, j in T.grid(128, 64):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 64] = A[vi, vj + 64] * T.float32(3.0)
"""


@pytest.mark.parametrize("keep", [True, False])
def test_blockize_of_an_int64_nest_whose_loops_are_already_the_targets(keep):
    sch = s_tir.Schedule(load(INT64), debug_mask="none")
    sch.blockize(sch.get_loops(sch.get_sblock("B"))[2], preserve_unit_iters=keep)
    answer = Session(INT64).path_to(sch.mod)
    assert_way(INT64, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["blockize"]


def test_blockize_of_two_blocks_side_by_side():
    sch = s_tir.Schedule(load(TWO_NESTS), debug_mask="none")
    sch.blockize([sch.get_sblock("B"), sch.get_sblock("C")], preserve_unit_iters=False)
    answer = Session(TWO_NESTS).path_to(sch.mod)
    assert_way(TWO_NESTS, sch.mod, answer, "main")
    assert answer.steps[0].arguments["target"] == ["B", "C"]


@pytest.mark.full  # CI time: the default sketch is checked above
def test_a_sketch_for_other_thread_limits_is_reached():
    target = _sketch(MATMUL, _default_rules(), {**tensorcore._CUDA, "max_threads_per_block": 512}, seed=5)
    assert_way(MATMUL, target, Session(MATMUL).path_to(target), "main")


def test_a_start_whose_blocks_tvm_cannot_look_up_is_answered_not_raised():
    # TVM's get_sblock fails inside a blockized reduction's init: the one-blockize probe must pass on
    from tests.conformance import harness, path_pairs

    entry = next(e for e in harness.corpus() if e["id"].endswith("test_reduction_decompose1[block_obj]/79"))
    answer = Session(entry["module"]).path_to(path_pairs.tvm_target(entry))
    assert answer.status in ("reached", "unreached") and (answer.reached or answer.why)
