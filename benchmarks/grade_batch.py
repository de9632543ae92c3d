"""Time of a batch of hand-ins of a GPU assignment (`mlc-lab grade`'s batch); prints JSON.

    .venv/bin/python benchmarks/grade_batch.py [--count 200] [--jobs 2] [--size 64] [--cpus 0,1]

The grading lab (tests/labs/grading: gemm + relu + add at 2048^3, four tasks) with the numeric check
at ``size`` (the schedule run on the CPU's OpenCL, pocl or Oclgrind, and compared); ``count`` hand-ins
cycling over its traces, tuning record and (every fourth) a .py holding the program and
``manual_schedule()``, run in the sandbox. Graded ``jobs`` at a time by the batch's judging children,
on the CPUs named by ``--cpus`` (``taskset``). Prints the wall time, per hand-in, the statuses, the
OpenCL engine and the load average before and after (a loaded machine is slower: say so).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LAB = ROOT / "tests" / "labs" / "grading"
TRACES = ["reference.py", "no_shared.py", "variant_ji.json", "write_back_in_k.record.json", "racing.json"]


def _manual(program: str) -> str:
    body = (LAB / "submissions" / "reference.py").read_text().split("-> None:\n", 1)[1]
    head = "\n\nfrom tvm import s_tir\n\n\ndef manual_schedule():\n    sch = s_tir.Schedule(gemm_relu_add)\n"
    return program + head + body + "    return sch\n"


class _CpuSampler(threading.Thread):
    """CPU seconds (user + system) of every process under this one, sampled every 0.1 s: the
    judging children, their OpenCL workers and the sandboxes (processes living under 0.1 s are missed)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[tuple[int, float], float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.done.wait(0.1):
            for proc in me.children(recursive=True):
                try:
                    t = proc.cpu_times()
                    self.seen[(proc.pid, proc.create_time())] = t.user + t.system
                except psutil.Error:
                    pass

    def stop(self) -> float:
        self.done.set()
        self.join()
        return sum(self.seen.values())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--cpus", default=None, help="CPUs to run on, as taskset -c takes them (default: all)")
    parser.add_argument("--unsafe-same-user", action="store_true")
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})  # children inherit it
    from mlc_lab.grading import grade_batch, load_assignment

    work = Path(tempfile.mkdtemp(prefix="mlc_lab_bench_"))
    try:
        program = (LAB / "gemm_relu_add.py").read_text()
        (work / "gemm_relu_add.py").write_text(program)
        text = (LAB / "assignment.toml").read_text().replace("[limits]", f"[numeric]\nsize = {args.size}\n\n[limits]")
        (work / "a.toml").write_text(text.replace("time_s = 10", "time_s = 60"))
        paths = []
        for i in range(args.count):
            folder = work / f"student{i:03d}"
            folder.mkdir()
            if i % 4 == 3:
                (folder / "lab3.py").write_text(_manual(program))
                paths.append(str(folder / "lab3.py"))
            else:
                name = TRACES[i % len(TRACES)]
                shutil.copy(LAB / "submissions" / name, folder / name)
                paths.append(str(folder / name))
        assignment = load_assignment(work / "a.toml")
        load_before = os.getloadavg()
        sampler = _CpuSampler()
        sampler.start()
        started = time.monotonic()
        results = grade_batch(assignment, paths, jobs=args.jobs, unsafe_same_user=args.unsafe_same_user)
        seconds = time.monotonic() - started
        cpu_s = sampler.stop()
        engines = Counter(
            m.group(1) if (m := re.search(r" on (\w+)$", (r.numeric or {}).get("message", ""))) else "(a mismatch)"
            for r in results
            if r.numeric
        )
        print(
            json.dumps(
                {
                    "count": args.count,
                    "jobs": args.jobs,
                    "cpus": args.cpus or f"all {os.cpu_count()}",
                    "numeric_size": args.size,
                    "seconds": round(seconds, 1),
                    "per_hand_in_s": round(seconds / max(1, args.count), 3),
                    # CPU time of the processes under this one: what the batch costs whatever the
                    # load; cpu_s / jobs is about its time on idle cores
                    "cpu_s": round(cpu_s, 1),
                    "cpu_s_per_hand_in": round(cpu_s / max(1, args.count), 3),
                    "statuses": dict(Counter(r.status for r in results)),
                    "scores": dict(Counter(r.score for r in results)),
                    "opencl": dict(engines),
                    "load_before": [round(x, 1) for x in load_before],
                    "load_after": [round(x, 1) for x in os.getloadavg()],
                },
                indent=1,
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
