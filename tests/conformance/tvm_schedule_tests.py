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

With ``MLC_LAB_CORPUS_OUT`` instead, the plugin writes every distinct schedule the tests make as a
corpus entry (one JSON line each, ``generate.entry``'s form, TVM's own replays judged): the schedules
``verify_trace_roundtrip`` checks, the design spaces of meta_schedule's tests
(``generate_design_space``), dlight's rules (``ApplyDefaultSchedule``) and meta_schedule's anchor
traces (``schedule_using_anchor_trace``)::

    cd TVM_TESTS/tests/python/s_tir && MLC_LAB_CORPUS_OUT=/tmp/tvm_tests.jsonl PYTHONPATH=/path/to/mlc_lab \
        python -m pytest -q -p tests.conformance.tvm_schedule_tests schedule meta_schedule dlight
    python tests/conformance/generate.py --sources tvm_test_entries --tvm-tests /tmp/tvm_tests.jsonl

The second line puts them in the corpus (group ``tvm-tests``), where both replay channels are held
to TVM's own replay (``test_conformance.py``).
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


_RECORDED: set = set()


def record(mod, sch, source: str, out_path: str) -> None:
    """One corpus entry for the schedule ``sch`` made from ``mod`` (a PrimFunc or an IRModule), once
    per distinct module and trace. The module is printed and read back and the trace replayed on it
    by TVM (``generate.reparsed``), so that a printer round trip that is not exact is no difference."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    from mlc_lab.tvm.schedule import to_plain
    from tests.conformance import generate

    if isinstance(mod, tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    if sch.trace is None or not sch.trace.insts:
        return
    trace_json = json.dumps(to_plain(sch.trace.as_json()), sort_keys=True)
    key = (str(tvm_ffi.structural_hash(mod, map_free_vars=True)), trace_json)
    if key in _RECORDED:
        return
    _RECORDED.add(key)
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    func = next(gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc))
    try:
        again = generate.reparsed(mod)
        fresh = s_tir.Schedule(again, debug_mask="none")
        s_tir.schedule.Trace.apply_json_to_schedule(sch.trace.as_json(), fresh)
        mod, sch = again, fresh
    except Exception:  # noqa: BLE001 - kept as the test made it; TVM's own replay is judged in entry()
        pass
    try:
        row = generate.entry(f"tvm-tests/{test}/{len(_RECORDED)}", "tvm-tests", mod, sch, func)
    except Exception as exc:  # noqa: BLE001 - a schedule TVM cannot print or hash: said, not recorded
        row = {"id": test, "skipped": f"{type(exc).__name__}: {exc}"[:300]}
    row["source"] = source
    with open(out_path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _record_everything(out_path: str) -> None:
    """Patch the four places TVM's tests make schedules so that each is recorded (``record``)."""
    import tvm.s_tir.dlight.base.transform as dlight_transform
    import tvm.s_tir.meta_schedule.testing.space_generation as spaces
    import tvm.s_tir.meta_schedule.trace_apply as trace_apply
    import tvm.s_tir.schedule.testing as testing

    verify, design, rules, anchor = (
        testing.verify_trace_roundtrip,
        spaces.generate_design_space,
        dlight_transform._apply_rules,  # noqa: SLF001 - the one place dlight's rules run
        trace_apply.schedule_using_anchor_trace,
    )

    def verify_trace_roundtrip(sch, mod, **kw):
        record(mod, sch, "verify_trace_roundtrip", out_path)
        return verify(sch, mod, **kw)

    def generate_design_space(kind, mod, target, types, sch_rules=None):
        sketches = design(kind, mod, target, types, sch_rules)
        for sch in sketches:
            record(mod, sch, "generate_design_space", out_path)
        return sketches

    def _apply_rules(func, target, rule_list, tunable):
        space = rules(func, target, rule_list, tunable)
        for sch in space or []:
            record(func, sch, "dlight", out_path)
        return space

    def schedule_using_anchor_trace(sch, anchor_trace, target):
        before = sch.mod
        anchor(sch, anchor_trace, target)
        record(before, sch, "schedule_using_anchor_trace", out_path)

    testing.verify_trace_roundtrip = verify_trace_roundtrip
    spaces.generate_design_space = generate_design_space
    dlight_transform._apply_rules = _apply_rules  # noqa: SLF001
    trace_apply.schedule_using_anchor_trace = schedule_using_anchor_trace


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    import tvm.s_tir.schedule.testing as testing

    if os.environ.get("MLC_LAB_CORPUS_OUT"):
        _record_everything(os.environ["MLC_LAB_CORPUS_OUT"])
        return
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
