"""bind refuses a thread axis that does not exist, naming the ones that do (TVM takes any
"threadIdx.*" and fails only when the program is built)."""

from __future__ import annotations

import pytest

import mlc_lab
from mlc_lab.errors import ScheduleStepError


@pytest.mark.parametrize("axis", ["threadIdx.w", "threadidx.x", "blockIdx", "warp"])
def test_an_unknown_thread_axis_is_refused(axis):
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    with pytest.raises(ScheduleStepError) as info:
        s.apply("bind", "Y/i", thread_axis=axis)
    text = str(info.value).splitlines()[0]
    assert text.startswith(f"bind: {axis!r} is not a GPU thread axis; the thread axes are blockIdx.x, ")
    assert "threadIdx.x" in text and "vthread.x" in text
    assert len(s.steps) == 1 and s.failed[-1].primitive == "bind"


def test_a_known_thread_axis_binds():
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    s.apply("bind", "Y/i", "threadIdx.x")
    assert s.current.primitive == "bind" and "threadIdx.x" in s.current.label
