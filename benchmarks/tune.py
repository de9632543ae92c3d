"""Tuning figures, printed as one JSON object.

  speed:    64 trials of the 128^3 float32 matmul through `mlc_lab.core.tune.tune` (wall time from
            the call to the end of the job), against a bare `ms.tune_tir` with the same settings
            (same builder, runner, search, trial counts) in a plain subprocess: the job's overhead.
  quality:  64 trials of the 512^3 float32 matmul; the best trial's GFLOPS against numpy's `a @ b`
            measured in a clean subprocess in the same run (TVM's thread pool would slow numpy).

Usage: python benchmarks/tune.py [--trials 64] [--skip-speed] [--skip-bare] [--skip-quality]
The machine's load average is included: on a shared 2-core box the wall times move a lot.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mlc_lab  # noqa: E402
from mlc_lab.core.measure import measure, shutdown_worker  # noqa: E402
from mlc_lab.core.tune import tune  # noqa: E402


def matmul(n: int) -> str:
    return f"""
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
        T.func_attr({{"global_symbol": "main", "tirx.noalias": True}})
        for i, j, k in T.grid({n}, {n}, {n}):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

NUMPY_SNIPPET = """
import json, time, numpy as np
n = {n}
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
for _ in range(5): a @ b
times = []
for _ in range(30):
    t = time.perf_counter(); a @ b; times.append(time.perf_counter() - t)
times.sort()
print(json.dumps({{"median_s": times[len(times) // 2], "min_s": times[0]}}))
"""

BARE_SNIPPET = """
import sys, time
from mlc_lab.tvm import build, tuning
from tvm.s_tir import meta_schedule as ms
import tvm
work_dir, module_path, trials, per_iter, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tuning.install_fast_stack()
target = tvm.target.Target(tuning.tuning_target("cpu"))
tuning.import_tensor_intrinsics(target)
mod = build.module_from_text(open(module_path).read())
ms.tune_tir(mod=mod, target=target, work_dir=work_dir, max_trials_global=trials, num_trials_per_iter=per_iter,
            builder=tuning.InProcessBuilder(), runner=tuning.make_runner({"kind": "local"}, 30, 30),
            database="json", cost_model="xgb", seed=seed, num_tuning_cores=int(target.attrs["num-cores"]))
"""


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def numpy_gflops(n: int) -> dict:
    out = subprocess.run([sys.executable, "-c", NUMPY_SNIPPET.format(n=n)], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    r["gflops"] = 2 * n**3 / r["median_s"] / 1e9
    r["gflops_at_min"] = 2 * n**3 / r["min_s"] / 1e9
    return r


def run_job(n: int, trials: int, per_iter: int, seed: int) -> dict:
    wd = tempfile.mkdtemp(prefix=f"bench_tune_{n}_")
    t0 = time.perf_counter()
    job = tune(mlc_lab.Session(matmul(n)), trials=trials, work_dir=wd, num_trials_per_iter=per_iter, seed=seed)
    status = job.wait()
    wall = time.perf_counter() - t0
    best = job.best
    recs = job.records(with_traces=False)
    return {
        "n": n,
        "status": status,
        "error": job.error,
        "wall_s": round(wall, 2),
        "trials": len(recs),
        "failed": sum(1 for r in recs if not r.ok),
        "best_latency_s": best.latency_s if best else None,
        "best_gflops": best.gflops if best else None,
        "first_record_after_s": min((r.elapsed_s for r in recs if r.elapsed_s is not None), default=None),
        "work_dir": wd,
        "_job": job,
    }


def run_bare(n: int, trials: int, per_iter: int, seed: int) -> dict:
    from mlc_lab.tvm.build import module_to_text

    wd = tempfile.mkdtemp(prefix=f"bench_bare_{n}_")
    module_path = os.path.join(wd, "module.json")
    with open(module_path, "w") as fh:
        fh.write(module_to_text(mlc_lab.load(matmul(n))))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", BARE_SNIPPET, wd, module_path, str(trials), str(per_iter), str(seed)],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - t0
    lines = open(os.path.join(wd, "database_tuning_record.json")).read().splitlines() if proc.returncode == 0 else []
    return {"wall_s": round(wall, 2), "rc": proc.returncode, "trials": len(lines),
            "stderr_tail": proc.stderr[-500:] if proc.returncode else None}


def recheck_best(job, n: int) -> dict | None:
    """Rebuild the best trial from its trace and time it with mlc_lab's own measure (and verify it)."""
    best = job.best
    if best is None or not best.trace:
        return None
    try:
        s = mlc_lab.Session.from_trace(matmul(n), best.trace)
        m = measure(s.module, s.original, s.func_name, repeats=30)
        return {"latency_s": m.latency_s, "min_s": m.min_s, "gflops": m.gflops, "gflops_at_min": m.flops / m.min_s / 1e9,
                "max_abs_error": m.max_abs_error, "correct": m.correct}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--per-iter", type=int, default=16)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-bare", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()

    out: dict = {"cores": len(os.sched_getaffinity(0)), "tvm_num_threads": os.environ.get("TVM_NUM_THREADS"),
                 "loadavg_start": loadavg()}
    if not args.skip_speed:
        speed = run_job(128, args.trials, args.per_iter, args.seed)
        speed.pop("_job")
        out["speed_128"] = speed
    if not args.skip_bare and not args.skip_speed:
        bare = run_bare(128, args.trials, args.per_iter, args.seed)
        out["bare_tune_tir_128"] = bare
        if bare["rc"] == 0:
            out["job_overhead_pct"] = round(100 * (speed["wall_s"] - bare["wall_s"]) / bare["wall_s"], 1)
    if not args.skip_quality:
        quality = run_job(512, args.trials, args.per_iter, args.seed)
        job = quality.pop("_job")
        quality["recheck_with_measure"] = recheck_best(job, 512)
        out["quality_512"] = quality
        npy = numpy_gflops(512)
        out["numpy_512"] = npy
        if quality["best_gflops"]:
            # tuner's own figure (mean of its runs) over numpy's median; and, robust to a loaded
            # machine, the best trial re-timed by measure() (fastest of 30) over numpy's fastest of 30
            out["best_over_numpy"] = round(quality["best_gflops"] / npy["gflops"], 3)
            recheck = quality.get("recheck_with_measure") or {}
            if recheck.get("gflops_at_min"):
                out["best_over_numpy_at_min"] = round(recheck["gflops_at_min"] / npy["gflops_at_min"], 3)
    out["loadavg_end"] = loadavg()
    shutdown_worker()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
