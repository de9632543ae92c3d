"""Time of the numeric check of GPU schedules without a GPU (`mlc_lab.core.checks.numeric_gpu`); prints JSON.

    .venv/bin/python benchmarks/numeric_gpu.py [--size 128] [--repeat 3]

The course's 1024^3 shared-memory matmul (chapter 6, through the Session API), checked at
``size``^3: the trace replayed on the smaller program, TVM's OpenCL code run by pocl or Oclgrind in
the worker, the unscheduled program on the CPU as the reference. ``first_s`` includes starting the
worker process and choosing the engine; ``seconds`` is each later call, wall time in this process
(target: under 10 s at 128^3); ``worker`` is the split inside the worker for the last call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import mlc_lab
    from mlc_lab.core.checks.numeric_gpu import numeric_check
    from mlc_lab.tvm.course_programs import matmul
    from tests.unit.test_cuda import blocking_with_shared

    session = blocking_with_shared(mlc_lab.Session(matmul(1024)))
    t0 = time.perf_counter()
    first = numeric_check(session, sizes=args.size)
    first_s = time.perf_counter() - t0
    seconds = []
    last = first
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        last = numeric_check(session, sizes=args.size)
        seconds.append(round(time.perf_counter() - t0, 3))
    print(
        json.dumps(
            {
                "program": "course matmul 1024^3, shared-memory schedule",
                "size": args.size,
                "ok": last.ok,
                "wrong": last.wrong,
                "total": last.total,
                "engine": last.engine,
                "first_s": round(first_s, 3),
                "seconds": seconds,
                "best_s": min(seconds) if seconds else None,
                "target_s": 10,
                "cpus": os.cpu_count(),
                "message": last.message,
            },
            indent=2,
        )
    )
    return 0 if last.ok else 1


if __name__ == "__main__":
    sys.exit(main())
