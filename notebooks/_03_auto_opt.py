"""The cells of notebooks/03_auto_opt.ipynb, written out by ``notebooks/_build.py``.

("md", text) | ("code", source) | ("code!", source): a solution, collapsed when opened. A cell that
shows a course program prints its text from the course catalog (mlc_lab/tvm/course_programs.py).
"""

from __future__ import annotations

from mlc_lab.tvm.course_programs import PROGRAMS

CELLS: list[tuple[str, str]] = [
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
        PROGRAMS["matmul"].source
        + r"""

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


"""
        + PROGRAMS["mlp_mixture"].source
        + r"""

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
