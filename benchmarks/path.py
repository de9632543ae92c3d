"""The path engine measured (issue 33): ``Session.path_to`` on pairs the project generates; JSON and a table.

    PYTHONPATH=. .venv/bin/python benchmarks/path.py [--subset all|fast|ID-PART] [--groups llvm,cuda,...]
        [--middle N|all|none] [--json out.json] [--details details.json]

Pairs (``tests/conformance/path_pairs.py``): every schedule of the conformance corpus with its trace
withheld (start: the original program, target: TVM's own replay of the trace); every step of those as a
start (``--middle N``: every N-th step, ``all``, ``none``); the course (chapter 2's walk-through,
exercise 3, the GPU lab's reference and variants); targets no schedule reaches (each must be said not
reached). A way is wrong when it is said reached and TVM's own replay of its ``apply_trace`` (run with
``exec`` here: the corpus and the engine's output are trusted) is not structurally equal to the target.

Printed: the share reached per group (from the middle: directly, or after going back), wrong ways, time
p50 / p95 / max, the path's length against the withheld trace's transforming steps (the rest of it from
the middle), and the schedules not reached by the primitive kinds their withheld traces use.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conformance import path_pairs  # noqa: E402


def tvm_replays_to(program: str, func: str, trace: str, target) -> bool:
    """TVM's own replay of an ``apply_trace`` text (exec'd: our own output) gives the target."""
    import tvm
    import tvm_ffi
    from tvm import s_tir

    from mlc_lab.tvm.program import load

    mod = load(program)
    sch = s_tir.Schedule(mod, debug_mask="none")
    env: dict = {}
    exec(compile(trace, "<apply_trace>", "exec"), env)  # noqa: S102  (the engine's own output, in a benchmark)
    env["apply_trace"](sch)
    theirs = target[func] if isinstance(target, tvm.IRModule) else target
    name = "f"
    return bool(
        tvm_ffi.structural_equal(
            sch.mod[func].with_attr("global_symbol", name), theirs.with_attr("global_symbol", name)
        )
    )


def _target_func(target, func: str):
    import tvm

    from mlc_lab.tvm.program import load

    mod = target if isinstance(target, tvm.IRModule) else load(target)
    names = [gv.name_hint for gv in mod.get_global_vars()]
    return mod[func] if func in names else mod[names[0]]


def run_pair(pair: path_pairs.Pair) -> dict:
    from mlc_lab.core.session import Session

    session = Session(pair.program, pair.func)
    started = time.perf_counter()
    try:
        answer = session.path_to(pair.target)
        error = None
    except Exception as exc:  # noqa: BLE001  (counted: an engine that raises is a failure)
        answer, error = None, f"{type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.perf_counter() - started
    out = {"id": pair.id, "group": pair.group, "seconds": seconds, "withheld": pair.withheld, "kinds": pair.kinds}
    if answer is None:
        return out | {"status": "error", "why": error, "length": None, "wrong": False}
    wrong = False
    if answer.reached:
        try:
            wrong = not tvm_replays_to(
                pair.program, session.func_name, answer.trace, _target_func(pair.target, session.func_name)
            )
        except Exception:  # noqa: BLE001  (an apply_trace TVM cannot run is a wrong way, counted)
            wrong = True
    wrong = wrong or (answer.reached and not pair.reachable)
    return out | {"status": answer.status, "why": answer.why, "length": len(answer.steps), "wrong": wrong}


def run_middle(pair: path_pairs.Pair, entry: dict, every: int) -> list[dict]:
    """Every ``every``-th step of the corpus schedule as a start (the hint from the middle)."""
    from mlc_lab.core.session import Session

    session = Session.from_trace(pair.program, entry["json"], pair.func)
    steps = session.path()[1:]  # the replayed steps, root excluded (the full pair starts there)
    out = []
    for n, sid in enumerate(steps[:-1]):
        if n % every:
            continue
        # the withheld trace's transforming steps still to come after this one (samples transform nothing)
        rest = [s for s in steps[n + 1 :] if not (session.steps[s].primitive or "").startswith("sample_")]
        started = time.perf_counter()
        wrong = False
        try:
            answer = session.path_to(pair.target, step=sid)
            status, why, length, back = answer.status, answer.why, len(answer.steps), answer.undo_to
        except Exception as exc:  # noqa: BLE001
            answer, status, why, length, back = None, "error", f"{type(exc).__name__}: {str(exc)[:200]}", None, None
        seconds = time.perf_counter() - started
        if answer is not None and answer.reached:  # the whole schedule (from the original program), replayed
            try:
                target = _target_func(pair.target, session.func_name)
                wrong = not tvm_replays_to(pair.program, session.func_name, answer.trace, target)
            except Exception:  # noqa: BLE001  (an apply_trace TVM cannot run is a wrong way, counted)
                wrong = True
        wrong = wrong or bool(answer is not None and answer.reached and not pair.reachable)
        out.append(
            {
                "id": f"{pair.id}@{n + 1}",
                "group": "middle",
                "seconds": seconds,
                "withheld": len(rest),
                "kinds": pair.kinds,
                "status": status,
                "why": why,
                "length": length,
                "back": back,
                "wrong": wrong,
            }
        )
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summarize(rows: list[dict]) -> dict:
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        groups[r["group"]].append(r)
    table: dict = {"groups": {}}
    for name, rs in sorted(groups.items()):
        reached = [r for r in rs if r["status"] == "reached"]
        entry = {
            "pairs": len(rs),
            "reached": len(reached),
            "reached_pct": round(100 * len(reached) / len(rs), 1),
            "names": sum(r["status"] == "names" for r in rs),
            "errors": sum(r["status"] == "error" for r in rs),
        }
        if name == "middle":
            entry["after_going_back"] = sum(r.get("back") is not None and r["status"] == "reached" for r in rs)
        table["groups"][name] = entry
    corpus = [r for r in rows if r["group"].startswith("corpus/")]
    if corpus:
        ok = sum(r["status"] == "reached" for r in corpus)
        table["corpus"] = {"pairs": len(corpus), "reached": ok, "reached_pct": round(100 * ok / len(corpus), 1)}
    secs = [r["seconds"] for r in rows]
    table["seconds"] = {
        "p50": round(_pct(secs, 0.5), 3),
        "p95": round(_pct(secs, 0.95), 3),
        "max": round(max(secs, default=0), 3),
    }
    slowest = max(rows, key=lambda r: r["seconds"], default=None)
    table["slowest"] = slowest["id"] if slowest else None
    table["wrong_ways"] = [r["id"] for r in rows if r["wrong"]]
    table["unreachable_said_reached"] = [
        r["id"] for r in rows if r["group"] == "unreachable" and r["status"] != "unreached"
    ]
    measured = [r for r in rows if r["status"] == "reached" and r["withheld"] is not None and r.get("back") is None]
    longer = [r for r in measured if r["length"] > r["withheld"]]
    table["length"] = {
        "compared": len(measured),
        "longer_than_withheld": len(longer),
        "longer": [f"{r['id']} ({r['length']} > {r['withheld']})" for r in longer][:20],
        "mean_ratio": round(statistics.mean(r["length"] / max(r["withheld"], 1) for r in measured), 3)
        if measured
        else None,
    }
    by_kind: dict[str, int] = collections.Counter()
    for r in corpus:
        if r["status"] != "reached":
            for kind in set(r["kinds"]):
                by_kind[kind] += 1
    table["not_reached_by_primitive_kind"] = dict(by_kind.most_common())
    table["not_reached"] = {
        r["id"]: r["why"] for r in rows if r["status"] not in ("reached",) and r["group"] != "unreachable"
    }
    return table


def print_table(table: dict) -> None:
    print(f"{'group':28s} {'pairs':>6s} {'reached':>8s} {'%':>6s}", file=sys.stderr)
    for name, g in table["groups"].items():
        print(f"{name:28s} {g['pairs']:6d} {g['reached']:8d} {g['reached_pct']:6.1f}", file=sys.stderr)
    if "corpus" in table:
        c = table["corpus"]
        print(f"{'corpus (all groups)':28s} {c['pairs']:6d} {c['reached']:8d} {c['reached_pct']:6.1f}", file=sys.stderr)
    s = table["seconds"]
    print(f"time p50 {s['p50']} s, p95 {s['p95']} s, max {s['max']} s ({table['slowest']})", file=sys.stderr)
    print(
        f"wrong ways: {len(table['wrong_ways'])}; unreachable said reached: {len(table['unreachable_said_reached'])}",
        file=sys.stderr,
    )
    ln = table["length"]
    print(
        f"paths longer than the withheld trace: {ln['longer_than_withheld']} of {ln['compared']} (mean length ratio {ln['mean_ratio']})",
        file=sys.stderr,
    )
    print(f"not reached, by primitive kind: {table['not_reached_by_primitive_kind']}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subset", default="all", help="corpus entries: all, fast, or a part of their id")
    parser.add_argument("--groups", help="only these corpus groups (comma-separated: llvm,cuda,...)")
    parser.add_argument("--middle", default="3", help="every N-th step of each corpus schedule as a start; all; none")
    parser.add_argument("--json", help="write the table here too")
    parser.add_argument("--details", help="write every pair's outcome here")
    args = parser.parse_args()
    from tests.conformance import harness

    started = time.time()
    rows: list[dict] = []
    pairs = path_pairs.corpus_pairs(args.subset)
    if args.groups:
        wanted = {f"corpus/{g}" for g in args.groups.split(",")}
        pairs = [p for p in pairs if p.group in wanted]
    entries = {e["id"]: e for e in harness.corpus()}
    for pair in pairs + path_pairs.course_pairs() + path_pairs.unreachable_pairs():
        rows.append(run_pair(pair))
    if args.middle != "none":
        every = 1 if args.middle == "all" else int(args.middle)
        for pair in pairs:
            rows.extend(run_middle(pair, entries[pair.id], every))
    table = summarize(rows)
    table["wall_s"] = round(time.time() - started, 1)
    table["machine"] = {"load": open("/proc/loadavg").read().split()[:3], "cores": os.cpu_count()}
    print_table(table)
    print(json.dumps(table, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    if args.details:
        Path(args.details).write_text(json.dumps(rows, indent=0, default=list))


if __name__ == "__main__":
    main()
