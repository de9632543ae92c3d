"""What a killed class server leaves behind, found and removed by the next one.

Each grading child is recorded in the store (pid, start time, folder) while it runs, and carries
``MLC_LAB_CLASS_CHILD=<class folder>#<submission>`` in its environment (so do its own children, even
those in a session of their own). On start, a server kills every recorded child that is still the
same process (same pid and start time: a pid the system gave to something else is left alone), every
process carrying its folder's mark, and removes the grading folders. The child is also started so
that the kernel kills it when its server dies (``PR_SET_PDEATHSIG``, ``die_with``), so this is the
backstop, not the rule.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import signal

import psutil

from mlc_lab.classroom.store import Store
from mlc_lab.core.processes import kill_tree
from mlc_lab.errors import MlcLabError

MARK = "MLC_LAB_CLASS_CHILD"
_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the forked child only calls it


class FolderInUse(MlcLabError):
    """Another class server runs on this folder."""


def mark(store: Store, sid: int) -> str:
    return f"{store.dir.resolve()}#{sid}"


def die_with(parent: int):
    """A ``preexec_fn``: between fork and exec, ask the kernel to SIGKILL the child when the thread
    that started it dies (the server's grading thread, so the server), and exit if the server died
    before the ask (the child's parent is then no longer ``parent``). Nothing in it takes a lock."""

    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def lock_folder(store: Store) -> int:
    """Hold ``DIR/server.lock`` while the server runs (the kernel drops it when the server dies)."""
    fd = os.open(store.dir / "server.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FolderInUse(f"another class server is running on {store.dir}; stop it first") from None
    return fd


def started_at(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def reap(store: Store) -> list[int]:
    """Kill what a dead server of this folder left running, remove its grading folders; the pids killed."""
    killed: list[int] = []
    for pid, started, _folder in store.children():
        now = started_at(pid)
        if now is not None and abs(now - started) < 0.05:  # the same process, not a reused pid
            killed += _stop_group(pid)
        store.child_ended(pid)
    prefix = f"{store.dir.resolve()}#"
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(MARK, "").startswith(prefix) and proc.pid not in killed:
                kill_tree(proc.pid, wait_s=5.0)  # a grading child's own child, and what it started
                killed.append(proc.pid)
        except psutil.Error:
            continue  # gone, or another user's
    psutil.wait_procs([p for p in map(_proc, killed) if p is not None], timeout=5)  # a child of ours: reaped
    grading = store.dir / "grading"
    if grading.is_dir():
        for entry in grading.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    return sorted(set(killed))


def _stop_group(pid: int) -> list[int]:
    """The child leads its own process group (started in a new session): stop the group and everything the
    child started (`kill_tree`); the pids that were in it."""
    members = [pid]
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != pid and os.getpgid(proc.pid) == pid:
                members.append(proc.pid)
        except OSError:
            continue
    kill_tree(pid, wait_s=5.0)
    return members


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None
