"""Hints that name what to do must name something that works (issue 9, "wrong hints")."""

from __future__ import annotations

import pytest

from mlc_lab.core.session import Session
from mlc_lab.errors import ScheduleStepError
from tests.fixtures.programs import MM_RELU


@pytest.mark.parametrize("primitive, verb", [("vectorize", "vectorized"), ("parallel", "parallelized")])
def test_a_reduction_loop_after_decompose_reduction_is_called_a_reduction_loop(primitive, verb):
    s = Session(MM_RELU)
    s.apply("decompose_reduction", "Y", "k")
    with pytest.raises(ScheduleStepError) as info:
        s.apply(primitive, "k")
    summary = info.value.summary
    assert f"k is a reduction loop and cannot be {verb}" in summary, summary
    assert "before decompose_reduction" not in summary  # there it fails too: no such advice
    # The advice it used to give fails as well, for the reason now given first.
    fresh = Session(MM_RELU)
    with pytest.raises(ScheduleStepError, match="reduction loop"):
        fresh.apply(primitive, "k")


def test_a_spatial_loop_after_decompose_reduction_still_gets_the_order_advice():
    s = Session(MM_RELU)
    s.apply("decompose_reduction", "Y", "k")
    with pytest.raises(ScheduleStepError, match="apply it before decompose_reduction"):
        s.apply("parallel", "Y_init/i")
    # ... and that advice works
    fresh = Session(MM_RELU)
    fresh.apply("parallel", "Y/i")
    fresh.apply("decompose_reduction", "Y", "k")
