"""The cells of notebooks/04_gpu.ipynb, written out by ``notebooks/_build.py``.

("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened. A cell that
shows a course program prints its text from the course catalog (mlc_lab/tvm/course_programs.py).
"""

from __future__ import annotations

from mlc_lab.tvm.course_programs import PROGRAMS

CELLS: list[tuple[str, str]] = [
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

'''
        + PROGRAMS["gpu_vector_add"].source
        + r'''"""
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

'''
        + PROGRAMS["window_sum"].source
        + r'''"""
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

'''
        + PROGRAMS["gpu_matmul"].source
        + r'''"""


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
