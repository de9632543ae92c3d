"""The course's programs as TVMScript text (TVM 0.27 spelling), for new explorations started from
JupyterLab's Launcher ("New schedule exploration") and from ``mlc_lab.course_program``.

Behind the one door to TVM because the text is TVM's spelling. The JupyterLab extension lists the
same names (js/labextension/src/programs.ts; a test keeps the two lists equal).
"""

from mlc_lab.tvm.exercises.programs import BMM_RELU

MM_RELU = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.sblock("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
"""


def matmul(n: int = 128, name: str = "main") -> str:
    """The chapter-4 matmul ``C = A @ B`` at ``n`` x ``n`` (the course's is 128), its function
    called ``name``: the one text of it that the Launcher, the tests and the benchmarks use."""
    return f'''
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def {name}(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"),
             C: T.Buffer(({n}, {n}), "float32")):
        T.func_attr({{"global_symbol": "{name}", "tirx.noalias": True}})
        for i, j, k in T.grid({n}, {n}, {n}):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


MATMUL = matmul(128)

VECTOR_ADD = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class MyAdd:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "add", "tirx.noalias": True})
        for i in range(1024):
            with T.sblock("C"):
                vi = T.axis.spatial(1024, i)
                C[vi] = A[vi] + B[vi]
"""

#: name -> (title, TVMScript text)
COURSE_PROGRAMS: dict[str, tuple[str, str]] = {
    "mm_relu": ("Chapter 2: matmul + ReLU (128x128)", MM_RELU),
    "matmul": ("Chapter 4: matmul (128x128)", MATMUL),
    "bmm_relu": ("Exercise: batched matmul + ReLU", BMM_RELU),
    "vector_add": ("Vector add (1024)", VECTOR_ADD),
}
