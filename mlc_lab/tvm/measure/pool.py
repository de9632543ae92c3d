"""Measuring on the machines of a TVM RPC tracker whose servers may run TVM's runtime alone.

A class's measurement machines run ``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY``,
often under ``TVM_USE_RUNTIME_LIB=1`` (TVM's runtime without its compiler: what a lab admin
installs). Such a server loads libraries, moves arrays and times functions; it has none of the
full TVM's helpers (``tvm.contrib.random.random_fill``, which meta_schedule's RPC runner asks for
to make its inputs). So everything is decided here: the library is built here (CUDA kernels
compiled to a binary, `artifact`), the inputs are made here and uploaded, the function runs once
there and its arguments come back to be checked here against the reference's outputs, and then it
is timed there by the one method (`mlc_lab.tvm.measure.time_function`).

`TrackerPool` measures candidates on those machines, `servers` at a time, and keeps going when
machines fail:

- **a server that dies** mid-measurement (its session's connection closes): the candidate is
  measured again on another server (once: a candidate that loses two servers is the one that
  crashes them, and is reported failed), and the job goes on;
- **a server that hangs** (no answer within the session's time limit plus a grace, or no answer
  to a connection): it is left out for the rest of the pool's life, said once through `on_event`
  (the tuning job writes it to its live log, the dashboard says it), and the candidate is
  measured elsewhere;
- **a tracker that is down**: `check_tracker` says so in one sentence before anything starts; a
  tracker that goes away later fails the candidates that needed it, each with that sentence;
- **never two timings at once on one machine**: servers on the same host (the address the
  tracker hands out) take turns for the part that runs the kernel; uploads and checks overlap.

TVM's server runs each session in a forked child; a kernel that crashes that child also stops the
server's listening loop (TVM 0.27: ``_serving`` raises on the child's exit status), so a crashing
candidate costs a server. `mlc_lab.core.server_sandbox` is a server that survives it (each session in the sandbox).
"""

from __future__ import annotations

import json
import os
import queue
import select
import socket
import struct
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from mlc_lab.tvm import measure
from mlc_lab.tvm.measure.build import output_errors
from mlc_lab.tvm.measure.session import CONFINEMENT, session_verdict

import tvm  # noqa: E402
from tvm import rpc  # noqa: E402
from tvm.rpc import base as rpc_base  # noqa: E402

GRACE_S = 5.0  # beyond the session's own limit, for the server to end an overlong session and say so
CONNECT_S = 20.0  # at most: a server that does not finish the handshake in this long is hung
TRACKER_S = 5.0  # a tracker that does not answer in this long is down


class PoolError(Exception):
    """The pool cannot measure at all (the tracker is down, no server has the key): one sentence."""


@dataclass
class Candidate:
    """One program to measure: its library (built here), the function, every argument's starting
    contents, and what the arguments must hold after one run (None: not checked)."""

    id: str
    artifact: str
    func_name: str
    device: str  # "cpu" or "cuda"
    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None = None
    method: measure.TimingMethod = measure.TUNING
    best_s: float | None = None  # the best so far: a clearly slower candidate stops early


@dataclass
class Outcome:
    """What became of one candidate: its repeats (seconds) or the error, where it ran, how long it
    waited for a free server, how many servers it took."""

    id: str
    results_s: list[float] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None  # load, run, check, timeout, crash, no_server (a batch round: round, wrong, ...)
    where: str | None = None
    waited_s: float = 0.0
    attempts: int = 0
    correct: bool | None = None
    max_abs_error: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Hung(Exception):
    pass


class _Lost(Exception):
    """The session's connection closed under it: the server went away (or the kernel killed it)."""


class _Unconfined(Exception):
    """The server runs its sessions outside mlc_lab's sandbox, and the pool was asked for sandboxed ones."""


class _Failed(Exception):
    """The candidate failed on a healthy server: no point measuring it elsewhere."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _within(fn: Callable[[], Any], seconds: float) -> Any:
    """`fn()` in a daemon thread; `_Hung` when it has not returned after `seconds` (the thread is left
    blocked on its socket: nothing can interrupt a call into TVM's RPC)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="mlc_lab-rpc")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise _Hung(f"no answer in {seconds:g} s")
    if "error" in box:
        error = box.pop("error")
        try:
            raise error
        finally:  # no cycle through this frame: the session its traceback holds closes when the caller drops it
            del error
    return box.get("value")


_CLOSED_MARKS = ("kShutdown", "Socket", "socket", "Connection reset", "Broken pipe", "EOF", "closed")


def _closed(exc: BaseException) -> bool:
    """Whether an RPC error says the connection went away (rather than the call failing there): TVM
    reports a peer that vanished as ``code=kShutdown`` where it expected a return."""
    text = str(exc)
    return isinstance(exc, OSError) or (
        any(mark in text for mark in _CLOSED_MARKS) and "RPCSessionTimeoutError" not in text
    )


class _Busy(Exception):
    """The host's turn did not come in time: measure the candidate again later (not its fault)."""


class HostTurns:
    """One turn per host at a time to run kernels: `turn(host, owner, wait_s)` is a context manager
    that raises `_Busy` when the turn does not come within `wait_s`. A turn whose owner hung (a
    server that stopped answering while it held it) is taken back with `forfeit`, so that the
    host's other servers go on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holder: dict[str, object] = {}

    def acquire(self, host: str, owner: object, wait_s: float | None = None) -> None:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        with self._cond:
            while host in self._holder:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise _Busy(f"another server of {host} held the machine for {wait_s:g} s")
                self._cond.wait(left)
            self._holder[host] = owner

    def release(self, host: str, owner: object) -> None:
        with self._cond:
            if self._holder.get(host) is owner:
                del self._holder[host]
                self._cond.notify_all()

    forfeit = release

    def turn(self, host: str, owner: object, wait_s: float | None = None) -> "_Turn":
        return _Turn(self, host, owner, wait_s)


@dataclass
class _Turn:
    turns: HostTurns
    host: str
    owner: object
    wait_s: float | None = None

    def __enter__(self) -> None:
        self.turns.acquire(self.host, self.owner, self.wait_s)

    def __exit__(self, *_exc: Any) -> None:
        self.turns.release(self.host, self.owner)


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else type(exc).__name__


# ----------------------------------------------------------------------------------------- the tracker


def _tracker_socket(host: str, port: int, timeout: float = TRACKER_S) -> socket.socket:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.sendall(struct.pack("<i", rpc_base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", rpc_base.recvall(sock, 4))[0]
    except (OSError, RuntimeError) as exc:
        raise PoolError(
            f"the RPC tracker at {host}:{port} does not answer ({_reason(exc)}): is "
            f"`python -m tvm.exec.rpc_tracker --port {port}` running there?"
        ) from None
    if magic != rpc_base.RPC_TRACKER_MAGIC:
        sock.close()
        raise PoolError(f"{host}:{port} answers, but it is not a TVM RPC tracker")
    sock.settimeout(None)
    return sock


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.timeout):
        return "no answer"
    return str(exc) or type(exc).__name__


def tracker_summary(host: str, port: int, timeout: float = TRACKER_S) -> dict:
    """The tracker's summary (``queue_info``, ``server_info``); a `PoolError` when it is down."""
    sock = _tracker_socket(host, port, timeout)
    try:
        sock.settimeout(timeout)
        rpc_base.sendjson(sock, [rpc_base.TrackerCode.SUMMARY])
        value = rpc_base.recvjson(sock)
    except (OSError, ValueError) as exc:
        raise PoolError(f"the RPC tracker at {host}:{port} stopped answering ({_reason(exc)})") from None
    finally:
        sock.close()
    if value[0] != rpc_base.TrackerCode.SUCCESS:
        raise PoolError(f"the RPC tracker at {host}:{port} refused its summary ({value!r})")
    return value[1]


def registered(summary: dict, key: str) -> list[str]:
    """``host:port`` of each server the tracker lists under `key`."""
    return [f"{s['addr'][0]}:{s['addr'][1]}" for s in summary.get("server_info", []) if s.get("key") == f"server:{key}"]


def check_tracker(host: str, port: int, key: str, timeout: float = TRACKER_S) -> dict:
    """The tracker's summary when it answers and lists a server under `key`; a `PoolError` saying
    which of the two is wrong otherwise."""
    summary = tracker_summary(host, port, timeout)
    if not registered(summary, key):
        keys = sorted({s.get("key", "").removeprefix("server:") for s in summary.get("server_info", [])} - {""})
        have = f"it lists {', '.join(repr(k) for k in keys)}" if keys else "no server is registered with it"
        raise PoolError(f"the RPC tracker at {host}:{port} has no server under the key {key!r} ({have})")
    return summary


# ----------------------------------------------------------------------------------------- one session


def confinement(session: Any) -> dict | None:
    """What confines this session, as the session itself says before anything is uploaded
    (`mlc_lab.tvm.measure.session`); None from a server that cannot say (TVM's own). `_Lost` when the
    connection went away meanwhile."""
    try:
        text = session.get_function(CONFINEMENT)()
    except Exception as exc:  # noqa: BLE001 - no such function there, or no connection
        if _closed(exc):
            raise _Lost(_last_line(exc)) from exc
        return None
    try:
        facts = json.loads(str(text))
    except ValueError:
        return None
    return facts if isinstance(facts, dict) else None


def require_sandbox(session: Any) -> dict:
    """The session's confinement when it runs in mlc_lab's sandbox; `_Unconfined` otherwise."""
    facts = confinement(session)
    if facts is None:
        raise _Unconfined("it does not run its sessions in mlc_lab's sandbox (TVM's own server?)")
    if facts.get("sandboxed") is not True:
        raise _Unconfined("its sessions run as its own user (mlc_lab's server with --unsafe-same-user)")
    return facts


def measure_in_session(session: Any, cand: Candidate, turn: Any, sandboxed_only: bool = False) -> Outcome:
    """Upload, load, run once, bring the arguments back, time: the candidate on one server (with
    `sandboxed_only`, only once the session says it runs in mlc_lab's sandbox). Raises `_Failed` for
    what the candidate did (load or run error, a limit of the server's, told by it), `_Lost` when the
    connection went away (the caller measures it again elsewhere), `_Unconfined` when a sandbox was
    asked for and the server has none."""
    if sandboxed_only:
        require_sandbox(session)
    name = f"mlc_lab_{cand.id}_{uuid.uuid4().hex[:8]}.so"

    def step(fn: Callable[[], Any], kind: str, sentence: str) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - sorted below
            stopped = session_verdict(str(exc))
            if stopped is not None:  # the server stopped the session (mlc_lab's server): its sentence
                raise _Failed(*stopped) from exc
            if "RPCSessionTimeoutError" in str(exc):
                raise _Failed("timeout", "the program ran past the server's time limit for a session") from exc
            if _closed(exc) or not _answers(session):
                raise _Lost(_last_line(exc)) from exc
            raise _Failed(kind, f"{sentence}: {_last_line(exc)}") from exc

    step(lambda: session.upload(cand.artifact, name), "load", "the library could not be sent")
    try:
        rmod = step(lambda: session.load_module(name), "load", "the library does not load there")
        dev = session.cuda(0) if cand.device == "cuda" else session.cpu(0)
        tensors = step(lambda: [tvm.runtime.tensor(a, dev) for a in cand.inputs], "run", "the arguments do not fit")
        with turn:
            fn = step(lambda: rmod.get_function(cand.func_name), "load", f"no function {cand.func_name!r} there")
            step(lambda: (fn(*tensors), dev.sync()), "run", "the program failed while running")
            got = step(lambda: [t.numpy() for t in tensors], "run", "its arguments could not be read back")
            results = step(
                lambda: measure.time_function(rmod, cand.func_name, dev, tensors, cand.method, best_s=cand.best_s),
                "run",
                "the program failed while being timed",
            )
    finally:
        try:
            session.remove(name)
        except Exception:  # noqa: BLE001 - the session may be gone; the server removes its folder anyway
            pass
    out = Outcome(cand.id, results_s=[float(x) for x in results])
    if cand.expected is not None:
        out.max_abs_error, _rel, out.correct = output_errors(got, cand.expected)
        if not out.correct:
            out.error_kind = "check"
            out.error = f"wrong result: max abs error {out.max_abs_error:.3g} against the reference program"
    return out


def _answers(session: Any) -> bool:
    """Whether the server still answers on this session (a short remote call)."""
    try:  # an allocation is a round trip (a device's `exist` is not: it answers after the server is gone)
        _within(lambda: tvm.runtime.empty((1,), "uint8", session.cpu(0)), 5.0)
    except BaseException:  # noqa: BLE001 - no answer, or the connection is gone
        return False
    return True


# ----------------------------------------------------------------------------------------- the pool


@dataclass
class _Lease:
    session: Any
    host: str
    port: int
    waited_s: float

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"


class TrackerPool:
    """Candidates measured on the servers a tracker hands out under `key`, `servers` at once.

    `on_event(kind, **facts)` hears about the servers: "lost" (a session's connection closed),
    "hung" (left out), "retry" (a candidate measured again elsewhere)."""

    def __init__(
        self,
        host: str,
        port: int,
        key: str,
        *,
        servers: int = 1,
        session_timeout_s: float = 60.0,
        wait_s: float = 600.0,
        on_event: Callable[..., None] | None = None,
        priority: int = 1,
        sandboxed_only: bool = False,
    ) -> None:
        self.host, self.port, self.key = host, int(port), key
        # A session may wait up to `session_timeout_s` for its host's turn, then run for as long
        # again: the server ends it after both (a kernel that never ends is the candidate's
        # failure), and a server silent for longer still is hung.
        self.session_timeout_s = float(session_timeout_s)
        self._server_limit_s = 2 * self.session_timeout_s
        self._watch_s = self._server_limit_s + GRACE_S
        self._connect_s = min(CONNECT_S, max(GRACE_S, self.session_timeout_s))
        self.wait_s = float(wait_s)
        self.priority = priority
        self.sandboxed_only = sandboxed_only  # a hand-in's kernels: only servers whose sessions are sandboxed
        self.on_event = on_event or (lambda kind, **facts: None)
        self.left_out: dict[str, str] = {}  # server -> why
        self.lost: dict[str, str] = {}
        self.turns = HostTurns()
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._serve, daemon=True, name=f"mlc_lab-pool-{n}") for n in range(max(1, servers))
        ]
        for t in self._threads:
            t.start()

    def submit(self, cand: Candidate) -> Future:
        fut: Future = Future()
        self._queue.put((cand, fut, time.monotonic()))
        return fut

    def measure(self, cands: list[Candidate]) -> list[Outcome]:
        return [f.result() for f in [self.submit(c) for c in cands]]

    def close(self) -> None:
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)

    # ------------------------------------------------------------------------------------ workers

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            cand, fut, queued = item
            try:
                fut.set_result(self._measure_one(cand, queued))
            except BaseException as exc:  # noqa: BLE001 - a bug here must not stop the pool's thread
                fut.set_result(Outcome(cand.id, error=f"{type(exc).__name__}: {exc}", error_kind="internal"))

    def _measure_one(self, cand: Candidate, queued: float) -> Outcome:
        lost_on: list[str] = []
        attempts = 0
        while True:
            attempts += 1
            try:
                lease = self._acquire(queued)
            except PoolError as exc:
                return Outcome(cand.id, error=str(exc), error_kind="no_server", attempts=attempts)
            owner = object()
            turn = self.turns.turn(lease.host, owner, self.session_timeout_s)
            try:
                out = _within(
                    lambda: measure_in_session(lease.session, cand, turn, self.sandboxed_only),  # noqa: B023
                    self._watch_s,
                )
            except _Unconfined as exc:
                self._leave_out(lease.addr, str(exc))
                continue
            except _Hung:
                self.turns.forfeit(lease.host, owner)
                self._leave_out(lease.addr, f"it did not answer for {self._watch_s:g} s")
                continue
            except _Busy:
                attempts -= 1  # the machine was busy with another server's timing: not this one's try
                continue
            except _Failed as exc:
                out = Outcome(cand.id, error=str(exc), error_kind=exc.kind)
            except _Lost:
                lost_on.append(lease.addr)
                self._lost(lease.addr, cand.id)
                if len(lost_on) < 2:
                    self.on_event("retry", candidate=cand.id, server=lease.addr)
                    continue
                out = Outcome(
                    cand.id,
                    error=f"the program's session ended abruptly on two servers ({', '.join(lost_on)}): "
                    "it crashes the server that runs it, or both went down",
                    error_kind="crash",
                )
            except Exception as exc:  # noqa: BLE001 - anything else that went wrong there is this candidate's row
                out = Outcome(cand.id, error=f"the measurement failed there: {_last_line(exc)}", error_kind="run")
            finally:
                lease.session = None  # the session closes when its last remote object is dropped
            out.where, out.waited_s, out.attempts = lease.addr, round(lease.waited_s, 3), attempts
            return out

    def _acquire(self, queued: float) -> _Lease:
        """A session with a server of the key that is not left out, waiting at most `wait_s` (from
        when the candidate was submitted) for the tracker to hand one out."""
        deadline = queued + self.wait_s
        while True:
            if self._closed:
                raise PoolError("the pool was closed")
            left = deadline - time.monotonic()
            if left <= 0:
                raise PoolError(
                    f"no server of the key {self.key!r} was free at the tracker {self.host}:{self.port} "
                    f"for {self.wait_s:g} s" + (f" (left out: {', '.join(self.left_out)})" if self.left_out else "")
                )
            value = self._request(left)
            if value is None:
                continue
            host, port, matchkey = value
            addr = f"{host}:{port}"
            if addr in self.left_out:
                self._unless_all_left_out()
                time.sleep(0.5)  # not connecting: the server hands its key back to the tracker shortly
                continue
            try:
                session = _within(
                    lambda: rpc.connect(host, port, matchkey, session_timeout=self._server_limit_s),  # noqa: B023
                    self._connect_s,
                )
            except _Hung:
                self._leave_out(addr, f"it did not answer a connection in {self._connect_s:g} s")
                continue
            except Exception as exc:  # noqa: BLE001 - it went away between the tracker's answer and now
                self._lost(addr, None, _last_line(exc))
                continue
            return _Lease(session, host, int(port), time.monotonic() - queued)

    def _unless_all_left_out(self) -> None:
        """A `PoolError` when every server the tracker lists under the key is left out (no wait can help)."""
        listed = set(registered(tracker_summary(self.host, self.port), self.key))
        with self._lock:
            out = dict(self.left_out)
        if listed and listed <= set(out):
            why = "; ".join(f"{a}: {out[a]}" for a in sorted(listed))
            raise PoolError(
                f"every server of the key {self.key!r} at the tracker {self.host}:{self.port} is left out ({why})"
            )

    def _request(self, seconds: float) -> tuple[str, int, str] | None:
        """The tracker's next free server under the key, or None after `seconds` (or a poll's worth)."""
        sock = _tracker_socket(self.host, self.port)
        try:
            rpc_base.sendjson(sock, [rpc_base.TrackerCode.REQUEST, self.key, "", self.priority])
            ready, _, _ = select.select([sock], [], [], min(seconds, 5.0))
            if not ready:
                return None  # a request whose socket closes is skipped by the tracker
            value = rpc_base.recvjson(sock)
        except OSError as exc:
            raise PoolError(f"the RPC tracker at {self.host}:{self.port} stopped answering ({_reason(exc)})") from None
        finally:
            sock.close()
        if value[0] != rpc_base.TrackerCode.SUCCESS:
            raise PoolError(f"the RPC tracker at {self.host}:{self.port} answered {value!r}")
        return value[1][0], int(value[1][1]), value[1][2]

    def _leave_out(self, addr: str, why: str) -> None:
        with self._lock:
            new = addr not in self.left_out
            self.left_out[addr] = why
        if new:
            self.on_event("hung", server=addr, reason=why)

    def _lost(self, addr: str, candidate: str | None, why: str = "its session's connection closed") -> None:
        with self._lock:
            self.lost[addr] = why
        self.on_event("lost", server=addr, candidate=candidate, reason=why)


def environment_note() -> str:
    """One line for logs: which TVM measures here, and how many threads it uses."""
    return f"tvm {tvm.__version__}, {os.environ.get('TVM_NUM_THREADS', '?')} thread(s)"
