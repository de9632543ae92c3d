"""The conformance suite: schedules TVM writes (tests/conformance/corpus.json.gz: design spaces,
dlight, the course, every primitive, and the schedules of TVM's own schedule, meta_schedule and dlight
tests), replayed by mlc_lab from the printed trace and from the JSON, with TVM's own replay as the
oracle: every schedule TVM reproduces, both channels reproduce.

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


# what the analysis may still refuse: symbolic shapes (the view asks for their values), and a
# program TVM wrote ill-formed (cache_inplace uses a block's variable outside the block: such a
# program does not compile, so it has no footprint to give)
_MAY_REFUSE = ("symbolic shapes without values", "variable out of scope (ill-formed program)")


def _check_footprints(entry: dict) -> None:
    """The access analysis answers the outermost, a middle and the innermost loop, or asks for the
    values of symbolic shapes (``_MAY_REFUSE``). No message shows a TVM placeholder (``SBlock#0``)."""
    out = harness.run_entry(entry)
    for loop, result, *_ in out.footprints:
        if result != "ok":
            why = harness.refusal_reason(out.errors.get(f"footprint {loop}", ""))
            assert why in _MAY_REFUSE, (loop, out.errors.get(f"footprint {loop}"))
    shown = [m for k, m in out.errors.items() if not k.endswith("_traceback") and harness.PLACEHOLDER.search(m)]
    assert not shown, shown


# the fast subset's schedules whose footprints matter most: every primitive, the course, dlight,
# and the full-size padded convolutions and fused GPU nests that once overflowed the budget
_FOOTPRINT_IDS = (
    "primitive/",
    "course",
    "dlight/",
    "C3D/llvm/sketch2",
    "C3D/cuda/sketch0/seed2",
    "T2D/cuda/sketch1/seed1",
)


@pytest.mark.parametrize(
    "entry",
    [e for e in harness.corpus() if e["id"].startswith(_FOOTPRINT_IDS) and "tensorize" not in e["id"]],
    ids=lambda e: e["id"],
)
def test_footprints_refuse_only_symbolic_shapes(entry):
    _check_footprints(entry)


@pytest.mark.full
@pytest.mark.parametrize("entry", harness.entries("all"), ids=lambda e: e["id"])
def test_whole_corpus_footprints_refuse_only_symbolic_shapes(entry):
    _check_footprints(entry)


def test_refusal_reasons_and_placeholders_are_recognised():
    assert (
        harness.refusal_reason("function main has symbolic shapes n: give their values")
        == "symbolic shapes without values"
    )
    assert (
        harness.refusal_reason("the function could not be read for the access analysis (X)") == "function not readable"
    )
    assert harness.PLACEHOLDER.search("cannot bind s_tir.SBlock#0 to tirx.For#1")
    assert not harness.PLACEHOLDER.search("loop i_0 of block C")


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
    assert {"llvm", "cuda", "cuda-tensorcore", "course", "primitive", "dlight", "tvm-tests"} <= groups
    texts = "\n".join(e["text"] or "" for e in items)
    assert "decision=-1)" in texts and "decision=-2)" in texts  # sampled compute locations: root, inline
    assert "decision=[-1," in texts  # dynamic tiles
    assert "index_map=lambda" in texts and " // v" in texts  # layouts with sampled variables
    # what TVM's own tests, dlight and meta_schedule write, once refused by a list of annotation names
    for written in (
        'ann_key="pragma_vectorize"',
        'ann_key="test1"',
        'ann_key="tirx.manifest_shared_memory_local_stage"',
    ):
        assert written in texts, written
