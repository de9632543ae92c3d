"""The cells of notebooks/01_tensorir.ipynb, written out by ``notebooks/_build.py``.

("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened. A cell that
shows a course program prints its text from the course catalog (mlc_lab/tvm/course_programs.py).
"""

from __future__ import annotations

from mlc_lab.tvm.course_programs import PROGRAMS

CELLS: list[tuple[str, str]] = [
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
        PROGRAMS["mm_relu"].source,
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
