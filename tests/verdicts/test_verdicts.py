"""The verdicts corpus (tests/verdicts/corpus.json.gz) still says what it was built to say.

Each item's trace is the one its catalog entry builds today and replays in mlc_lab; every item has a
label for every named check of its target and a numeric label from a run; a few items run again
give the same numeric label; the benchmark's scoring counts what it should. A subset runs in CI;
``pytest -m full`` runs every item (and more numeric re-runs). The checks' precision and recall are
the benchmark's business (benchmarks/verdicts.py), not a test's: they move as the checks are fixed.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from benchmarks import verdicts as bench
from mlc_lab.core.checks import CHECKS
from mlc_lab.core.session import Session
from mlc_lab.model.checks import HAZARD_KINDS
from tests.verdicts import catalog, generate

NUMERIC = {"right", "wrong", "crash", "timeout", "error", "not_run"}


@lru_cache(maxsize=1)
def corpus() -> dict:
    return generate.load(generate.CORPUS)


@lru_cache(maxsize=1)
def specs() -> dict:
    return {s.id: s for s in catalog.specs()}


def _items(subset: bool) -> list[dict]:
    return [it for it in corpus()["items"] if it["subset"] or not subset]


def test_the_corpus_holds_what_the_issue_asks_for():
    items = corpus()["items"]
    ids = [it["id"] for it in items]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(specs()), "the stored corpus and the catalog list different items: regenerate it"
    gpu = {it["program"] for it in items if it["target"] == "cuda"}
    assert gpu == {"matmul", "gemm_relu_add", "bmm", "conv2d_nhwc", "transpose", "softmax"}
    for prog in gpu:
        styles = {it["id"].split("/")[1] for it in items if it["program"] == prog}
        assert len(styles) >= 3, prog
    assert {it["program"] for it in items if it["target"] == "cpu"} == {"mm_relu", "matmul_cpu", "bmm_relu"}


def test_every_item_is_labelled_for_every_check_and_hazard():
    for it in corpus()["items"]:
        names = {n for n, c in CHECKS.items() if c.target == it["target"]}
        assert set(it["checks"]) == names, it["id"]
        assert set(it["checks"].values()) <= {"pass", "fail", "n/a"}, it["id"]
        assert set(it["hazards"]) <= set(HAZARD_KINDS), it["id"]
        if it["target"] == "cuda":
            assert it["numeric"]["label"] in NUMERIC, it["id"]
            assert it["numeric"]["message"], it["id"]


def test_every_mutant_trips_something_its_style_does_not():
    by_id = {it["id"]: it for it in corpus()["items"]}
    for iid, it in by_id.items():
        if "/mutant:" not in iid:
            assert "fail" not in it["checks"].values() and not it["hazards"], f"{iid} is a style, labelled wrong"
            continue
        style = by_id[iid.split("/mutant:")[0]]
        flipped = {n for n, v in it["checks"].items() if v != style["checks"][n]}
        assert flipped or set(it["hazards"]) - set(style["hazards"]), f"{iid} trips nothing"
        assert all(it["checks"][n] == "fail" for n in flipped), iid
        assert it["mistake"], iid


def _still_built_as_stored(it: dict) -> None:
    spec = specs()[it["id"]]
    assert generate.trace_of(spec) == it["trace"], f"{it['id']}: the catalog now builds another schedule"
    assert corpus()["programs"][it["program"]] == catalog.PROGRAMS[it["program"]], it["program"]
    Session.from_trace(corpus()["programs"][it["program"]], it["trace"], it["func"])


@pytest.mark.parametrize("it", _items(subset=True), ids=lambda it: it["id"])
def test_a_subset_item_is_still_built_as_stored(it):
    _still_built_as_stored(it)


@pytest.mark.full
@pytest.mark.parametrize("it", _items(subset=False), ids=lambda it: it["id"])
def test_every_item_is_still_built_as_stored(it):
    _still_built_as_stored(it)


# items with a right, a wrong-numbers and a raced (Oclgrind saw a race though the numbers match) label
RERUN = ["matmul/base", "matmul/base/mutant:missing_guard", "softmax/row128/mutant:no_thread_blocks"]
RERUN_FULL = [
    "gemm_relu_add/regcopy",
    "gemm_relu_add/regcopy/mutant:copy_other_threads",
    "bmm/base/mutant:missing_guard",
    "conv2d_nhwc/base",
    "transpose/direct/mutant:missing_guard",
    "transpose/shared32x8",
    "softmax/thread_per_row64",
]


def _rerun(iid: str) -> None:
    it = next(i for i in corpus()["items"] if i["id"] == iid)
    again = generate.numeric(specs()[iid], it["trace"])
    assert again["label"] == it["numeric"]["label"], (iid, again["message"])


@pytest.mark.parametrize("iid", RERUN)
def test_a_numeric_label_holds_when_the_item_runs_again(iid):
    _rerun(iid)


@pytest.mark.full
@pytest.mark.parametrize("iid", RERUN_FULL)
def test_more_numeric_labels_hold_when_run_again(iid):
    _rerun(iid)


def test_the_scoring_counts_each_kind_of_mistake():
    items = [
        {"id": "a", "target": "cuda", "checks": {"x": "fail", "y": "pass", "z": "n/a"}, "hazards": ["race"]},
        {"id": "b", "target": "cuda", "checks": {"x": "pass", "y": "pass", "z": "n/a"}, "hazards": []},
        {"id": "c", "target": "cuda", "checks": {"x": "fail", "y": "fail", "z": "n/a"}, "hazards": []},
    ]
    results = {
        "a": {"checks": {"x": ("fail", ""), "y": ("unjudged", "why"), "z": ("absent", "")}, "hazards": {}},
        "b": {"checks": {"x": ("fail", "no"), "y": ("pass", ""), "z": ("pass", "")}, "hazards": {"spill": ["s"]}},
        "c": {"checks": {"x": ("pass", "ok"), "y": ("fail", "")}, "hazards": {}},  # z left out
    }
    out = bench.score(items, results)
    x, y, z = (out["checks"][n] for n in "xyz")
    assert (x["tp"], x["fp"], x["fn"], x["tn"]) == (1, 1, 1, 0)
    assert x["precision"] == 0.5 and x["recall"] == 0.5
    assert (y["tp"], y["tn"], y["could_not_judge"], y["labelled"]) == (1, 1, 1, 3)
    assert (z["not_applicable"], z["judged_where_not_applicable"]) == (3, 1)
    assert (out["hazards"]["race"]["fn"], out["hazards"]["spill"]["fp"]) == (1, 1)
    assert {w["id"] for w in out["wrong"]["x"]} == {"b", "c"}
    assert [w["id"] for w in out["wrong"]["z"]] == ["b"]


def test_the_benchmark_judges_every_subset_item():
    out = bench.run(subset=True, with_conformance=False)
    items = _items(subset=True)
    assert out["items"] == {
        t: sum(it["target"] == t for it in items) for t in ("cuda", "cpu") if any(it["target"] == t for it in items)
    }
    for target in ("cuda", "cpu"):
        part = [it for it in items if it["target"] == target]
        for name, s in out[target]["checks"].items():
            applies = sum(it["checks"][name] != "n/a" for it in part)
            assert s["labelled"] == applies, name
            assert s["not_applicable"] == len(part) - applies, name
    assert not out["errors"], out["errors"]
    missed = set(out["targets_met"]["missed_by"])
    for target in ("cuda", "cpu"):
        for name, s in out[target]["checks"].items():
            clean = not (s["fp"] or s["fn"] or s["could_not_judge"] or s["judged_where_not_applicable"])
            assert (f"{target} check {name}" not in missed) == clean, name
