"""Every out-of-process job of mlc_lab, one mechanism: ``python -m mlc_lab.core.worker_main``.

Generated code (measuring, the exercise graders, lowering checks) and meta_schedule can segfault
or hang; they run in a child process in its own process group, so that the Jupyter kernel never
does. Three ways to run a child:

- `Worker` (one per process, `worker()`): a persistent child serving requests, one at a time
  (``worker().call("measure", module=..., ...)``). A crash or a time-out costs the child; the
  caller gets a `MeasureError` (kind ``crash`` / ``timeout``) and the next call starts a fresh one.
- `start_job`: a detached child running one long request (a tuning job) that outlives the
  kernel; it is found again by pid (`job_running`) and stopped with its whole group (`stop_group`).
- sandboxed, `mlc_lab.core.sandbox.run_sandboxed`: one command (the grader's run of a hand-in) in
  its own namespaces, as an unprivileged user, with limits on its whole tree (docs/sandbox.md).

Each of them is stopped by `kill_tree`: the process, its group and every descendant, waited for.

The request types live in one table, `mlc_lab.core.worker_main.REQUESTS`: adding one is one line
there plus a function taking the request dict and returning plain data. Process control is psutil's.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import psutil

from mlc_lab._threads import tvm_thread_env
from mlc_lab.errors import MeasureError, NoGPUError
from mlc_lab.tvm.wire import decode, encode

DEFAULT_TIMEOUT_S = 30.0
START_TIMEOUT_S = 120.0
ENTRY = "mlc_lab.core.worker_main"  # the module every child runs; also how a job is recognised


def child_env() -> dict[str, str]:
    """The environment of every child: TVM's thread count fixed before TVM starts its pool (the
    same count the kernel's own measurements state), unbuffered output for the logs."""
    env = dict(os.environ)
    env.update(tvm_thread_env())
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ----------------------------------------------------------------------------------------- process control


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
    tuning job, the sandbox); a `Popen` (or `popen`) is reaped too."""
    if isinstance(proc, subprocess.Popen):
        popen, pid = proc, proc.pid
    else:
        pid = proc
    seen: dict[int, psutil.Process] = {}  # orphans leave the tree: keep those met
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, wait_s)):
        if wait <= 0:
            continue
        deadline = time.monotonic() + wait
        signalled: set[int] = set()  # SIGTERM once per process: a second could cut its clean-up short
        while True:
            if popen is not None:
                popen.poll()
            alive = {p.pid: p for p in [*_tree(pid), *seen.values()] if _alive(p)}
            seen.update(alive)
            if not alive and (popen is None or popen.returncode is not None):
                return True
            if time.monotonic() >= deadline:
                break
            _signal_all(pid, [p for p in alive.values() if p.pid not in signalled], sig)
            signalled.update(alive)
            time.sleep(0.02)
    return False


def _signal_all(pgid: int, procs: list[psutil.Process], sig: int) -> None:
    if sig == signal.SIGKILL:  # the whole group at once too, forks in flight included
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def stop_group(pid: int, grace_s: float = 3.0, popen: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group led by `pid` and its descendants, SIGKILL what is left after
    `grace_s`, and wait until none is alive (meta_schedule's pool workers are in it too)."""
    kill_tree(pid, grace_s=grace_s, wait_s=5.0, popen=popen)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def job_running(pid: int | None, request: str) -> bool:
    """Whether `pid` is alive and is a detached job of ours running `request` (a pid may be reused
    by an unrelated process after a reboot)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if not _alive(proc):
            return False
        cmd = proc.cmdline()
    except psutil.AccessDenied:
        return True  # alive, but not ours to inspect
    except psutil.Error:
        return False
    return ENTRY in cmd and request in cmd


def start_job(request: str, work_dir: str, log_path: str) -> subprocess.Popen:
    """Start ``worker_main --job REQUEST WORK_DIR`` detached (own session), output to `log_path`."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", ENTRY, "--job", request, work_dir],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
            env=child_env(),
            start_new_session=True,
        )


# ----------------------------------------------------------------------------------------- the worker


_DOING = {
    "measure": "building and running the program",
    "cuda": "compiling for CUDA",
    "run_function": "running the program",
    "machine": "measuring the machine's peak",
    "lower": "lowering and compiling the program",
}


class Worker:
    """One persistent child serving requests; `call` sends one and waits for its answer."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._log_path: str | None = None
        self.env: dict = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.alive() else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            self.close()
            fd, self._log_path = tempfile.mkstemp(prefix="mlc_lab_worker_", suffix=".log")
            with os.fdopen(fd, "wb") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", ENTRY],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=child_env(),
                    start_new_session=True,
                )
            self._buf = b""
            hello = self._read_message(time.monotonic() + START_TIMEOUT_S, what="starting")
            self.env = hello.get("env", {})

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                kill_tree(proc, wait_s=5.0)
                for stream in (proc.stdin, proc.stdout):
                    try:
                        if stream:
                            stream.close()
                    except OSError:
                        pass
            if self._log_path and os.path.exists(self._log_path):
                try:
                    os.unlink(self._log_path)
                except OSError:
                    pass
            self._log_path = None

    def _log_tail(self, limit: int = 2000) -> str:
        if not self._log_path:
            return ""
        try:
            with open(self._log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - limit))
                return fh.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def _died(self, what: str) -> MeasureError:
        proc = self._proc
        try:
            code = proc.wait(timeout=5) if proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        tail = self._log_tail()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            msg = (
                f"the generated code crashed the worker process ({name}) while {what}; "
                "the kernel is fine, the next call starts a fresh worker"
            )
        else:
            msg = f"the worker process exited (status {code}) while {what}; the next call starts a fresh worker"
        self.close()
        return MeasureError(msg, kind="crash", detail=tail)

    def _read_message(self, deadline: float, what: str) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if not sel.select(timeout=min(left, 1.0)):
                    if self._proc.poll() is not None:
                        raise self._died(what)
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self._died(what)
                self._buf += chunk
        finally:
            sel.close()
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, op: str, payload: dict, timeout: float = DEFAULT_TIMEOUT_S) -> dict:
        """Send one request; the raw answer ({"ok", "result"} or {"ok": False, "kind", "error", "detail"})."""
        with self._lock:
            self.start()
            assert self._proc is not None and self._proc.stdin is not None
            rid = next(self._ids)
            data = json.dumps({"id": rid, "op": op, **encode(payload)}).encode() + b"\n"
            try:
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._died("receiving a request") from None
            deadline = time.monotonic() + timeout
            while True:
                try:
                    msg = self._read_message(deadline, what=_DOING.get(op, f"serving {op!r}"))
                except TimeoutError:
                    self.close()
                    raise MeasureError(
                        f"the program ran for more than {timeout:g} s, so the worker process was stopped "
                        "(an endless or very long loop?); the kernel is fine, the next call starts a fresh worker",
                        kind="timeout",
                    ) from None
                if msg.get("id") == rid:
                    return decode(msg)

    def call(self, op: str, timeout: float = DEFAULT_TIMEOUT_S, **payload: Any) -> Any:
        """Send one request and return its result; a failure raises `MeasureError` (its `kind` says
        which: build, run, check, gpu_check, crash, timeout, ...; `NoGPUError` for no_gpu)."""
        msg = self.request(op, payload, timeout=timeout)
        if not msg.get("ok"):
            kind = msg.get("kind", "internal")
            cls = NoGPUError if kind == "no_gpu" else MeasureError
            raise cls(msg.get("error", f"the {op} request failed"), kind=kind, detail=msg.get("detail", ""))
        return msg["result"]


_WORKER = Worker()
atexit.register(_WORKER.close)


def worker() -> Worker:
    """The process-wide worker (started on first use)."""
    return _WORKER


def shutdown_worker() -> None:
    _WORKER.close()
