"""Run mlc_lab on the conformance corpus and count what matters (see ``benchmarks/conformance.py``).

For one corpus entry: replay its printed trace and its JSON with ``Session.from_trace`` and compare the
result with TVM's module (by structural hash: equal modules hash equally), build the loop tree, and
ask ``Session.footprint`` about the outermost, a middle and the innermost loop. Every outcome is one of
``equal`` / ``differs`` / ``refused`` (an ``MlcLabError``) / ``raw`` (any other exception).
"""

from __future__ import annotations

import gzip
import json
import re
import time
import traceback
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

CORPUS = Path(__file__).with_name("corpus.json.gz")


@lru_cache(maxsize=1)
def corpus() -> list[dict]:
    return json.loads(gzip.decompress(CORPUS.read_bytes()))["entries"]


# Schedules of TVM's own tests in the fast subset: the annotations and index maps the reader once
# refused (TVM's tests' own keys, dlight's GEMV, meta_schedule's tensor-core pipeline) and layouts.
_FAST_TVM_TESTS = (
    "test_annotate_unannotate_",
    "test_gpu_gemv.py::test_gemv_basic/",
    "test_gpu_gemv.py::test_decode_gemv1/",
    "mlt_tc.py::test_matmul_relu_pipeline[shared]/",
    "test_tir_schedule_transform_layout.py::",
)


def entries(subset: str = "all") -> list[dict]:
    """``all``, or ``fast``: every primitive and course schedule, one sketch of each design space, and
    a few schedules of TVM's own tests (``_FAST_TVM_TESTS``)."""
    items = corpus()
    if subset == "all":
        return items
    if subset == "fast":
        small = ("GMM/", "SFM/", "NRM/", "C1D/", "GMM16/", "DYN/")
        # tensorize registers TVM's tensor intrinsics (a minute on a loaded machine): full runs only
        return [
            e
            for e in items
            if (e["group"] in {"primitive", "course", "dlight"} and "tensorize" not in e["id"])
            or (e["id"].startswith(small) and e["id"].endswith("/sketch0"))
            or (e["group"] == "tvm-tests" and any(part in e["id"] for part in _FAST_TVM_TESTS))
        ]
    return [e for e in items if subset in e["id"]]


@dataclass
class Outcome:
    id: str
    tvm_text: bool
    tvm_json: bool
    text: str = "?"
    json: str = "?"
    loop_tree: str = "?"
    footprints: list[tuple] = field(default_factory=list)  # (loop, outcome, wall seconds, CPU seconds)
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _module_hash(session: Any) -> str:
    import tvm_ffi  # the harness, not mlc_lab: it also measures checkouts that predate program.structural_hash

    return str(tvm_ffi.structural_hash(session.module, map_free_vars=True))  # as generate.py


def _classify(exc: BaseException) -> str:
    from mlc_lab.errors import MlcLabError

    return "refused" if isinstance(exc, MlcLabError) else "raw"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def run_entry(entry: dict, *, footprint: bool = True, every_loop: bool = False) -> Outcome:
    from mlc_lab import Session

    out = Outcome(entry["id"], entry["tvm_text"], entry["tvm_json"])
    started = time.perf_counter()
    replayed = None
    for form in ("text", "json"):
        if entry[form] is None:  # TVM could not print this trace: nothing to replay
            setattr(out, form, "n/a")
            continue
        try:
            session = Session.from_trace(entry["module"], entry[form], entry.get("func"))
            result = "equal" if _module_hash(session) == entry["hash"] else "differs"
            replayed = replayed or (session if result == "equal" else None)
        except Exception as exc:  # noqa: BLE001  (counted: refused or raw)
            result = _classify(exc)
            out.errors[form] = _first_line(exc)
            if result == "raw":
                out.errors[form + "_traceback"] = traceback.format_exc(limit=-3)
        setattr(out, form, result)
    if replayed is not None:
        try:
            tree = replayed.loop_tree()
            out.loop_tree = "ok" if _index_matches_walk(tree) else "names differ"
        except Exception as exc:  # noqa: BLE001
            out.loop_tree = _classify(exc)
            out.errors["loop_tree"] = _first_line(exc)
            tree = None
        if footprint and tree is not None:
            for loop in _every_loop(tree) if every_loop else _three_loops(tree):
                t0, c0 = time.perf_counter(), time.process_time()
                try:
                    replayed.footprint(loop)
                    result = "ok"
                except Exception as exc:  # noqa: BLE001
                    result = _classify(exc)
                    out.errors[f"footprint {loop}"] = _first_line(exc)
                out.footprints.append((loop, result, time.perf_counter() - t0, time.process_time() - c0))
    out.seconds = time.perf_counter() - started
    return out


def _index_matches_walk(tree) -> bool:
    """The name index the scanner hands over equals the one a walk of the finished tree builds."""
    fresh = type(tree)(tree)
    walked = fresh.index_names([(n, fn) for n, fn, _ in fresh._walked()])

    def ids(index):
        refs, names = index
        return (
            {k: [id(n) for n in v] for k, v in refs.items()},
            {k: [(id(n), id(fn)) for n, fn in v] for k, v in names.items()},
        )

    return ids(tree._names()) == ids(walked)


def _every_loop(tree: dict) -> list[str]:
    """Every loop of the tree (qualified names), in pre-order."""
    names: list[str] = []

    def walk(node: dict) -> None:
        if node.get("kind") == "loop":
            name = node.get("qualified") or node.get("name")
            if name not in names:
                names.append(name)
        for kid in node.get("children", []):
            walk(kid)

    for func in tree.get("functions", []):
        for child in func.get("children", []):
            walk(child)
    return names


def _three_loops(tree: dict) -> list[str]:
    """The outermost, a middle and the innermost loop of the deepest nest (qualified names)."""
    best: list[dict] = []

    def walk(node: dict, chain: list[dict]) -> None:
        nonlocal best
        chain = chain + [node] if node.get("kind") == "loop" else chain
        kids = node.get("children", [])
        if not kids and len(chain) > len(best):
            best = chain
        for kid in kids:
            walk(kid, chain)

    for func in tree.get("functions", []):
        for child in func.get("children", []):
            walk(child, [])
    if not best:
        return []
    picks = [best[0], best[len(best) // 2], best[-1]]
    names: list[str] = []
    for node in picks:
        name = node.get("qualified") or node.get("name")
        if name not in names:
            names.append(name)
    return names


# TVM's rendering of an object without a name: ``s_tir.SBlock#0``, ``tirx.For#1``
PLACEHOLDER = re.compile(r"\b[A-Za-z_.]*[A-Za-z]#\d+")

# refusals of the access analysis by what they say (the first pattern found names the class)
REASONS = (
    ("symbolic shapes without values", "has symbolic shapes"),
    ("memory budget", "beyond the analysis's budget"),
    ("memory budget", "AccessAnalysisError: enumerating the access"),  # the message cut before "budget"
    ("function not readable", "could not be read for the access analysis"),
    ("variable out of scope (ill-formed program)", "outside any scope that defines it"),
    ("value it cannot evaluate", "which the analysis cannot evaluate"),
    ("loop range not bounded", "only loops with constant starts and bounded extents"),
    ("out of bounds", "is accessed out of its bounds"),
    ("construct not handled", "failed on a construct it does not handle"),
)


def refusal_reason(message: str) -> str:
    for name, pattern in REASONS:
        if pattern in message:
            return name
    return "other: " + re.sub(r"\d+", "N", message)[:80]


def summarize(outcomes: Iterable[Outcome]) -> dict:
    outcomes = list(outcomes)
    n = len(outcomes)

    def rate(k: int, d: int) -> float | None:
        return round(100.0 * k / d, 1) if d else None

    table: dict[str, Any] = {"schedules": n}
    for form in ("text", "json"):
        present = [o for o in outcomes if getattr(o, form) != "n/a"]
        n = len(present)
        tvm_ok = [o for o in present if getattr(o, f"tvm_{form}")]
        equal = [o for o in present if getattr(o, form) == "equal"]
        equal_where_tvm = [o for o in tvm_ok if getattr(o, form) == "equal"]
        table[form] = {
            "schedules": n,
            "equal_pct": rate(len(equal), n),
            "tvm_own_pct": rate(len(tvm_ok), n),
            "equal_where_tvm_reproduces_pct": rate(len(equal_where_tvm), len(tvm_ok)),
            "refused": sum(getattr(o, form) == "refused" for o in outcomes),
            "differs": sum(getattr(o, form) == "differs" for o in outcomes),
            "raw": sum(getattr(o, form) == "raw" for o in outcomes),
            "failing_where_tvm_reproduces": [o.id for o in tvm_ok if getattr(o, form) != "equal"][:20],
        }
    n = len(outcomes)
    replays = sum((o.text != "n/a") + (o.json != "n/a") for o in outcomes)
    raw = sum((o.text == "raw") + (o.json == "raw") for o in outcomes)
    table["replays_raw_exception_pct"] = rate(raw, replays)
    table["loop_tree"] = {k: sum(o.loop_tree == k for o in outcomes) for k in ("ok", "refused", "raw")}
    calls = [f for o in outcomes for f in o.footprints]
    slowest = max(((f[2], o.id, f[0]) for o in outcomes for f in o.footprints), default=None)
    reasons: dict[str, int] = {}
    for o in outcomes:
        for loop, result, *_ in o.footprints:
            if result != "ok":
                why = refusal_reason(o.errors.get(f"footprint {loop}", ""))
                reasons[why] = reasons.get(why, 0) + 1
    table["footprint"] = {
        "calls": len(calls),
        "refused_pct": rate(sum(f[1] == "refused" for f in calls), len(calls)),
        "raw_pct": rate(sum(f[1] == "raw" for f in calls), len(calls)),
        "refusals_by_reason": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "slowest_s": round(slowest[0], 3) if slowest else None,
        "slowest_at": f"{slowest[1]} {slowest[2]}" if slowest else None,
    }
    # CPU time of the process: on a shared machine the wall time also counts others' work
    slowest_cpu = max(((f[3], o.id, f[0]) for o in outcomes for f in o.footprints if len(f) > 3), default=None)
    if slowest_cpu:
        table["footprint"]["slowest_cpu_s"] = round(slowest_cpu[0], 3)
        table["footprint"]["slowest_cpu_at"] = f"{slowest_cpu[1]} {slowest_cpu[2]}"
    placeholders = sorted(
        {
            f"{o.id}: {m}"
            for o in outcomes
            for k, m in o.errors.items()
            if not k.endswith("_traceback") and PLACEHOLDER.search(m)
        }
    )
    table["messages_with_tvm_placeholder"] = {"count": len(placeholders), "first": placeholders[:5]}
    slow_entry = max(outcomes, key=lambda o: o.seconds, default=None)
    table["slowest_schedule"] = {"id": slow_entry.id, "seconds": round(slow_entry.seconds, 2)} if slow_entry else None
    return table


def outcome_dict(o: Outcome) -> dict:
    return asdict(o)
