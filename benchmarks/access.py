"""Timings of the access analysis; prints JSON.

    .venv/bin/python benchmarks/access.py [--repeat 3] [--n 1024] [--corpus [all|fast|ID-PART]] [--skip-course] [--big]

* ``schedules``: every loop level of the course's 1024^3 matmuls (GPU local/shared, CPU tiled),
  best of ``repeat`` runs of ``footprint`` and, for GPU schedules, of ``gpu_stats``;
* ``big_outer_loop``: the 4096^3 matmul's outermost loop as the memory panel asks for it (the
  analysis, and the whole answer: pooled to the drawn size); ``--big`` runs only this;
* ``init_case``: every loop level of the 1024^3 matmul split on i, j, k and reordered with its
  ``T.init()`` kept (nothing decomposed): target under 50 ms at every level;
* ``corpus`` (with ``--corpus``): the conformance corpus (``tests/conformance/corpus.json.gz``, or
  the entries whose id contains a given part), each schedule replayed from its JSON trace, the
  outermost, a middle and the innermost ``For`` of every program: refused (an ``MlcLabError``, a
  sentence), raw exceptions, the slowest call in wall and CPU time (target under 1 s). The same
  runner works on the analysis of earlier commits (``mlc_lab.core.access.footprint(func, loop)``),
  for before/after tables; ``benchmarks/conformance.py`` gives the whole conformance table.

The enclosing loops are at their first value. Footprints are computed as the views ask for them
(no per-element counts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
if str(ROOT) not in sys.path and not os.environ.get("MLC_LAB_BENCH_KEEP_PATH"):
    sys.path.insert(0, str(ROOT))


def _analysis():
    """(footprint(func, loop), gpu_stats(func, loop)) of whichever analysis is importable."""
    try:
        from mlc_lab.core import access
        from mlc_lab.tvm.access import loop_id, lower
    except ImportError:  # the analysis before the split: one module that took TVM objects
        from mlc_lab.core.access import footprint as old_fp, gpu_stats as old_gpu

        return old_fp, old_gpu
    return (
        lambda f, lp: access.footprint(lower(f), loop_id(f, lp)),
        lambda f, lp: access.gpu_stats(lower(f), loop_id(f, lp)),
    )


def _loops(func):
    """The function's ``For`` nodes in pre-order (blocks' bodies, not their inits)."""
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
        elif isinstance(s, tvm.tirx.IfThenElse):
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif isinstance(getattr(s, "body", None), tvm.tirx.Stmt):
            walk(s.body)

    walk(func.body)
    return out


def _best(fn, repeat):
    """Best wall and best CPU (process) time in ms: on a loaded shared machine the CPU time is the
    figure to compare (the wall time waits for cores)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return round(wall * 1000, 1), round(cpu * 1000, 1)


def every_level(func, repeat, gpu=False):
    footprint, gpu_stats = _analysis()
    rows = []
    for i, loop in enumerate(_loops(func)):
        try:
            footprint(func, loop)  # warm up (the lowered program is cached)
        except Exception as exc:  # noqa: BLE001 - an earlier analysis may refuse: say so in the row
            rows.append({"loop": f"{i}:{loop.loop_var.name}", "refused": str(exc).splitlines()[0][:120]})
            continue
        wall, cpu = _best(lambda loop=loop: footprint(func, loop), repeat)
        row = {"loop": f"{i}:{loop.loop_var.name}", "footprint_ms": wall, "footprint_cpu_ms": cpu}
        if gpu:
            row["gpu_stats_ms"], row["gpu_stats_cpu_ms"] = _best(lambda loop=loop: gpu_stats(func, loop), repeat)
        rows.append(row)
    return rows


def big_outer_loop(repeat: int) -> dict:
    """The 4096^3 matmul's outer loop as the memory panel asks for it: the exact analysis, and the
    whole answer the page gets (analysis, cropping, pooling to the drawn size, packing). Target:
    under 2 s, or the answer says it is pooled (``crop.pool``)."""
    import mlc_lab
    from mlc_lab.tvm.course_programs import matmul
    from mlc_lab.widgets.access.view import footprint_payload

    session = mlc_lab.Session(matmul(4096))
    session.footprint("k")  # lowering and indexing, once
    analysis = _best(lambda: session.footprint("i"), repeat)
    answers = []
    panel = _best(lambda: answers.append(footprint_payload(session, "i")), repeat)
    result, data = answers[-1]
    return {
        "loop": "i (4096^3 matmul, outermost)",
        "analysis_ms": analysis[0],
        "analysis_cpu_ms": analysis[1],
        "panel_answer_ms": panel[0],
        "panel_answer_cpu_ms": panel[1],
        "payload_bytes": sum(len(b) for b in data),
        "pooled": {b["buffer"]: b["crop"].get("pool") for b in result["buffers"]},
    }


def scheduled_functions(subset: str = "all"):
    """(id, scheduled PrimFunc) of the conformance corpus, replayed from the JSON traces (the text
    where TVM could not write JSON); entries that do not replay are counted, not timed."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # the corpus's harness, whichever mlc_lab is measured
    from tests.conformance import harness

    from mlc_lab import Session

    for entry in harness.entries(subset):
        trace = entry["json"] if entry["json"] is not None else entry["text"]
        try:
            session = Session.from_trace(entry["module"], trace, entry.get("func"))
        except Exception:  # noqa: BLE001 - the conformance table reports replays; here: nothing to time
            yield entry["id"], None
            continue
        yield entry["id"], session.module[entry.get("func") or "main"]


def corpus_table(subset: str = "all", log=None) -> dict:
    """Refusals, raw exceptions and the slowest call over outermost/middle/innermost loops."""
    from mlc_lab.errors import MlcLabError

    footprint, _ = _analysis()
    calls = refused = raw = not_replayed = 0
    slowest, slowest_at, reasons, raws = 0.0, None, {}, {}
    slowest_cpu, slowest_cpu_at = 0.0, None
    for name, func in scheduled_functions(subset):
        if func is None:
            not_replayed += 1
            continue
        loops = _loops(func)
        picks = sorted({0, len(loops) // 2, len(loops) - 1}) if loops else []
        for k in picks:
            calls += 1
            t, c = time.perf_counter(), time.process_time()
            try:
                footprint(func, loops[k])
            except MemoryError as exc:
                raw += 1
                raws[f"MemoryError: {exc}"[:100]] = raws.get(f"MemoryError: {exc}"[:100], 0) + 1
            except Exception as exc:  # noqa: BLE001 - classified, that is the point
                first = (str(exc).splitlines() or [""])[0]
                if isinstance(exc, MlcLabError) or type(exc).__name__ == "AccessAnalysisError":
                    refused += 1
                    key = " ".join(first.split()[:8])
                    reasons[key] = reasons.get(key, 0) + 1
                else:
                    raw += 1
                    key = f"{type(exc).__name__}: {first[:80]}"
                    raws[key] = raws.get(key, 0) + 1
            took, took_cpu = time.perf_counter() - t, time.process_time() - c
            if took_cpu > slowest_cpu:
                slowest_cpu, slowest_cpu_at = took_cpu, f"{name} loop {loops[k].loop_var.name}"
            if took > slowest:
                slowest, slowest_at = took, f"{name} loop {loops[k].loop_var.name}"
            if log:
                log(f"{name} {loops[k].loop_var.name}: cpu {took_cpu * 1000:.0f} ms wall {took * 1000:.0f} ms")
    return {
        "not_replayed": not_replayed,
        "calls": calls,
        "refused": refused,
        "refused_rate": round(refused / max(1, calls), 4),
        "raw_exceptions": raw,
        "slowest_ms": round(slowest * 1000, 1),
        "slowest_at": slowest_at,
        "slowest_cpu_ms": round(slowest_cpu * 1000, 1),
        "slowest_cpu_at": slowest_cpu_at,
        "refusals": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "raw": raws,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument(
        "--corpus",
        nargs="?",
        const="all",
        default=None,
        help="time the conformance corpus (all, fast, or the ids containing this part)",
    )
    ap.add_argument("--skip-course", action="store_true", help="only the corpus")
    ap.add_argument("--big", action="store_true", help="only the 4096^3 matmul's outer loop (the memory panel)")
    ap.add_argument("--mem-limit-gb", type=float, default=None, help="address-space limit (old analyses)")
    args = ap.parse_args(argv)
    if args.mem_limit_gb:
        import resource

        lim = int(args.mem_limit_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    report = {
        "n": args.n,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    report["big_outer_loop"] = big_outer_loop(args.repeat)
    if not args.skip_course and not args.big:
        from fixtures import programs_access as P

        n = args.n
        schedules = {
            "gpu_shared (6.5)": (P.sched_gpu_shared(n), True),
            "gpu_local (6.4)": (P.sched_gpu_local(n), True),
            "cpu_tiled": (P.sched_cpu_tiled(n), False),
        }
        report["schedules"] = {
            name: every_level(sch.mod["main"], args.repeat, gpu) for name, (sch, gpu) in schedules.items()
        }
        report["worst_footprint_ms"] = max(
            r.get("footprint_ms", 0) for rows in report["schedules"].values() for r in rows
        )
        report["worst_footprint_cpu_ms"] = max(
            r.get("footprint_cpu_ms", 0) for rows in report["schedules"].values() for r in rows
        )
        rows = every_level(P.sched_matmul_init(n).mod["main"], args.repeat)
        report["init_case"] = {
            "rows": rows,
            "worst_ms": max(r.get("footprint_ms", 0) for r in rows),
            "worst_cpu_ms": max(r.get("footprint_cpu_ms", 0) for r in rows),
            "refused": sum("refused" in r for r in rows),
        }
    if args.corpus:
        report["corpus"] = corpus_table(args.corpus)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
