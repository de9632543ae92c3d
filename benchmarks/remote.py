"""Measuring elsewhere, figures printed as one JSON object (issue 37's "Done when"):

  tracker:  a TVM RPC tracker and three servers on 127.0.0.1 running TVM's runtime alone (each its own
            process, one TVM thread, no compiler on its PATH: tests/unit/rpc_cluster.py). Two 64-trial
            tunes of the 128^3 matmul through it (`runner="rpc://..."`, 3 servers at once): one
            undisturbed, one in which a server is killed (kill -9 of its process group) while it
            measures, after the first round. Figures: trials measured and failed, what happened to
            the servers, each run's best by the tuner and both bests re-timed here by `measure` (2
            threads), interleaved (`--retime` rounds), with the spread of each kernel's own
            re-timings (the noise the two bests are compared within).
  slurm:    a one-node Slurm cluster from Debian's packages (tests/unit/slurm_cluster.py): a 64-trial
            tune with `runner="batch:slurm"` (each round of 16 an exclusive job running the measuring
            side, TVM's runtime alone) against the same tune with the local runner; each round's
            wait in the queue and run time; both bests re-timed by `measure`, interleaved.
  sessions: what a sandboxed session costs (issue 32's last door): one tracker, one server of each kind
            on 127.0.0.1 (TVM's own `tvm.exec.rpc_server`; mlc_lab's `mlc_lab.core.server_sandbox` with
            `--unsafe-same-user`; the same, each session in the sandbox), the same built 128^3 matmul
            measured `--sessions` times on each, one session a candidate, the kinds interleaved. Figures:
            each kind's wall time a candidate (request the session, upload, load, check, time, the server
            back at the tracker), its kernel's median latency, and the ratios to TVM's own server.

Usage: python benchmarks/remote.py [--trials 64] [--size 128] [--skip-tracker] [--skip-slurm] [--retime 5]
                                   [--sessions 12] [--skip-sessions]
Slurm needs root (slurmd) and `scripts/install_slurm.sh`. The machine's load average and CPU are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mlc_lab  # noqa: E402
from mlc_lab._threads import cpu_name  # noqa: E402
from mlc_lab.core.measure import measure  # noqa: E402
from mlc_lab.core.session import Session  # noqa: E402
from mlc_lab.core.tuning import TuneJob, tune  # noqa: E402
from mlc_lab.tvm.course_programs import matmul  # noqa: E402
from tests.unit.rpc_cluster import SANDBOXED, Cluster  # noqa: E402
from tests.unit.slurm_cluster import SlurmCluster  # noqa: E402


def load() -> float:
    return round(os.getloadavg()[0], 2)


def run_tune(program, work_dir: str, runner: str, trials: int, servers: int = 1, harm=None) -> dict:
    t0 = time.monotonic()
    job = tune(program, trials=trials, work_dir=work_dir, runner=runner, servers=servers, seed=0)
    harmer = threading.Thread(target=harm, args=(job,), daemon=True) if harm else None
    if harmer:
        harmer.start()
    status = job.wait(timeout=3600)
    if harmer:
        harmer.join(30)
    recs = job.records()
    ok = [r for r in recs if r.ok]
    best = min(ok, key=lambda r: r.latency_s) if ok else None
    return {
        "job": job,
        "status": status,
        "error": job.error,
        "wall_s": round(time.monotonic() - t0, 1),
        "trials": len(recs),
        "failed": len(recs) - len(ok),
        "failures": sorted({(r.error or "")[:160] for r in recs if not r.ok}),
        "best_tuner_s": best.latency_s if best else None,
        "best_trace": best.trace if best else None,
        "best_where": best.where if best else None,
        "servers_used": sorted({r.where for r in recs if r.where}),
        "events": job.events(),
        "load_after": load(),
    }


def retime(program, runs: dict[str, dict], rounds: int) -> dict:
    """Each run's best re-timed here by `measure` (the worker, 2 threads), interleaved `rounds` times:
    the median per run, its spread, and the ratios."""
    sessions = {name: Session.from_trace(program, r["best_trace"]) for name, r in runs.items() if r["best_trace"]}
    figures: dict[str, list[dict]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, s in sessions.items():
            m = measure(s.module, s.original, s.func_name, "cpu", 10, roofline=False)
            figures[name].append({"latency_s": m.latency_s, "quiet": m.quiet, "others_cores": m.others_cores})
    out = {}
    for name, figs in figures.items():
        lat = [f["latency_s"] for f in figs]
        out[name] = {
            "median_s": statistics.median(lat),
            "min_s": min(lat),
            "max_s": max(lat),
            "self_spread": (max(lat) - min(lat)) / statistics.median(lat),
            "quiet": sum(bool(f["quiet"]) for f in figs),
            "figures_s": lat,
        }
    names = list(out)
    if len(names) == 2:
        a, b = names
        out["ratio_" + b + "_over_" + a] = out[b]["median_s"] / out[a]["median_s"]
    return out


def public(run: dict) -> dict:
    return {k: v for k, v in run.items() if k not in ("job", "best_trace")}


def tracker_figures(program, trials: int, work: Path, rounds: int) -> dict:
    runs: dict[str, dict] = {}
    for name in ("undisturbed", "killed"):
        cluster = Cluster(work / f"cluster_{name}", servers=3)
        killed: dict = {}

        def kill_one(job: TuneJob, cluster: Cluster = cluster, killed: dict = killed) -> None:
            while job.status == "running" and len(job.records(with_traces=False)) < 16:
                time.sleep(0.05)
            while job.status == "running":
                busy = cluster.in_session(started_within=0.1)  # a session that just began: the kill lands in it
                if busy:
                    killed.update(server=cluster.addrs[busy[0]], at_trial=len(job.records(with_traces=False)))
                    cluster.kill(busy[0])
                    return
                time.sleep(0.01)

        try:
            runs[name] = run_tune(
                program,
                str(work / f"wd_{name}"),
                cluster.runner,
                trials,
                servers=3,
                harm=kill_one if name == "killed" else None,
            )
            runs[name]["killed"] = killed or None
        finally:
            cluster.close()
    out = {name: public(r) for name, r in runs.items()}
    out["retimed_here"] = retime(program, runs, rounds)
    return out


def slurm_figures(program, trials: int, work: Path, rounds: int) -> dict:
    cluster = SlurmCluster(work / "slurm")
    runs: dict[str, dict] = {}
    try:
        with cluster.configured():
            runs["local"] = run_tune(program, str(work / "wd_local"), "local", trials)
            runs["slurm"] = run_tune(program, str(work / "wd_slurm"), "batch:slurm", trials)
    finally:
        cluster.close()
    rounds_seen = [e for e in runs["slurm"]["events"] if e["event"] in ("round_done", "round_failed")]
    out = {name: public(r) for name, r in runs.items()}
    out["slurm_rounds"] = [
        {k: e.get(k) for k in ("round", "where", "waited_s", "ran_s", "measured", "error")} for e in rounds_seen
    ]
    waits = [e["waited_s"] for e in rounds_seen if e.get("waited_s") is not None]
    out["slurm_wait_per_round_s"] = {"median": statistics.median(waits), "max": max(waits)} if waits else None
    out["retimed_here"] = retime(program, runs, rounds)
    return out


SESSION_KINDS = {  # key -> the server's module and flags (tests/unit/rpc_cluster.py)
    "tvm": [("tvm.exec.rpc_server",)],
    "unsafe": [(SANDBOXED, "--unsafe-same-user")],
    "sandboxed": [(SANDBOXED,)],
}


def session_figures(size: int, sessions: int, work: Path) -> dict:
    """The wall time of one measurement (one session) on each kind of server, interleaved."""
    from mlc_lab.tvm.measure import build, pool

    mod = mlc_lab.load(matmul(size))
    name, one = build.single_function_module(mod, None)
    lib = str(work / "mm.so")
    _export(one, lib)
    inputs, expected = build.reference_outputs(build.module_to_text(mod), name, 0)
    cluster = Cluster(work / "cluster_sessions", servers=0, more=SESSION_KINDS)
    walls: dict[str, list[float]] = {k: [] for k in SESSION_KINDS}
    latencies: dict[str, list[float]] = {k: [] for k in SESSION_KINDS}
    errors: dict[str, list[str]] = {k: [] for k in SESSION_KINDS}
    pools = {k: pool.TrackerPool("127.0.0.1", cluster.port, k, servers=1, session_timeout_s=60) for k in SESSION_KINDS}
    try:
        for i in range(sessions + 1):  # the first round warms each server (its page cache), not counted
            for key, p in pools.items():
                cluster.wait_free(1, key=key)  # the server is back at the tracker: its next session can start
                t0 = time.monotonic()
                (out,) = p.measure([pool.Candidate(f"{key}{i}", lib, name, "cpu", inputs, expected)])
                wall = time.monotonic() - t0
                if not out.ok or not out.correct:
                    errors[key].append(out.error or "wrong outputs")
                elif i:
                    walls[key].append(wall)
                    latencies[key].append(statistics.median(out.results_s))
    finally:
        for p in pools.values():
            p.close()
        cluster.close()
    out: dict = {"sessions": sessions, "load_after": load()}
    for key in SESSION_KINDS:
        w = walls[key]
        out[key] = {
            "measured": len(w),
            "errors": errors[key][:3],
            "wall_s_per_session": {"median": round(statistics.median(w), 3), "min": round(min(w), 3)} if w else None,
            "kernel_median_ms": round(statistics.median(latencies[key]) * 1e3, 4) if w else None,
        }
    for key in ("unsafe", "sandboxed"):
        if walls[key] and walls["tvm"]:
            a, b = statistics.median(walls[key]), statistics.median(walls["tvm"])
            out[f"{key}_over_tvm_wall"] = round(a / b, 2)
            out[f"{key}_minus_tvm_wall_s"] = round(a - b, 3)
    return out


def _export(one, path: str) -> None:
    import tvm

    from mlc_lab.tvm.measure import build

    tvm.compile(one, target=build.cpu_target()).export_library(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--retime", type=int, default=5, help="interleaved re-timings of each best by measure")
    p.add_argument("--skip-tracker", action="store_true")
    p.add_argument("--skip-slurm", action="store_true")
    p.add_argument("--sessions", type=int, default=12, help="measurements on each kind of server (sessions)")
    p.add_argument("--skip-sessions", action="store_true")
    args = p.parse_args(argv)
    program = mlc_lab.load(matmul(args.size))
    out: dict = {"cpu": cpu_name(), "load_before": load(), "trials": args.trials, "size": args.size}
    with tempfile.TemporaryDirectory(prefix="mlc_lab_remote_bench_") as tmp:
        work = Path(tmp)
        if not args.skip_tracker:
            out["tracker"] = tracker_figures(program, args.trials, work, args.retime)
        if not args.skip_slurm:
            out["slurm"] = slurm_figures(program, args.trials, work, args.retime)
        if not args.skip_sessions:
            out["sessions"] = session_figures(args.size, args.sessions, work)
    out["load_after"] = load()
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
