"""The background follower's base (mlc_lab/core/follower.py): the newest step only, one piece at a
time, a thread that ends when idle and comes back, close, and a failing piece that leaves the thread
alive. The Checks and Way followers of the explorer are tested through the explorer
(tests/widgets/test_explorer_checks.py, test_explorer_path.py)."""

from __future__ import annotations

import logging
import threading

from mlc_lab.core.follower import Follower


class Recorder(Follower):
    """Follows steps by writing them down; a step in ``hold`` waits for ``go`` first."""

    THREAD_NAME = "mlc-lab-test-follower"
    WHAT = "recording step {!r}"

    def __init__(self, hold: tuple = (), fail: tuple = ()) -> None:
        super().__init__()
        self.seen: list = []
        self.hold, self.fail = hold, fail
        self.started = threading.Event()
        self.go = threading.Event()

    def _follow(self, sid: object) -> None:
        if sid in self.hold:
            self.started.set()
            assert self.go.wait(10)
        if sid in self.fail:
            raise RuntimeError(f"step {sid} cannot be followed")
        self.seen.append(sid)


def test_steps_passed_over_while_it_works_are_not_followed_only_the_newest():
    f = Recorder(hold=(1,))
    try:
        f.schedule(1)
        assert f.started.wait(10)
        for sid in (2, 3, 4):  # the user clicks on while step 1 is followed
            f.schedule(sid)
        assert not f.wait(0.05)  # step 1 runs, step 4 waits
        f.go.set()
        assert f.wait(10)
        assert f.seen == [1, 4]
    finally:
        f.close()


def test_the_thread_ends_when_idle_and_the_next_step_starts_another(monkeypatch):
    monkeypatch.setattr(Recorder, "IDLE_EXIT_S", 0.05)
    f = Recorder()
    try:
        f.schedule(1)
        assert f.wait(10)
        first = f._thread
        assert first is not None and first.name == "mlc-lab-test-follower"
        first.join(5)
        assert not first.is_alive() and f._thread is None
        f.schedule(2)
        assert f.wait(10) and f.seen == [1, 2]
        assert f._thread is not first
    finally:
        f.close()


def test_a_piece_that_fails_is_logged_by_what_it_is_and_the_next_is_followed(caplog):
    f = Recorder(fail=(1,))
    try:
        with caplog.at_level(logging.ERROR, logger="mlc_lab.core.follower"):
            f.schedule(1)
            assert f.wait(10)
        assert "recording step 1 failed" in caplog.text and "cannot be followed" in caplog.text
        f.schedule(2)
        assert f.wait(10) and f.seen == [2]
    finally:
        f.close()


def test_close_ends_the_thread_after_its_piece_and_a_disabled_follower_starts_none():
    f = Recorder(hold=(1,))
    f.schedule(1)
    assert f.started.wait(10)
    thread = f._thread
    f.schedule(2)
    f.close()
    f.go.set()
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive() and f.seen == [1]  # step 2 was queued, not started: it is not followed

    class Off(Recorder):
        enabled = False

    off = Off()
    off.schedule(1)
    assert off._thread is None and off.wait(0) and off.seen == []


def test_a_step_given_just_as_the_idle_wait_runs_out_is_still_followed():
    f = Recorder()
    real_wait, slipped = f._cond.wait, []

    def wait(timeout: float | None = None) -> bool:
        if timeout == f.IDLE_EXIT_S and not slipped:  # the thread's idle wait runs out...
            slipped.append(7)
            f._current = 7  # ...as schedule(7) takes the lock: it sees a thread, so it starts none
            return False
        return real_wait(timeout)

    f._cond.wait = wait
    try:
        f.schedule(1)
        assert f.wait(5) and f.seen == [1, 7]
    finally:
        f.close()
