"""Issue 34: the numeric check at more than one size (mlc_lab.core.checks.numeric_sizes): the plan of
sizes, what each size means, and one verdict from several runs."""

from __future__ import annotations

from mlc_lab.core.checks.numeric_gpu import NumericResult
from mlc_lab.core.checks.numeric_sizes import _combined, _default_rest, _mapping


def _run(verdict: str, big: int, total: int, message: str = "") -> NumericResult:
    return NumericResult(verdict == "match", 0.0, {}, 0, total, message or f"{verdict} at {big}", verdict, {2048: big})


def test_a_size_keeps_the_tiles_whole_when_it_is_a_power_of_two_fraction_of_the_program():
    assert _mapping(256, [2048, 512]) == ({2048: 256, 512: 64}, False)
    assert _mapping(196, [2048, 512]) == ({2048: 196, 512: 49}, True)  # runs with TVM's bounds checks
    assert _mapping(2048, [2048]) == (None, "the program's largest dimension is 2048")
    assert _mapping(0, [2048]) == (None, "a size is a positive number, not 0")
    assert _mapping("default", [2048]) == (None, False)  # numeric_check chooses the small size


def test_the_default_plan_adds_the_shape_class_and_a_size_no_tile_divides():
    first = _run("match", 128, 16384)
    assert _default_rest(first, [2048], "sch.split(...)") == [{2048: 256}, {2048: 196, "guards": True}]
    # a trace whose splits turn bounds checks off runs only at multiples of its tiles
    assert _default_rest(first, [2048], "disable_predication=True") == [{2048: 256}]
    # a program small enough to run at its own size has no second size
    assert _default_rest(NumericResult(True, 0.0, {}, 0, 1, "", "match", {}), [128], "") == []


def test_one_verdict_from_several_runs():
    match = _combined([_run("match", 128, 16384, "all 16384 elements match"), _run("match", 256, 65536)], [])
    assert (
        match.verdict == "match"
        and match.message == "all 16384 elements match; the same at 2048 -> 256 (65536 elements)"
    )
    wrong = _combined([_run("match", 128, 16384), _run("mismatch", 256, 65536, "24635 of 65536 are wrong")], [])
    assert wrong.verdict == "mismatch" and wrong.sizes == {2048: 256}
    assert wrong.message == "24635 of 65536 are wrong (it matched at 2048 -> 128)"
    skipped = _combined([_run("match", 128, 16384, "ok")], ["not run at 2048 -> 256: the time left cannot hold it"])
    assert skipped.message == "ok; not run at 2048 -> 256: the time left cannot hold it"
    none = _combined([], ["not run at 4096: the program's largest dimension is 2048"])
    assert none.verdict == "could_not_run" and none.message.startswith("the numbers were not checked: not run at 4096")
