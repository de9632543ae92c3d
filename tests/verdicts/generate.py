"""Generate the verdicts corpus: GPU and CPU schedules with labels, the numeric ones obtained by running.

    PYTHONPATH=. .venv/bin/python tests/verdicts/generate.py            # rewrites corpus.json.gz
    PYTHONPATH=. .venv/bin/python tests/verdicts/generate.py --only matmul/ --out /tmp/c.json.gz
    PYTHONPATH=. .venv/bin/python tests/verdicts/generate.py --shard 0/2 --out /tmp/s0.json.gz

Each item is scheduled by a function over ``tvm.s_tir.Schedule`` (``catalog.py``: a style's knobs,
or a style with one knob changed for a mutant), and stored as TVM prints its trace, which
``Session.from_trace`` replays. The check and hazard labels are what the construction intends
(``catalog.py``); the numeric label of a GPU item is what ``numeric_check`` says when it runs the
item's OpenCL code on the CPU (Oclgrind here, with its data-race and uninitialized-value plugins;
pocl where it works), at 64 where the tiles fit, else at the check's own small size: "right", "wrong", "crash", "timeout",
"error" (it did not build or launch) or "not_run" (the check could not set the run up: why is kept).

A numeric label already in ``corpus.json.gz`` (or the files given to ``--cache``: corpora, or the
``.jsonl`` log an interrupted run leaves beside its output) for the same program and trace is kept,
so a regeneration runs only what changed (``--rerun`` runs all).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tvm import s_tir  # noqa: E402

from mlc_lab.tvm import program as tprogram  # noqa: E402
from tests.verdicts.catalog import PROGRAMS, Spec, specs  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.json.gz")
SMALL = 64  # the size the numeric check runs an item at first (its largest dimension)
NUMERIC_LABELS = {"match": "right", "mismatch": "wrong", "crash": "crash", "timeout": "timeout", "error": "error"}


def trace_of(spec: Spec) -> str:
    """The item's schedule as TVM prints its trace."""
    mod = tprogram.load(PROGRAMS[spec.program])
    sch = s_tir.Schedule(mod)
    sch.work_on(spec.func)
    spec.schedule(sch)
    return str(sch.trace)


def numeric(spec: Spec, trace: str, timeout_s: float = 120.0) -> dict:
    """Run the item's GPU code on the CPU; its label and what the run said."""
    from mlc_lab.core.checks.numeric_gpu import NumericCheckError, numeric_check

    t0 = time.perf_counter()
    r = None
    for size in (SMALL, None):  # the smallest size its tiles fit, else the check's own search from 128
        try:
            r = numeric_check(PROGRAMS[spec.program], trace, func=spec.func, sizes=size, timeout_s=timeout_s)
            break
        except NumericCheckError as exc:
            why = str(exc).splitlines()[0]
    if r is None:
        return {"label": "not_run", "message": why, "seconds": round(time.perf_counter() - t0, 1)}
    return {
        "label": NUMERIC_LABELS.get(r.verdict, r.verdict),
        "message": r.message.splitlines()[0] if r.message else "",
        "max_error": r.max_error,
        "wrong": r.wrong,
        "total": r.total,
        "sizes": {str(k): v for k, v in r.sizes.items()},
        "engine": r.engine,
        "diagnostics": list(r.diagnostics),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def item(spec: Spec, trace: str) -> dict:
    return {
        "id": spec.id,
        "program": spec.program,
        "func": spec.func,
        "target": spec.target,
        "subset": spec.subset,
        "mistake": spec.mistake or None,
        "checks": spec.checks,
        "hazards": sorted(spec.hazards),
        "trace": trace,
    }


def load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _cached(paths: list[Path]) -> dict:
    """(program text, trace) -> numeric label, from corpora and from the log lines of interrupted runs."""
    out = {}
    for p in paths:
        if not p.exists():
            continue
        if p.suffix == ".jsonl":
            rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
            texts = PROGRAMS  # (a log is read by the run that wrote it, with today's programs)
        else:
            data = load(p)
            rows, texts = data["items"], data["programs"]
        for it in rows:
            if it.get("numeric"):
                out[(texts[it["program"]], it["trace"])] = it["numeric"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=CORPUS)
    ap.add_argument("--only", action="append", default=[], help="item ids starting with this (repeatable)")
    ap.add_argument("--shard", default="0/1", help="i/n: every n-th item from the i-th")
    ap.add_argument("--cache", type=Path, action="append", default=[], help="corpora whose numeric labels to reuse")
    ap.add_argument("--rerun", action="store_true", help="run every GPU item again")
    ap.add_argument("--no-numeric", action="store_true")
    args = ap.parse_args(argv)
    # Oclgrind's checks beyond bounds: races (on by default in mlc_lab) and reads of unwritten values.
    # Set for the labelling run only, before its worker starts: importing this module (the tests do)
    # must not change how every later numeric check of the process reports.
    os.environ.setdefault("OCLGRIND_UNINITIALIZED", "1")
    os.environ.setdefault("OCLGRIND_DATA_RACES", "1")
    shard, nshard = (int(x) for x in args.shard.split("/"))
    cache = {} if args.rerun else _cached([CORPUS, CORPUS.with_suffix(".jsonl"), *args.cache])
    chosen = [s for s in specs() if not args.only or any(s.id.startswith(o) for o in args.only)]
    chosen = chosen[shard::nshard]
    items = []
    t0 = time.perf_counter()
    log = args.out.with_suffix(".jsonl")  # each run item as it is labelled: an interrupted run loses nothing
    for n, spec in enumerate(chosen, 1):
        try:
            trace = trace_of(spec)
        except Exception as exc:  # noqa: BLE001  (a style TVM refuses is a bug of the catalog: say which)
            raise SystemExit(f"{spec.id}: TVM refused the schedule: {str(exc).strip().splitlines()[-1]}") from None
        it = item(spec, trace)
        if spec.target == "cuda" and not args.no_numeric:
            it["numeric"] = cache.get((PROGRAMS[spec.program], trace))
            if it["numeric"] is None:
                it["numeric"] = numeric(spec, trace)
                with log.open("a") as f:
                    f.write(json.dumps(it) + "\n")
        items.append(it)
        num = it.get("numeric", {})
        print(f"[{n}/{len(chosen)} {time.perf_counter() - t0:.0f}s] {spec.id}: {num.get('label', '-')}", flush=True)
    data = {
        "about": "tests/verdicts/generate.py; labels per item: checks (pass/fail/n/a), hazards present, numeric (run)",
        "numeric_settings": {
            "size": f"{SMALL} where the tiles fit, else numeric_check's own search from 128",
            **{k: os.environ[k] for k in ("OCLGRIND_DATA_RACES", "OCLGRIND_UNINITIALIZED")},
        },
        "programs": PROGRAMS,
        "items": items,
    }
    with gzip.open(args.out, "wt") as f:
        json.dump(data, f, indent=1)
    print(f"{len(items)} items -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
