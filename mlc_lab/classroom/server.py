"""The class server: takes submissions over HTTP+JSON, stores them in SQLite, grades each in a child
process with the autograder and times it by mlc_lab's one method, and answers the leaderboard and
the teacher's summary.

    POST /api/submit        {"trace", "task"?, "client_id"?, "wait"?: seconds}  -> the verdict (or "queued")
    GET  /api/submissions/N -> one verdict (status "queued" until graded): its student's and the teacher's
    GET  /api/history       -> the student's own verdicts (the teacher: ?student=ID)
    GET  /api/me            -> who the token is
    GET  /api/assignment    -> title, tasks, points
    GET  /api/leaderboard   -> one row per student, by approved pseudonym (or "student N"), ranked
    GET  /api/summary       -> the teacher's figures

Every request but /api/assignment carries a token (header "Authorization: Bearer T"): a student's
(issued from the roster, see ``mlc-lab class tokens``), JupyterHub's (``--jupyterhub``: the Hub says
whose it is) or the teacher's. Who handed a submission in is the token's student, never a name in
the body; another student's submission is "not found", as one that does not exist. A demo server
(``--open``) takes the body's name instead, and says so in every answer. A ``client_id`` (one per
hand-in, kept by the client across its retries) makes a retried hand-in the submission stored the
first time.

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
from urllib.parse import parse_qs, urlparse

from mlc_lab.classroom import reaper
from mlc_lab.classroom.identity import OPEN_NOTICE, Identities, Mode, NotIdentified, Who, bearer
from mlc_lab.classroom.store import Store
from mlc_lab.core.worker import launch
from mlc_lab.core.worker import stop as stop_child
from mlc_lab.errors import MlcLabError
from mlc_lab.grading.report import failed_verdict
from mlc_lab.model.worker_ops import WORKER_OPS

log = logging.getLogger(__name__)

CLIENT_ID = re.compile(r"^[A-Za-z0-9\-]{8,64}$")
MAX_TRACE = 200_000  # characters: a long tuned trace is ~20 kB
MAX_BODY = 400_000
MAX_WAIT_S = 600.0
MAX_WAITING = 3  # submissions of one student waiting to be graded: one student cannot fill the queue
PER_HOUR = 30  # submissions of one student in an hour (retries of one hand-in count once)


class SubmissionRefused(MlcLabError):
    """A submission the server does not take (the sentence says why); nothing was stored."""


class ServerSetupError(MlcLabError):
    """A class server that cannot start as asked (the sentence says what to give)."""


def refusal(trace: Any, task: Any, task_names: list[str], client_id: Any = None) -> str | None:
    """Why a submission is refused before it is stored, or None."""
    if client_id is not None and (not isinstance(client_id, str) or not CLIENT_ID.match(client_id)):
        return "the client id must be 8 to 64 letters, digits or dashes (a UUID)"
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
    """A class server over one assignment and one folder (``class.sqlite`` and the graders' files).

    ``mode``: "roster" (students by the tokens issued from a roster: ``roster`` given now or once
    before), "jupyterhub" (students by JupyterHub's word: ``hub_api``, default
    ``$JUPYTERHUB_API_URL``) or "open" (a demo: names are typed, not checked)."""

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
        mode: Mode = "roster",
        roster: list | None = None,
        hub_api: str | None = None,
        per_hour: int = PER_HOUR,
        unsafe_same_user: bool = False,
    ) -> None:
        from mlc_lab.grading import load_assignment

        self.assignment_path = Path(assignment).resolve()
        self.assignment = load_assignment(self.assignment_path)
        self.runner = runner
        self.unsafe_same_user = unsafe_same_user  # the teacher's choice where this machine cannot sandbox
        tasks = [{"name": t.name, "title": t.title, "points": t.points} for t in self.assignment.tasks]
        self.store = Store(directory, tasks)
        try:
            self._lock_fd = reaper.lock_folder(self.store)
            if roster is not None:
                self.store.sync_roster(roster)
            self.identities = self._identities(mode, hub_api, new_token)
            self.issued = self.store.issue_tokens() if mode == "roster" else []  # students new to the roster
            self.httpd = ThreadingHTTPServer((host, port), Handler)
            self.httpd.class_server = self  # type: ignore[attr-defined]
        except BaseException:
            self.store.close()
            if hasattr(self, "_lock_fd"):
                os.close(self._lock_fd)
            raise
        self.token = self.identities.teacher_token
        self.mode = mode
        self.per_hour = per_hour
        # replay and checks take seconds; a schedule file's own limit does not apply to traces
        self.grade_timeout_s = grade_timeout_s or max(
            WORKER_OPS["grade_class"].timeout_s, 2 * self.assignment.time_s + 60.0
        )
        self._queue: queue.Queue[int] = queue.Queue()
        self._done: dict[int, threading.Event] = {}
        self._done_lock = threading.Lock()
        self._submit_lock = threading.Lock()
        self._stop = threading.Event()
        self._children: set[subprocess.Popen] = set()
        self.workers = max(1, int(workers))  # graders at once; >1 is for --tracker (local timings would collide)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._threads: list[threading.Thread] = []

    def _identities(self, mode: Mode, hub_api: str | None, new_token: bool) -> Identities:
        if mode == "roster" and not self.store.has_roster():
            raise ServerSetupError(
                "a class server needs to know its students: give a roster (--roster roster.csv), run as a "
                "JupyterHub service (--jupyterhub), or pass --open for a demo where anyone hands in under any name"
            )
        hub_token = None
        if mode == "jupyterhub":
            hub_api = hub_api or os.environ.get("JUPYTERHUB_API_URL")
            hub_token = os.environ.get("JUPYTERHUB_API_TOKEN")
            if not hub_api or not hub_token:
                raise ServerSetupError(
                    "--jupyterhub needs $JUPYTERHUB_API_URL and $JUPYTERHUB_API_TOKEN, which JupyterHub sets "
                    "for a service it starts (c.JupyterHub.services in jupyterhub_config.py)"
                )
        return Identities(self.store, self.store.token(renew=new_token), mode, hub_api, hub_token)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    # --- running ----------------------------------------------------------------------------------

    def start(self) -> ClassServer:
        killed = reaper.reap(self.store)  # a killed server's grading children and folders
        if killed:
            log.warning("mlc_lab: killed %d grading processes left by a stopped server", len(killed))
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
            stop_child(child)
        self.httpd.shutdown()
        self.httpd.server_close()
        for th in self._threads:
            th.join(timeout=10)
        self.store.close()
        os.close(self._lock_fd)

    def submit(self, who: Who, trace: Any, task: Any = None, client_id: Any = None) -> int:
        """Store a hand-in of ``who`` (a student; refused for the teacher) and queue it; a
        ``client_id`` this student used before gives the submission stored then, never a second."""
        if who.student is None:
            raise SubmissionRefused("the teacher's token hands nothing in; use a student's")
        why = refusal(trace, task, [t.name for t in self.assignment.tasks], client_id)
        if why:
            raise SubmissionRefused(why)
        name = who.student
        with self._submit_lock:  # the limits and the insert, one student's requests at a time
            if client_id is not None:
                before = self.store.find(name, client_id)
                if before is not None:
                    if (before[1], before[2]) != (trace, task):
                        raise SubmissionRefused(
                            f"the client id {client_id} was used for another hand-in (#{before[0]}); "
                            "a new hand-in needs a new id"
                        )
                    return before[0]
            if self.store.waiting(name) >= MAX_WAITING:
                raise SubmissionRefused(
                    f"you have {MAX_WAITING} submissions waiting to be graded; submit again once their verdicts are in"
                )
            if self.store.submitted_since(name, time.time() - 3600) >= self.per_hour:
                raise SubmissionRefused(f"you handed in {self.per_hour} times in the last hour, the class's limit")
            sid = self.store.add(name, task, trace, client_id)
        self._event(sid)
        self._queue.put(sid)
        return sid

    def wait(self, sid: int, timeout_s: float) -> bool:
        event = self._event(sid)  # before the look: a verdict recorded in between sets it
        return self.store.status(sid) == "graded" or event.wait(timeout_s)

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
                result = failed_verdict(
                    {
                        "type": "internal",
                        "summary": f"the class server could not grade this submission ({type(exc).__name__}: "
                        f"{exc}); tell the course staff",
                    }
                )
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
            cmd = [sys.executable, "-m", WORKER_OPS["grade_class"].entry, str(self.assignment_path), str(sub), str(out)]
            if self.runner:
                cmd += ["--runner", self.runner]
            if self.unsafe_same_user:
                cmd.append("--unsafe-same-user")
            proc = launch(
                cmd,
                "detached",
                cwd=tmp,
                stderr=subprocess.PIPE,
                text=True,
                env={reaper.MARK: reaper.mark(self.store, sid)},  # found by the next server if this one dies
                preexec_fn=reaper.die_with(os.getpid()),  # a SIGKILLed server takes its grader with it
            )
            self._children.add(proc)
            self.store.child_started(proc.pid, reaper.started_at(proc.pid) or time.time(), tmp, sid)
            try:
                _out, err = proc.communicate(timeout=self.grade_timeout_s)
            except subprocess.TimeoutExpired:
                return failed_verdict(
                    {
                        "type": "timeout",
                        "summary": f"grading this submission took longer than {self.grade_timeout_s:g} s; it was stopped",
                    }
                )
            finally:
                stop_child(proc)
                self._children.discard(proc)
                self.store.child_ended(proc.pid)
            if not out.is_file():
                lines = (err or "").strip().splitlines()
                last = lines[-1][:300] if lines else f"exit status {proc.returncode}"
                return failed_verdict(
                    {
                        "type": "crash",
                        "summary": f"the grader's process died on this submission: {last}",
                        "detail": "\n".join(lines[-20:])[-2000:],
                    }
                )
            return json.loads(out.read_text(encoding="utf-8"))


class Handler(BaseHTTPRequestHandler):
    """The class server's HTTP answers (the ``ClassServer`` is its HTTP server's ``class_server``)."""

    protocol_version = "HTTP/1.1"
    server_version = "mlc-lab-class/1"

    @property
    def cs(self) -> ClassServer:
        return self.server.class_server  # type: ignore[attr-defined]

    def log_message(self, fmt: str, *args: Any) -> None:  # requests are not worth a line each
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, status: int, body: dict) -> None:
        if self.cs.mode == "open":
            body = {**body, "notice": OPEN_NOTICE}
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if self.cs.mode == "open":
            self.send_header("X-Mlc-Lab-Class", "open (demo: names are not checked)")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    def _who(self, what: str) -> Who | None:
        """The request's identity (``NotIdentified`` without one, naming ``what`` needs it); None
        only on a demo server, which takes anyone."""
        token = bearer(self.headers.get("Authorization", "")) or self.headers.get("X-Class-Token", "")
        if self.cs.mode == "open":
            return self.cs.identities.who(token)
        return self.cs.identities.required(token, what)

    def do_GET(self) -> None:  # noqa: N802  (http.server's spelling)
        url = urlparse(self.path)
        path = url.path.rstrip("/")
        if path == "/api/assignment":
            a = self.cs.assignment
            self._send(
                200,
                {
                    "title": a.title,
                    "target": a.target,
                    "max_score": a.max_score,
                    # each task's checks too: the class explorer scores its Checks tab as the grader does
                    "tasks": [
                        {**t, "checks": list(a_t.checks), "max_latency_ms": a_t.max_latency_ms}
                        for t, a_t in zip(self.cs.store.tasks, a.tasks, strict=True)
                    ],
                    "hazards_fail": sorted(a.hazards_fail),
                    "timed_on": self.cs.runner or "the class server",
                    "mode": self.cs.mode,
                },
            )
            return
        try:
            self._get(path, parse_qs(url.query))
        except NotIdentified as exc:
            self._error(exc.status, str(exc))

    def _get(self, path: str, query: dict[str, list[str]]) -> None:
        store = self.cs.store
        if path == "/api/leaderboard":
            who = self._who("the leaderboard")
            board = store.leaderboard(store.labels(), you=who.student if who else None)
            self._send(200, {"title": self.cs.assignment.title, **board})
        elif path == "/api/summary":
            who = self._who("the teacher's summary")
            if who is None or not who.teacher:
                raise NotIdentified(
                    "the teacher's summary needs the teacher's token, printed when the server started "
                    "(header 'Authorization: Bearer TOKEN')",
                    status=HTTPStatus.FORBIDDEN,
                )
            self._send(200, {"title": self.cs.assignment.title, **store.summary(store.labels(teacher=True))})
        elif path == "/api/me":
            who = self._who("who you are")
            if who is None or who.teacher:
                self._send(200, {"teacher": who is not None, "student": None, "name": None})
            else:
                self._send(200, {"teacher": False, "student": who.student, "name": store.labels().get(who.student)})
        elif path == "/api/history":
            who = self._who("your history")
            student = who.student if who else None
            if who and who.teacher:
                student = (query.get("student") or [None])[0]
            if not student:
                raise NotIdentified("whose history? (the teacher adds ?student=ID)", status=400)
            self._send(200, {"student": student, "submissions": store.history(student, store.labels())})
        elif path.startswith("/api/submissions/") and path.rsplit("/", 1)[1].isdigit():
            sid = int(path.rsplit("/", 1)[1])
            who = self._who("a verdict")
            mine = self.cs.mode == "open" or (who is not None and (who.teacher or store.owner(sid) == who.student))
            v = store.verdict(sid, store.labels()) if mine else None
            if v is None:  # another student's and one that does not exist: the same answer
                self._error(404, "there is no such submission of yours")
            else:
                self._send(200, v)
        else:
            self._error(
                404,
                f"no such page {path or '/'}: the class server answers /api/submit, /api/leaderboard, "
                "/api/assignment, /api/submissions/N, /api/history, /api/me and /api/summary",
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
            who = self._who("handing in")
        except NotIdentified as exc:
            self.rfile.read(length)
            self._error(exc.status, str(exc))
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            self._error(400, 'a submission is a JSON object {"trace": ..., "task": ..., "client_id": ...}')
            return
        try:
            if who is None or (self.cs.mode == "open" and not who.teacher):  # a demo: the typed name
                who = self.cs.identities.open_name(body.get("name"))
            sid = self.cs.submit(who, body.get("trace"), body.get("task"), body.get("client_id"))
        except NotIdentified as exc:
            self._error(exc.status, str(exc))
            return
        except SubmissionRefused as exc:
            self._error(400, str(exc))
            return
        wait = body.get("wait", 0)
        if isinstance(wait, (int, float)) and wait > 0:
            self.cs.wait(sid, min(float(wait), MAX_WAIT_S))
        labels = self.cs.store.labels()
        self._send(200, self.cs.store.verdict(sid, labels) or {"id": sid, "status": "queued"})


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
