"""The exercise programs as TVMScript text.

They are written in TVM 0.27's spelling, so they live behind the one door to TVM: when TVMScript
is renamed again, this is one of the places to change.
"""

#: Exercise 3's starting program (batched matmul then relu), for notebooks and tests.
BMM_RELU = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class MyBmmRelu:
    @T.prim_func(s_tir=True)
    def bmm_relu(A: T.Buffer((16, 128, 128), "float32"), B: T.Buffer((16, 128, 128), "float32"),
                 C: T.Buffer((16, 128, 128), "float32")):
        T.func_attr({"global_symbol": "bmm_relu", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((16, 128, 128), "float32")
        for n, i, j, k in T.grid(16, 128, 128, 128):
            with T.sblock("Y"):
                vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
                with T.init():
                    Y[vn, vi, vj] = T.float32(0)
                Y[vn, vi, vj] = Y[vn, vi, vj] + A[vn, vi, vk] * B[vn, vk, vj]
        for n, i, j in T.grid(16, 128, 128):
            with T.sblock("C"):
                vn, vi, vj = T.axis.remap("SSS", [n, i, j])
                C[vn, vi, vj] = T.max(Y[vn, vi, vj], T.float32(0))
"""

#: The schedule the course asks for (its ``TargetModule``), in today's spelling.
BMM_RELU_TARGET = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class TargetModule:
    @T.prim_func(s_tir=True)
    def bmm_relu(A: T.Buffer((16, 128, 128), "float32"), B: T.Buffer((16, 128, 128), "float32"),
                 C: T.Buffer((16, 128, 128), "float32")):
        T.func_attr({"global_symbol": "bmm_relu", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((16, 128, 128), "float32")
        for i0 in T.parallel(16):
            for i1, i2_0 in T.grid(128, 16):
                for ax0_init in T.vectorized(8):
                    with T.sblock("Y_init"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + ax0_init)
                        Y[n, i, j] = T.float32(0)
                for ax1_0 in T.serial(32):
                    for ax1_1 in T.unroll(4):
                        for ax0 in T.serial(8):
                            with T.sblock("Y_update"):
                                n, i = T.axis.remap("SS", [i0, i1])
                                j = T.axis.spatial(128, i2_0 * 8 + ax0)
                                k = T.axis.reduce(128, ax1_0 * 4 + ax1_1)
                                Y[n, i, j] = Y[n, i, j] + A[n, i, k] * B[n, k, j]
                for i2_1 in T.vectorized(8):
                    with T.sblock("C"):
                        n, i = T.axis.remap("SS", [i0, i1])
                        j = T.axis.spatial(128, i2_0 * 8 + i2_1)
                        C[n, i, j] = T.max(Y[n, i, j], T.float32(0))
"""
