"""The way to dlight's reduction schedules (issue 33): its fallback rule's unit spatial iterator, laid
out by ``transform_block_layout`` to the constant 0, then fused alone and split over the threads (the
fuse binds the iterator to 0, so the split only adds a predicate). TVM is the oracle: its replay of
the ``apply_trace`` gives the target, and so do the steps applied one by one through
``Session.apply``.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir

from mlc_lab import Session
from tests.unit.test_path import _same, _tvm_replay

ROW_SUM = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((1, {n}), "float32"), B: T.Buffer((1,), "float32")):
    for i, k in T.grid(1, {n}):
        with T.sblock("block"):
            v0, v1 = T.axis.remap("SR", [i, k])
            with T.init():
                B[v0] = T.float32(0.0)
            B[v0] = B[v0] + A[v0, v1]
"""


def _fallback(program: str, threads: int, fused: bool):
    """dlight's fallback on a unit row: the unit iterator laid out to 0, its loop fused alone (or
    not), split over blockIdx.x / threadIdx.x, the reduction's init decomposed."""
    sch = s_tir.Schedule(tvm.script.from_source(program), debug_mask="all")
    block = sch.get_sblock("block")
    sch.transform_block_layout(block, lambda v0, v1: (tvm.tirx.const(0, "int64"), v1))
    i, k = sch.get_loops(block)
    if fused:
        i = sch.fuse(i, preserve_unit_iters=True)
    bx, tx = sch.split(i, [None, threads], preserve_unit_iters=True)
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.decompose_reduction(block, k)
    return sch.mod


def assert_way_here(session: Session, program: str, target, answer) -> None:
    """The way replays to the target on TVM alone, and step by step in the session that found it
    (its split past a unit loop is the way's own: a fresh session would refuse it as a slip)."""
    assert answer.reached, answer.why
    assert _same(_tvm_replay(program, "main", answer.trace), target["main"])
    for step in answer.steps:
        args, kwargs = step.call()
        session.apply(step.primitive, *args, **kwargs)
    assert _same(session.module["main"], target["main"])


@pytest.mark.parametrize(("n", "threads", "fused"), [(6144, 1024, True)])
def test_a_unit_iterator_bound_to_zero_under_split_threads_is_reached(n, threads, fused):
    program = ROW_SUM.format(n=n)
    target = _fallback(program, threads, fused)
    session = Session(program)
    answer = session.path_to(target)
    assert_way_here(session, program, target, answer)
    kinds = [s.primitive for s in answer.steps]
    assert kinds.count("fuse") == (1 if fused else 0)
    if fused:
        assert kinds.index("fuse") < kinds.index("split")


BLOCKIZED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(x: T.Buffer((64,), "float32"), w: T.Buffer((2, 32, 64), "float32"), o: T.Buffer((2, 32), "float32")):
    for e in T.thread_binding(2, thread="blockIdx.y"):
        with T.sblock("gemv_o"):
            ve = T.axis.spatial(2, e)
            vi_o = T.axis.spatial(1, 0)
            vj_o = T.axis.reduce(1, 0)
            T.reads(x[0:64], w[ve, 0:32, 0:64])
            T.writes(o[ve, 0:32])
            for i, j in T.grid(32, 64):
                with T.sblock("gemv"):
                    vi, vj = T.axis.remap("SR", [i, j])
                    with T.init():
                        o[ve, vi] = T.float32(0.0)
                    o[ve, vi] = o[ve, vi] + x[vj] * w[ve, vi, vj]
"""


@pytest.mark.parametrize(("inner", "units"), [(8, 2)])
def test_the_loops_inside_a_block_kept_as_it_is_are_tiled_there(inner, units):
    sch = s_tir.Schedule(tvm.script.from_source(BLOCKIZED), debug_mask="all")
    block = sch.get_sblock("gemv")
    for _ in range(units):
        sch.add_unit_loop(block)
    i, j = sch.get_loops(block)[:2]  # the loops inside gemv_o
    i0, i1 = sch.split(i, [None, inner])
    j0, _ = sch.split(j, [None, 4])
    sch.parallel(i0)
    sch.vectorize(i1)
    sch.annotate(j0, "pragma_auto_unroll_max_step", 16)
    session = Session(BLOCKIZED)
    answer = session.path_to(sch.mod)
    assert_way_here(session, BLOCKIZED, sch.mod, answer)
    assert {"parallel", "vectorize", "annotate"} <= {s.primitive for s in answer.steps}


NT_MATMUL = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((3, 64), "float32"), B: T.Buffer((8, 64), "float32"), C: T.Buffer((3, 8), "float32")):
    for i, j, k in T.grid(3, 8, 64):
        with T.sblock("NT_matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""


@pytest.mark.parametrize(("pieces", "scoped"), [([None, 4, 2, 4], True)])
def test_a_padded_batch_summed_in_parts_over_pieces_apart_is_reached(pieces, scoped):
    """dlight's low-batch gemv, its first half: the batch padded (A's padded copy inlined, C's kept in
    local memory), the reduction split and its pieces 1 and 3 fused into the partial sums' index."""
    sch = s_tir.Schedule(tvm.script.from_source(NT_MATMUL), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    sch.pad_einsum(block, [4, 8, 64])
    sch.compute_inline(sch.get_sblock("A_pad"))
    k0, k1, k2, k3 = sch.split(sch.get_loops(block)[2], pieces)
    sch.reorder(k0, k2, k1, k3)
    rf = sch.rfactor(sch.fuse(k1, k3), 0)
    if scoped:
        sch.set_scope(rf, 0, "local")
        sch.set_scope(block, 0, "local")
    session = Session(NT_MATMUL)
    answer = session.path_to(sch.mod)
    assert_way_here(session, NT_MATMUL, sch.mod, answer)
    kinds = [s.primitive for s in answer.steps]
    assert kinds[:2] == ["pad_einsum", "compute_inline"]
    assert kinds.count("set_scope") == (2 if scoped else 0)


def _padded_into_scopes(twice: bool):
    """Both inputs padded and kept in shared / local memory by set_scope, the reduction factored once
    (or twice: the partial sums summed in parts again, as dlight's low-batch gemv does)."""
    sch = s_tir.Schedule(tvm.script.from_source(NT_MATMUL), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    sch.pad_einsum(block, [4, 16, 64])
    sch.set_scope(sch.get_sblock("A_pad"), 0, "shared")
    sch.set_scope(sch.get_sblock("B_pad"), 0, "local")
    _, k1 = sch.split(sch.get_loops(block)[2], [None, 16])
    first = sch.rfactor(k1, 0)
    if twice:
        outer, _ = sch.split(sch.get_loops(block)[-1], [4, None])
        second = sch.rfactor(outer, 0)
        sch.set_scope(second, 0, "local")
        sch.set_scope(first, 0, "local")
    return sch.mod


def test_partial_sums_read_through_buffers_set_scope_renames_are_reached():
    target = _padded_into_scopes(twice=False)
    session = Session(NT_MATMUL)
    answer = session.path_to(target)
    assert_way_here(session, NT_MATMUL, target, answer)
    assert [s.primitive for s in answer.steps].count("set_scope") == 2


def test_a_reduction_factored_twice_is_reached_its_second_partial_block_named_by_place():
    """The second rfactor names its block NT_matmul_rf as the first did: the way says it NT_matmul_rf#2
    and the session finds it so, step by step; TVM's replay of the trace gives the target."""
    target = _padded_into_scopes(twice=True)
    session = Session(NT_MATMUL)
    answer = session.path_to(target)
    assert_way_here(session, NT_MATMUL, target, answer)
    assert [s.primitive for s in answer.steps].count("rfactor") == 2
    assert any("NT_matmul_rf#2" in str(s.arguments.get("block", "")) for s in answer.steps)


LOW_BATCH = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(var_A: T.handle, B: T.Buffer((T.int64(8), T.int64(512)), "float16"), var_C: T.handle):
    n = T.int64()
    A = T.match_buffer(var_A, (n, T.int64(512)), "float16")
    C = T.match_buffer(var_C, (n, T.int64(8)), "float16")
    for i0, i1, k in T.grid(n, T.int64(8), T.int64(512)):
        with T.sblock("NT_matmul"):
            v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
            with T.init():
                C[v_i0, v_i1] = T.float16(0.0)
            C[v_i0, v_i1] = C[v_i0, v_i1] + A[v_i0, v_k] * B[v_i1, v_k]
"""


def test_dlight_low_batch_gemv_with_its_reduction_factored_once_is_reached():
    """dlight's low-batch gemv on a symbolic batch up to its second rfactor: the batch padded, the
    partial sums over threads, the sum and the copy back moved under the block's loop, in local memory."""
    sch = s_tir.Schedule(tvm.script.from_source(LOW_BATCH), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    sch.pad_einsum(block, [4, 8, 512])
    i, j, k = sch.get_loops(block)
    sch.split(j, [None, 2, 2], preserve_unit_iters=True)
    k0, k1, k2, k3 = sch.split(k, [None, 8, 2, 4], preserve_unit_iters=True)
    sch.reorder(k0, k2, k1, k3)
    rf = sch.rfactor(sch.fuse(k1, k3), 0)
    i, bx, ty, j2, k0, k2, fused = sch.get_loops(rf)
    tx, vec = sch.split(fused, [8, None], preserve_unit_iters=True)
    sch.reorder(bx, ty, tx, k0, j2, k2, vec)
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    by, _ = sch.split(i, [None, 4], preserve_unit_iters=True)
    sch.bind(by, "blockIdx.y")
    sch.compute_inline(sch.get_sblock("A_pad"))
    sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
    sch.decompose_reduction(rf, k0)
    sch.set_scope(rf, 0, "local")
    sch.reverse_compute_at(sch.get_sblock("C_pad"), bx, preserve_unit_loops=True)
    sch.set_scope(block, 0, "local")
    session = Session(LOW_BATCH)
    answer = session.path_to(sch.mod)
    assert_way_here(session, LOW_BATCH, sch.mod, answer)
    kinds = [s.primitive for s in answer.steps]
    assert kinds.count("reverse_compute_at") == 2 and kinds.count("bind") == 4


DOUBLE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
"""


@pytest.mark.parametrize("inner_unit", [True])
def test_a_loop_split_past_its_extent_its_unit_outer_piece_fused_with_the_next_is_reached(inner_unit):
    """dlight's gemv rules: j (8) split into 1 x 16 x 2, the first two fused and bound to threads (the
    target's predicate takes the fused loop modulo 16), the last split again into 1 x 2 or not."""
    sch = s_tir.Schedule(tvm.script.from_source(DOUBLE), debug_mask="all")
    block = sch.get_sblock("B")
    j0, j1, j2 = sch.split(sch.get_loops(block)[1], [None, 16, 2], preserve_unit_iters=True)
    if inner_unit:
        sch.split(j2, [None, 2], preserve_unit_iters=True)
    sch.bind(sch.fuse(j0, j1, preserve_unit_iters=True), "threadIdx.y")
    session = Session(DOUBLE)
    answer = session.path_to(sch.mod)
    assert_way_here(session, DOUBLE, sch.mod, answer)
    assert [s.primitive for s in answer.steps][:2] == ["split", "fuse"]


BATCHED = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((3, 1, 64), "float32"), B: T.Buffer((8, 64), "float32"), C: T.Buffer((3, 1, 8), "float32")):
    for i0, i1, i2, k in T.grid(3, 1, 8, 64):
        with T.sblock("NT_matmul"):
            v_i0, v_i1, v_i2, v_k = T.axis.remap("SSSR", [i0, i1, i2, k])
            with T.init():
                C[v_i0, v_i1, v_i2] = T.float32(0.0)
            C[v_i0, v_i1, v_i2] = C[v_i0, v_i1, v_i2] + A[v_i0, v_i1, v_k] * B[v_i2, v_k]
"""


def test_a_padded_copy_the_target_keeps_without_its_unit_iterator_is_laid_out_so():
    """dlight's low-batch gemv on a (batch, 1, n) output: the einsum in TVM's normal form, padded, the
    copy back laid out without its unit iterator too."""
    sch = s_tir.Schedule(tvm.script.from_source(BATCHED), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    sch.transform_block_layout(block, lambda v0, v1, v2, k: (v0, v2, k))
    sch.pad_einsum(block, [4, 8, 64])
    sch.transform_block_layout(sch.get_sblock("C_pad"), lambda v0, v1, v2: (v0, v2))
    sch.compute_inline(sch.get_sblock("A_pad"))
    _, k1 = sch.split(sch.get_loops(block)[2], [None, 16])
    sch.rfactor(k1, 0)
    session = Session(BATCHED)
    answer = session.path_to(sch.mod)
    assert_way_here(session, BATCHED, sch.mod, answer)
    assert [s.primitive for s in answer.steps].count("transform_block_layout") == 2


def test_a_partial_index_fused_around_a_unit_piece_is_reached():
    """dlight on a reduction shorter than its tiles: k (64) split into 1 x 8 x 1 x 8, the 8s fused into
    the partial index; TVM folds the unit pieces into the index, the scale of the inner one tells the cut."""
    sch = s_tir.Schedule(tvm.script.from_source(NT_MATMUL), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    k0, k1, k2, k3 = sch.split(sch.get_loops(block)[2], [None, 8, 1, 8], preserve_unit_iters=True)
    sch.reorder(k0, k2, k1, k3)
    sch.rfactor(sch.fuse(k1, k3), 0)
    session = Session(NT_MATMUL)
    answer = session.path_to(sch.mod)
    assert_way_here(session, NT_MATMUL, sch.mod, answer)


DEQUANT = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((4, 64), "float32"), W: T.Buffer((8, 64), "int8"), C: T.Buffer((4, 8), "float32")):
    D = T.sblock_alloc_buffer((8, 64), "float32")
    for i, k in T.grid(8, 64):
        with T.sblock("dequantize"):
            vi, vk = T.axis.remap("SS", [i, k])
            D[vi, vk] = T.Cast("float32", W[vi, vk]) * T.float32(0.5)
    for i, j, k in T.grid(4, 8, 64):
        with T.sblock("NT_matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * D[vj, vk]
"""


def test_a_producer_kept_in_local_memory_read_by_the_partial_block_is_a_set_scope():
    """dlight's low-batch gemv on a dequantized weight: the weight's block writes into local memory
    (set_scope), read by the partial block the rfactor makes, not by the einsum as before."""
    sch = s_tir.Schedule(tvm.script.from_source(DEQUANT), debug_mask="all")
    block = sch.get_sblock("NT_matmul")
    _, k1 = sch.split(sch.get_loops(block)[2], [None, 16])
    sch.rfactor(k1, 0)
    sch.set_scope(sch.get_sblock("dequantize"), 0, "local")
    session = Session(DEQUANT)
    answer = session.path_to(sch.mod)
    assert_way_here(session, DEQUANT, sch.mod, answer)
    assert "set_scope" in [s.primitive for s in answer.steps]


@pytest.mark.full  # ~2-3 s: the corpus's 404-409 check the same in benchmarks/path.py
def test_dlight_low_batch_gemv_made_by_dlight_itself_is_reached():
    """dlight's LowBatchGEMV rule schedules the program (two rfactors, their blocks sharing a name,
    every later block moved under the first's loops): the engine finds a way TVM replays to it."""
    from tvm.s_tir import dlight
    from tvm.target import Target

    cuda = Target({"kind": "cuda", "arch": "sm_80", "max_threads_per_block": 1024, "thread_warp_size": 32})
    func = tvm.script.from_source(LOW_BATCH)
    sch = dlight.gpu.LowBatchGEMV(4).apply(func.with_attr("global_symbol", "main"), cuda, False)
    assert str(sch.trace).count("rfactor") == 2
    session = Session(LOW_BATCH)
    answer = session.path_to(sch.mod)
    assert_way_here(session, LOW_BATCH, sch.mod, answer)
