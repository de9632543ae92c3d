"""The conformance suite: schedules TVM writes (tests/conformance/corpus.json.gz), replayed by mlc_lab
from the printed trace and from the JSON, with TVM's own replay as the oracle.

A fast subset runs in CI; the whole corpus is marked ``full`` (``pytest -m full``). The table of
issue 13 over the whole corpus, footprints included: ``benchmarks/conformance.py``.
"""

from __future__ import annotations

import pytest

from tests.conformance import harness


def _check(entry: dict) -> None:
    out = harness.run_entry(entry, footprint=False)
    assert "raw" not in (out.text, out.json, out.loop_tree), out.errors
    if entry["tvm_text"]:
        assert out.text == "equal", out.errors.get("text", "the module differs from TVM's")
    if entry["tvm_json"]:
        assert out.json == "equal", out.errors.get("json", "the module differs from TVM's")
    if "equal" in (out.text, out.json):
        assert out.loop_tree == "ok", out.errors


@pytest.mark.parametrize("entry", harness.entries("fast"), ids=lambda e: e["id"])
def test_fast_subset_replays_like_tvm(entry):
    _check(entry)


@pytest.mark.full
@pytest.mark.parametrize("entry", harness.entries("all"), ids=lambda e: e["id"])
def test_whole_corpus_replays_like_tvm(entry):
    _check(entry)


def test_corpus_covers_what_the_issue_asks():
    items = harness.corpus()
    ids = [e["id"] for e in items]
    workloads = {i.split("/")[0] for i in ids if "/sketch" in i}
    assert {"C1D", "C2D", "C3D", "GMM", "GRP", "DIL", "DEP", "T2D", "CAP", "NRM", "SFM", "CBR", "TBG"} <= workloads
    groups = {e["group"] for e in items}
    assert {"llvm", "cuda", "cuda-tensorcore", "course", "primitive", "dlight"} <= groups
    texts = "\n".join(e["text"] or "" for e in items)
    assert "decision=-1)" in texts and "decision=-2)" in texts  # sampled compute locations: root, inline
    assert "decision=[-1," in texts  # dynamic tiles
    assert "index_map=lambda" in texts and " // v" in texts  # layouts with sampled variables
