"""Precision and recall of the named checks and the hazards on the labelled corpus (tests/verdicts/),
and how often a check cannot judge TVM's own CUDA schedules (tests/conformance/); prints JSON.

    PYTHONPATH=. .venv/bin/python benchmarks/verdicts.py             # every item (a few minutes)
    PYTHONPATH=. .venv/bin/python benchmarks/verdicts.py --subset    # the CI subset
    PYTHONPATH=. .venv/bin/python benchmarks/verdicts.py --table     # the same figures as a table

For each item, ``Session.from_trace`` replays its trace and ``Session.check(target=...)`` judges it.
A check's verdict is "pass", "fail", "n/a" (not judged because it does not apply: its evidence's
reason), "unjudged" (``CheckResult.judged`` is False for another reason, or the message says it
could not be judged) or "absent" (left out of the report). A named check is positive when it
fails: label "fail" and verdict "fail" is a true positive; label "pass" and verdict "fail" a false
positive; label "fail" and any other verdict a false negative (a false pass when it passed). A
labelled item whose verdict is "n/a", "unjudged" or "absent" counts in ``could_not_judge``; an item
labelled "n/a" (nothing to judge) is right when the check did not judge it. On the conformance corpus
only "unjudged" and "error" count as could not judge ("does not apply" is an answer). A hazard kind is
positive when present. Targets (issue 28): precision = recall = 1.0 and no could-not-judge on the
labelled items; could-not-judge under 10% on the conformance corpus's CUDA schedules.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "verdicts" / "corpus.json.gz"
CONFORMANCE = ROOT / "tests" / "conformance" / "corpus.json.gz"
CUDA_GROUPS = ("cuda", "cuda-tensorcore", "dlight")
SUBSET_CONFORMANCE = ("GMM/cuda/sketch0", "SFM/cuda/sketch0", "NRM/cuda/sketch0", "C2D/cuda/sketch0")
UNJUDGED = ("unjudged", "absent", "error", "n/a")


def load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _verdict(result) -> str:
    if not result.judged and (result.evidence or {}).get("reason") == "does not apply":
        return "n/a"  # nothing to judge: right for an n/a label, a miss for any other
    if not result.judged or "could not be judged" in result.message:
        return "unjudged"
    return result.verdict


def judge(program: str, trace: str, func: str | None, target: str) -> dict:
    """Every named check of ``target`` on one schedule, and its hazards: {"checks": {name: (verdict,
    message)}, "hazards": {kind: [message]}}; a schedule that cannot be checked gives "error"."""
    from mlc_lab.core.checks import CHECKS
    from mlc_lab.core.session import Session

    names = [n for n, c in CHECKS.items() if c.target == target]
    try:
        report = Session.from_trace(program, trace, func).check(target=target)
    except Exception as exc:  # noqa: BLE001  (any failure is a verdict of the benchmark, with its reason)
        why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return {"checks": {n: ("error", why) for n in names}, "hazards": None, "error": why}
    got = {r.name: (_verdict(r), r.message) for r in report.checks}
    hazards: dict = defaultdict(list)
    for h in report.hazards:
        hazards[h.kind].append(h.message)
    return {"checks": {n: got.get(n, ("absent", "")) for n in names}, "hazards": dict(hazards), "error": None}


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def score(items: list[dict], results: dict) -> dict:
    """Per check and per hazard kind: the counts, precision, recall, could-not-judge; the items each gets wrong."""
    checks: dict = defaultdict(Counter)
    hazards: dict = defaultdict(Counter)
    wrong: dict = defaultdict(list)
    for it in items:
        res = results[it["id"]]
        for name, label in it["checks"].items():
            verdict, said = res["checks"].get(name, ("absent", ""))
            outcome = _check_outcome(label, verdict)
            checks[name][outcome] += 1
            checks[name]["target:" + it["target"]] += 1
            if outcome not in ("tp", "tn", "na_ok"):
                wrong[name].append({"id": it["id"], "label": label, "got": verdict, "said": said})
        if it["target"] != "cuda" or res["hazards"] is None:
            continue
        for kind in _hazard_kinds():
            want, got = kind in it["hazards"], kind in res["hazards"]
            outcome = ("tp" if got else "fn") if want else ("fp" if got else "tn")
            hazards[kind][outcome] += 1
            if outcome in ("fp", "fn"):
                said = (res["hazards"].get(kind) or [""])[0]
                wrong["hazard:" + kind].append({"id": it["id"], "label": want, "got": got, "said": said})
    return {
        "checks": {n: _summary(c, checks=True) for n, c in checks.items()},
        "hazards": {k: _summary(c, checks=False) for k, c in hazards.items()},
        "wrong": dict(wrong),
    }


def _check_outcome(label: str, verdict: str) -> str:
    if label == "n/a":
        return "na_ok" if verdict in UNJUDGED else "na_judged"
    if verdict in UNJUDGED:
        return "fn_unjudged" if label == "fail" else "pass_unjudged"
    if label == "fail":
        return "tp" if verdict == "fail" else "fn"
    return "fp" if verdict == "fail" else "tn"


def _hazard_kinds() -> tuple:
    from mlc_lab.model.checks import HAZARD_KINDS

    return tuple(HAZARD_KINDS)


def _summary(c: Counter, *, checks: bool) -> dict:
    tp, fp, tn = c["tp"], c["fp"], c["tn"]
    fn = c["fn"] + c["fn_unjudged"]
    out = {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn)}
    if checks:
        labelled = tp + fp + fn + tn + c["pass_unjudged"]
        unjudged = c["fn_unjudged"] + c["pass_unjudged"]
        out.update(
            labelled=labelled,
            could_not_judge=unjudged,
            could_not_judge_share=_ratio(unjudged, labelled),
            not_applicable=c["na_ok"] + c["na_judged"],
            judged_where_not_applicable=c["na_judged"],
        )
    return out


def numeric_vs_hazards(items: list[dict], results: dict) -> dict:
    """Do the correctness hazards predict the numbers the items computed when run?"""
    from mlc_lab.model.checks import HAZARD_CLASS

    c: Counter = Counter()
    for it in items:
        num, res = it.get("numeric"), results[it["id"]]
        if (
            it["target"] != "cuda"
            or not num
            or res["hazards"] is None
            or num["label"] not in ("right", "wrong", "crash")
        ):
            c["not_run_" + (num or {}).get("label", "none")] += 1
            continue
        bad = num["label"] != "right"
        flagged = any(HAZARD_CLASS.get(k, "correctness") == "correctness" for k in res["hazards"])
        c[("tp" if flagged else "fn") if bad else ("fp" if flagged else "tn")] += 1
    tp, fp, fn = c["tp"], c["fp"], c["fn"]
    return {**dict(c), "precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn)}


def conformance(subset: bool) -> dict:
    """How often each GPU check cannot judge TVM's own CUDA schedules (the conformance corpus)."""
    entries = [e for e in load(CONFORMANCE)["entries"] if e["group"] in CUDA_GROUPS]
    if subset:
        entries = [e for e in entries if e["group"] == "dlight" or e["id"] in SUBSET_CONFORMANCE]
    per: dict = defaultdict(Counter)
    cannot: dict = defaultdict(list)
    for e in entries:
        res = judge(e["module"], e["text"], e.get("func"), "cuda")
        for name, (verdict, said) in res["checks"].items():
            per[name][verdict] += 1
            if verdict in ("unjudged", "error"):
                cannot[name].append({"id": e["id"], "got": verdict, "said": said})
    checks = {}
    for name, c in per.items():
        n = sum(c.values())
        checks[name] = {
            **dict(c),
            "could_not_judge_share": _ratio(c["unjudged"] + c["error"], n),
            "absent_share": _ratio(c["absent"], n),
        }
    total = sum(sum(c.values()) for c in per.values())
    bad = sum(c["unjudged"] + c["error"] for c in per.values())
    absent = sum(c["absent"] for c in per.values())
    return {
        "schedules": len(entries),
        "could_not_judge_share": _ratio(bad, total),
        "absent_share": _ratio(absent, total),  # left out of the report (issue 28: every check in every report)
        "target_share": 0.1,
        "checks": checks,
        "could_not_judge": dict(cannot),
    }


def run(
    subset: bool = False, only: list[str] | None = None, with_conformance: bool = True, corpus: Path = CORPUS
) -> dict:
    data = load(corpus)
    items = [
        it
        for it in data["items"]
        if (not subset or it["subset"]) and (not only or any(it["id"].startswith(o) for o in only))
    ]
    t0 = time.perf_counter()
    results = {it["id"]: judge(data["programs"][it["program"]], it["trace"], it["func"], it["target"]) for it in items}
    out: dict = {"items": dict(Counter(it["target"] for it in items)), "subset": subset}
    for target in ("cuda", "cpu"):
        part = [it for it in items if it["target"] == target]
        if part:
            out[target] = score(part, results)
    out["numeric_vs_correctness_hazards"] = numeric_vs_hazards(items, results)
    out["errors"] = {i: r["error"] for i, r in results.items() if r["error"]}
    out["seconds_labelled"] = round(time.perf_counter() - t0, 1)
    if with_conformance:
        t0 = time.perf_counter()
        out["conformance_cuda"] = conformance(subset)
        out["seconds_conformance"] = round(time.perf_counter() - t0, 1)
    out["targets_met"] = targets_met(out)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def targets_met(out: dict) -> dict:
    """Issue 28's targets: every check and hazard kind at precision = recall = 1.0 with nothing it
    could not judge on the labelled items (a kind with no positive item needs no false positive);
    under 10% could-not-judge on the conformance CUDA schedules."""
    misses = []
    for target in ("cuda", "cpu"):
        for kind, group in (("check", "checks"), ("hazard", "hazards")):
            for name, s in out.get(target, {}).get(group, {}).items():
                if s["fp"] or s["fn"] or s.get("could_not_judge") or s.get("judged_where_not_applicable"):
                    misses.append(f"{target} {kind} {name}")
    met = {"labelled": not misses, "missed_by": misses}
    conf = out.get("conformance_cuda")
    if conf:
        met["conformance"] = conf["could_not_judge_share"] is not None and conf["could_not_judge_share"] < 0.1
    return met


def table(out: dict) -> str:
    """The figures as a Markdown table (one row per check and per hazard kind)."""
    rows = ["| target | check / hazard | TP | FP | FN | TN | precision | recall | could not judge |", "|---" * 9 + "|"]
    for target in ("cuda", "cpu"):
        part = out.get(target)
        if not part:
            continue
        for name, s in part["checks"].items():
            cnj = f"{s['could_not_judge']}/{s['labelled']}"
            rows.append(_row(target, name, s, cnj))
        for kind, s in part["hazards"].items():
            rows.append(_row(target, "hazard " + kind, s, "-"))
    conf = out.get("conformance_cuda")
    if conf:
        rows.append("")
        rows.append(
            f"Conformance CUDA schedules: {conf['schedules']}; could not judge (all checks): "
            f"{conf['could_not_judge_share']} (target under {conf['target_share']}); left out of the report: "
            f"{conf['absent_share']}"
        )
        rows.append("")
        rows.append("| check | pass | fail | unjudged | error | absent | could not judge |")
        rows.append("|---" * 7 + "|")
        for name, c in conf["checks"].items():
            rows.append(
                f"| {name} | {c.get('pass', 0)} | {c.get('fail', 0)} | {c.get('unjudged', 0)} | {c.get('error', 0)} "
                f"| {c.get('absent', 0)} | {c['could_not_judge_share']} |"
            )
    return "\n".join(rows)


def _row(target: str, name: str, s: dict, cnj: str) -> str:
    return (
        f"| {target} | {name} | {s['tp']} | {s['fp']} | {s['fn']} | {s['tn']} | {s['precision']} | "
        f"{s['recall']} | {cnj} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subset", action="store_true", help="the items CI runs, and a few conformance schedules")
    ap.add_argument("--only", action="append", default=[], help="items whose id starts with this (repeatable)")
    ap.add_argument("--no-conformance", action="store_true")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="the labelled corpus (default: tests/verdicts/)")
    ap.add_argument("--table", action="store_true", help="print a Markdown table instead of JSON")
    args = ap.parse_args(argv)
    out = run(args.subset, args.only, not args.no_conformance, args.corpus)
    print(table(out) if args.table else json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
