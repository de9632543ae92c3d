"""Helpers for tests that start servers and process groups (RPC trackers and servers, tuning jobs,
class servers, JupyterLab)."""

from __future__ import annotations

import os
import socket
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_gone(pgid: int, wait_s: float = 10.0) -> bool:
    """Whether every process of the group ``pgid`` has ended within ``wait_s`` seconds (orphaned
    children are reaped by init shortly after their parent ends)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def kill_groups(procs: list) -> None:
    """SIGKILL each process's group (servers, daemons a test started with start_new_session), reap them,
    and fail if any group outlives it."""
    import signal

    for p in reversed(procs):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait(timeout=10)
    assert all(group_gone(p.pid) for p in procs), "a process group a test started outlived it"
