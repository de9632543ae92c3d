"""The source of the lecture notebooks 01-05: their cells, and a writer (outputs empty).

    .venv/bin/python notebooks/_build.py          # rewrite notebooks/0[1-5]_*.ipynb

Edit the cells here and rebuild; tests/notebooks/test_notebooks.py checks that the committed
notebooks match this file (a notebook edited in JupyterLab would drift from it). Cell ids come
from the notebook name and position, so a rebuild gives a stable diff.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    # As ipykernel's kernelspec names itself: JupyterLab writes the running kernel's spec into the
    # notebook, and a different display name marked every lecture changed as soon as it was opened.
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for pos, (kind, src) in enumerate(cells):
        src = src.strip("\n")
        hidden = kind.endswith("!")  # "code!": a solution cell, collapsed in JupyterLab
        kind = kind.rstrip("!")
        cell = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        cell["id"] = hashlib.sha1(f"{name}:{pos}".encode()).hexdigest()[:8]
        if hidden:
            cell.metadata["jupyter"] = {"source_hidden": True}
            cell.metadata["tags"] = ["solution"]
        nb.cells.append(cell)
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        path = HERE / name
        nbformat.write(build(name, cells), str(path))
        print("wrote", path)


# ----------------------------------------------------------------------------------------- cells
# ("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened.

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["01_tensorir.ipynb"] = [
    (
        "md",
        r"""
# 1. Tensor programs and TensorIR

A model is a chain of *primitive tensor functions*: a matrix multiply, an add, a ReLU. Each one can be
written as plain loops over arrays, and the same function has many loop programs that compute the same
numbers at very different speeds. TensorIR is TVM's way of writing those loop programs so that a
compiler (or you) can rewrite them safely, one *schedule primitive* at a time.

In this notebook:

1. the course's `mm_relu` (a matrix multiply followed by ReLU) in TVMScript, checked against numpy;
2. the **explorer**: the program, its loop nest and its history in one widget;
3. the chapter-2 transformation (split, reorder, reverse_compute_at, decompose_reduction), step by step;
4. **why** the new loop order is faster, read off the memory each loop touches;
5. a sweep over the split factor, measured on this machine.
""",
    ),
    (
        "code",
        r"""
import os

import numpy as np
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

import mlc_lab
from mlc_lab.core.measure import sweep
from mlc_lab.widgets.measure import sweep_figure

# MLC_LAB_QUICK=1 (set by the test suite and CI) keeps the sweep short; leave it unset in class.
QUICK = os.environ.get("MLC_LAB_QUICK", "0") == "1"
""",
    ),
    (
        "md",
        r"""
## The program

`Y = A @ B` then `C = max(Y, 0)`, all 128×128 float32. Three things to notice in the script:

* **buffers**: the parameters `A`, `B`, `C` and the intermediate `Y`;
* **loop nests**: `T.grid(128, 128, 128)` is three nested loops `i, j, k`;
* **blocks** (`T.sblock`): the unit of computation. A block names its iteration axes and says what
  each one is: `vi, vj` are *spatial* (every value writes a different element, so they could run
  in any order or in parallel) and `vk` is a *reduce* axis (values are summed into the same `Y[vi, vj]`,
  starting from the `T.init()` value).

This is TVM 0.27's spelling (`tirx`, `T.sblock`, `s_tir=True`); the course's older spelling
(`tir`, `T.block`) is accepted everywhere mlc_lab takes a program, see notebook 5.
""",
    ),
    (
        "code",
        r"""
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
""",
    ),
    (
        "md",
        r"""
The same loops in plain Python, next to numpy's one-liner. The loop version is what the TensorIR
program means; we run it on a 24×24 corner because Python loops are slow.
""",
    ),
    (
        "code",
        r"""
def loops_mm_relu(A, B, C):
    n, m, K = A.shape[0], B.shape[1], A.shape[1]
    Y = np.empty((n, m), dtype="float32")
    for i in range(n):
        for j in range(m):
            for k in range(K):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(n):
        for j in range(m):
            C[i, j] = max(Y[i, j], 0)


rng = np.random.default_rng(0)
a_np = rng.random((128, 128), dtype=np.float32) - 0.5
b_np = rng.random((128, 128), dtype=np.float32) - 0.5
small = 24
c_loops = np.empty((small, small), dtype="float32")
loops_mm_relu(a_np[:small, :small], b_np[:small, :small], c_loops)
np.testing.assert_allclose(c_loops, np.maximum(a_np[:small, :small] @ b_np[:small, :small], 0), rtol=1e-5, atol=1e-6)
print("the loop version agrees with numpy")
""",
    ),
    (
        "md",
        r"""
## The explorer

`mlc_lab.explore` opens a *session* on the program: the script on the left (changed lines are
highlighted after each step), the loop nest on the right, the primitives you can apply to what you
select, and the history. Click a loop, pick a primitive, fill the form, apply. Every click calls the
same Python methods you can call yourself, so the cells below and the widget stay in step: run a cell
and watch the explorer change.
""",
    ),
    (
        "code",
        r"""
explorer = mlc_lab.explore(MyModule)
session = explorer.session
explorer
""",
    ),
    (
        "md",
        r"""
## The chapter-2 walk-through

Loops and blocks are named as they appear in the script. Both loop nests have an `i` and a `j`, so
`Y/j` means "the `j` around block `Y`". Each `apply` returns the names of the loops it created.

**Step 1: split.** Cut `j` (128) into `j_0` (32) × `j_1` (4). `None` lets TVM infer that factor.
The cell starts from the original program (`goto(0)`), so steps you clicked in the explorer above do
not get in the way; they stay in its history, as a branch you can go back to.
""",
    ),
    (
        "code",
        r"""
session.goto(0)
j0, j1 = session.apply("split", "Y/j", factors=[None, 4])
print(j0, j1)
print(session.script_of_function("mm_relu"))
""",
    ),
    (
        "md",
        r"""
**Step 2: reorder** to `i, j_0, k, j_1`: the innermost loop now walks along a *row* of `B` and `Y`
instead of down a column of `B`.
""",
    ),
    (
        "code",
        r"""
session.apply("reorder", "Y/i", j0, "k", j1)
print(session.script_of_function("mm_relu"))
""",
    ),
    (
        "md",
        r"""
**Step 3: reverse_compute_at** moves block `C` (the ReLU) inside `j_0`: the four `Y` values are
turned into `C` right after they are computed, while they are still in cache.

**Step 4: decompose_reduction** takes the `T.init()` out of the block as its own block `Y_init`,
placed above `k`. TVM would do this when compiling anyway; doing it here makes it visible.
""",
    ),
    (
        "code",
        r"""
session.apply("reverse_compute_at", "C", j0)
session.apply("decompose_reduction", "Y", "k")
chapter = session.current.id   # this chapter's schedule: the cells below read this step, whatever you click
print(f"step {chapter}:")
print(session.script_of_function("mm_relu"))
""",
    ),
    (
        "md",
        r"""
The schedule so far is recorded as a *trace*, TVM's own record of every step. It replays on the
original program and gives the same result (the explorer's trace panel shows it too).
From here on the cells read step `chapter` (`step=chapter`), so clicking on in the explorer
does not change what they show; they say which step they measured.
""",
    ),
    (
        "code",
        r"""
print(session.submission(chapter))   # step `chapter`'s trace, as a function that runs on a tvm Schedule
replayed = mlc_lab.Session.from_trace(MyModule, session.submission(chapter))
print("replays to the same program:", replayed.script == session.script_at(chapter))
""",
    ),
    (
        "md",
        r"""
## Why is the new order faster? The memory each loop touches

A CPU does not fetch one float at a time: it moves 64-byte *cache lines* (16 floats). A loop whose
consecutive iterations read neighbouring addresses uses every float of each line it brings in; a loop
that jumps by a whole row pays a new line for every single float.

`session.footprint(loop, at=...)` answers, for one loop with the loops around it held at `at`, which
elements of every buffer its iterations touch, in which order, and with which stride per loop. Below:
the inner loops of `Y` before the transformation (`k` at `i = j = 0`) and after it (`k` with `j_1`
inside, at `i = j_0 = 0`). Colour is the order of first touch (dark = early).
""",
    ),
    (
        "code",
        r'''
import plotly.graph_objects as go
from plotly.subplots import make_subplots


def footprint_figure(fp, names, title, crop=(32, 32)):
    """Heat maps of the first-touch order of each buffer (untouched elements blank), top-left corner."""
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.06)
    for col, name in enumerate(names, start=1):
        order = fp[name].first_touch[: crop[0], : crop[1]].astype(float)
        order[order < 0] = np.nan
        fig.add_trace(go.Heatmap(z=order, colorscale="Viridis", showscale=False, hoverongaps=False,
                                 hovertemplate="row %{y}, col %{x}: step %{z}<extra>" + name + "</extra>"),
                      row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    fig.update_layout(title=title, height=330, margin=dict(l=30, r=10, t=70, b=30), template="plotly_white")
    return fig


def footprint_table(fp, names):
    for name in names:
        s = fp[name].summary()
        per_line = s["distinct"] / s["cache_lines"] if s["cache_lines"] else 0
        print(f"  {name}: {s['distinct']:4d} elements in {s['cache_lines']:3d} cache lines "
              f"({per_line:4.1f} useful floats per line), strides per loop {s['strides']}")


original = mlc_lab.Session(MyModule)
before_fp = original.footprint("Y/k", at={"Y/i": 0, "Y/j": 0})
after_fp = session.footprint("k", at={"i": 0, "j_0": 0}, step=chapter)
print("before: loop k of Y, at i = j = 0")
footprint_table(before_fp, ["A", "B", "Y"])
print(f"after (step {chapter}): loops k, j_1 of Y_update, at i = j_0 = 0")
footprint_table(after_fp, ["A", "B", "Y"])
''',
    ),
    (
        "code",
        r"""
footprint_figure(before_fp, ["A", "B", "Y"], "before: k innermost walks down a column of B").show()
footprint_figure(after_fp, ["A", "B", "Y"], "after: j_1 innermost walks along rows of B and Y").show()
""",
    ),
    (
        "md",
        r"""
Read the numbers above: before, the 128 floats of `B` that one `(i, j)` needs sit in 128 different
cache lines (stride 128 floats for `k`). After, each cache line of `B` that is brought in serves
`j_1`'s 4 consecutive floats (stride 1 for `j_1`). A larger `j_1` uses more of each line, which is
what the sweep at the end of this notebook measures.

The **access view** shows the same data interactively: pick a loop, move the enclosing loops with
the sliders, scrub through time, colour by order or by access kind. It opens on `replayed`, this
chapter's program in a session of its own (the explorer's **Memory** panel follows your clicks).
""",
    ),
    (
        "code",
        r"""
try:
    from mlc_lab.widgets.access.view import access_view
except ImportError:  # an older mlc_lab without the access view: the figures above carry the same data
    access_view = None
view = access_view(replayed, "k", at={"i": 0, "j_0": 0}) if access_view is not None else None
view
""",
    ),
    (
        "md",
        r"""
## Measure it

`session.measure(step=...)` builds a step for this machine's CPU, checks its output against the
original program on random inputs, and times it (in a separate process, so a crashing program
cannot take the notebook down). Nothing below is typed in: every number is measured now.
""",
    ),
    (
        "code",
        r"""
m_before = session.measure(step=0)
m_after = session.measure(step=chapter)
for label, m in (("original", m_before), (f"step {chapter}", m_after)):
    print(f"{label:12s} {m.latency_s * 1e3:8.3f} ms  {m.gflops:6.2f} GFLOPS  correct={m.correct}  max error {m.max_abs_error:.2g}")
print(f"speed-up of step {chapter} (the schedule above) over the original: {m_before.latency_s / m_after.latency_s:.2f}x")
""",
    ),
    (
        "md",
        r"""
## What did the compiler make of it?

`session.lower(step)` compiles a step the way `tvm.compile` does and keeps everything on the way:
every lowering pass with the TVMScript after it (or "no-op"), then the LLVM IR and the assembly.
Each machine instruction carries the line of the step's script it came from, so the facts are per
loop: how wide the vector operations are, how many FMAs are packed or scalar, how many loads.
(The explorer shows the same in its **Compiler** view: pick it in the toolbar, click a loop.)

The original program's innermost loop is `k`, which walks *down a column* of `B` (stride 128); the
transformed one has `j_1` innermost, walking *along a row* of `B` and `Y` (stride 1).
""",
    ),
    (
        "code",
        r"""
low_before = session.lower(step=0)
low_after = session.lower(step=chapter)
print("original:   ", low_before.verdict)
print(f"step {chapter}:    ", low_after.verdict)
for label, low, loop in (("original", low_before, "k"), (f"step {chapter}", low_after, "j_1")):
    f = low.loop(loop)
    width = f"{f.vector_width}-wide on {f.register}" if f.vector_width else "scalar"
    print(f"{label:12s} innermost {f.name:4s} ({f.kind}): {width}; FMAs {f.vector_fma} packed / {f.scalar_fma} scalar; "
          f"loads {f.vector_loads} vector / {f.scalar_loads} scalar")
""",
    ),
    (
        "md",
        r"""
Read it as: along `k`, the elements of `B` are 512 bytes apart, so the compiler can only load them one
at a time and the loop stays scalar. Along `j_1`, they are neighbours, and LLVM may pack the
iterations of `j_1` into vector FMAs *on its own*, without being asked (the verdict says whether it
did). The new order is faster twice over: fewer cache lines (the footprint above) and fewer
instructions.

## What did `vectorize` do?

Now ask for it explicitly, with `j_1` of 16 (one 64-byte cache line of floats). The pass
`tirx.VectorizeLoop` replaces the loop by vector expressions (`T.Ramp` is "16 consecutive
addresses", `T.Broadcast` "one value in all 16 lanes"); the verdict says what reached the machine.
""",
    ),
    (
        "code",
        r"""
import difflib

vec = mlc_lab.Session(MyModule)
j0v, j1v = vec.apply("split", "Y/j", factors=[None, 16])
vec.apply("reorder", "Y/i", j0v, "k", j1v)
before_vec = vec.lower()
vec.apply("vectorize", j1v)
after_vec = vec.lower()
print("before vectorize:", before_vec.loop("j_1").verdict)
print("after vectorize: ", after_vec.loop("j_1").verdict)
print(f"{len(after_vec.passes)} passes ran; these changed the program:", ", ".join(p.name for p in after_vec.changed))
(vectorize_pass,) = after_vec.passes_named("VectorizeLoop")
print("".join(difflib.unified_diff(after_vec.script_before(vectorize_pass).splitlines(True),
                                   after_vec.script_after(vectorize_pass).splitlines(True),
                                   "before tirx.VectorizeLoop", "after", n=0)))
""",
    ),
    (
        "code",
        r"""
excerpt = after_vec.asm_around_first("j_1", "vector_fma")
if excerpt is None:
    print("j_1's machine code holds no packed FMA on this CPU: the verdict above says what it does instead")
else:
    print("j_1's body around its first packed FMA, marked => (x86 assembly, AT&T syntax: source operands first):")
    print(excerpt)
""",
    ),
    (
        "md",
        r"""
The marked `vfmadd...ps` is a packed fused multiply-add: one instruction, as many floats as the
register holds (`xmm` 4, `ymm` 8, `zmm` 16). How many loads LLVM places ahead of the first one
depends on the CPU it compiled for, which is why the excerpt is found, not cut at a fixed line.
On Intel CPUs with AVX-512, LLVM's own vectorizer prefers 256-bit `ymm` registers (512-bit code
lowers the clock), so a 16-wide loop it vectorizes by itself runs as two
8-wide halves; the verdicts above say which happened on this machine.
""",
    ),
    (
        "md",
        r"""
## How does the split factor matter?

The course asks: try other values of `j_1`'s extent (`jfactor`). `sweep` measures one schedule per
value, `sweep_figure` plots latency against it (log axes, min-max bars, the best marked).
""",
    ),
    (
        "code",
        r"""
JFACTORS = [1, 4, 16, 128] if QUICK else [1, 2, 4, 8, 16, 32, 64, 128]


def transform(jfactor):
    s = mlc_lab.Session(MyModule)
    j0, j1 = s.apply("split", "Y/j", factors=[None, jfactor])
    s.apply("reorder", "Y/i", j0, "k", j1)
    s.apply("reverse_compute_at", "C", j0)
    return s


results = sweep(transform, JFACTORS, repeats=3 if QUICK else 5)
for jf, m in results:
    print(f"jfactor {jf:4d}: {m.latency_s * 1e3:7.3f} ms" if m.ok else f"jfactor {jf}: {m.error}")
sweep_figure(results, param="jfactor", title="mm_relu 128³: latency against the split factor of j")
""",
    ),
    (
        "code",
        r"""
best_jf, best_m = min(((jf, m) for jf, m in results if m.ok), key=lambda r: r[1].latency_s)
print(f"best jfactor here: {best_jf} ({best_m.latency_s * 1e3:.3f} ms, "
      f"{m_before.latency_s / best_m.latency_s:.1f}x faster than the original)")
""",
    ),
    (
        "md",
        r"""
Your curve depends on your CPU (cache sizes, vector width) and on what else the machine is doing.
Things to try in the explorer above: `vectorize` the innermost `j_1`, `parallel` the outer `i`,
or `undo` and try another order. Then measure again.
""",
    ),
    (
        "md",
        r"""
## How far from what the machine can do?

A latency alone does not say whether a schedule is good. `mlc_lab.machine()` measures this CPU
once (then remembers it): its peak floating-point rate, with a multiply-add kernel TVM generates
for all cores, and its memory bandwidth, with a generated STREAM kernel. Every measurement carries
its **arithmetic intensity** (FLOPs per byte the program must move) and its **fraction of the
peak**. On the **roofline** below, the slanted line is the memory's limit and the flat line the
arithmetic's: a point far under the roof has room to grow, and the roof above it says what to
work on.
""",
    ),
    (
        "code",
        r"""
from mlc_lab.widgets.measure import roofline_figure

machine = mlc_lab.machine()
print(machine)
print(f"best jfactor: {best_m.gflops:.1f} GFLOP/s, {best_m.fraction_of_peak:.1%} of the roof "
      f"at {best_m.intensity:.1f} FLOPs/byte")
roofline_figure(results, param="jfactor", machine=machine, title="mm_relu 128³ on this machine's roofline")
""",
    ),
]

NOTEBOOKS["02_exercises.ipynb"] = [
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
        r"""
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
        r"""
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
        r"""
@I.ir_module
class BroadcastAddSolution:
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"), C: T.Buffer((4, 4), "int64")):
        T.func_attr({"global_symbol": "add", "tirx.noalias": True})
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]


exercises.check_broadcast_add(BroadcastAddSolution)
""",
    ),
    (
        "code!",
        r"""
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

NOTEBOOKS["03_auto_opt.ipynb"] = [
    (
        "md",
        r"""
# 3. Automatic program optimisation

In notebook 1 we picked the split factor by hand and measured a handful of values. Here the
*schedule itself* leaves the choice open: a **stochastic schedule** samples its factors, every
sample is a program, and the set of programs it can produce is a **search space**. A search
then measures candidates and keeps the best. TVM's `meta_schedule` does this at scale, with a cost
model and an evolutionary search instead of blind sampling.

1. a stochastic schedule, its sampled decisions as knobs (in Python and in the explorer);
2. random search by hand, latency per trial;
3. `meta_schedule` over *your* space (`space="session"`) and over its default space, with a live dashboard;
4. the tuned kernel put back into the course's two-layer MLP (Relax), end to end before and after.
""",
    ),
    (
        "code",
        r'''
import os
import tempfile
from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

import mlc_lab
from mlc_lab.core.tuning import tune
from mlc_lab.widgets.tuning import dashboard

# Tuning budget per meta_schedule run: 64 trials is a good classroom value (a few minutes on a
# laptop). The test suite sets MLC_LAB_TRIALS=8 so that the notebook runs in CI.
TRIALS = int(os.environ.get("MLC_LAB_TRIALS", "64"))
SEARCH_TRIALS = min(TRIALS, 12)   # the hand-written random search below measures this many
WORK = tempfile.mkdtemp(prefix="mlc_tune_")   # tuning records: a temporary folder, not next to the notebook
print(f"{TRIALS} trials per tuning run; records under {WORK}")


def best_of(job, session):
    """The job's best candidate so far. A run cancelled before it measured anything has none: say so,
    and let the session's own schedule stand in for it (run the tuning cell again to tune)."""
    best = job.best
    if best is not None:
        return best
    print(f"The tuning run was {job.status} before any candidate was measured, so there is no tuned "
          f"program: the schedule it started from stands in for it below. Run the tuning cell again to tune.")
    m = session.measure()
    return SimpleNamespace(trial=None, latency_s=m.latency_s, trace=session.trace, gflops=m.gflops)


def tuned_or_not(best, name):
    """A label that says whether ``best`` was tuned or is the untuned schedule standing in for it."""
    return f"tuned ({name})" if best.trial is not None else f"not tuned ({name})"
''',
    ),
    (
        "md",
        r"""
## The program: a 128×128 matmul
""",
    ),
    (
        "code",
        r"""
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


baseline = mlc_lab.Session(MyModule).measure()
print(f"unscheduled: {baseline.latency_s * 1e3:.3f} ms ({baseline.gflops:.2f} GFLOPS)")
""",
    ),
    (
        "md",
        r"""
## A stochastic schedule

The deterministic schedule of the course splits `j` by a fixed 4. The stochastic one asks
`sample_perfect_tile` for two factors whose product is 128 and splits with them. The sampled
values are *decisions*: the trace records them, and changing one replays the schedule with the new
value. `session.decisions` lists each one with all the values it may take.
""",
    ),
    (
        "code",
        r"""
explorer = mlc_lab.explore(MyModule)
stoch = explorer.session
tiles = stoch.apply("sample_perfect_tile", "j", n=2)
j0, j1 = stoch.apply("split", "j", factors=tiles)
stoch.apply("reorder", "i", j0, "k", j1)
stoch.apply("decompose_reduction", "C", "k")
decision = stoch.decisions[0]
print("sampled:", decision["value"], " possible:", decision["choices"])
explorer
""",
    ),
    (
        "md",
        r"""
In the explorer the decision is a knob in the trace panel. From Python, `set_decision` does the
same: it replays the schedule with the new value, as a new step of the history.
""",
    ),
    (
        "code",
        r"""
for choice in decision["choices"]:
    stoch.set_decision(0, choice)
    m = stoch.measure(repeats=3)
    print(f"decision {choice}: j_1 has extent {choice[1]:3d}, {m.latency_s * 1e3:.3f} ms")
""",
    ),
    (
        "md",
        r"""
## Random search by hand

The course's `random_search`: draw the schedule again and again (a different seed each time),
measure each program, keep the best. Every draw is independent; nothing is learned between them.
""",
    ),
    (
        "code",
        r"""
def stochastic_schedule_mm(session):
    tiles = session.apply("sample_perfect_tile", "j", n=2)
    j0, j1 = session.apply("split", "j", factors=tiles)
    session.apply("reorder", "i", j0, "k", j1)
    session.apply("decompose_reduction", "C", "k")
    return session


search = []
for trial in range(SEARCH_TRIALS):
    s = stochastic_schedule_mm(mlc_lab.Session(MyModule, seed=trial + 1))
    m = s.measure(repeats=3)
    search.append((trial, s.decisions[0]["value"], m.latency_s))
    print(f"trial {trial:2d}: decision {s.decisions[0]['value']}, {m.latency_s * 1e3:.3f} ms")
best_trial = min(search, key=lambda r: r[2])
print(f"best: trial {best_trial[0]}, decision {best_trial[1]}, {best_trial[2] * 1e3:.3f} ms")
""",
    ),
    (
        "code",
        r"""
trials = [r[0] for r in search]
lat_ms = [r[2] * 1e3 for r in search]
best_so_far = np.minimum.accumulate(lat_ms)
fig = go.Figure()
fig.add_scatter(x=trials, y=lat_ms, mode="markers", name="trial",
                text=[str(r[1]) for r in search], hovertemplate="trial %{x}: %{y:.3f} ms, decision %{text}<extra></extra>")
fig.add_scatter(x=trials, y=best_so_far, mode="lines", name="best so far", line_shape="hv")
fig.update_layout(title="random search over the stochastic schedule", xaxis_title="trial",
                  yaxis_title="latency (ms)", yaxis_type="log", template="plotly_white", height=360)
fig
""",
    ),
    (
        "md",
        r"""
## meta_schedule over your own space

`tune(session, space="session")` turns the steps of a session into a search space: every split with
literal factors becomes a sampled split of the same loop. Below, the course's deterministic
`schedule_mm` (split `j` by 4, reorder, decompose), so meta_schedule explores the same family as
the random search, with its cost model and evolutionary search. The job runs in its own process
(cancel it any time; the records stay in the work directory). The dashboard shows latency per trial
as measurements arrive; click a point to see that trial's trace and program.
""",
    ),
    (
        "code",
        r"""
student = mlc_lab.Session(MyModule)
j0, j1 = student.apply("split", "j", factors=[None, 4])
student.apply("reorder", "i", j0, "k", j1)
student.apply("decompose_reduction", "C", "k")

job_session = tune(student, trials=TRIALS, space="session", work_dir=os.path.join(WORK, "session_space"))
board = dashboard(job_session, student)
board
""",
    ),
    (
        "code",
        r"""
print("status:", job_session.wait())
best = best_of(job_session, student)
if best.trial is not None:
    print(f"{len(job_session.records())} distinct candidates measured (the space is small); "
          f"best {best.latency_s * 1e3:.3f} ms at trial {best.trial}")
if job_session.stopped_early:
    print("why it stopped early:", job_session.stopped_early["reason"])
print(best.trace)
""",
    ),
    (
        "md",
        r"""
## meta_schedule's own space

Without `space=`, meta_schedule builds its default space for the target: multi-level tiling,
a cached write, parallel outer loops, vectorised inner loops, unrolling. Many more decisions, so
many more trials pay off.
""",
    ),
    (
        "code",
        r"""
job_auto = tune(student, trials=TRIALS, space="auto", work_dir=os.path.join(WORK, "auto_space"))
dashboard(job_auto, student)
""",
    ),
    (
        "code",
        r"""
print("status:", job_auto.wait())
best_auto = best_of(job_auto, student)
tuned = mlc_lab.Session.from_trace(MyModule, best_auto.trace)
m_tuned = tuned.measure()
print(tuned.script)
print(f"unscheduled      {baseline.latency_s * 1e3:8.3f} ms")
print(f"random search    {best_trial[2] * 1e3:8.3f} ms")
print(f"{tuned_or_not(best, 'session'):16s} {best.latency_s * 1e3:8.3f} ms")
print(f"{tuned_or_not(best_auto, 'default'):16s} {m_tuned.latency_s * 1e3:8.3f} ms  "
      f"({m_tuned.gflops:.1f} GFLOPS, correct={m_tuned.correct})")
""",
    ),
    (
        "md",
        r"""
## Back into the model: the MLP in Relax

The course's two-layer MLP (784 → 128 → ReLU → 10) as a Relax program: `linear0` is a TensorIR
function, the ReLU and the second layer call out to Python functions registered with TVM
(`env.relu`, `env.linear`, numpy underneath). The weights are random numbers made here: we measure
speed, not accuracy, so nothing is downloaded.
""",
    ),
    (
        "code",
        r"""
from tvm import relax
from tvm.script import relax as R


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


@tvm.register_global_func("env.linear", override=True)
def env_linear(x, w, b, out):
    np.from_dlpack(out)[:] = np.from_dlpack(x) @ np.from_dlpack(w).T + np.from_dlpack(b)


@tvm.register_global_func("env.relu", override=True)
def env_relu(x, out):
    np.maximum(np.from_dlpack(x), 0, out=np.from_dlpack(out))
""",
    ),
    (
        "code",
        r'''
rng = np.random.default_rng(0)
params = {
    "w0": (rng.standard_normal((128, 784)) * 0.05).astype("float32"),
    "b0": (rng.standard_normal(128) * 0.1).astype("float32"),
    "w1": (rng.standard_normal((10, 128)) * 0.1).astype("float32"),
    "b1": (rng.standard_normal(10) * 0.1).astype("float32"),
}
image = rng.random((1, 784), dtype=np.float32)   # stands in for a 28x28 picture
expected = np.maximum(image @ params["w0"].T + params["b0"], 0) @ params["w1"].T + params["b1"]

dev = tvm.cpu()
target = tvm.target.Target.from_device(dev)   # this CPU (plain "llvm" is generic and slower)
nd_params = {k: tvm.runtime.tensor(v, dev) for k, v in params.items()}
x_nd = tvm.runtime.tensor(image, dev)


def run_mlp(module, linear0=None):
    """Bind the weights (and swap in a new linear0), build for this CPU, check against numpy,
    time end to end (ms)."""
    bound = relax.transform.BindParams("main", nd_params)(module)
    if linear0 is not None:
        bound.update_func(bound.get_global_var("linear0"), linear0)
    vm = relax.VirtualMachine(tvm.compile(bound, target=target), dev)
    out = vm["main"](x_nd).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    timer = vm.time_evaluator("main", dev, number=100, repeat=5)
    return timer(x_nd).mean * 1e3


mlp_before_ms = run_mlp(MyModuleMixture)
print(f"MLP with the naive linear0: {mlp_before_ms:.4f} ms per image")
''',
    ),
    (
        "md",
        r"""
Tune `linear0` alone (a session on that one function of the module), then swap the tuned function in
with `update_func` and measure the whole model again.
""",
    ),
    (
        "code",
        r"""
linear0 = mlc_lab.Session(MyModuleMixture, func="linear0")
job_linear = tune(linear0, trials=TRIALS, space="auto", work_dir=os.path.join(WORK, "linear0"))
dashboard(job_linear, linear0)
""",
    ),
    (
        "code",
        r"""
print("status:", job_linear.wait())
best_linear0 = best_of(job_linear, linear0)
tuned_linear0 = mlc_lab.Session.from_trace(MyModuleMixture, best_linear0.trace, func="linear0")

if best_linear0.trial is None:   # nothing was tuned: the MLP keeps its naive linear0, nothing to compare
    print(f"linear0 alone: {best_linear0.latency_s * 1e3:.4f} ms, not tuned (the run was {job_linear.status})")
    print(f"MLP end to end: {mlp_before_ms:.4f} ms with the naive linear0; run the tuning cell again to compare")
else:
    mlp_after_ms = run_mlp(MyModuleMixture, linear0=tuned_linear0.module["linear0"])
    print(f"linear0 alone: {best_linear0.latency_s * 1e3:.4f} ms after tuning")
    print(f"MLP end to end: {mlp_before_ms:.4f} ms -> {mlp_after_ms:.4f} ms "
          f"({mlp_before_ms / mlp_after_ms:.2f}x), outputs still match numpy")
""",
    ),
    (
        "md",
        r"""
The end-to-end gain is smaller than `linear0`'s own: the other two calls and the VM's own work did
not get faster. That is the usual picture, and why real compilers tune every kernel and fuse them.
""",
    ),
    (
        "md",
        r"""
## The chapter on one picture: the roofline

Each schedule of this notebook, measured the same way (`measure`: warm-up, median of repeats, all
cores), placed against what this machine can do (`mlc_lab.machine()`). All of them do the same
FLOPs on the same bytes, so they stand on one vertical line: the distance to the roof is what
tuning won, and what is left.
""",
    ),
    (
        "code",
        r"""
from mlc_lab.widgets.measure import roofline_figure

m_session = mlc_lab.Session.from_trace(MyModule, best.trace).measure()
points = [("unscheduled", baseline), (tuned_or_not(best, "your space"), m_session),
          (tuned_or_not(best_auto, "default space"), m_tuned)]
for name, m in points:
    print(f"{name:22s} {m.gflops:8.1f} GFLOP/s = {m.fraction_of_peak:6.1%} of the roof")
roofline_figure(points, param="schedule", machine=mlc_lab.machine(), title="MyModule 128³ on this machine's roofline")
""",
    ),
]

NOTEBOOKS["04_gpu.ipynb"] = [
    (
        "md",
        r"""
# 4. GPU acceleration

A GPU runs thousands of threads. In CUDA terms, threads are grouped in **thread blocks** (a block
runs on one streaming multiprocessor, and its threads can share fast on-chip **shared memory**), and
every thread knows its `threadIdx` and its block's `blockIdx`. A TensorIR schedule targets a GPU by
*binding* loops to those indices (`sch.bind(loop, "threadIdx.x")`).

This notebook works with or without a GPU. Without one, everything that does not need to *run* a
kernel still works: building the CUDA code, reading it, and analysing how threads touch memory
(coalescing of global memory, bank conflicts of shared memory). **Timings need a GPU**: those cells
say so and skip.
""",
    ),
    (
        "code",
        r'''
import os

import numpy as np
import plotly.graph_objects as go
import tvm
from plotly.subplots import make_subplots

import mlc_lab
from mlc_lab.errors import MlcLabError
from mlc_lab.tvm.measure.build import gpu_present

# Tuning budget for meta_schedule on the GPU (used only when there is one). CI sets it small.
TRIALS = int(os.environ.get("MLC_LAB_TRIALS", "64"))
HAS_GPU = gpu_present()
print("CUDA GPU found: kernels will be timed" if HAS_GPU else
      "no CUDA GPU here: kernels are built and analysed, but timing needs a GPU")


def time_on_gpu(session, label, step=None):
    """GFLOPS of the step (default: current) on the GPU (checked against the original program), or a note."""
    if not HAS_GPU:
        print(f"{label}: built and checked statically; timing needs a GPU")
        return None
    m = session.measure(target="cuda", step=step)
    print(f"{label}: {m.latency_s * 1e6:.1f} us, {m.gflops:.1f} GFLOPS, correct={m.correct}")
    return m


def warp_table(stats):
    """One line per memory access of the analysed warp."""
    print(f"launch {stats.launch}; warp {stats.warp} = threads {stats.threads[0]}..{stats.threads[-1]}")
    for a in stats.accesses:
        if a.sectors_per_request is not None:
            fig = (f"{a.sectors_per_request:5.1f} sectors/request, {a.efficiency:5.0%} of the bytes moved are used")
        elif a.bank_conflicts is not None:
            fig = f"{a.wavefronts} wavefronts, {a.bank_conflicts} bank conflicts (worst {a.max_ways}-way)"
        else:
            fig = a.note or ""
        print(f"  {a.kind:10s} {a.buffer}[{a.index}] in {a.block} ({a.scope}): {fig}")
''',
    ),
    (
        "md",
        r"""
## Vector add

`C[i] = A[i] + B[i]` for 1024 elements: split `i` into blocks of 128 threads.
""",
    ),
    (
        "code",
        r'''
VEC_ADD = """
from tvm.script import ir as I
from tvm.script import tirx as T

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
vec = mlc_lab.Session(VEC_ADD)
i0, i1 = vec.apply("split", "i", factors=[None, 128])
vec.apply("bind", i0, "blockIdx.x")
vec.apply("bind", i1, "threadIdx.x")
print(vec.script_of_function("main"))
''',
    ),
    (
        "md",
        r"""
The CUDA kernel TVM generates (no GPU needed to build it): one thread per element,
`blockIdx.x * 128 + threadIdx.x`.
""",
    ),
    (
        "code",
        r"""
cuda = vec.cuda_source()
print(cuda.source)
print(cuda.kernels)
""",
    ),
    (
        "md",
        r"""
**Coalescing.** The 32 threads of a *warp* issue each load together. When they read 32 neighbouring
floats (128 bytes), the memory system moves four 32-byte sectors and every byte is used. Below, the
analysis of warp 0, then the same computation with the split the other way round (thread `t` of
block `b` handles element `8t + b`): neighbouring threads are 32 bytes apart, every lane needs its
own sector and 7/8 of each sector moved is wasted.
""",
    ),
    (
        "code",
        r"""
warp_table(vec.gpu_stats("i_0"))

strided = mlc_lab.Session(VEC_ADD)
t, b = strided.apply("split", "i", factors=[128, None])
strided.apply("bind", t, "threadIdx.x")
strided.apply("bind", b, "blockIdx.x")
print()
warp_table(strided.gpu_stats("i_0"))
""",
    ),
    (
        "md",
        r"""
## Window sum: shared memory and cooperative fetching

`B[i] = A[i] + A[i + 1] + A[i + 2]`. The 128 threads of a block together need 130 consecutive
elements of `A`, each read three times. `cache_read(..., "shared")` adds a stage that copies them
into shared memory once; `compute_at` puts that copy inside the block; splitting the copy loop and
binding it to `threadIdx.x` makes all 128 threads fetch together (*cooperative fetching*).
""",
    ),
    (
        "code",
        r'''
WINDOW_SUM = """
from tvm.script import ir as I
from tvm.script import tirx as T

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
win = mlc_lab.Session(WINDOW_SUM)
i0, i1 = win.apply("split", "i", factors=[None, 128])
win.apply("bind", i0, "blockIdx.x")
win.apply("bind", i1, "threadIdx.x")
shared = win.apply("cache_read", "C", 0, "shared")
win.apply("compute_at", shared, i1)
f0, f1 = win.apply("split", "ax0", factors=[None, 128])
win.apply("bind", f1, "threadIdx.x")
print(win.script_of_function("main"))
''',
    ),
    (
        "code",
        r"""
cuda = win.cuda_source()
print(cuda.source)
k = cuda.kernels[0]
print(f"{k['blocks']} blocks x {k['threads_per_block']} threads, {k['shared_bytes']} bytes of shared memory per block")
""",
    ),
    (
        "code",
        r"""
warp_table(win.gpu_stats("i_0"))
""",
    ),
    (
        "md",
        r"""
The build shrank the shared buffer to the 130 elements one block uses. The three shared reads are
conflict-free: the 32 threads of a warp read 32 consecutive floats, one per bank.
""",
    ),
    (
        "md",
        r"""
## Matrix multiply on the GPU: local blocking

`C = A @ B`, 1024×1024. The course's first GPU schedule: each thread computes an 8×8 tile of `C`
in registers (`cache_write(..., "local")`), so every value of `A` and `B` it loads is used 8 times;
a thread block of 8×8 threads covers a 64×64 tile. The function is the course's, in today's API
(`get_sblock`); `session.run` records what it does as steps. `target="cuda"` makes the explorer a GPU
one from step 0: its Checks tab judges the GPU's optimisations at every step, before the first bind
too, and Measure times on the GPU (the toolbar's target menu switches both).
""",
    ),
    (
        "code",
        r'''
MATMUL = """
from tvm.script import ir as I
from tvm.script import tirx as T

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


def blocking(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
    block_C = sch.get_sblock("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k0)
    return sch


local = mlc_lab.explore(MATMUL, target="cuda")  # the GPU's checks from step 0, and Measure on the GPU
local.session.run(lambda sch: blocking(sch, 8, 8, 8, 8, 4))
blocked = local.session.current.id   # the cells below analyse this step, whatever you click meanwhile
local
''',
    ),
    (
        "md",
        r"""
Who computes what: below, the top-left 128×128 corner of `C`, coloured by the thread (left) and by
the thread block (right) that writes each element. The 8×8 tiles per thread and 64×64 tiles per
block are the schedule's split factors.
""",
    ),
    (
        "code",
        r"""
def ownership_figure(session, buffer="C", corner=128, title="", step=None):
    fp = session.footprint("i_0", step=step)[buffer]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["thread (linear threadIdx)", "block (linear blockIdx)"])
    for col, data in ((1, fp.thread), (2, fp.block)):
        fig.add_trace(go.Heatmap(z=data[:corner, :corner], colorscale="Turbo", showscale=False,
                                 hovertemplate="C[%{y}, %{x}]: %{z}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    fig.update_layout(title=title, height=380, template="plotly_white", margin=dict(l=30, r=10, t=70, b=30))
    return fig


ownership_figure(local.session, title="local blocking: each thread owns an 8x8 tile of C", step=blocked)
""",
    ),
    (
        "code",
        r"""
cuda = local.session.cuda_source(step=blocked)
print(cuda.source[:2500])
warp_table(local.session.gpu_stats("i_0", step=blocked))
m_local = time_on_gpu(local.session, "local blocking", step=blocked)
""",
    ),
    (
        "md",
        r"""
The warp analysis shows the cost of this schedule: the 32 threads of a warp read `A` from 4 rows
and `B` 8 floats apart, so only one float in eight of every sector moved is used.

## Shared-memory blocking

The threads of one block need the same rows of `A` and columns of `B`. The course's second
schedule stages a 64×8 tile of `A` and an 8×64 tile of `B` in shared memory at every step of `k_0`,
fetched cooperatively (all 64 threads, 4 floats each, vectorised), then computes from shared memory.
""",
    ),
    (
        "code",
        r"""
def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
    sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")


def blocking_with_shared(sch, tile_local_y, tile_local_x, tile_block_y, tile_block_x, tile_k):
    block_C = sch.get_sblock("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block=block_C)
    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    sch.decompose_reduction(block_C, k0)
    return sch


shared_mm = mlc_lab.explore(MATMUL, target="cuda")
shared_mm.session.run(lambda sch: blocking_with_shared(sch, 8, 8, 8, 8, 8))
shared_mm
""",
    ),
    (
        "code",
        r"""
cuda = shared_mm.session.cuda_source()
print(cuda.source[:3000])
k = cuda.kernels[0]
print(f"{k['blocks']} blocks x {k['threads_per_block']} threads, {k['shared_bytes']} bytes of shared memory per block")
""",
    ),
    (
        "md",
        r"""
What does the GPU's own compiler make of this kernel? `session.lower(target="cuda")` runs TVM's
lowering passes, then `nvcc` (to PTX, the GPU's portable assembly) and `ptxas -v`, which reports
the **registers** each thread needs, its shared memory and spills. Registers bound occupancy: a
streaming multiprocessor has 65536 of them, shared by all the threads resident on it.
""",
    ),
    (
        "code",
        r"""
low_gpu = shared_mm.session.lower(target="cuda")
print(low_gpu.verdict)
for kf in low_gpu.kernels:
    per_block = (kf.registers or 0) * k["threads_per_block"]
    print(f"{kf.name}: {kf.registers} registers per thread ({per_block} per block of {k['threads_per_block']} threads), "
          f"{kf.shared_bytes} bytes shared, spills {kf.spill_stores}/{kf.spill_loads} bytes, "
          f"{kf.vector_loads} vector global loads, {kf.shared_loads} shared loads, {kf.fma} FMAs")
if low_gpu.ptx:
    loads = [line.strip() for line in low_gpu.ptx.splitlines() if "ld.global" in line or "ld.shared" in line]
    print("\nsome loads in the PTX:", *loads[:8], sep="\n  ")
else:
    print("no PTX:", low_gpu.ptx_error)
""",
    ),
    (
        "md",
        r"""
Now the global loads are the cooperative fetches: consecutive threads load consecutive `float4`s, so
the sectors are fully used. The reads of the computation come from shared memory, where what matters
is **bank conflicts**: shared memory has 32 banks, and threads of a warp that hit different
addresses in the same bank are served one after another.
""",
    ),
    (
        "code",
        r"""
stats = shared_mm.session.gpu_stats("i_0")
warp_table(stats)
for a in stats.accesses:
    if a.bank_conflicts:
        print(f"-> {a.buffer}[{a.index}] in {a.block}: {a.bank_conflicts / a.wavefronts:.0%} of its wavefronts are "
              f"conflict replays (worst {a.max_ways}-way)")
m_shared = time_on_gpu(shared_mm.session, "shared-memory blocking")
""",
    ),
    (
        "md",
        r"""
Where the shared-memory reads show conflicts, several threads of a warp read different addresses
of the staged tile that are a multiple of 32 floats apart, so they fall into the same bank. Padding each row of the shared buffer (`sch.storage_align`) or another thread layout spreads
them over the banks: try it in the explorer above and run the analysis again.
""",
    ),
    (
        "md",
        r"""
The same data in the access view (choose loop `k_0`, colour by thread, pick a warp):
""",
    ),
    (
        "code",
        r"""
try:
    from mlc_lab.widgets.access.view import access_view
except ImportError:  # an older mlc_lab without the access view
    access_view = None
access_view(shared_mm.session, "k_0") if access_view is not None else None
""",
    ),
    (
        "md",
        r"""
## meta_schedule on CUDA

The tuner searches thread bindings, tile sizes, shared-memory staging and unrolling for the GPU.
It has to *run* candidates, so it needs a GPU (or an RPC runner on a machine with one: pass
`runner="rpc://HOST:PORT/KEY"`). Here it runs only when a GPU is present.
""",
    ),
    (
        "code",
        r"""
from mlc_lab.core.tuning import tune
from mlc_lab.widgets.tuning import dashboard

gpu_job = None
if HAS_GPU:
    gpu_session = mlc_lab.Session(MATMUL)
    gpu_job = tune(gpu_session, target="cuda", trials=TRIALS, space="auto")
    board = dashboard(gpu_job, gpu_session)
else:
    try:
        tune(mlc_lab.Session(MATMUL), target="cuda", trials=TRIALS)
    except MlcLabError as err:  # the tuner says why it cannot run here
        print(err)
    board = None
board
""",
    ),
    (
        "code",
        r"""
if gpu_job is not None and (gpu_job.wait() != "done" or gpu_job.best is None):
    print("the tuning job found no working candidate:", gpu_job.error or gpu_job.summary())
elif gpu_job is not None:
    tuned = mlc_lab.Session.from_trace(MATMUL, gpu_job.best.trace)
    m_tuned = time_on_gpu(tuned, "meta_schedule")
    for label, m in (("local blocking", m_local), ("shared blocking", m_shared), ("meta_schedule", m_tuned)):
        print(f"{label:16s} {m.gflops:8.1f} GFLOPS")
else:
    print("no GPU: the GFLOPS comparison of the three schedules needs one")
""",
    ),
]

NOTEBOOKS["05_playground.ipynb"] = [
    (
        "md",
        r"""
# 5. Playground

Paste any TensorIR program into `PROGRAM` below and run the notebook: the explorer opens on it.
Today's spelling (`tirx`, `T.sblock`) and the course's older one (`tir`, `T.block`, `T.Buffer[...]`,
`tvm.tir.Schedule`, `get_block`, `tvm.build`, ...) both work. The first decorated module or
function in the text is the program; other code in it is *not* run.

Pre-filled: the course's element-wise add with its parallel / unroll / vectorize demo, as the
course printed it (old spelling).
""",
    ),
    (
        "code",
        r'''
import mlc_lab

PROGRAM = """
import numpy as np
import tvm
from tvm.script import tir as T


@tvm.script.ir_module
class MyAdd:
    @T.prim_func
    def add(A: T.Buffer[(4, 4), "int64"],
            B: T.Buffer[(4, 4), "int64"],
            C: T.Buffer[(4, 4), "int64"]):
        T.func_attr({"global_symbol": "add"})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                vj = T.axis.spatial(4, j)
                C[vi, vj] = A[vi, vj] + B[vi, vj]


sch = tvm.tir.Schedule(MyAdd)
block = sch.get_block("C", func_name="add")
i, j = sch.get_loops(block)
i0, i1 = sch.split(i, factors=[2, 2])
sch.parallel(i0)
sch.unroll(i1)
sch.vectorize(j)
rt_lib = tvm.build(sch.mod, target="llvm")
a_tvm = tvm.nd.array(np.arange(16).reshape(4, 4))
"""
''',
    ),
    (
        "md",
        r"""
`mlc_lab.convert` rewrites old course code for today's TVM, keeping your layout and comments (and
marking anything it cannot convert). Copy from its output what you want to keep.
""",
    ),
    (
        "code",
        r"""
print(mlc_lab.convert(PROGRAM))
""",
    ),
    (
        "md",
        r"""
The explorer on the program. Select a loop or a block, pick a primitive, apply; undo and redo freely
(the history is a tree). Errors are explained in a sentence and change nothing.
""",
    ),
    (
        "code",
        r"""
playground = mlc_lab.explore(PROGRAM)
session = playground.session
playground
""",
    ),
    (
        "md",
        r"""
Steps can come from Python too, using the names shown in the script. A function written against
TVM's schedule API (as in the course, with today's `get_sblock`) is recorded step by step with
`session.run`. This is the pre-filled program's demo; change it or skip it for your own program.
""",
    ),
    (
        "code",
        r"""
def schedule(sch):
    block = sch.get_sblock("C", func_name="add")
    i, j = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[2, 2])
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j)


if session.func_name == "add":   # only for the pre-filled example
    session.goto(0)               # from the original program: steps clicked above stay in the history
    session.run(schedule)
print(session.script)
""",
    ),
    (
        "md",
        r"""
Check and time the current step against the original program (random inputs, a separate process),
and list what the innermost loop touches:
""",
    ),
    (
        "code",
        r"""
m = session.measure()
print(f"step {session.current.id}: {m.latency_s * 1e6:.2f} us, correct={m.correct}" if m.ok else m.error)


def innermost(tree):
    last = None
    stack = list(tree["functions"][0]["children"])
    while stack:
        node = stack.pop(0)
        if node["kind"] == "loop":
            last = node.get("qualified") or node["name"]
        stack[:0] = node.get("children", [])
    return last


loop = innermost(session.loop_tree())
for name, fp in session.footprint(loop).items():
    s = fp.summary()
    print(f"{loop}: {name} touches {s['distinct']} element(s), strides {s['strides']}")
""",
    ),
    (
        "code",
        r"""
try:
    from mlc_lab.widgets.access.view import access_view
except ImportError:  # an older mlc_lab without the access view
    access_view = None
access_view(session, loop) if access_view is not None else None
""",
    ),
]

# CELLS_PLACEHOLDER

if __name__ == "__main__":
    main()
