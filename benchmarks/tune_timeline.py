"""Where a tuning job's wall time goes: one 128^3 matmul job (64 trials by default) with its event
log on ($MLC_LAB_TIMELINE, `mlc_lab.timeline`) and its processes' CPU time sampled every
50 ms, printed as one JSON object:

  phases     per batch: search (from the previous batch's last measurement, or the stage's start,
             to its first build; the cost model's training is counted apart), build, measure; with
             the seconds each took and the cores the job's processes used meanwhile (2.0 = both
             cores of this VM busy) and the cores other processes used (others_cores)
  start      process start -> the job's main function (interpreter, imports) -> first search
  builds     per candidate: lowering + LLVM code generation, export (object emission + link)
  measures   per candidate: the runner's timing itself (`evaluate`) and the rest of the call
  totals     wall and CPU seconds per kind of phase; idle core-seconds (2 x wall - job CPU)

Usage: python benchmarks/tune_timeline.py [--trials 64] [--n 128] [--seed 7] [--per-iter 16]
Timings on a shared machine move: the others_cores figures say how much.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import psutil  # noqa: E402

from mlc_lab._contention import _machine_busy_ticks, _TICK  # noqa: E402
from mlc_lab._threads import cpu_name, usable_cores  # noqa: E402


class Sampler(threading.Thread):
    """Cumulative CPU seconds of a process and its descendants, and of the whole machine."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.every = every
        self.samples: list[tuple[float, float, float]] = []  # (epoch, job cpu s, machine busy s)
        self.stop = threading.Event()
        self.dead: dict[int, float] = {}  # CPU of descendants that exited, last seen
        self.members: list[psutil.Process] = [self.root]
        self.create_time = self.root.create_time()

    def run(self) -> None:
        last_scan = 0.0
        seen: dict[int, float] = {}
        while not self.stop.is_set():
            now = time.time()
            if now - last_scan > 0.25:
                try:
                    self.members = [self.root, *self.root.children(recursive=True)]
                except psutil.Error:
                    pass
                last_scan = now
            alive = {}
            for p in self.members:
                try:
                    c = p.cpu_times()
                    alive[p.pid] = c.user + c.system
                except psutil.Error:
                    continue
            for pid, v in seen.items():
                if pid not in alive:
                    self.dead[pid] = v
            seen.update(alive)
            total = sum(alive.values()) + sum(v for k, v in self.dead.items() if k not in alive)
            busy = _machine_busy_ticks()
            self.samples.append((now, total, (busy or 0) / _TICK))
            self.stop.wait(self.every)

    def at(self, t: float) -> tuple[float, float]:
        """(job cpu, machine busy) at time t, interpolated."""
        ts = [s[0] for s in self.samples]
        i = bisect.bisect_left(ts, t)
        if i <= 0:
            return self.samples[0][1:]
        if i >= len(ts):
            return self.samples[-1][1:]
        (t0, a0, b0), (t1, a1, b1) = self.samples[i - 1], self.samples[i]
        f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
        return a0 + f * (a1 - a0), b0 + f * (b1 - b0)

    def cores(self, a: float, b: float) -> tuple[float | None, float | None]:
        """(the job's cores, other processes' cores) over [a, b]."""
        if b - a < 0.1:
            return None, None
        j0, m0 = self.at(a)
        j1, m1 = self.at(b)
        job = (j1 - j0) / (b - a)
        return round(job, 2), round(max(0.0, (m1 - m0) / (b - a) - job), 2)


def spans(events: list[dict], name: str) -> list[tuple[float, float, dict]]:
    """(start, end, start event) of every span `name`, matched per thread."""
    open_: dict = {}
    out = []
    for e in events:
        if e["ev"] != name:
            continue
        key = (e["pid"], e["tid"])
        if not e.get("end"):
            open_[key] = e
        elif key in open_:
            s = open_.pop(key)
            out.append((s["t"], e["t"], s))
    return sorted(out, key=lambda x: x[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--per-iter", type=int, default=16)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    wd = tempfile.mkdtemp(prefix=f"tune_timeline_{args.n}_")
    log = os.path.join(wd, "timeline.jsonl")
    os.environ["MLC_LAB_TIMELINE"] = log  # the job's processes inherit it

    import mlc_lab
    from benchmarks.tune import matmul
    from mlc_lab.core.tuning import tune

    session = mlc_lab.Session(matmul(args.n))
    t_call = time.time()
    job = tune(session, trials=args.trials, work_dir=wd, num_trials_per_iter=args.per_iter, seed=args.seed)
    sampler = Sampler(job.pid)
    sampler.start()
    status = job.wait()
    t_end = time.time()
    sampler.stop.set()
    sampler.join()
    events = [json.loads(x) for x in open(log)] if os.path.exists(log) else []
    first = {e["ev"]: e["t"] for e in reversed(events)}  # first occurrence of each event

    def rel(t: float) -> float:
        return round(t - t_call, 3)

    builds = spans(events, "build_batch")
    measures = spans(events, "measure")
    evaluates = spans(events, "evaluate")
    lowers = spans(events, "lower_codegen")
    exports = spans(events, "export")
    updates = spans(events, "xgb_update")
    predicts = spans(events, "xgb_predict")
    stages = [e["t"] for e in events if e["ev"] == "stage"]
    confirm = spans(events, "confirm")

    phases = []
    prev_end = None
    for k, (b0, b1, bev) in enumerate(builds):
        batch_measures = [m for m in measures if b1 <= m[0] and (k + 1 >= len(builds) or m[1] <= builds[k + 1][0])]
        # the search starts when the previous batch's last measurement ended (its callbacks and the
        # cost model's training included), or for the first batch at the first stage
        s0 = prev_end if prev_end is not None else max([x for x in stages if x <= b0] or [b0])
        upd = sum(u[1] - u[0] for u in updates if s0 <= u[0] < b0)
        pred = sum(p[1] - p[0] for p in predicts if s0 <= p[0] < b0)
        m1 = batch_measures[-1][1] if batch_measures else b1
        ev_in = [e for e in evaluates if b1 <= e[0] <= m1]
        row = {
            "batch": k,
            "search": {
                "from": rel(s0),
                "s": round(b0 - s0, 2),
                "xgb_update_s": round(upd, 2),
                "xgb_predict_s": round(pred, 2),
                "cores": sampler.cores(s0, b0),
            },
            "build": {"from": rel(b0), "s": round(b1 - b0, 2), "n": bev.get("n"), "cores": sampler.cores(b0, b1)},
            "measure": {
                "from": rel(b1),
                "s": round(m1 - b1, 2),
                "n": len(batch_measures),
                "evaluate_s": round(sum(e[1] - e[0] for e in ev_in), 2),
                "cores": sampler.cores(b1, m1),
            },
        }
        phases.append(row)
        prev_end = m1
    per_build = [(round(x[1] - x[0], 3)) for x in lowers]
    per_export = [(round(x[1] - x[0], 3)) for x in exports]
    per_measure = [round(x[1] - x[0], 3) for x in measures]
    per_eval = [round(x[1] - x[0], 3) for x in evaluates]
    wall = t_end - t_call
    job_cpu = sampler.samples[-1][1] if sampler.samples else None

    def total(key: str) -> float:
        return round(sum(p[key]["s"] for p in phases), 2)

    def total_cpu(key: str) -> float:
        return round(sum(p[key]["s"] * (p[key]["cores"][0] or 0) for p in phases), 2)

    out = {
        "cpu": cpu_name(),
        "cores": usable_cores(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "status": status,
        "wall_s": round(wall, 2),
        "job_cpu_s": round(job_cpu, 2) if job_cpu is not None else None,
        "idle_core_s": round(usable_cores() * wall - job_cpu, 2) if job_cpu is not None else None,
        "others_cores": sampler.cores(t_call, t_end)[1],
        "start": {
            "process_started": rel(sampler.create_time),
            "job_main": rel(first["job_main"]) if "job_main" in first else None,
            "runner_ready": rel(first["runner_ready"]) if "runner_ready" in first else None,
            "first_search": rel(stages[0]) if stages else None,
            "first_build": rel(builds[0][0]) if builds else None,
            "first_measure_end": rel(measures[0][1]) if measures else None,
            "cores_to_job_main": sampler.cores(sampler.create_time, first.get("job_main", sampler.create_time))[0],
        },
        "totals": {
            "search_s": total("search"),
            "build_s": total("build"),
            "measure_s": total("measure"),
            "search_cpu_s": total_cpu("search"),
            "build_cpu_s": total_cpu("build"),
            "measure_cpu_s": total_cpu("measure"),
            "xgb_update_s": round(sum(u[1] - u[0] for u in updates), 2),
            "xgb_predict_s": round(sum(p[1] - p[0] for p in predicts), 2),
            "confirm_s": round(confirm[0][1] - confirm[0][0], 2) if confirm else None,
            "after_done_s": round(t_end - first["done"], 2) if "done" in first else None,
        },
        "builds": {
            "n": len(per_build),
            "reused": sum(1 for e in events if e["ev"] == "build_reused"),
            "lower_codegen_s_mean": _mean(per_build),
            "lower_codegen_s_sum": round(sum(per_build), 2),
            "export_s_mean": _mean(per_export),
            "export_s_sum": round(sum(per_export), 2),
        },
        "measures": {
            "n": len(per_measure),
            "call_s_mean": _mean(per_measure),
            "evaluate_s_mean": _mean(per_eval),
            "overhead_s_mean": round(_mean(per_measure) - _mean(per_eval), 4) if per_eval and per_measure else None,
        },
        "phases": phases,
        "work_dir": wd,
    }
    print(json.dumps(out, indent=1))
    return 0


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


if __name__ == "__main__":
    sys.exit(main())
