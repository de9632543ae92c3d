"""Another course's GPU lab graded as Gradescope grades it, inside its memory; prints JSON.

    .venv/bin/python benchmarks/teacher_lab.py [--forms trace.json,schedule.py,...] [--names reference,...]
                                               [--engine pocl|oclgrind] [--cpus 0] [--budget-mb 768]

The lab is tests/labs/register_sgemm (a register-tiled SGEMM at 2048^3, four tasks of 20 points, the
numeric check at its default sizes). Each hand-in (default: all 7 hand-ins in all 7 forms) is graded
alone by ``mlc-lab grade lab4.toml HAND-IN --gradescope --out results.json``, as Gradescope's
``run_autograder`` would, on the CPUs ``--cpus`` names (``taskset``). While it runs, the summed RSS of
its whole process tree (the command, the judging child, the worker, the OpenCL run, the sandbox) is
sampled every 20 ms (as proportional set sizes: a page shared counts once, as a container's limit
counts it; the RSS sum, which counts a fork's pages twice, beside it), and the OpenCL run's alone. Prints per hand-in: its score against
tests/labs/register_sgemm/expected.toml, the peak of the tree and of the numeric check's run, the
seconds, the numeric verdict and engine; then the largest peak, whether every one fit the budget and
every verdict was as expected, with the load average before and after (say it with any figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "tests" / "labs" / "register_sgemm"
FORMS = ("schedule.py", "apply_trace.py", "trace.txt", "trace.json", "manual.py", "lab4.ipynb", "folder")

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


class _Peaks(threading.Thread):
    """The peak memory of a process tree, and of its OpenCL runs alone, sampled every 20 ms: the sum of
    each process's proportional set size (PSS: a page two processes share counts half in each, as a
    container's memory limit counts it once; a fork, such as pocl's call of its linker, doubles an RSS
    sum but not this), and the plain RSS sum beside it."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.tree = self.opencl = self.tree_rss = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                continue
            total = opencl = rss_total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    try:
                        pss = p.memory_full_info().pss
                    except (psutil.AccessDenied, AttributeError):
                        pss = rss
                    total += pss
                    rss_total += rss
                    if any("opencl_run" in part or "runside" in part for part in p.cmdline()):
                        opencl += pss
                except psutil.Error:
                    continue
            self.tree, self.opencl = max(self.tree, total), max(self.opencl, opencl)
            self.tree_rss = max(self.tree_rss, rss_total)


def grade_one(path: Path, cpus: str | None, env: dict) -> dict:
    out = Path(tempfile.mkdtemp(prefix="mlc_lab_teacher_lab_")) / "results.json"
    argv = [sys.executable, "-m", "mlc_lab.cli", "grade", str(LAB / "lab4.toml"), str(path), "--gradescope"]
    argv += ["--out", str(out)]
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = _Peaks(proc.pid)
    peaks.start()
    _out, err = proc.communicate()
    peaks.done.set()
    peaks.join()
    seconds = time.monotonic() - started
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        doc = {"score": None, "output": err[-500:]}
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    numeric = next((line for line in str(doc.get("output", "")).splitlines() if line.startswith("Numeric")), "")
    return {
        "score": doc.get("score"),
        "seconds": round(seconds, 1),
        "tree_peak_mb": round(peaks.tree / 2**20),
        "tree_peak_rss_sum_mb": round(peaks.tree_rss / 2**20),
        "opencl_peak_mb": round(peaks.opencl / 2**20),
        "numeric": numeric[:300],
        "returncode": proc.returncode,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--names", default="")
    ap.add_argument("--engine", choices=("pocl", "oclgrind"), default=None)
    ap.add_argument("--cpus", default=None, help="taskset CPU list, as 0 (Gradescope gives about half a CPU)")
    ap.add_argument("--budget-mb", type=int, default=768)
    args = ap.parse_args()
    expected = tomllib.loads((LAB / "expected.toml").read_text())
    names = [n for n in args.names.split(",") if n] or sorted(expected)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.engine:
        env["MLC_LAB_OPENCL_ENGINE"] = args.engine
    load_before = os.getloadavg()
    rows = {}
    for name in names:
        for form in args.forms.split(","):
            row = grade_one(LAB / "hand_ins" / name / form, args.cpus, env)
            row["expected"] = expected[name]["score"]
            rows[f"{name}/{form}"] = row
            print(json.dumps({f"{name}/{form}": row}), file=sys.stderr, flush=True)
    peak = max(r["tree_peak_mb"] for r in rows.values())
    seconds = [r["seconds"] for r in rows.values()]
    summary = {
        "hand_ins": len(rows),
        "as_expected": sum(r["score"] == r["expected"] for r in rows.values()),
        "largest_tree_peak_mb": peak,
        "largest_tree_peak_rss_sum_mb": max(r["tree_peak_rss_sum_mb"] for r in rows.values()),
        "largest_opencl_peak_mb": max(r["opencl_peak_mb"] for r in rows.values()),
        "within_budget": peak <= args.budget_mb,
        "seconds_per_hand_in": {"min": min(seconds), "median": sorted(seconds)[len(seconds) // 2], "max": max(seconds)},
        "engine": args.engine or "as found",
        "cpus": args.cpus or "all",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps({"summary": summary, "hand_ins": rows}, indent=1))


if __name__ == "__main__":
    main()
