"""The class server: takes submissions over HTTP+JSON, stores them in SQLite, grades them side by
side in persistent child processes with the autograder, a fair share per student, times each by
mlc_lab's one method, and answers the leaderboard and the teacher's summary.

    POST /api/submit        {"trace", "task"?, "client_id"?, "file"?, "wait"?: seconds}  -> the verdict (or "queued")
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
first time; ``file`` is what the student called the hand-in, the name its verdict uses.

Nothing a student sends is run here: the trace is written to a file that the autograder parses in a
child process (own process group, killed after a time limit); schedule files, which the autograder
would execute, are refused. A child that crashes or hangs is a verdict, never a dead server. The
graders, their fair queue and their folders: ``mlc_lab.classroom.graders``; the HTTP side (timeouts,
an answer for every request): ``mlc_lab.classroom.handler``.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

from mlc_lab.classroom import reaper
from mlc_lab.classroom.graders import FairQueue, Grader, default_graders
from mlc_lab.classroom.handler import ClassHTTPServer, Handler, SubmissionRefused
from mlc_lab.classroom.identity import Identities, Mode, Who
from mlc_lab.classroom.store import Store
from mlc_lab.errors import MlcLabError
from mlc_lab.grading.report import failed_verdict
from mlc_lab.model.worker_ops import WORKER_OPS

log = logging.getLogger(__name__)

CLIENT_ID = re.compile(r"^[A-Za-z0-9\-]{8,64}$")
MAX_TRACE = 200_000  # characters: a long tuned trace is ~20 kB
MAX_WAITING = 3  # submissions of one student waiting to be graded: one student cannot fill the queue
PER_HOUR = 30  # submissions of one student in an hour (retries of one hand-in count once)
MAX_FILE_NAME = 100  # characters of what a student calls a hand-in
IDLE_POLL_S = 2.0  # how often an idle grader looks for close results to time again
RETIME_ROUNDS = 3

__all__ = ["ClassServer", "ServerSetupError", "SubmissionRefused", "refusal", "serve_forever"]


class ServerSetupError(MlcLabError):
    """A class server that cannot start as asked (the sentence says what to give)."""


def refusal(trace: Any, task: Any, task_names: list[str], client_id: Any = None, file: Any = None) -> str | None:
    """Why a submission is refused before it is stored, or None."""
    if client_id is not None and (not isinstance(client_id, str) or not CLIENT_ID.match(client_id)):
        return "the client id must be 8 to 64 letters, digits or dashes (a UUID)"
    if file is not None and (
        not isinstance(file, str)
        or not file.strip()
        or len(file) > MAX_FILE_NAME
        or any(not c.isprintable() for c in file)
        or "/" in file
    ):
        return f"the hand-in's name must be a file name of 1 to {MAX_FILE_NAME} printable characters, without '/'"
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
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "def schedule" in text
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return "schedule" in names and "apply_trace" not in names


class ClassServer:
    """A class server over one assignment and one folder (``class.sqlite`` and the graders' folders).

    ``mode``: "roster" (students by the tokens issued from a roster: ``roster`` given now or once
    before), "jupyterhub" (students by JupyterHub's word: ``hub_api``, default
    ``$JUPYTERHUB_API_URL``) or "open" (a demo: names are typed, not checked). ``workers``: hand-ins
    graded at once (default: one per core; timings on this machine still take turns)."""

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
        workers: int | None = None,
        mode: Mode = "roster",
        roster: list | None = None,
        hub_api: str | None = None,
        per_hour: int = PER_HOUR,
        max_connections: int | None = None,
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
            self.token = self.store.teacher_token(renew=new_token)  # None: made before, kept as a hash
            self.identities = self._identities(mode, hub_api)
            self.issued = self.store.issue_tokens() if mode == "roster" else []  # students new to the roster
            self.httpd = ClassHTTPServer((host, port), Handler, max_connections or 1024)
            self.httpd.class_server = self  # type: ignore[attr-defined]
        except BaseException:
            self.store.close()
            if hasattr(self, "_lock_fd"):
                os.close(self._lock_fd)
            raise
        self.mode = mode
        self.per_hour = per_hour
        # replay and checks take seconds; a schedule file's own limit does not apply to traces
        self.grade_timeout_s = grade_timeout_s or max(
            WORKER_OPS["grade_class"].timeout_s, 2 * self.assignment.time_s + 60.0
        )
        self._queue = FairQueue()
        self._done: dict[int, threading.Event] = {}
        self._done_lock = threading.Lock()
        self._submit_lock = threading.Lock()
        self._retime_lock = threading.Lock()
        self._retimed: set[frozenset[int]] = set()  # pairs timed again (or tried): once each
        self._stop = threading.Event()
        self.workers = max(1, int(workers or default_graders()))
        self._graders = [Grader(self, i + 1) for i in range(self.workers)]
        self.host, self.port = self.httpd.server_address[:2]
        self._threads: list[threading.Thread] = []

    def _identities(self, mode: Mode, hub_api: str | None) -> Identities:
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
        return Identities(self.store, mode, hub_api, hub_token)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def assignment_info(self) -> dict:
        """``/api/assignment``: what the class explorer needs to score its Checks tab as the grader does."""
        a = self.assignment
        return {
            "title": a.title,
            "target": a.target,
            "max_score": a.max_score,
            "tasks": [
                {**t, "checks": list(a_t.checks), "max_latency_ms": a_t.max_latency_ms}
                for t, a_t in zip(self.store.tasks, a.tasks, strict=True)
            ],
            "hazards_fail": sorted(a.hazards_fail),
            "timed_on": self.runner or "the class server",
            "mode": self.mode,
        }

    # --- running ----------------------------------------------------------------------------------

    def start(self) -> ClassServer:
        killed = reaper.reap(self.store)  # a killed server's grading children and folders
        if killed:
            log.warning("mlc_lab: killed %d grading processes left by a stopped server", len(killed))
        for sid, student in self.store.waiting_list():  # left by a server stopped while they waited
            self._queue.put(sid, student)
        self._threads = [
            threading.Thread(target=self._grade_loop, args=(g,), name=f"mlc-lab-class-grader-{g.slot}", daemon=True)
            for g in self._graders
        ]
        self._threads.append(threading.Thread(target=self.httpd.serve_forever, name="mlc-lab-class-http", daemon=True))
        for th in self._threads:
            th.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for grader in self._graders:
            grader.close()  # a child grading now is killed; its submission is graded after a restart
        self._queue.close()
        self.httpd.shutdown()
        self.httpd.server_close()
        for th in self._threads:
            th.join(timeout=10)
        for grader in self._graders:
            grader.close()
        self.store.close()
        os.close(self._lock_fd)

    def queued(self) -> int:
        """Submissions waiting for a grader now."""
        return self._queue.waiting()

    def submit(self, who: Who, trace: Any, task: Any = None, client_id: Any = None, file: Any = None) -> int:
        """Store a hand-in of ``who`` (a student; refused for the teacher) and queue it; a
        ``client_id`` this student used before gives the submission stored then, never a second.
        ``file``: what the student called it (its verdict's sentences use that name)."""
        if who.student is None:
            raise SubmissionRefused("the teacher's token hands nothing in; use a student's")
        why = refusal(trace, task, [t.name for t in self.assignment.tasks], client_id, file)
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
            sid = self.store.add(name, task, trace, client_id, file.strip() if isinstance(file, str) else None)
        self._event(sid)
        self._queue.put(sid, name)
        return sid

    def wait(self, sid: int, timeout_s: float) -> bool:
        event = self._event(sid)  # before the look: a verdict recorded in between sets it
        return self.store.status(sid) == "graded" or event.wait(timeout_s)

    def _event(self, sid: int) -> threading.Event:
        with self._done_lock:
            return self._done.setdefault(sid, threading.Event())

    # --- grading ----------------------------------------------------------------------------------

    def _grade_loop(self, grader: Grader) -> None:
        try:
            self._grading(grader)
        finally:
            # while this thread lives: its child dies with it (PR_SET_PDEATHSIG), and what the child
            # started in a session of its own (the timing worker) is found only while the child is alive
            grader.close()

    def _grading(self, grader: Grader) -> None:
        while not self._stop.is_set():
            item = self._queue.get(timeout_s=IDLE_POLL_S)
            if item is None:
                if not self._stop.is_set() and self._queue.idle():
                    self._retime_close_results(grader)
                continue
            sid, student = item
            started = time.monotonic()
            try:
                result = grader.grade(sid)
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
            result["grading_s"] = round(time.monotonic() - started, 3)  # a grader's time on it, waits not counted
            self.store.record(sid, result)
            self._queue.done(sid, student)
            with self._done_lock:
                event = self._done.pop(sid, None)
            if event is not None:
                event.set()

    def _retime_close_results(self, grader: Grader) -> None:
        """On an idle server, two tied neighbours of the leaderboard timed again, interleaved
        (``mlc_lab.classroom.timing``); each pair once. Timings on the class's machines need none."""
        if self.runner or not self._retime_lock.acquire(blocking=False):
            return
        try:
            pair = self.store.retime_due(self._retimed)
            if pair is None:
                return
            self._retimed.add(frozenset(pair))
            traces = [self.store.trace_of(sid)[0] for sid in pair]
            timings = grader.retime(traces, RETIME_ROUNDS, self.grade_timeout_s)
            for sid, t in zip(pair, timings or [], strict=False):
                if "latency_ms" in t and not self._stop.is_set():
                    self.store.retimed(sid, float(t["latency_ms"]), {**t["timing"], "retimed_with": [*pair]})
        finally:
            self._retime_lock.release()


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
