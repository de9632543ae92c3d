"""What the explorer's Checks panel costs a click: the reference schedules of the GPU lab (gemm + relu +
add at 2048^3) and of mm_relu (128^3) applied as front-end requests, one click every ``--gap`` ms.

For each lab it prints, in ms: the time the kernel takes to answer a click (the step's state message)
with the Checks panel and without it (median and max over the steps), and when the checks of the
step arrive after the click (the second message, computed by the panel's worker thread).

    .venv/bin/python benchmarks/checks_panel.py [--gap 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import comm  # noqa: E402

from mlc_lab._threads import cpu_name  # noqa: E402
from mlc_lab.core.session import Session  # noqa: E402
from tests.labs import cpu_mm_relu, gpu_matmul  # noqa: E402
from tests.widgets.fakes import RecordingComm  # noqa: E402


def _explorer(program: str, checks: bool):
    from mlc_lab.widgets.explorer import Explorer

    w = Explorer(Session(program))
    if not checks:
        w._checks._setup = {"available": False}  # noqa: SLF001  (the same view without its panel)
    w.wait(300)
    return w


def run(program: str, steps: list, checks: bool, gap_s: float) -> dict:
    w = _explorer(program, checks)
    clicks, ready = [], []
    for i, (primitive, args, kwargs) in enumerate(steps):
        if primitive == "transform_layout":  # its index map is a Python function: not a click
            w.session.apply(primitive, *args, **kwargs)
            w.wait(300)
            continue
        params = {
            "primitive": primitive,
            "args": [list(a) if isinstance(a, tuple) else a for a in args],
            "kwargs": kwargs,
        }
        t = time.perf_counter()
        reply = w.comm.request("apply", params, req_id=f"r{i}")
        clicks.append((time.perf_counter() - t) * 1e3)
        if not reply["ok"]:
            raise SystemExit(f"step {i} ({primitive}) failed: {reply['error']['summary']}")
        if checks:
            sid = w.session.current.id
            while w.checks.get("step") != sid:
                time.sleep(0.001)
            ready.append((time.perf_counter() - t) * 1e3)
        time.sleep(gap_s)
    w.wait(300)
    w.close()
    out = {"click_median": round(statistics.median(clicks), 1), "click_max": round(max(clicks), 1)}
    if ready:
        out |= {"checks_ready_median": round(statistics.median(ready), 1), "checks_ready_max": round(max(ready), 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gap", type=float, default=50.0, help="ms between clicks")
    args = ap.parse_args()
    comm.create_comm = lambda **kw: RecordingComm(**kw)  # no Jupyter: the comm keeps the messages
    labs = {
        "gpu_2048_reference": gpu_matmul.SUBMISSIONS["reference"],
        "mm_relu_reference": cpu_mm_relu.SUBMISSIONS["reference"],
    }
    rows = {}
    for name, (program, steps) in labs.items():
        rows[name] = {
            "steps": len(steps),
            "without_panel": run(program, steps, False, args.gap / 1e3),
            "with_panel": run(program, steps, True, args.gap / 1e3),
        }
    print(json.dumps({"cpu": cpu_name(), "gap_ms": args.gap, "ms": rows}, indent=1))


if __name__ == "__main__":
    main()
