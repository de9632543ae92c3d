"""Step latency: what one schedule step costs through the Session, next to bare TVM.

For each step of the chapter-2 walk-through of the 128^3 mm_relu, it times
  session: Session.apply(...) + .script + .loop_tree()     (names resolved from the printed script)
  bare:    the TVM primitive on a schedule copy (handles already in hand) + mod.script()
in the same process, and prints JSON with medians in milliseconds and their ratio.
Targets (issue 2): session/bare < 2 and every session step < 5 ms.

    .venv/bin/python benchmarks/step_latency.py [--repeat 60]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlc_lab import Session  # noqa: E402
from tests.fixtures.programs import MM_RELU  # noqa: E402

STEPS = [
    ("split", ("Y/j",), {"factors": [None, 4]}),
    ("reorder", ("Y/i", "j_0", "k", "j_1"), {}),
    ("reverse_compute_at", ("C", "j_0"), {}),
    ("decompose_reduction", ("Y", "k"), {}),
]


def bare_calls(sch):
    """The same four steps on a raw tvm Schedule, returning closures that apply step n to a copy."""
    y = sch.get_sblock("Y", func_name="mm_relu")
    c = sch.get_sblock("C", func_name="mm_relu")
    i, j, k = sch.get_loops(y)
    states, calls = [], []

    def split(s):
        return s.split(j, factors=[None, 4])

    states.append(sch.copy())
    calls.append(split)
    j0, j1 = sch.split(j, factors=[None, 4])
    states.append(sch.copy())
    calls.append(lambda s: s.reorder(i, j0, k, j1))
    sch.reorder(i, j0, k, j1)
    states.append(sch.copy())
    calls.append(lambda s: s.reverse_compute_at(c, j0))
    sch.reverse_compute_at(c, j0)
    states.append(sch.copy())
    calls.append(lambda s: s.decompose_reduction(y, k))
    return states, calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=60)
    args = parser.parse_args()

    from mlc_lab.tvm import schedule as tsch  # the bare side uses TVM through our one door

    first = Session(MM_RELU)
    states, calls = bare_calls(tsch.State.initial(first.original, "mm_relu").sch)

    results = []
    for n, (prim, a, kw) in enumerate(STEPS):
        sess_times, bare_times = [], []
        for _ in range(args.repeat):
            # A fresh session brought to the step before (untimed): applying the same call twice in
            # one session would just walk back down the existing branch.
            session = Session(first.original)
            for p, pa, pkw in STEPS[:n]:
                session.apply(p, *pa, **pkw)
            _ = session.script, session.loop_tree()
            t0 = time.perf_counter()
            session.apply(prim, *a, **kw)
            _ = session.script
            _ = session.loop_tree()
            sess_times.append(time.perf_counter() - t0)

            s = states[n].copy()
            t0 = time.perf_counter()
            calls[n](s)
            _ = s.mod.script()
            bare_times.append(time.perf_counter() - t0)
        sm, bm = statistics.median(sess_times) * 1e3, statistics.median(bare_times) * 1e3
        results.append({"step": prim, "session_ms": round(sm, 3), "bare_ms": round(bm, 3), "ratio": round(sm / bm, 2)})

    total_s = sum(r["session_ms"] for r in results)
    total_b = sum(r["bare_ms"] for r in results)
    out = {
        "benchmark": "step_latency",
        "program": "mm_relu 128^3 (chapter-2 walk-through)",
        "repeat": args.repeat,
        "machine": f"{platform.machine()} {platform.processor() or ''} cores={len(__import__('os').sched_getaffinity(0))}",
        "steps": results,
        "median_session_ms": round(statistics.median(r["session_ms"] for r in results), 3),
        "max_session_ms": round(max(r["session_ms"] for r in results), 3),
        "overall_ratio": round(total_s / total_b, 2),
        "targets": {"ratio_below": 2.0, "step_below_ms": 5.0},
        "meets_targets": total_s / total_b < 2.0 and max(r["session_ms"] for r in results) < 5.0,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
