"""A small class lab: mm_relu at 64x64 on the CPU (timing it takes milliseconds)."""

from tvm.script import tirx as T

N = 64


@T.prim_func(s_tir=True)
def mm_relu(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32"), C: T.Buffer((N, N), "float32")):
    T.func_attr({"tirx.noalias": True})
    Y = T.sblock_alloc_buffer((N, N), "float32")
    for i, j, k in T.grid(N, N, N):
        with T.sblock("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(N, N):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
