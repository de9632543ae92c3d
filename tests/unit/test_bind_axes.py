"""bind refuses a thread axis that does not exist, naming the ones that do (TVM takes any
"threadIdx.*" and fails only when the program is built)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mlc_lab
from mlc_lab.errors import ScheduleStepError
from mlc_lab.model.steps import LEGACY_THREAD_AXES, THREAD_AXES


@pytest.mark.parametrize("axis", ["threadIdx.w", "threadidx.x", "blockIdx", "warp"])
def test_an_unknown_thread_axis_is_refused(axis):
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    with pytest.raises(ScheduleStepError) as info:
        s.apply("bind", "Y/i", thread_axis=axis)
    text = str(info.value).splitlines()[0]
    assert text.startswith(f"bind: {axis!r} is not a GPU thread axis; the thread axes are blockIdx.x, ")
    assert "threadIdx.x" in text and "vthread.x" in text
    assert len(s.steps) == 1 and s.failed[-1].primitive == "bind"


@pytest.mark.parametrize("axis", THREAD_AXES + LEGACY_THREAD_AXES)
def test_every_thread_axis_the_form_offers_binds(axis):
    """The list the explorer's bind form offers (js/lib/model.ts, generated) is what TVM takes."""
    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    s.apply("bind", "Y/i", axis)
    assert s.current.primitive == "bind" and axis in s.current.label


def test_the_page_offers_the_thread_axes_of_the_model():
    text = (Path(__file__).resolve().parents[2] / "js" / "lib" / "model.ts").read_text()
    line = next(x for x in text.splitlines() if x.startswith("export const THREAD_AXES = "))
    offered = json.loads(line.removeprefix("export const THREAD_AXES = ").removesuffix(" as const;"))
    assert offered == list(THREAD_AXES) and "vthread" not in offered  # the legacy spelling is taken, not offered
