"""Lab 4, GPU programming: single-precision matrix multiply C = A @ B, as handed out."""

import tvm  # noqa: F401  (as lab files are handed out)
from tvm.script import tirx as T

M = N = K = 2048


@T.prim_func(s_tir=True)
def sgemm(A: T.Buffer((M, K), "float32"), B: T.Buffer((K, N), "float32"), C: T.Buffer((M, N), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i, j, k in T.grid(M, N, K):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


BM, BN, BK = 64, 64, 16  # a smaller block: 8 x 8 threads, k by 16
TM, TN = 8, 8  # the tile of C a thread computes


def manual_schedule():
    sch = tvm.s_tir.Schedule(sgemm)
    c = sch.get_sblock("C")
    c_local = sch.cache_write(c, 0, "local")
    i, j, k = sch.get_loops(c)
    by, ty, ti = sch.split(i, [None, BM // TM, TM])
    bx, tx, tj = sch.split(j, [None, BN // TN, TN])
    ko, ki = sch.split(k, [None, BK])
    sch.reorder(by, bx, ko, ty, tx, ki, ti, tj)
    sch.bind(by, "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    # the block's tiles of A and B in shared memory, copied by all its threads
    for operand in (0, 1):
        tile = sch.cache_read(c, operand, "shared")
        sch.compute_at(tile, ko)
        fused = sch.fuse(*sch.get_loops(tile)[-2:])
        _, cy, cx, vec = sch.split(fused, [None, BM // TM, BN // TN, 4])
        sch.bind(cy, "threadIdx.y")
        sch.bind(cx, "threadIdx.x")
        sch.vectorize(vec)
    # each thread's column of A and row of B in registers, for every ki
    for operand in (0, 1):
        regs = sch.cache_read(c, operand, "local")
        sch.compute_at(regs, ki)
    # after the ko loop: every thread stores the tile it computed
    sch.reverse_compute_at(c_local, bx)
    wi, wj = sch.get_loops(c_local)[-2:]
    wy, wi = sch.split(wi, [BM // TM, TM])
    wx, wj = sch.split(wj, [BN // TN, TN])
    sch.reorder(wy, wx, wi, wj)
    sch.bind(wy, "threadIdx.y")
    sch.bind(wx, "threadIdx.x")
    sch.decompose_reduction(c, ko)
    sch.unroll(ki)
    return sch
