"""A background follower: one thread that follows the current step off the click path.

The explorer answers a click with the step's own state first; what takes longer (the checks of the
step, the way from it to a target program) is computed by a follower and published as a second
message. A follower keeps only the newest step it was given (steps passed over while it worked are
not followed), runs one piece of work at a time outside its lock, and ends its thread after
``IDLE_EXIT_S`` with nothing to do (an explorer nobody closes keeps no thread); the next step given
starts another. ``close`` ends it after the piece it is on; so does the interpreter's exit
(``helper_thread``), while TVM's code that the work runs can still return.

A subclass says what following a step is (``_follow``), and may queue more than the newest step
(``_queued`` and ``_take``: the Checks panel's hazards of every new step of the history).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mlc_lab._threads import helper_thread

log = logging.getLogger(__name__)


class Follower:
    """Follows the newest step given to ``schedule`` in a thread of its own (see the module's doc)."""

    IDLE_EXIT_S = 30.0  # a thread with nothing to do ends (an explorer nobody closes keeps none)
    THREAD_NAME = "mlc-lab-follower"
    WHAT = "following step {!r}"  # what following a step is, for the log when it fails

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._current: Any = None  # the step to follow next (only the newest is kept)
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        """Whether there is anything to follow (a disabled follower starts no thread)."""
        return True

    def schedule(self, current: Any) -> None:
        """Follow ``current`` (replacing any step not started yet)."""
        if self.enabled:
            with self._queueing():
                self._current = current

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or running; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._busy or self._queued():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        """End the thread after the piece of work it is on (nothing queued is done)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- what a subclass says ----------------------------------------------------------------------
    def _follow(self, sid: Any) -> None:
        """Follow step ``sid`` (in the thread, outside the lock): compute, then publish."""
        raise NotImplementedError

    def _queued(self) -> bool:
        """Whether work waits (called under the lock): by default, a step given and not yet taken."""
        return self._current is not None

    def _take(self) -> tuple[str, Callable[[], None]]:
        """Take the next piece of work (under the lock; only when ``_queued``): what it is, for the
        log if it fails, and the work itself, which runs outside the lock."""
        sid, self._current = self._current, None
        return self.WHAT.format(sid), lambda: self._follow(sid)

    # --- the thread --------------------------------------------------------------------------------
    @contextmanager
    def _queueing(self) -> Iterator[None]:
        """Change what is queued under the lock; then the thread is woken, or started if it ended."""
        with self._cond:
            yield
            self._cond.notify_all()
            if self._thread is None:
                self._thread = helper_thread(self._loop, name=self.THREAD_NAME, stop=self.close)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._queued():
                    self._busy = False
                    self._cond.notify_all()
                    # idle: end the thread (the next schedule starts another); work queued just as
                    # the wait ran out is still taken, since the thread was there to take it
                    if not self._cond.wait(self.IDLE_EXIT_S) and not self._queued():
                        self._thread = None
                        return
                if self._closed:
                    self._busy = False
                    self._cond.notify_all()
                    return
                self._busy = True
                what, work = self._take()
            try:
                work()
            except Exception:  # noqa: BLE001  (a view's helper thread must not die)
                log.exception("mlc_lab: %s failed", what)
