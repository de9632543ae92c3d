"""One intent, one step: the same idempotent primitive applied again to the step it made (a key
pressed five times, a double-click) adds no step and records no failure."""

from __future__ import annotations

import mlc_lab


def test_parallel_five_times_is_one_step():
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    for _ in range(5):
        assert s.apply("parallel", "Y/i") is None
    assert [st.label for st in s.steps][1:] == ["parallel(Y/i)"] and len(s.steps) == 2
    assert s.failed == []
    for _ in range(3):
        s.apply("vectorize", "C/j")
    assert len(s.steps) == 3


def test_a_split_again_is_still_a_split():
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    s.apply("split", "Y/k", factors=[None, 4])
    s.apply("split", "Y/k_0", factors=[None, 2])
    assert len(s.steps) == 3
