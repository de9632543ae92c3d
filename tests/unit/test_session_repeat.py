"""One intent, one step: the same idempotent primitive applied again to the step it made (a key
pressed five times, a double-click) adds no step and records no failure."""

from __future__ import annotations

import pytest

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


def test_a_call_is_bound_to_tvms_signature_once_and_labelled_once(monkeypatch):
    """The label, the repeat check, the same-child check and TVM's call read one binding."""
    from mlc_lab.core import session as session_module
    from mlc_lab.tvm import primitives

    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    binds, labels = [], []
    real_bind, real_label = primitives._bind, session_module.call_label
    monkeypatch.setattr(primitives, "_bind", lambda *a: binds.append(a[0]) or real_bind(*a))
    monkeypatch.setattr(session_module, "call_label", lambda *a: labels.append(a[0]) or real_label(*a))
    s.apply("split", "Y/j", factors=[None, 4])  # a new step
    s.apply("parallel", "Y/i")
    s.apply("parallel", "Y/i")  # the same step again: no new step
    s.undo()
    s.apply("parallel", loop="Y/i")  # the child made before, spelled otherwise
    assert binds == ["split", "parallel", "parallel", "parallel"]
    assert labels == binds
    assert len(s.steps) == 3 and s.current.label == "parallel(Y/i)"


def test_a_call_that_fits_no_primitive_is_kept_as_given():
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    for args, kwargs in ((("Y/j",), {"bogus": 3}), (("Y/j", [None, 4], 7, 8, 9), {})):
        with pytest.raises(mlc_lab.MlcLabError, match="wrong arguments for split"):
            s.apply("split", *args, **kwargs)
    with pytest.raises(mlc_lab.MlcLabError, match="not a schedule primitive"):
        s.apply("explode", "Y/i", n=2)
    labels = [f.label for f in s.failed]
    assert labels == ["split(Y/j, bogus=3)", "split(Y/j, [None, 4], 7, 8, 9)", "explode(Y/i, n=2)"]
    assert len(s.steps) == 1
