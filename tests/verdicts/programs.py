"""The corpus's programs as TVMScript text (TVM 0.27's spelling): six GPU programs and the course's
CPU ones. Each GPU program is written at a size the numeric check can shrink (every dimension a power
of two times a small number) or small enough to run as it is."""

from __future__ import annotations

from mlc_lab.tvm.course_programs import BMM_RELU, MM_RELU, PROGRAMS, matmul

_HEAD = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Module:
"""

# The course's MyModuleMatmul (P23, chapter 6), 1024^3.
MATMUL = PROGRAMS["gpu_matmul"].text

# A gemm, then a relu and an add, each its own block: two intermediates (Y, R).
GEMM_RELU_ADD = (
    _HEAD
    + """    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"),
             C: T.Buffer((1024, 1024), "float32"), D: T.Buffer((1024, 1024), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((1024, 1024), dtype="float32")
        R = T.sblock_alloc_buffer((1024, 1024), dtype="float32")
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.sblock("gemm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(1024, 1024):
            with T.sblock("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                R[vi, vj] = T.max(Y[vi, vj], T.float32(0))
        for i, j in T.grid(1024, 1024):
            with T.sblock("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = R[vi, vj] + C[vi, vj]
"""
)

# A batched matmul, 8 x 512^3.
BMM = (
    _HEAD
    + """    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((8, 512, 512), "float32"), B: T.Buffer((8, 512, 512), "float32"),
             C: T.Buffer((8, 512, 512), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for b, i, j, k in T.grid(8, 512, 512, 512):
            with T.sblock("bmm"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.float32(0)
                C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vb, vk, vj]
"""
)

# A conv2d NHWC, 3x3, stride 1, no padding: X (1, 4, 66, 16), W (3, 3, 16, 64) -> Y (1, 2, 64, 64).
# Small enough to run as it is (the numeric check does not shrink it).
CONV2D_NHWC = (
    _HEAD
    + """    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((1, 4, 66, 16), "float32"), W: T.Buffer((3, 3, 16, 64), "float32"),
             Y: T.Buffer((1, 2, 64, 64), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for n, h, w, co, rh, rw, rc in T.grid(1, 2, 64, 64, 3, 3, 16):
            with T.sblock("conv"):
                vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
                with T.init():
                    Y[vn, vh, vw, vco] = T.float32(0)
                Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + X[vn, vh + vrh, vw + vrw, vrc] * W[vrh, vrw, vrc, vco]
"""
)

# A transpose, 1024^2.
TRANSPOSE = (
    _HEAD
    + """    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j in T.grid(1024, 1024):
            with T.sblock("transpose"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj, vi] = A[vi, vj]
"""
)

# A row softmax, 256 rows of 1024: two row reductions (max, sum of exp) and two elementwise blocks.
SOFTMAX = (
    _HEAD
    + """    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((256, 1024), "float32"), S: T.Buffer((256, 1024), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        M = T.sblock_alloc_buffer((256,), dtype="float32")
        E = T.sblock_alloc_buffer((256, 1024), dtype="float32")
        Z = T.sblock_alloc_buffer((256,), dtype="float32")
        for i, k in T.grid(256, 1024):
            with T.sblock("row_max"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    M[vi] = T.float32(-3.4028234663852886e38)
                M[vi] = T.max(M[vi], A[vi, vk])
        for i, j in T.grid(256, 1024):
            with T.sblock("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                E[vi, vj] = T.exp(A[vi, vj] - M[vi])
        for i, k in T.grid(256, 1024):
            with T.sblock("row_sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    Z[vi] = T.float32(0)
                Z[vi] = Z[vi] + E[vi, vk]
        for i, j in T.grid(256, 1024):
            with T.sblock("norm"):
                vi, vj = T.axis.remap("SS", [i, j])
                S[vi, vj] = E[vi, vj] / Z[vi]
"""
)

GPU_PROGRAMS = {
    "matmul": MATMUL,
    "gemm_relu_add": GEMM_RELU_ADD,
    "bmm": BMM,
    "conv2d_nhwc": CONV2D_NHWC,
    "transpose": TRANSPOSE,
    "softmax": SOFTMAX,
}

# The course's CPU programs (catalog P03 mm_relu, P17 matmul, P10 bmm_relu).
CPU_PROGRAMS = {
    "mm_relu": MM_RELU,
    "matmul_cpu": matmul(128),
    "bmm_relu": BMM_RELU,
}
