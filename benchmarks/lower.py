"""Compiler-view latency: Session.lower(step) for each step of the 128^3 mm_relu walk-throughs.

Each step is lowered once with the worker already started (what a click on a new step costs in
the explorer's Compiler view: worker round trip + re-parse + every pass + LLVM IR + assembly +
the facts read from them); a second call is the cache. Prints JSON: per step the wall time in ms,
the worker's own parse / compile / code-text split, the pass count, and the time TVM alone takes
for the same step (tvm.compile + assembly text, in this process) with the ratio, which holds up
better than raw times on a loaded machine. Target (issue 10): < 1 s.

    .venv/bin/python benchmarks/lower.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlc_lab import Session  # noqa: E402
from mlc_lab._threads import cpu_name  # noqa: E402
from mlc_lab.core.worker import worker  # noqa: E402
from tests.fixtures.programs import MM_RELU  # noqa: E402


def walk() -> Session:
    s = Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", j0, "k", j1)
    s.apply("reverse_compute_at", "C", j0)
    s.apply("decompose_reduction", "Y", "k")
    s.goto(0)  # the second branch starts at the original program
    j0, j1 = s.apply("split", "Y/j", factors=[None, 16])
    s.apply("reorder", "Y/i", j0, "k", j1)
    s.apply("vectorize", j1)
    s.apply("parallel", "Y/i")
    return s


def main() -> None:
    s = walk()
    t0 = time.perf_counter()
    worker().call("env", timeout=300)
    start_s = time.perf_counter() - t0
    Session(MM_RELU).lower()  # the worker's first compile (imports, LLVM init) is not a click's cost
    from mlc_lab.tvm.measure.build import compile_module

    def bare(step_id: int) -> float:
        """What TVM alone takes for the same step, in this process: tvm.compile + the assembly text."""
        t0 = time.perf_counter()
        compile_module(s.module_at(step_id), "cpu").mod.inspect_source("asm")
        return time.perf_counter() - t0

    bare(0)
    rows = []
    for step in s.steps:
        bare_s = bare(step.id)
        t0 = time.perf_counter()
        low = s.lower(step=step.id)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.lower(step=step.id)
        cached = time.perf_counter() - t0
        raw_timings = {k: round(v * 1e3, 1) for k, v in low.timings.items()}
        rows.append(
            {
                "step": step.id,
                "label": step.label,
                "ms": round(first * 1e3, 1),
                "bare_tvm_ms": round(bare_s * 1e3, 1),
                "ratio_to_bare": round(first / bare_s, 2),
                "worker_ms": round(low.seconds * 1e3, 1),
                "cached_ms": round(cached * 1e3, 3),
                "passes": len(low.passes),
                "changed": len(low.changed),
                "verdict": low.verdict[:90],
                **({"split_ms": raw_timings} if raw_timings else {}),
            }
        )
    out = {
        "cpu": cpu_name(),
        "load": os.getloadavg(),
        "worker_start_s": round(start_s, 2),
        "max_ms": max(r["ms"] for r in rows),
        "median_ratio_to_bare": sorted(r["ratio_to_bare"] for r in rows)[len(rows) // 2],
        "steps": rows,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
