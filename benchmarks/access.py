"""Timings of the access analysis at every loop level of the course's 1024^3 matmuls; prints JSON.

    .venv/bin/python benchmarks/access.py [--repeat 3] [--n 1024]

For each schedule and each loop: the best of ``repeat`` runs of ``footprint`` (all buffers,
first_touch, counts, thread/block for GPU programs) and, for GPU schedules, of ``gpu_stats``
(coalescing and bank conflicts of one warp). The enclosing loops are at 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fixtures import programs_access as P  # noqa: E402
from mlc_lab.core import access  # noqa: E402
from mlc_lab.tvm.access_ir import loop_id, lower  # noqa: E402


def footprint(func, loop):
    return access.footprint(lower(func), loop_id(func, loop))


def gpu_stats(func, loop):
    return access.gpu_stats(lower(func), loop_id(func, loop))


def _loops(func):
    import tvm

    out = []

    def walk(s):
        if isinstance(s, tvm.tirx.For):
            out.append(s)
            walk(s.body)
        elif isinstance(s, tvm.tirx.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, tvm.s_tir.SBlockRealize):
            walk(s.block.body)

    walk(func.body)
    return out


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1000


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=1024)
    args = ap.parse_args(argv)
    n = args.n
    schedules = {
        "gpu_shared (6.5)": (P.sched_gpu_shared(n), True),
        "gpu_local (6.4)": (P.sched_gpu_local(n), True),
        "cpu_tiled": (P.sched_cpu_tiled(n), False),
    }
    report = {"n": n, "repeat": args.repeat, "cpus": os.cpu_count(),
              "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "schedules": {}}
    worst = 0.0
    for name, (sch, gpu) in schedules.items():
        func = sch.mod["main"]
        rows = []
        footprint(func, _loops(func)[0])          # warm up (the program model is cached)
        for i, loop in enumerate(_loops(func)):
            row = {"loop": f"{i}:{loop.loop_var.name}",
                   "footprint_ms": round(_best(lambda: footprint(func, loop), args.repeat), 1)}
            worst = max(worst, row["footprint_ms"])
            if gpu:
                row["gpu_stats_ms"] = round(_best(lambda: gpu_stats(func, loop), args.repeat), 1)
            rows.append(row)
        report["schedules"][name] = rows
    report["worst_footprint_ms"] = worst
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
