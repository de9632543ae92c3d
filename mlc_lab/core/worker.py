"""Every child process of mlc_lab starts here, in one of three modes, and is stopped by `kill_tree`.

Generated code (measuring, the exercise graders, lowering checks), meta_schedule and students' hand-ins
can segfault or hang; they run in a child in its own session and process group, so that the Jupyter
kernel, the grader and the class server never do. `launch` starts one:

- ``persistent``: requests on its stdin, answers on its stdout. `Worker` (one per process, `worker()`)
  is the worker serving ``python -m mlc_lab.core.worker_main`` one request at a time
  (``worker().call("measure", module=..., ...)``); a crash or a time-out costs the child, the caller
  gets a `MeasureError` (kind ``crash`` / ``timeout``, an ``ErrorInfo`` kind) and the next call starts a
  fresh one. The batch grader's judging children and the class server's graders are persistent too,
  and run the same entry, as the child of their operation (``worker_main --child OP``: `child_argv`).
- ``detached``: no stdin, its output to a log; the tuning job (`start_job`, found again by pid with
  `job_running`, stopped with its group by `stop_group`).
- ``sandboxed`` (`sandboxed`): one command (the run of a hand-in, or of a kernel compiled from one:
  `mlc_lab.core.kernel_sandbox`) in its own namespaces, as an unprivileged user, under limits on its
  whole tree (`mlc_lab.core.sandbox`, docs/sandbox.md).

What each operation sends, answers, and how long it may take is `mlc_lab.model.worker_ops.WORKER_OPS`;
the worker's handlers are `mlc_lab.core.worker_main.REQUESTS`, the children of its operations `CHILDREN`
(tests/unit/test_children.py holds them equal to the table, every other module to this launcher, and every
signal sent to `mlc_lab.core.processes`). `stop` kills a child's tree and closes its pipes.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Literal

import psutil

from mlc_lab._threads import tvm_thread_env
from mlc_lab.core.processes import alive as _alive
from mlc_lab.core.processes import kill_tree
from mlc_lab.errors import MeasureError, NoGPUError
from mlc_lab.model.conform import STRICT_WIRE, check_wire, wire_violation
from mlc_lab.model.worker_ops import WORKER_OPS, WorkerEnv
from mlc_lab.model.wire import decode, encode

DEFAULT_TIMEOUT_S = WORKER_OPS["measure"].timeout_s
START_TIMEOUT_S = WORKER_OPS["env"].timeout_s
ENTRY = "mlc_lab.core.worker_main"  # the module every child runs; also how a job is recognised


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: TVM's thread count fixed before TVM starts its pool (the
    same count the kernel's own measurements state), unbuffered output for the logs, this copy of
    mlc_lab first on the path; then `extra` (a grader's one thread, a class child's mark)."""
    env = dict(os.environ)
    env.update(tvm_thread_env())
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root(), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def package_root() -> str:
    """The folder holding this copy of the ``mlc_lab`` package (what a child must import)."""
    return str(Path(__file__).resolve().parents[2])


# ----------------------------------------------------------------------------------------- launching

Mode = Literal["persistent", "detached"]


def launch(
    argv: list[str],
    mode: Mode,
    *,
    stdout: Any = None,
    stderr: Any = subprocess.DEVNULL,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    preexec_fn: Callable[[], Any] | None = None,
    text: bool = False,
) -> subprocess.Popen:
    """Start a child of mlc_lab in its own session (so that `kill_tree` stops all it starts), with
    `child_env` plus `env`. ``persistent``: requests on its stdin, answers on its stdout (pipes);
    ``detached``: no stdin, its output to `stdout` (a log file; none: dropped), found again by pid.
    The third mode, ``sandboxed``, is `sandboxed` below: a command in namespaces, under limits."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if mode == "persistent" else subprocess.DEVNULL,
        stdout=subprocess.PIPE if mode == "persistent" else (stdout if stdout is not None else subprocess.DEVNULL),
        stderr=stderr,
        cwd=cwd,
        env=child_env(env),
        start_new_session=True,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - the class server's die-with-parent, nothing that locks
        text=text,
    )


def sandboxed(
    op: str,
    argv: list[str],
    *,
    inputs: dict,
    env: dict[str, str],
    unsafe_same_user: bool,
    extras: Any = None,
    **limits: Any,
):
    """Run `argv` in the sandbox under the limits `worker_ops.WORKER_OPS[op]` declares, changed
    by `limits` (an assignment's own time and memory), with `extras` (`sandbox.Extras`: a passed
    descriptor, devices, more read-only paths); the sandbox's `Outcome`."""
    from mlc_lab.core import sandbox

    spec = WORKER_OPS[op]
    if spec.limits is None:
        raise ValueError(f"the worker operation {op!r} does not run sandboxed")
    return sandbox.run_sandboxed(
        argv,
        inputs=inputs,
        limits=sandbox.Limits(**{**spec.limits, **limits}),
        env=env,
        unsafe_same_user=unsafe_same_user,
        extras=extras or sandbox.Extras(),
    )


def stop(proc: subprocess.Popen, wait_s: float = 10.0) -> None:
    """Kill a child's whole tree (`kill_tree`), reap it and close the pipes this side holds."""
    kill_tree(proc, wait_s=wait_s)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if stream:
                stream.close()
        except OSError:
            pass


def stop_group(pid: int, grace_s: float = 3.0, popen: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group led by `pid` and its descendants, SIGKILL what is left after
    `grace_s`, and wait until none is alive (meta_schedule's pool workers are in it too)."""
    kill_tree(pid, grace_s=grace_s, wait_s=5.0, popen=popen)


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


def child_argv(op: str, *args: str) -> list[str]:
    """The command line of the child of `op` (a row of `worker_main.CHILDREN`, declared in `WORKER_OPS`):
    ``python -m mlc_lab.core.worker_main --child OP ARG...``, to `launch` (or to run in the sandbox)."""
    if WORKER_OPS[op].entry != ENTRY:
        raise ValueError(f"the worker operation {op!r} has no child of mlc_lab.core.worker_main")
    return [sys.executable, "-m", ENTRY, "--child", op, *args]


def start_job(request: str, work_dir: str, log_path: str) -> subprocess.Popen:
    """Start ``worker_main --job REQUEST WORK_DIR`` detached (own session), output to `log_path`."""
    with open(log_path, "ab") as log:
        return launch(
            [sys.executable, "-m", ENTRY, "--job", request, work_dir],
            "detached",
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
        )


# ----------------------------------------------------------------------------------------- the worker


_DOING = {
    "measure": "building and running the program",
    "cuda": "compiling for CUDA",
    "run_function": "running the program",
    "machine": "measuring the machine's peak",
    "lower": "lowering and compiling the program",
}


class _Launcher:
    """One thread, alive as long as this process, that starts the persistent workers. A worker dies with
    the thread that started it (``PR_SET_PDEATHSIG``, worker_main.die_with_parent): started from a
    request's helper thread, it would die when that thread ends, and started from no thread that lives
    on, it would outlive a killed kernel."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def run(self, start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        with self._guard:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="mlc-lab-launcher", daemon=True)
                self._thread.start()
        done: queue.Queue = queue.Queue(1)
        self._jobs.put((start, done))
        ok, value = done.get()
        if not ok:
            raise value
        return value

    def _serve(self) -> None:
        while True:
            start, done = self._jobs.get()
            try:
                done.put((True, start()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                done.put((False, exc))


_LAUNCHER = _Launcher()


class Worker:
    """One persistent child serving requests; `call` sends one and waits for its answer."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._log_path: str | None = None
        self.env: WorkerEnv | None = None  # what the worker said of itself as it started
        # `cancel`'s bookkeeping, apart from the request lock that the request in flight holds
        self._flight = threading.Lock()
        self._owner: int | None = None  # the thread whose request runs now
        self._cancelled = False  # the request in flight was cancelled (its child killed)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self.alive() else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> str | None:
        """The file the worker's stderr goes to while it runs (removed when it stops)."""
        return self._log_path

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            self.close()
            fd, self._log_path = tempfile.mkstemp(prefix="mlc_lab_worker_", suffix=".log")
            with os.fdopen(fd, "wb") as log:
                self._proc = _LAUNCHER.run(lambda: launch([sys.executable, "-m", ENTRY], "persistent", stderr=log))
            self._buf = b""
            hello = self._read_message(time.monotonic() + START_TIMEOUT_S, what="starting")
            self.env = decode_result("env", hello.get("env"))

    def cancel(self, owner: int | None = None) -> bool:
        """Stop the request in flight when it is `owner`'s (a thread's ident; None: whoever's): its
        child is killed now, its caller gets `MeasureError` of kind ``cancelled`` and the next call
        starts a fresh worker. False when no request of `owner` was in flight."""
        with self._flight:
            if self._owner is None or (owner is not None and self._owner != owner):
                return False
            self._cancelled = True
            proc = self._proc
        if proc is not None:
            kill_tree(proc, wait_s=5.0)  # the caller's read then ends: it reports the cancel
        return True

    def close(self) -> None:
        proc = self._proc
        if proc is not None:  # first, without the lock: a request in flight holds it until its child ends
            kill_tree(proc, wait_s=5.0)
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                stop(proc, wait_s=5.0)
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
        with self._flight:
            cancelled, self._cancelled = self._cancelled, False
        if cancelled:
            self.close()
            return MeasureError(
                f"cancelled while {what}: the worker process was stopped; the next call starts a fresh one",
                kind="cancelled",
            )
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

    def request(self, op: str, payload: dict, timeout: float | None = None) -> dict:
        """Send one request; the raw answer ({"ok", "result"} or {"ok": False, "error": ErrorInfo}).
        Without `timeout`, the operation's own (`WORKER_OPS`)."""
        if timeout is None:
            timeout = WORKER_OPS[op].timeout_s if op in WORKER_OPS else DEFAULT_TIMEOUT_S
        with self._lock:
            with self._flight:
                self._owner, self._cancelled = threading.get_ident(), False
            try:
                return self._request(op, payload, timeout)
            finally:
                with self._flight:
                    self._owner = None

    def _request(self, op: str, payload: dict, timeout: float) -> dict:
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

    def call(self, op: str, timeout: float | None = None, **payload: Any) -> Any:
        """Send one request and return its result, decoded into the operation's type (`WORKER_OPS`);
        a failure raises `MeasureError` (its `kind` an ``ErrorInfo`` kind: build, run, check, crash,
        timeout, ...; `NoGPUError` for no_gpu)."""
        msg = self.request(op, payload, timeout=timeout)
        if not msg.get("ok"):
            raise failure(msg.get("error"), op)
        return decode_result(op, msg["result"])


def failure(info: Any, op: str) -> MeasureError:
    """The exception of a worker's failed answer, its `ErrorInfo` (anything else: a protocol error)."""
    if not isinstance(info, dict) or not isinstance(info.get("summary"), str):
        return MeasureError(f"the worker answered the {op} request with no error it should send", kind="protocol")
    kind = info.get("type", "internal")
    cls = NoGPUError if kind == "no_gpu" else MeasureError
    return cls(info["summary"], kind=kind, detail=info.get("detail", ""))


def decode_result(op: str, raw: Any, as_type: Any = None) -> Any:
    """A child's answer to `op` as the operation's result type (`WORKER_OPS`; ``as_type``: a subclass of
    it that adds behaviour, the grader's `GradeResult`): the one place where an answer that crossed a
    process is read, by its type's ``from_json`` (else `conform.decode`). An answer that is not of its
    type raises `MeasureError` (kind ``protocol``) saying where it departs; on the strict wire every
    place it departs is also a wire violation."""
    from mlc_lab.model.conform import WireData
    from mlc_lab.model.conform import decode as decode_as

    if op not in WORKER_OPS:
        return raw  # no operation of the table: nothing declares what it answers
    declared: Any = WORKER_OPS[op].result
    tp = as_type if as_type is not None else declared
    where = f"{op} result"
    conforms = check_wire(raw, declared, where)
    try:
        if hasattr(tp, "from_json") and not (isinstance(tp, type) and issubclass(tp, WireData)):
            return tp.from_json(raw)  # a reading of its own (Measurement's, RunResults')
        return decode_as(tp, raw, where)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # WireError, RunFormatError among them
        if STRICT_WIRE and conforms:
            wire_violation(f"{where}: {exc}")
        name = getattr(declared, "__name__", str(declared))
        raise MeasureError(
            f"the {op} child answered with a result that is not a {name}: {exc}", kind="protocol"
        ) from None


_WORKER = Worker()
atexit.register(_WORKER.close)


def worker() -> Worker:
    """The process-wide worker (started on first use)."""
    return _WORKER


def shutdown_worker() -> None:
    _WORKER.close()
