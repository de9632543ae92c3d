"""Measuring figures, printed as one JSON object: the cost of `measure()` for each step of the
course's chapter-2 schedule of the 128^3 mm_relu (cold worker first, then warm), and what each step
measured. Target: under 1 s per warm step.

Usage: python benchmarks/measure.py
"""

from __future__ import annotations

import json
import os
import sys
import time

import mlc_lab
from mlc_lab.core.measure import measure, shutdown_worker

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.fixtures.programs import MM_RELU  # noqa: E402


def main() -> int:
    s = mlc_lab.Session(MM_RELU)
    steps = [
        ("original", None),
        ("split j by 4", lambda: s.apply("split", "Y/j", factors=[None, 4])),
        ("reorder", lambda: s.apply("reorder", "Y/i", "Y/j_0", "Y/k", "Y/j_1")),
        ("reverse_compute_at C", lambda: s.apply("reverse_compute_at", "C", "Y/j_0")),
        ("parallel i", lambda: s.apply("parallel", "Y/i")),
        ("vectorize j_1", lambda: s.apply("vectorize", "Y/j_1")),
        ("decompose_reduction", lambda: s.apply("decompose_reduction", "Y", "Y/k")),
    ]
    out: dict = {"loadavg_start": [round(x, 2) for x in os.getloadavg()], "steps": []}
    t0 = time.perf_counter()
    measure(s.module, s.original, s.func_name)
    out["cold_first_measure_s"] = round(time.perf_counter() - t0, 3)
    for label, action in steps:
        if action is not None:
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - report and go on
                out["steps"].append({"step": label, "error": str(exc).splitlines()[0]})
                continue
        t = time.perf_counter()
        m = measure(s.module, s.original, s.func_name, repeats=5)
        out["steps"].append(
            {
                "step": label,
                "measure_wall_s": round(time.perf_counter() - t, 3),
                "latency_ms": round(m.latency_s * 1e3, 4),
                "std_ms": round(m.std_s * 1e3, 4),
                "gflops": round(m.gflops, 2),
                "max_abs_error": m.max_abs_error,
            }
        )
    walls = [x["measure_wall_s"] for x in out["steps"] if "measure_wall_s" in x]
    out["warm_step_wall_s_max"] = max(walls)
    out["warm_step_wall_s_median"] = sorted(walls)[len(walls) // 2]
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    shutdown_worker()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
