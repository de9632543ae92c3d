"""Time of every named check of one step at 2048^3 (the GPU lab's gemm + relu + add), cold.

For each submission of ``tests/labs/gpu_matmul.py`` at 2048^3, the facts of the step are rebuilt
(the caches of the schedule facts, the access program and the hazards are emptied first) and then
every check and the hazards are timed one by one; the median of ``--repeat`` cold runs is printed
in ms, with the total (facts + every check + hazards). Target (issue 19): total under 200 ms.

    .venv/bin/python benchmarks/checks.py [--repeat 5] [NAME ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlc_lab._threads import cpu_name  # noqa: E402
from mlc_lab.core import checks  # noqa: E402
from mlc_lab.core.checks import facts as check_facts
from mlc_lab.core.checks import hazards
from mlc_lab.core.checks import CHECKS, Target  # noqa: E402
from mlc_lab.tvm import access as access_ir  # noqa: E402
from tests.labs import gpu_matmul as lab  # noqa: E402


def _cold(session) -> None:
    checks.forget(session)
    access_ir._CACHE.clear()  # noqa: SLF001  (the access program of a step is part of the cold cost)


def one(session, target: Target) -> dict:
    _cold(session)
    out: dict = {}
    t = time.perf_counter()
    sf = check_facts.step_facts(session, None, target)
    sf.kernels()
    out["facts"] = (time.perf_counter() - t) * 1e3
    for name, check in CHECKS.items():
        if check.target != target.kind:
            continue
        t = time.perf_counter()
        check.run(sf)
        out[name] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    hazards.find(sf)
    out["hazards"] = (time.perf_counter() - t) * 1e3
    out["total"] = sum(out.values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", help="submissions (default: the gemm + relu + add ones)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    names = args.names or [n for n, (prog, _) in lab.SUBMISSIONS.items() if prog is lab.GEMM_RELU_ADD]
    target = Target.of("cuda")
    rows = []
    for name in names:
        session = lab.session_of(name)
        runs = [one(session, target) for _ in range(args.repeat)]
        med = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
        rows.append({"submission": name, "ms": med})
    # the hazards of every step of the reference's history (what marking the history costs), cold
    ref = lab.session_of("reference")
    _cold(ref)
    t = time.perf_counter()
    for sid in ref.path():
        checks.step_hazards(ref, sid, target)
    history = {"steps": len(ref.path()), "ms": round((time.perf_counter() - t) * 1e3, 1)}
    worst = max(rows, key=lambda r: r["ms"]["total"])
    print(
        json.dumps(
            {
                "cpu": cpu_name(),
                "size": 2048,
                "repeat": args.repeat,
                "target_ms": 200,
                "slowest": {"submission": worst["submission"], "total_ms": worst["ms"]["total"]},
                "history_hazards": history,
                "steps": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
