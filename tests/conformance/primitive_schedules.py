"""A few schedules per primitive of ``tvm.s_tir.Schedule`` 0.27, for the conformance corpus.

Each is (module, function applying primitives to a ``Schedule``); ``generate.py`` records the trace.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
from tvm import te
from tvm.s_tir.meta_schedule.testing import te_workload
from tvm.script import tirx as T


def _mod(func: Any) -> tvm.IRModule:
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


MATMUL = _mod(te.create_prim_func(te_workload.matmul(64, 64, 64)))
MATMUL_RELU = _mod(te.create_prim_func(te_workload.matmul_relu(64, 64, 64)))
MATMUL16 = _mod(te.create_prim_func(te_workload.matmul(64, 64, 64, "float16", "float32")))
NORM = _mod(te.create_prim_func(te_workload.norm_bmn(1, 64, 64)))


@T.prim_func(s_tir=True)
def _two_stage(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.sblock_alloc_buffer((64, 64), "float32")
    for i, j in T.grid(64, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


@T.prim_func(s_tir=True)
def _pad(A: T.Buffer((60,), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = T.if_then_else(2 <= vi and vi < 62, A[vi - 2], T.float32(0))


@T.prim_func(s_tir=True)
def _rolling(A: T.Buffer((1, 12, 12, 16), "int8"), C: T.Buffer((1, 8, 8, 16), "int8")):
    B = T.sblock_alloc_buffer((1, 10, 10, 16), "int8")
    for n, h, w, c, kh, kw in T.grid(1, 10, 10, 16, 3, 3):
        with T.sblock("B"):
            vn, vh, vw, vc, vkh, vkw = T.axis.remap("SSSSRR", [n, h, w, c, kh, kw])
            with T.init():
                B[vn, vh, vw, vc] = T.int8(-128)
            B[vn, vh, vw, vc] = T.max(B[vn, vh, vw, vc], A[vn, vh + vkh, vw + vkw, vc])
    for n, h, w, c, kh, kw in T.grid(1, 8, 8, 16, 3, 3):
        with T.sblock("C"):
            vn, vh, vw, vc, vkh, vkw = T.axis.remap("SSSSRR", [n, h, w, c, kh, kw])
            with T.init():
                C[vn, vh, vw, vc] = T.int8(-128)
            C[vn, vh, vw, vc] = T.max(C[vn, vh, vw, vc], B[vn, vh + vkh, vw + vkw, vc])


@T.prim_func(s_tir=True)
def _inplace(A: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("A"):
            vi = T.axis.spatial(64, i)
            A[vi] = A[vi] + T.float32(1)


@T.prim_func(s_tir=True)
def _indexed(A: T.Buffer((64, 64), "float32"), C: T.Buffer((32,), "float32")):
    for i in range(32):
        with T.sblock("C"):
            vi = T.axis.spatial(32, i)
            C[vi] = A[vi * 2 + 1, vi % 8 * 4]


TWO_STAGE = _mod(_two_stage)
PAD = _mod(_pad)
ROLLING = _mod(_rolling)
INPLACE = _mod(_inplace)
INDEXED = _mod(_indexed)
MATMUL_ODD = _mod(te.create_prim_func(te_workload.matmul(60, 60, 60)))


def _loops(sch: Any, block: str) -> list:
    return list(sch.get_loops(sch.get_sblock(block)))


def split_tiles(sch):
    i, j, k = _loops(sch, "C")
    f = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8)
    i0, i1, i2 = sch.split(i, factors=f)
    j0, j1 = sch.split(j, factors=[None, 16], disable_predication=True)
    sch.reorder(i0, j0, k, i1, i2, j1)
    sch.vectorize(j1)
    sch.parallel(sch.fuse(i0, j0))
    sch.unroll(i2)


def annotate_kinds(sch):
    b = sch.get_sblock("C")
    i, _, _ = sch.get_loops(b)
    sch.annotate(b, "warp_execution", True)  # keys from the trace parser's allowlist (trace_limits)
    sch.annotate(i, "software_pipeline_order", [1, 2, "x"])
    sch.annotate(b, "meta_schedule.vectorize", 0.5)
    sch.annotate(b, "meta_schedule.tiling_structure", "hello")
    sch.annotate(i, "pragma_unroll", 3)
    sch.unannotate(i, "pragma_unroll")


def compute_location(decision):
    def fn(sch):
        b = sch.get_sblock("B")
        loc = sch.sample_compute_location(b, decision=decision)
        sch.compute_at(b, loc)

    return fn


def compute_location_sampled(sch):
    b = sch.get_sblock("B")
    sch.compute_at(b, sch.sample_compute_location(b))


def cache_and_compute_at(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    rd = sch.cache_read(c, 0, "shared")
    wr = sch.cache_write(c, 0, "local")
    sch.compute_at(rd, io)
    sch.reverse_compute_at(wr, io)
    sch.decompose_reduction(c, k)
    sch.set_scope(rd, 0, "shared.dyn")
    sch.storage_align(rd, 0, axis=0, factor=32, offset=1)


def read_write_at(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    sch.read_at(i, c, 0, "shared")
    sch.write_at(i, c, 0, "local")


def inline_both(sch):
    sch.compute_inline(sch.get_sblock("B"))


def reverse_inline(sch):
    sch.reverse_compute_inline(sch.get_sblock("C"))


def rfactor(sch):
    c = sch.get_sblock("C")
    _, _, k = sch.get_loops(c)
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, factor_axis=0)


def blockize_and_bind(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "threadIdx.x")
    sch.blockize(i1)


def tensorize_wmma(sch):
    from tvm.s_tir.tensor_intrin.cuda import WMMA_SYNC_16x16x16_f16f16f32_INTRIN

    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    acc = sch.cache_write(c, 0, "wmma.accumulator")
    sch.reverse_compute_at(acc, j0)
    a = sch.cache_read(c, 0, "wmma.matrix_a")
    b = sch.cache_read(c, 1, "wmma.matrix_b")
    sch.compute_at(a, k0)
    sch.compute_at(b, k0)
    sch.decompose_reduction(c, k0)
    sch.tensorize(i1, WMMA_SYNC_16x16x16_f16f16f32_INTRIN)


def transform_layouts(sch):
    c = sch.get_sblock("C")
    sch.transform_layout(c, ("read", 0), lambda i, k: (i // 16, k // 16, i % 16, k % 16))
    # dlight writes a literal into the result; TVM prints it as a bare 0
    sch.transform_layout(c, ("write", 0), lambda i, j: (tvm.tirx.IntImm("int32", 0), i, j))
    sch.transform_block_layout(c, lambda i, j, k: (j, i, k))


def transform_with_pad(sch):
    c = sch.get_sblock("C")
    sch.transform_layout(
        c, ("write", 0), lambda i, j: (i // 16, j // 16, i % 16, j % 16), pad_value=lambda a, b, c, d: T.float32(0)
    )


def transform_with_sampled(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    v = sch.sample_categorical([2, 4], [0.5, 0.5], decision=1)
    sch.transform_layout(c, ("read", 0), lambda i, k: (i // v, k, i % v))


def transform_int64(sch):
    c = sch.get_sblock("C")
    sch.transform_layout(c, ("write", 0), lambda i, j: (i // T.int32(8), j, i % T.int32(8)))


def reindex_all(sch):
    c = sch.get_sblock("C")
    sch.reindex(c, ("read", 0))
    sch.reindex(c, ("write", 0))


def reindex_cache(sch):
    c = sch.get_sblock("C")
    sch.reindex_cache_read(c, 0, "shared", lambda i, j, k: (i, k))
    sch.reindex_cache_write(c, 0, "local", lambda i, j, k: (j, i))


def padding(sch):
    c = sch.get_sblock("C")
    (i,) = sch.get_loops(c)
    sch.decompose_padding(c, i)


def pad_einsum(sch):
    sch.pad_einsum(sch.get_sblock("C"), [64, 64, 64])


def partition(sch):
    c = sch.get_sblock("C")
    i, j, k = sch.get_loops(c)
    v = sch.sample_partitioned_tile(j, n=3, partition_pos=1, innerpart_factor=2)
    sch.split(j, v)
    sch.loop_partition(i, [None, 16])


def merge_loops(sch):
    b, c = sch.get_sblock("B"), sch.get_sblock("C")
    ib, _ = sch.get_loops(b)
    ic, _ = sch.get_loops(c)
    sch.merge(ib, ic)


def rolling(sch):
    c = sch.get_sblock("C")
    _, h, w, _, _, _ = sch.get_loops(c)
    ho, hi = sch.split(h, [None, 4])
    sch.compute_at(sch.get_sblock("B"), ho)
    sch.rolling_buffer(sch.get_sblock("B"), 0)


def unsafe(sch):
    sch.unsafe_set_dtype(sch.get_sblock("B"), 0, "float16")
    sch.reorder_block_iter_var(sch.get_sblock("C"), [1, 0])


def hide(sch):
    sch.unsafe_hide_buffer_access(sch.get_sblock("C"), "read", [0])


def buffer_access(sch):
    sch.annotate_buffer_access(sch.get_sblock("B"), 0, "read", lambda i, j: ((i, i + 1), (j, j + 1)))


def lookups(sch):
    root = sch.get_sblock("root")
    outs = sch.get_output_blocks(root)
    kids = sch.get_child_blocks(root)
    sch.get_producers(kids[1])
    sch.get_consumers(kids[0])
    sch.annotate(outs[0], "pragma_unroll_explicit", 1)


def unit_loops(sch):
    sch.add_unit_loop(sch.get_sblock("C"))
    _, j = _loops(sch, "B")
    sch.add_unit_loop(j)


def cache_inplace(sch):
    sch.cache_inplace(sch.get_sblock("A"), 0, "local")


def cache_index(sch):
    sch.cache_index(sch.get_sblock("C"), "global")


def epilogue(sch):
    sch.fuse_reduction_epilogue(sch.get_sblock("C"), sch.get_sblock("compute"))


def enter_postproc(sch):
    i, _, _ = _loops(sch, "C")
    sch.parallel(i)
    sch.enter_postproc()


SCHEDULES: dict[str, tuple[tvm.IRModule, Callable]] = {
    "split_tiles": (MATMUL, split_tiles),
    "annotate_kinds": (MATMUL, annotate_kinds),
    "compute_location_root": (TWO_STAGE, compute_location(-1)),
    "compute_location_inline": (TWO_STAGE, compute_location(-2)),
    "compute_location_loop": (TWO_STAGE, compute_location(1)),
    "compute_location_sampled": (TWO_STAGE, compute_location_sampled),
    "cache_and_compute_at": (MATMUL, cache_and_compute_at),
    "read_write_at": (MATMUL, read_write_at),
    "compute_inline": (TWO_STAGE, inline_both),
    "reverse_compute_inline": (TWO_STAGE, reverse_inline),
    "rfactor": (MATMUL, rfactor),
    "blockize_bind": (MATMUL, blockize_and_bind),
    "tensorize_wmma": (MATMUL16, tensorize_wmma),
    "transform_layouts": (MATMUL, transform_layouts),
    "transform_pad_value": (MATMUL_ODD, transform_with_pad),
    "transform_sampled_var": (MATMUL, transform_with_sampled),
    "transform_typed_cast": (MATMUL, transform_int64),
    "reindex": (MATMUL, reindex_all),
    "reindex_cache": (MATMUL, reindex_cache),
    "decompose_padding": (PAD, padding),
    "pad_einsum": (MATMUL_ODD, pad_einsum),
    "loop_partition": (MATMUL, partition),
    "merge": (TWO_STAGE, merge_loops),
    "rolling_buffer": (ROLLING, rolling),
    "unsafe_dtype_iter_order": (TWO_STAGE, unsafe),
    "unsafe_hide_buffer_access": (TWO_STAGE, hide),
    "annotate_buffer_access": (TWO_STAGE, buffer_access),
    "lookups": (TWO_STAGE, lookups),
    "add_unit_loop": (TWO_STAGE, unit_loops),
    "cache_inplace": (INPLACE, cache_inplace),
    "cache_index": (INDEXED, cache_index),
    "fuse_reduction_epilogue": (MATMUL_RELU, epilogue),
    "enter_postproc": (MATMUL, enter_postproc),
}
