"""The course catalog: every program of the MLC course that mlc_lab shows, runs or tests, once, as
TVMScript text (TVM 0.27's spelling) with what it is: its name, its chapter, a title, one sentence,
and a numpy reference where it computes arrays.

Read by the Launcher (``mlc_lab.course_program``), the lecture notebooks' builder
(``notebooks/_build.py`` prints each program's ``source`` into its cell), the tests and the
benchmarks. Importing this module imports no TVM (the builder and plain-data code read it);
``mlc_lab.tvm.program.course_program`` parses one. It stands in ``mlc_lab/tvm/`` because the text is TVM's
spelling and changes when TVM renames. The JupyterLab extension lists the Launcher's names
(js/labextension/src/programs.ts; tests/unit/test_packaging.py keeps the two lists equal).

Copies that differ on purpose stay where they are, each with a comment that says why: the legacy
spellings in ``tests/fixtures/legacy/`` (what the converter is tested on), the notebooks' deliberately
wrong exercise attempts, the verdict corpus's and labs' own programs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: The imports a program's text starts with (the notebooks import them in their first cell instead).
HEADER = "\nfrom tvm.script import ir as I\nfrom tvm.script import tirx as T\n\n\n"
_RELAX_HEADER = (
    "\nfrom tvm.script import ir as I\nfrom tvm.script import relax as R\nfrom tvm.script import tirx as T\n\n\n"
)


@dataclass(frozen=True)
class CourseProgram:
    """One program of the course. ``source`` is the module as the course shows it (from
    ``@I.ir_module`` on); ``text`` is what a parser is handed (the imports, then the source)."""

    name: str
    chapter: str  # where the course has it: "2", "2, exercise 3", "4", "6", ...
    title: str
    what: str  # one sentence: what it computes and why the course has it
    source: str
    #: numpy's answer from the function's inputs in order (None: nothing to compare, e.g. a Relax module)
    reference: Callable[..., np.ndarray] | None = None
    launcher: bool = False  # offered by JupyterLab's Launcher ("New schedule exploration")
    header: str = HEADER

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", self.source.lstrip("\n"))  # the literals below open on a new line

    @property
    def text(self) -> str:
        return self.header + self.source


_MM_RELU = """
@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def mm_relu(A: T.Buffer((128, 128), "float32"),
                B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "mm_relu", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((128, 128), "float32")
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

_ADD = """
@I.ir_module
class MyAdd:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"),
            B: T.Buffer((4, 4), "int64"),
            C: T.Buffer((4, 4), "int64")):
        T.func_attr({"global_symbol": "add", "tirx.noalias": True})
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                C[vi, vj] = A[vi, vj] + B[vi, vj]
"""

_BROADCAST_ADD = """
@I.ir_module
class BroadcastAddSolution:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"), C: T.Buffer((4, 4), "int64")):
        T.func_attr({"global_symbol": "add", "tirx.noalias": True})
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]
"""

_CONV = """
@I.ir_module
class ConvSolution:
    @T.prim_func(s_tir=True)
    def conv(A: T.Buffer((1, 1, 8, 8), "int64"), W: T.Buffer((2, 1, 3, 3), "int64"),
             Out: T.Buffer((1, 2, 6, 6), "int64")):
        T.func_attr({"global_symbol": "conv", "tirx.noalias": True})
        for b, k, i, j, q, di, dj in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.sblock("conv"):
                vb, vk, vi, vj, vq, vdi, vdj = T.axis.remap("SSSSRRR", [b, k, i, j, q, di, dj])
                with T.init():
                    Out[vb, vk, vi, vj] = T.int64(0)
                Out[vb, vk, vi, vj] = Out[vb, vk, vi, vj] + A[vb, vq, vi + vdi, vj + vdj] * W[vk, vq, vdi, vdj]
"""

_BMM_RELU = """
@I.ir_module
class MyBmmRelu:
    @T.prim_func(s_tir=True)
    def bmm_relu(A: T.Buffer((16, 128, 128), "float32"),
                 B: T.Buffer((16, 128, 128), "float32"),
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

_BMM_RELU_TARGET = """
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

_MATMUL = """
@I.ir_module
class MyModule:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((128, 128), "float32"),
             B: T.Buffer((128, 128), "float32"),
             C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j, k in T.grid(128, 128, 128):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

_MLP_MIXTURE = """
@I.ir_module
class MyModuleMixture:
    @T.prim_func(s_tir=True)
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                B: T.Buffer((128,), "float32"), Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tirx.noalias": True})
        Y = T.sblock_alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
        for i, j in T.grid(1, 128):
            with T.sblock("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w0: R.Tensor((128, 784), "float32"),
             b0: R.Tensor((128,), "float32"), w1: R.Tensor((10, 128), "float32"),
             b1: R.Tensor((10,), "float32")):
        cls = MyModuleMixture
        with R.dataflow():
            lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_ty=R.Tensor((1, 128), dtype="float32"))
            lv1 = R.call_dps_packed("env.relu", (lv0,), out_ty=R.Tensor((1, 128), dtype="float32"))
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), out_ty=R.Tensor((1, 10), dtype="float32"))
            R.output(out)
        return out
"""

_GPU_VECTOR_ADD = """
@I.ir_module
class MyModuleVecAdd:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"), C: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]
"""

_WINDOW_SUM = """
@I.ir_module
class MyModuleWindowSum:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1027,), "float32"), B: T.Buffer((1024,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]
"""

_GPU_MATMUL = """
@I.ir_module
class MyModuleMatmul:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"),
             C: T.Buffer((1024, 1024), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

_VECTOR_ADD = """
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


CATALOG: tuple[CourseProgram, ...] = (
    CourseProgram(
        "mm_relu",
        "2",
        "Chapter 2: matmul + ReLU (128x128)",
        "Y = A @ B then C = max(Y, 0): the program chapter 2's schedule (split, reorder, "
        "reverse_compute_at, decompose_reduction) transforms (catalog P02).",
        _MM_RELU,
        lambda a, b: np.maximum(a @ b, 0),
        launcher=True,
    ),
    CourseProgram(
        "add",
        "2",
        "Chapter 2: element-wise add (4x4 int64)",
        "C = A + B on 4x4 int64: the exercises' warm-up and the parallel/unroll/vectorize demo (P07).",
        _ADD,
        lambda a, b: a + b,
    ),
    CourseProgram(
        "broadcast_add",
        "2, exercise 1",
        "Exercise 1's answer: broadcast add",
        "C[i, j] = A[i, j] + B[j] on int64, A 4x4 and B a vector of 4: the answer to exercise 1 (P08).",
        _BROADCAST_ADD,
        lambda a, b: a + b,
    ),
    CourseProgram(
        "conv",
        "2, exercise 2",
        "Exercise 2's answer: 2-D convolution",
        "NCHW conv2d, stride 1, no padding, int64: data (1, 1, 8, 8), weights (2, 1, 3, 3), output "
        "(1, 2, 6, 6): the answer to exercise 2 (P09).",
        _CONV,
        lambda a, w: np.einsum("bqijxy,kqxy->bkij", np.lib.stride_tricks.sliding_window_view(a, (3, 3), (2, 3)), w),
    ),
    CourseProgram(
        "bmm_relu",
        "2, exercise 3",
        "Exercise: batched matmul + ReLU",
        "Y[n] = A[n] @ B[n] then C = max(Y, 0) over 16 batches of 128x128: exercise 3's starting program (P10).",
        _BMM_RELU,
        lambda a, b: np.maximum(a @ b, 0),
        launcher=True,
    ),
    CourseProgram(
        "bmm_relu_target",
        "2, exercise 3",
        "Exercise 3's target (TargetModule)",
        "bmm_relu as exercise 3 asks it to be scheduled (parallel, vectorized, unrolled, the "
        "reduction's init split out): the target a student's schedule is compared with (P11).",
        _BMM_RELU_TARGET,
        lambda a, b: np.maximum(a @ b, 0),
    ),
    CourseProgram(
        "matmul",
        "4",
        "Chapter 4: matmul (128x128)",
        "C = A @ B at 128x128: chapter 4's auto-tuning program (P17); ``matmul(n)`` gives it at any size.",
        _MATMUL,
        lambda a, b: a @ b,
        launcher=True,
    ),
    CourseProgram(
        "mlp_mixture",
        "4",
        "Chapter 4: the MLP, linear0 in TensorIR",
        "The two-layer MLP as a Relax module whose linear0 (X @ W.T + B) is TensorIR and the rest "
        "calls registered functions: tuned alone and swapped back in (P18).",
        _MLP_MIXTURE,
        header=_RELAX_HEADER,
    ),
    CourseProgram(
        "gpu_vector_add",
        "6",
        "Chapter 6: vector add (1024)",
        "C = A + B over 1024 elements, split and bound to GPU blocks and threads (P21).",
        _GPU_VECTOR_ADD,
        lambda a, b: a + b,
    ),
    CourseProgram(
        "window_sum",
        "6",
        "Chapter 6: window sum (1024)",
        "B[i] = A[i] + A[i + 1] + A[i + 2]: the shared-memory and cooperative-fetching demo (P22).",
        _WINDOW_SUM,
        lambda a: a[:1024] + a[1:1025] + a[2:1026],
    ),
    CourseProgram(
        "gpu_matmul",
        "6",
        "Chapter 6: matmul on the GPU (1024x1024)",
        "C = A @ B at 1024x1024: the GPU chapter's local and shared-memory blocking (P23).",
        _GPU_MATMUL,
        lambda a, b: a @ b,
    ),
    CourseProgram(
        "vector_add",
        "-",
        "Vector add (1024)",
        "C = A + B over 1024 float32 elements written as the Launcher's smallest program (the "
        "course's own is gpu_vector_add).",
        _VECTOR_ADD,
        lambda a, b: a + b,
        launcher=True,
    ),
)

PROGRAMS: dict[str, CourseProgram] = {p.name: p for p in CATALOG}


def program(name: str) -> CourseProgram:
    """The catalog's entry called ``name``; a KeyError says which names there are."""
    if name not in PROGRAMS:
        raise KeyError(f"no course program called {name!r}; there are: {', '.join(PROGRAMS)}")
    return PROGRAMS[name]


def matmul(n: int = 128, name: str = "main") -> str:
    """Chapter 4's matmul ``C = A @ B`` at ``n`` x ``n`` (the course's is 128), its function called
    ``name``: the one text of it that the Launcher, the tests and the benchmarks use."""
    text = re.sub(r"\b128\b", str(n), PROGRAMS["matmul"].text)
    return text.replace("def main(", f"def {name}(").replace('"global_symbol": "main"', f'"global_symbol": "{name}"')


MM_RELU = PROGRAMS["mm_relu"].text
MATMUL = matmul(128)
BMM_RELU = PROGRAMS["bmm_relu"].text
BMM_RELU_TARGET = PROGRAMS["bmm_relu_target"].text
VECTOR_ADD = PROGRAMS["vector_add"].text

#: What the Launcher offers: name -> (title, TVMScript text)
COURSE_PROGRAMS: dict[str, tuple[str, str]] = {p.name: (p.title, p.text) for p in CATALOG if p.launcher}
