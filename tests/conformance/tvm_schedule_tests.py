"""The access analysis on the schedules of TVM's own schedule tests (issue 19's figure).

TVM's tests are not in the wheel: check out ``tests/python/s_tir/schedule`` of apache/tvm at the
wheel's version, then run them with this plugin, which answers ``footprint`` at the outermost, a
middle and the innermost loop of every schedule a test verifies (``verify_trace_roundtrip``;
each distinct module once) and writes one JSON line per call::

    cd TVM_TESTS && MLC_LAB_ACCESS_OUT=/tmp/calls.jsonl PYTHONPATH=/path/to/mlc_lab \\
        python -m pytest -q -p tests.conformance.tvm_schedule_tests .
    python -m tests.conformance.tvm_schedule_tests /tmp/calls.jsonl      # the table

(``tests.conformance`` must be importable: put the checkout on PYTHONPATH.) Files whose imports
need another TVM than the wheel's fail to collect: move them aside.
"""

from __future__ import annotations

import json
import os
import sys
import time

_SEEN: set = set()


def _loops(func) -> list:
    from tests.fixtures.tir_loops import all_loops  # TVM is imported late here

    return all_loops(func)


def probe(mod, test: str, out_path: str) -> None:
    """Footprints of three loops of every PrimFunc of ``mod`` (once per distinct module)."""
    import tvm_ffi
    from tvm import tirx

    from mlc_lab.core import access
    from mlc_lab.tvm import access as access_ir

    key = str(tvm_ffi.structural_hash(mod, map_free_vars=True))
    if key in _SEEN:
        return
    _SEEN.add(key)
    rows = []
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        loops = _loops(func)
        picks = {id(x): x for x in (loops[:1] + loops[len(loops) // 2 :][:1] + loops[-1:])}.values()
        for loop in picks:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                access.footprint(access_ir.lower(func), access_ir.loop_id(func, loop))
                result, message = "ok", ""
            except Exception as exc:  # noqa: BLE001 - counted: a sentence (refused) or anything else (raw)
                result = "refused" if type(exc).__name__ == "AccessAnalysisError" else "raw"
                message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]
            rows.append(
                {
                    "test": test,
                    "func": gv.name_hint,
                    "loop": str(loop.loop_var.name),
                    "result": result,
                    "msg": message,
                    "s": round(time.perf_counter() - t0, 4),
                    "cpu": round(time.process_time() - c0, 4),
                }
            )
    with open(out_path, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    import tvm.s_tir.schedule.testing as testing

    original = testing.verify_trace_roundtrip
    out_path = os.environ.get("MLC_LAB_ACCESS_OUT", "tvm_schedule_footprints.jsonl")

    def verify_trace_roundtrip(sch, mod, **kw):
        replayed = original(sch, mod, **kw)
        probe(sch.mod, os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0], out_path)
        return replayed

    testing.verify_trace_roundtrip = verify_trace_roundtrip


def summarize(rows: list[dict]) -> dict:
    from tests.conformance.harness import refusal_reason

    calls = [r for r in rows if "result" in r]
    reasons: dict[str, int] = {}
    for r in calls:
        if r["result"] != "ok":
            why = refusal_reason(r["msg"])
            reasons[why] = reasons.get(why, 0) + 1
    slow = max(calls, key=lambda r: r["s"], default=None)
    slow_cpu = max((r for r in calls if "cpu" in r), key=lambda r: r["cpu"], default=None)
    return {
        "schedules": len({(r["test"], r["func"]) for r in calls}),
        "calls": len(calls),
        "refused_pct": round(100.0 * sum(r["result"] != "ok" for r in calls) / len(calls), 1) if calls else None,
        "refusals_by_reason": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "slowest_s": slow and slow["s"],
        "slowest_at": slow and f"{slow['test']} {slow['loop']}",
        "slowest_cpu_s": slow_cpu and slow_cpu["cpu"],
        "slowest_cpu_at": slow_cpu and f"{slow_cpu['test']} {slow_cpu['loop']}",
    }


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(summarize([json.loads(line) for line in f]), indent=2))
