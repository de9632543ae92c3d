"""The cells of notebooks/02_exercises.ipynb, written out by ``notebooks/_build.py``.

("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened. A cell that
shows a course program prints its text from the course catalog (mlc_lab/tvm/course_programs.py);
the exercises' attempts (MyBroadcastAdd, MyConv) are wrong on purpose and their solutions belong to
the lesson, so those stay here.
"""

from __future__ import annotations

from mlc_lab.tvm.course_programs import PROGRAMS

CELLS: list[tuple[str, str]] = [
    (
        "md",
        r"""
# 2. Exercises: writing and transforming TensorIR

Three exercises from the course's TensorIR chapter, each with a grader from `mlc_lab.exercises`:

1. **broadcast add**: write a TensorIR function, checked against numpy;
2. **2-D convolution**: write a 7-deep loop nest, checked against numpy;
3. **batched matmul + ReLU**: write it, then *schedule* it towards a target program. The grader checks
   the numbers and then says how far your loop structure is from the target, and where.

Each exercise cell holds a first attempt that is **not** right yet: run it, read the report, fix it.
(Worked solutions are at the very end, collapsed; try first.)
""",
    ),
    (
        "code",
        r"""
import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

import mlc_lab
from mlc_lab import exercises
""",
    ),
    (
        "md",
        r"""
## Warm-up: element-wise add

`C[i, j] = A[i, j] + B[i, j]` on 4×4 `int64` arrays (numpy's default integer type, which the
grader's `np.arange` inputs use). A grader builds your function for this CPU, calls it on its own
inputs and compares the output buffer with numpy.
""",
    ),
    (
        "code",
        PROGRAMS["add"].source
        + r"""

exercises.check_add(MyAdd)
""",
    ),
    (
        "md",
        r"""
## Exercise 1: broadcast add

Now `B` is a vector of 4: `C[i, j] = A[i, j] + B[j]`. The grader passes
`A = np.arange(16).reshape(4, 4)`, `B = np.arange(4, 0, -1)` and an empty `C`, and expects `A + B`.

The attempt below still declares `B` as a matrix. Run it, read the report, fix the function.
""",
    ),
    (
        "code",
        r"""
@I.ir_module
class MyBroadcastAdd:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"),
            B: T.Buffer((4, 4), "int64"),   # TODO: B is a vector of 4
            C: T.Buffer((4, 4), "int64")):
        T.func_attr({"global_symbol": "add", "tirx.noalias": True})
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]   # TODO


report1 = exercises.check_broadcast_add(MyBroadcastAdd)
report1
""",
    ),
    (
        "md",
        r"""
## Exercise 2: 2-D convolution

NCHW layout, stride 1, no padding:

`Out[b, k, i, j] = sum over q, di, dj of  A[b, q, i + di, j + dj] * W[k, q, di, dj]`

with data `(1, 1, 8, 8)`, weights `(2, 1, 3, 3)`, output `(1, 2, 6, 6)`, all `int64`
(`np.arange` values). Spatial axes are `b, k, i, j`; `q, di, dj` are reduce axes.

The attempt below has one wrong index. The report says how many elements are off and by how much.
""",
    ),
    (
        "code",
        r"""
@I.ir_module
class MyConv:
    @T.prim_func(s_tir=True)
    def conv(A: T.Buffer((1, 1, 8, 8), "int64"),
             W: T.Buffer((2, 1, 3, 3), "int64"),
             Out: T.Buffer((1, 2, 6, 6), "int64")):
        T.func_attr({"global_symbol": "conv", "tirx.noalias": True})
        for b, k, i, j, q, di, dj in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.sblock("conv"):
                vb, vk, vi, vj, vq, vdi, vdj = T.axis.remap("SSSSRRR", [b, k, i, j, q, di, dj])
                with T.init():
                    Out[vb, vk, vi, vj] = T.int64(0)
                Out[vb, vk, vi, vj] = Out[vb, vk, vi, vj] + A[vb, vq, vi + vdi, vj] * W[vk, vq, vdi, vdj]


report2 = exercises.check_conv(MyConv)
report2
""",
    ),
    (
        "md",
        r"""
## Exercise 3: transform a batched matmul

`Y[n, i, j] = sum over k of A[n, i, k] * B[n, k, j]`, then `C[n, i, j] = max(Y[n, i, j], 0)`, with
`n` 16 and the rest 128, float32. First the program itself:
""",
    ),
    (
        "code",
        PROGRAMS["bmm_relu"].source
        + r"""

start = exercises.check_bmm_relu(MyBmmRelu)
print(start.check("matches numpy").message)
print(f"unscheduled: {start.distance} structural differences from the target")
""",
    ),
    (
        "md",
        r"""
The target is the course's `TargetModule` (`exercises.BMM_RELU_TARGET`): the batch loop runs in
parallel, `j` is split by 8 with `C` computed right after each 8-wide strip of `Y`, `k` is split by 4
and unrolled, the reduction's initialisation is its own vectorised block, and `C`'s inner loop is
vectorised.
""",
    ),
    (
        "code",
        r"""
print(exercises.BMM_RELU_TARGET)
""",
    ),
    (
        "md",
        r"""
Schedule it in a session. The explorer below is opened with the target: the bar under its
toolbar says how many steps are left ("5 steps to the target"), **Hint** opens the next primitive's
form filled in on the loop or block it acts on (press Apply: the step is yours), and **Show the way**
lists every step with why the target needs it. After a step that leads away from the target, the bar
says which step to go back to, with a button that goes there. This first attempt does the splits,
the reorder and moves `C`, and stops there; the grader lists what is left.
""",
    ),
    (
        "code",
        r"""
bmm = mlc_lab.explore(MyBmmRelu, target=exercises.BMM_RELU_TARGET)
s3 = bmm.session
j0, j1 = s3.apply("split", "Y/j", factors=[None, 8])
k0, k1 = s3.apply("split", "k", factors=[None, 4])
s3.apply("reorder", j0, k0, k1, j1)
s3.apply("reverse_compute_at", "C", j0)
bmm
""",
    ),
    (
        "code",
        r"""
report3 = exercises.check_bmm_relu(s3)
report3
""",
    ),
    (
        "md",
        r"""
Stuck? Press Hint, or ask in Python for the next step towards the target: a primitive with its
arguments, named as in the script above, and why the target needs it (`bmm.hint()`, the explorer's
own; `s3.hint(target)` for any target). `path_to` gives the whole way; it is found by reading the
target with TVM and claimed only when TVM's `structural_equal` confirms its end. After a wrong step,
the hint says which step to go back to first.
""",
    ),
    (
        "code",
        r"""
hint = bmm.hint()
print("next:", hint)
way = bmm.path_to()
print(way)
""",
    ),
    (
        "md",
        r"""
The same report as text (handy in a terminal), and the numbers behind it:
""",
    ),
    (
        "code",
        r"""
print(report3.text())
print("differences:", report3.distance, " share of the structure that agrees:", f"{report3.similarity:.0%}")
""",
    ),
    (
        "md",
        r"""
Towards the target is what counts: the course says a program that moves in its direction and gets
faster is good enough. Measure where you are (original against your current step):
""",
    ),
    (
        "code",
        r"""
m_orig = s3.measure(step=0)
m_now = s3.measure()
print(f"original {m_orig.latency_s * 1e3:.2f} ms, yours {m_now.latency_s * 1e3:.2f} ms: "
      f"{m_orig.latency_s / m_now.latency_s:.2f}x, correct={m_now.correct}")
""",
    ),
    (
        "md",
        r"""
---
## Solutions

Collapsed cells: click the `...` to open them. Each ends with its grader passing.
""",
    ),
    (
        "code!",
        PROGRAMS["broadcast_add"].source
        + r"""

exercises.check_broadcast_add(BroadcastAddSolution)
""",
    ),
    (
        "code!",
        PROGRAMS["conv"].source
        + r"""

exercises.check_conv(ConvSolution)
""",
    ),
    (
        "code!",
        r"""
solution = mlc_lab.Session(MyBmmRelu)
j0, j1 = solution.apply("split", "Y/j", factors=[None, 8])
k0, k1 = solution.apply("split", "k", factors=[None, 4])
solution.apply("reorder", j0, k0, k1, j1)
solution.apply("reverse_compute_at", "C", j0)
solution.apply("parallel", "Y/n")            # before decompose_reduction: TVM refuses it after
solution.apply("unroll", k1)
init = solution.apply("decompose_reduction", "Y", k0)
solution.apply("vectorize", "j_1_init")      # the init block's inner loop
solution.apply("vectorize", "ax0")           # C's inner loop (made by reverse_compute_at)
final = exercises.check_bmm_relu(solution)
m_final = solution.measure()
print(f"{m_orig.latency_s / m_final.latency_s:.2f}x faster than the original")
final
""",
    ),
]
