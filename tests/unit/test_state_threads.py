"""A step's trace read from another thread while a primitive works on the live schedule.

The explorer finds the checks and the way from a step off the click, in worker threads, while the
kernel's thread applies the next step to that very state (``State.apply_call`` hands the live schedule
on to the new step). What the other thread reads of the step, its trace and a fork of it, is the
step's own program all along, never the half-made next one."""

from __future__ import annotations

import threading

from mlc_lab import Session
from mlc_lab.tvm import schedule as tsch
from mlc_lab.tvm.program import structural_equal
from tests.fixtures.programs import MM_RELU


def test_a_step_read_while_the_next_step_is_applied_is_the_step_itself(monkeypatch):
    session = Session(MM_RELU)
    state = session._states[0]  # noqa: SLF001  (the state a worker thread reads)
    length = len(state.trace.insts)
    inside, go_on = threading.Event(), threading.Event()
    real = tsch.raw_method

    def slowed(name):
        fn = real(name)
        if name != "parallel":
            return fn

        def run(sch, *args, **kwargs):
            out = fn(sch, *args, **kwargs)  # the live schedule has the new step ...
            inside.set()
            assert go_on.wait(30)  # ... and the state is not handed on yet
            return out

        return run

    monkeypatch.setattr(tsch, "raw_method", slowed)
    applying = threading.Thread(target=session.apply, args=("parallel", "Y/i"))
    applying.start()
    try:
        assert inside.wait(30)
        assert len(state.trace.insts) == length
        assert structural_equal(state.fork().mod, state.mod)
    finally:
        go_on.set()
        applying.join(30)
    assert session.current.id == 1 and len(session._states[1].trace.insts) > length  # noqa: SLF001
