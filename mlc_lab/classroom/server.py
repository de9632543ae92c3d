"""The class server: takes submissions over HTTP+JSON, stores them in SQLite, grades each in a child
process with the autograder and times it by mlc_lab's one method, and answers the leaderboard and
the teacher's summary.

    POST /api/submit        {"name", "trace", "task"?, "wait"?: seconds}  -> the verdict (or "queued")
    GET  /api/submissions/N -> one verdict (status "queued" until graded)
    GET  /api/assignment    -> title, tasks, points
    GET  /api/leaderboard   -> one row per pseudonym, ranked
    GET  /api/summary       -> the teacher's figures; needs the token (header "Authorization: Bearer T")

Nothing a student sends is run here: the trace is written to a file that the autograder parses in a
child process (own process group, killed after a time limit); schedule files, which the autograder
would execute, are refused. A child that crashes or hangs is a verdict, never a dead server.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mlc_lab.classroom.store import Store
from mlc_lab.errors import MlcLabError

log = logging.getLogger(__name__)

NAME = re.compile(r"^\w[\w .\-]{0,39}$")
MAX_TRACE = 200_000  # characters: a long tuned trace is ~20 kB
MAX_BODY = 400_000
MAX_WAIT_S = 600.0
MAX_WAITING = 3  # submissions of one pseudonym waiting to be graded: one student cannot fill the queue


class SubmissionRefused(MlcLabError):
    """A submission the server does not take (the sentence says why); nothing was stored."""


def refusal(name: Any, trace: Any, task: Any, task_names: list[str]) -> str | None:
    """Why a submission is refused before it is stored, or None."""
    if not isinstance(name, str) or not NAME.match(name):
        return (
            "the pseudonym must be 1 to 40 letters, digits, spaces, dots, dashes or underscores, "
            "starting with a letter or digit"
        )
    if not isinstance(trace, str) or not trace.strip():
        return "the submission has no trace: send the text of s.submission() (an apply_trace function) or a trace"
    if len(trace) > MAX_TRACE:
        return f"the trace is {len(trace):,} characters long; the server takes at most {MAX_TRACE:,}"
    if task is not None and task not in task_names:
        return f"the assignment has no task {task!r}; its tasks are {', '.join(task_names)}"
    if _is_schedule_file(trace):
        return (
            "the class server takes traces (the apply_trace function of s.submission(), or a printed trace), "
            "not schedule files that would have to be run: submit s.submission()"
        )
    return None


def _is_schedule_file(text: str) -> bool:
    """What the autograder would run as a schedule file (rather than parse as a trace)."""
    if text.lstrip().startswith(("[", "{")):
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return "def schedule" in text
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return "schedule" in names and "apply_trace" not in names


class ClassServer:
    """A class server over one assignment and one folder (``class.sqlite`` and the graders' files)."""

    def __init__(
        self,
        assignment: str | Path,
        directory: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        runner: str | None = None,
        grade_timeout_s: float | None = None,
        new_token: bool = False,
        workers: int = 1,
    ) -> None:
        from mlc_lab.grading import load_assignment

        self.assignment_path = Path(assignment).resolve()
        self.assignment = load_assignment(self.assignment_path)
        self.runner = runner
        tasks = [{"name": t.name, "title": t.title, "points": t.points} for t in self.assignment.tasks]
        self.store = Store(directory, tasks)
        self.token = self.store.token(renew=new_token)
        # replay and checks take seconds; a schedule file's own limit does not apply to traces
        self.grade_timeout_s = grade_timeout_s or max(120.0, 2 * self.assignment.time_s + 60.0)
        self._queue: queue.Queue[int] = queue.Queue()
        self._done: dict[int, threading.Event] = {}
        self._done_lock = threading.Lock()
        self._stop = threading.Event()
        self._children: set[subprocess.Popen] = set()
        self.workers = max(1, int(workers))  # graders at once; >1 is for --tracker (local timings would collide)
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    # --- running ----------------------------------------------------------------------------------

    def start(self) -> ClassServer:
        for sid in self.store.pending():  # left by a server stopped while they waited: graded now
            self._queue.put(sid)
        self._threads = [
            threading.Thread(target=self._grade_loop, name=f"mlc-lab-class-grader-{i}", daemon=True)
            for i in range(self.workers)
        ]
        self._threads.append(threading.Thread(target=self.httpd.serve_forever, name="mlc-lab-class-http", daemon=True))
        for th in self._threads:
            th.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for _ in range(self.workers):
            self._queue.put(-1)
        for child in list(self._children):
            _kill(child)
        self.httpd.shutdown()
        self.httpd.server_close()
        for th in self._threads:
            th.join(timeout=10)
        self.store.close()

    def submit(self, name: Any, trace: Any, task: Any = None) -> int:
        why = refusal(name, trace, task, [t.name for t in self.assignment.tasks])
        if why:
            raise SubmissionRefused(why)
        if self.store.waiting(name) >= MAX_WAITING:
            raise SubmissionRefused(
                f"{name} has {MAX_WAITING} submissions waiting to be graded; submit again once their verdicts are in"
            )
        sid = self.store.add(name, task, trace)
        self._event(sid)
        self._queue.put(sid)
        return sid

    def wait(self, sid: int, timeout_s: float) -> bool:
        return self._event(sid).wait(timeout_s)

    def _event(self, sid: int) -> threading.Event:
        with self._done_lock:
            return self._done.setdefault(sid, threading.Event())

    # --- grading ----------------------------------------------------------------------------------

    def _grade_loop(self) -> None:
        while not self._stop.is_set():
            sid = self._queue.get()
            if sid < 0 or self._stop.is_set():
                return
            try:
                result = self._grade(sid)
            except Exception as exc:  # noqa: BLE001  (the server goes on)
                log.exception("mlc_lab: grading submission %s failed", sid)
                result = {
                    "error": f"the class server could not grade this submission ({type(exc).__name__}: "
                    f"{exc}); tell the course staff"
                }
            if self._stop.is_set():
                return  # stopped while grading: it stays queued and is graded after the restart
            self.store.record(sid, result)
            self._event(sid).set()

    def _grade(self, sid: int) -> dict:
        trace, _task = self.store.trace_of(sid)
        work = self.store.dir / "grading"
        work.mkdir(exist_ok=True)
        with tempfile.TemporaryDirectory(dir=work, prefix=f"s{sid}_") as tmp:
            suffix = ".json" if trace.lstrip().startswith(("[", "{")) else ".py"
            sub = Path(tmp) / f"submission_{sid}{suffix}"
            sub.write_text(trace, encoding="utf-8")
            out = Path(tmp) / "result.json"
            cmd = [sys.executable, "-m", "mlc_lab.classroom.grade_child", str(self.assignment_path), str(sub), str(out)]
            if self.runner:
                cmd += ["--runner", self.runner]
            env = {**os.environ, "PYTHONPATH": _package_root() + os.pathsep + os.environ.get("PYTHONPATH", "")}
            proc = subprocess.Popen(
                cmd,
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
                env=env,
            )
            self._children.add(proc)
            try:
                _out, err = proc.communicate(timeout=self.grade_timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return {"error": f"grading this submission took longer than {self.grade_timeout_s:g} s; it was stopped"}
            finally:
                _kill(proc)
                self._children.discard(proc)
            if not out.is_file():
                tail = (err or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                return {"error": f"the grader's process died on this submission: {tail[0][:300]}"}
            return json.loads(out.read_text(encoding="utf-8"))


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _package_root() -> str:
    import mlc_lab

    return str(Path(mlc_lab.__file__).resolve().parents[1])


def _handler(server: ClassServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mlc-lab-class/1"

        def log_message(self, fmt: str, *args: Any) -> None:  # requests are not worth a line each
            log.debug("%s " + fmt, self.address_string(), *args)

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": message})

        def do_GET(self) -> None:  # noqa: N802  (http.server's spelling)
            path = urlparse(self.path).path.rstrip("/")
            if path == "/api/leaderboard":
                self._send(200, {"title": server.assignment.title, **server.store.leaderboard()})
            elif path == "/api/assignment":
                a = server.assignment
                self._send(
                    200,
                    {
                        "title": a.title,
                        "target": a.target,
                        "max_score": a.max_score,
                        "tasks": server.store.tasks,
                        "timed_on": server.runner or "the class server",
                    },
                )
            elif path == "/api/summary":
                if not self._teacher():
                    self._error(
                        HTTPStatus.FORBIDDEN,
                        "the teacher's summary needs the token the server printed "
                        "when it started (header 'Authorization: Bearer TOKEN')",
                    )
                    return
                self._send(200, {"title": server.assignment.title, **server.store.summary()})
            elif path.startswith("/api/submissions/") and path.rsplit("/", 1)[1].isdigit():
                v = server.store.verdict(int(path.rsplit("/", 1)[1]))
                if v is None:
                    self._error(404, "there is no such submission")
                else:
                    self._send(200, v)
            else:
                self._error(
                    404,
                    f"no such page {path or '/'}: the class server answers /api/submit, "
                    "/api/leaderboard, /api/assignment, /api/submissions/N and /api/summary",
                )

        def do_POST(self) -> None:  # noqa: N802
            path = urlparse(self.path).path.rstrip("/")
            if path != "/api/submit":
                self._error(404, "submissions go to /api/submit")
                return
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a submission is at most {MAX_BODY:,} bytes of JSON")
                self.close_connection = True
                return
            try:
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except (ValueError, UnicodeDecodeError):
                self._error(400, 'a submission is a JSON object {"name": ..., "trace": ..., "task": ...}')
                return
            try:
                sid = server.submit(body.get("name"), body.get("trace"), body.get("task"))
            except SubmissionRefused as exc:
                self._error(400, str(exc))
                return
            wait = body.get("wait", 0)
            if isinstance(wait, (int, float)) and wait > 0:
                server.wait(sid, min(float(wait), MAX_WAIT_S))
            self._send(200, server.store.verdict(sid) or {"id": sid, "status": "queued"})

        def _teacher(self) -> bool:
            import hmac

            given = self.headers.get("Authorization", "")
            given = given[len("Bearer ") :] if given.startswith("Bearer ") else self.headers.get("X-Class-Token", "")
            return bool(given) and hmac.compare_digest(given.encode(), server.token.encode())

    return Handler


def serve_forever(server: ClassServer) -> None:
    """Run until SIGTERM or Ctrl-C (the `mlc-lab class serve` command)."""
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    server.start()
    try:
        while not stop:
            time.sleep(0.3)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
