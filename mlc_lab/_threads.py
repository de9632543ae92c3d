"""TVM sizes its worker pool once, when the runtime starts: set the thread count before that.

TVM's pool threads also *spin* after every parallel kernel before they sleep: 300,000
`sched_yield` calls by default, which is 0.1 s on an idle core and a second or more when another
process wants that core. The idle measuring worker then competes with whatever runs next: measured
here, 0.38-0.55 CPU-seconds burnt by an idle worker while another process ran right after a
`measure`. `SPIN_COUNT` yields (~1-10 ms) keep the threads awake between the back-to-back calls
of one timing, and let them sleep right after (0.00-0.01 CPU-seconds then).

Our own helper threads (the explorer's checks, a view's background request) run TVM's C++ code.
One still inside it when the interpreter finalizes is ended by Python with ``pthread_exit`` when it
comes back for the GIL; that unwinds through TVM's C++ frames and the process aborts (``terminate
called without an active exception``, exit status 134) after the script's last line. So they are
started by ``helper_thread``, and an ``atexit`` hook stops each and joins it while the interpreter
is still whole (atexit runs before finalization starts).
"""

from __future__ import annotations

import atexit
import os
import platform
import sys
import threading
import time
from typing import Any, Callable


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (what `platform` says where there is none): the one
    reader, for the machine figures (`mlc_lab.tvm.machine`), their cache key and the benchmarks."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


SPIN_COUNT = 10000


def tvm_thread_env() -> dict[str, str]:
    """The variables TVM's thread pool reads when it starts (a value already set wins)."""
    return {
        # TVM picks one worker per *physical* core, which is 1 on a 2-vCPU VM: `parallel` then does nothing.
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS") or str(usable_cores()),
        "TVM_THREAD_POOL_SPIN_COUNT": os.environ.get("TVM_THREAD_POOL_SPIN_COUNT") or str(SPIN_COUNT),
    }


def ensure_tvm_threads() -> None:
    os.environ.update(tvm_thread_env())


EXIT_JOIN_S = 60.0  # at exit, the longest wait for helper threads to finish what they are computing
_helpers: dict[threading.Thread, Callable[[], Any] | None] = {}
_helpers_lock = threading.Lock()


def helper_thread(
    target: Callable[..., Any], *, name: str, args: tuple = (), stop: Callable[[], Any] | None = None
) -> threading.Thread:
    """Start a daemon thread that the interpreter's exit waits for: ``stop()`` is called then (it
    tells the thread to end after its current piece of work), and the thread is joined."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    stop_at_exit(thread, stop)
    thread.start()
    return thread


def stop_at_exit(thread: threading.Thread, stop: Callable[[], Any] | None = None) -> None:
    """Have the interpreter's exit call ``stop()`` and join ``thread`` (one made elsewhere, e.g. a
    ``threading.Timer`` with its ``cancel``)."""
    with _helpers_lock:
        for done in [t for t in _helpers if t.ident is not None and not t.is_alive()]:
            del _helpers[done]
        _helpers[thread] = stop


@atexit.register
def stop_helpers(timeout: float = EXIT_JOIN_S) -> list[threading.Thread]:
    """Stop and join every helper thread; the ones still running after ``timeout`` seconds (named on
    stderr: the process may then abort as it ends)."""
    with _helpers_lock:
        helpers = list(_helpers.items())
    for _thread, stop in helpers:
        if stop is not None:
            stop()
    deadline = time.monotonic() + timeout
    for thread, _stop in helpers:
        if thread is not threading.current_thread() and thread.ident is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
    left = [t for t, _stop in helpers if t.is_alive() and t is not threading.current_thread()]
    if left:
        names = ", ".join(t.name for t in left)
        print(f"mlc_lab: at exit, helper threads still running after {timeout:g} s: {names}", file=sys.stderr)
    with _helpers_lock:
        for thread, _stop in helpers:
            if not thread.is_alive():
                _helpers.pop(thread, None)
    return left
