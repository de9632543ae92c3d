"""Stopping a child of mlc_lab and everything it started: `kill_tree`, the one way (the worker,
the tuning job, the grading children, the sandbox, what a dead class server left), and `kill_now`, a
SIGKILL to processes already found (a sandbox's init, its cgroup's members). No other module of mlc_lab
sends a signal (tests/unit/test_children.py holds it). Process control is psutil's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable

import psutil


def _group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _tree(pid: int) -> list[psutil.Process]:
    """The process `pid` (when alive), every descendant of it and every member of its group."""
    members = {p.pid: p for p in _group_members(pid)}
    try:
        root = psutil.Process(pid)
        members[pid] = root
        members.update((p.pid, p) for p in root.children(recursive=True))
    except psutil.Error:
        pass
    return list(members.values())


def kill_tree(
    proc: subprocess.Popen | int, grace_s: float = 0.0, wait_s: float = 10.0, popen: subprocess.Popen | None = None
) -> bool:
    """Stop a child and everything it started: SIGTERM first when `grace_s` > 0, then SIGKILL to
    the process, its process group and every descendant; return when none is alive (True) or after
    `wait_s` (False). Every way of stopping a child in mlc_lab goes through here (the worker, the
    tuning job, the sandbox); a `Popen` (or `popen`) is reaped too.

    Each round signals what it found before it looks at the clock: a scan of the process table that
    takes longer than `wait_s` (a loaded machine, memory pressure) still signals every process it
    found, and the group is frozen (SIGSTOP) before the first scan and killed right after it."""
    if isinstance(proc, subprocess.Popen):
        popen, pid = proc, proc.pid
    else:
        pid = proc
    seen: dict[int, psutil.Process] = {}  # orphans leave the tree: keep those met
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, wait_s)):
        if wait <= 0:
            continue
        deadline = time.monotonic() + wait
        if sig == signal.SIGKILL:
            # The group frozen first: none of it dies, so a descendant in a session of its own is not
            # orphaned out of the tree before the table is read; then SIGKILL to the whole group.
            _signal_group(pid, signal.SIGSTOP)
            seen.update((p.pid, p) for p in _tree(pid))
            _signal_group(pid, sig)
        signalled: set[int] = set()  # SIGTERM once per process: a second could cut its clean-up short
        while True:
            if popen is not None:
                popen.poll()
            living = {p.pid: p for p in [*_tree(pid), *seen.values()] if alive(p)}
            seen.update(living)
            if not living and (popen is None or popen.returncode is not None):
                return True
            _signal_all(pid, [p for p in living.values() if p.pid not in signalled], sig)
            signalled.update(living)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
    if popen is not None:
        popen.poll()
    return False


def kill_now(procs: Iterable[int | psutil.Process]) -> None:
    """SIGKILL each of `procs` at once, without waiting; one already gone (or not ours) is passed over. A
    `psutil.Process` is signalled only while it is still the process it was (a reused pid is not)."""
    for proc in procs:
        try:
            if isinstance(proc, psutil.Process):
                proc.kill()
            else:
                os.kill(proc, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_all(pgid: int, procs: list[psutil.Process], sig: int) -> None:
    if sig == signal.SIGKILL:  # the whole group at once too, forks in flight included
        _signal_group(pgid, sig)
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def tree_usage(pid: int, apart: str | None = None) -> tuple[int, float]:
    """(summed RSS in bytes, CPU seconds) of the process `pid` and every descendant: CPU counts what
    each has used and what its reaped children used (the OpenCL runs of a worker). A subtree whose root's
    command line holds `apart` is left out (a sandbox, which has limits of its own)."""
    try:
        todo = [psutil.Process(pid)]
    except psutil.Error:
        return 0, 0.0
    rss, cpu = 0, 0.0
    while todo:
        p = todo.pop()
        try:
            if apart and p.pid != pid and any(apart in part for part in p.cmdline()):
                continue
            rss += p.memory_info().rss
            t = p.cpu_times()
            cpu += t.user + t.system + t.children_user + t.children_system
            todo += p.children()
        except psutil.Error:
            continue
    return rss, cpu


def usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def overloaded() -> str | None:
    """The sentence saying this machine is overloaded now (its 1-minute load average is above the CPUs
    this process may use: a runnable process waits for a CPU), or None. A hand-in stopped at a
    wall-clock limit at such a moment is graded again, never scored for the machine's load."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cpus = usable_cpus()
    if load <= cpus:
        return None
    return f"the machine was overloaded (load average {load:.1f} on {cpus} CPU{'s' if cpus > 1 else ''})"
