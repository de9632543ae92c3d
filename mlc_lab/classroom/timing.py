"""How the class server's grading children share the machine's timing, and how two close results are
timed again.

- **One timing at a time, mostly.** Graders run side by side; a kernel timed while another grader
  times its own would measure the other as much as itself. A child takes its turn (``timing_turn``:
  a lock on ``DIR/timing.lock``, which the kernel drops if the child dies) around each timing on this
  machine, but waits for it at most ``PATIENCE_S``: the turn covers the kernel's build too, and a
  hand-in whose build runs for half a minute must not hold every classmate's timing that long (a
  timing taken meanwhile says it was taken on a busy machine, and its band on the leaderboard is
  wider for it). Timings on the class's measurement machines (``--tracker``) need no turn.
- **Close results timed again, interleaved.** A tie on the leaderboard means the two timings'
  bands meet (``mlc_lab.classroom.store.tied``), often because one was taken while the machine was
  busy grading. When the server has nothing else to do it times both again, alternating one round
  of each (A B, B A, A B ...) so that whatever the machine does meanwhile falls on both alike
  (``retime``); the new figures replace the first ones, which the verdict keeps.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

import numpy as np

LOCK_ENV = "MLC_LAB_CLASS_TIMING_LOCK"  # set by the server for children that time on this machine
PATIENCE_S = 5.0  # the longest a timing waits for its turn


@contextlib.contextmanager
def timing_turn(remote: bool = False, patience_s: float = PATIENCE_S) -> Iterator[bool]:
    """Hold the class's timing lock (``$MLC_LAB_CLASS_TIMING_LOCK``) while timing on this machine,
    waiting for it at most ``patience_s``; yields whether the turn was had (False: timed all the same)."""
    path = os.environ.get(LOCK_ENV)
    if remote or not path:
        yield True
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + patience_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                had = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    had = False
                    break
                time.sleep(0.05)
        yield had
    finally:
        os.close(fd)  # the lock goes with the descriptor


def retime(assignment, traces: list[str], rounds: int = 3, unsafe: bool = False) -> list[dict]:
    """Time each trace ``rounds`` times, interleaved (each round alternates which goes first), in one
    turn of the timing lock, each kernel run in the sandbox as a first timing is
    (``mlc_lab.core.kernel_sandbox``): per trace ``{"latency_ms", "timing": {...}}`` from all its
    repeats (the median, the interquartile range, the highest load seen, quiet only if every round
    was), or ``{"error": sentence}`` when it could not be timed."""
    from mlc_lab.core.session import Session
    from mlc_lab.grading.grade import measure_in_sandbox
    from mlc_lab.tvm.program import load

    program = load(str(assignment.program), assignment.func)
    sessions = [Session.from_trace(program, t, assignment.func) for t in traces]
    samples: list[list[float]] = [[] for _ in traces]
    loads: list[list[float]] = [[] for _ in traces]
    quiet: list[list[bool | None]] = [[] for _ in traces]
    errors: list[str | None] = [None] * len(traces)
    with timing_turn(patience_s=60.0):  # an idle server: worth waiting for a quiet turn
        for r in range(max(1, rounds)):
            order = range(len(traces)) if r % 2 == 0 else reversed(range(len(traces)))
            for i in order:
                if errors[i]:
                    continue
                session = sessions[i]
                m = measure_in_sandbox(assignment, session, unsafe)
                if m.error or not m.correct:
                    errors[i] = f"it could not be timed again: {(m.error or 'a wrong result').splitlines()[0]}"
                    continue
                samples[i] += list(m.results_s)
                quiet[i].append(m.quiet)
                if m.load is not None:
                    loads[i].append(float(m.load))
    out = []
    for i in range(len(traces)):
        if errors[i] or not samples[i]:
            out.append({"error": errors[i] or "it could not be timed again"})
            continue
        q1, med, q3 = np.percentile(np.asarray(samples[i]), [25, 50, 75])
        out.append(
            {
                "latency_ms": float(med) * 1e3,
                "timing": {
                    "spread_ms": float(q3 - q1) * 1e3,
                    "load": max(loads[i]) if loads[i] else None,
                    "quiet": all(q is True for q in quiet[i]) if quiet[i] else None,
                    "retimed": {"rounds": max(1, rounds), "repeats": len(samples[i]), "interleaved": len(traces)},
                },
            }
        )
    return out
