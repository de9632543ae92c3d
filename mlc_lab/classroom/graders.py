"""The class server's graders: a fair queue of waiting submissions, and persistent grading children.

**Fair share.** Submissions wait in a ``FairQueue`` that hands the next one out by student, not by
arrival: first the students with the fewest hand-ins being graded now, among them the one served
longest ago (never: first), and that student's oldest hand-in. Students take turns: a student's
second and third waiting hand-ins wait behind everyone's first, and one student's slow traces cannot
hold a classmate's verdict for minutes (issue 34: 8 s became 373 s behind three slow traces, first
come first served).

**Graders.** Each grading thread of the server owns a ``Grader``: a persistent child
(``python -m mlc_lab.core.worker_main --child grade_class ASSIGNMENT``: `grading_child`, its own session and
process group) that loads TVM and the assignment once and grades one submission after another (each judged by
``mlc_lab.grading.judge.judge_for_class``) (a fresh process per
hand-in spent two seconds starting before it graded anything). A child that crashes, hangs past the
time limit, or grows past ``RECYCLE_MB`` is killed with everything it started, and the next
submission starts a fresh one.

**Nothing left behind.** A child works in a folder of its own under ``DIR/grading``, which is its
``TMPDIR`` too (TVM's build folders, the OpenCL engine's, the timing worker's log all land there): a
child killed mid-build leaves its mess inside that folder, and the folder goes with the child. The
hand-in's file is written there under the name the student gave it, and removed after its verdict.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from mlc_lab.classroom import reaper
from mlc_lab.classroom.timing import LOCK_ENV
from mlc_lab.core.worker import child_argv, decode_result, launch
from mlc_lab.core.worker import stop as stop_child
from mlc_lab.errors import MeasureError
from mlc_lab.grading.report import failed_verdict

RECYCLE_MB = 3000  # a child (with its timing worker) larger than this is started afresh
RECYCLE_JOBS = 500  # and after this many hand-ins, whatever its size
MAX_LINE = 8 << 20  # an answer of a child; more is a child gone wrong
SCRATCH_ENV = "MLC_LAB_CLASS_SCRATCH"  # the child's own folder: it empties its TMPDIR there after each job
# what a hand-in's file may be called on disk (else "hand-in" and the suffix its text calls for)
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+()-]{0,99}\.(py|txt|json|jsonl|trace)$")


def default_graders() -> int:
    """Submissions graded at once by default: one per core of this machine."""
    from mlc_lab._threads import usable_cores

    return usable_cores()


class FairQueue:
    """Submissions waiting to be graded, handed out fairly across students (see the module)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: dict[str, list[int]] = {}  # student -> their waiting ids, oldest first
        self._grading: dict[str, int] = {}  # student -> their submissions being graded now
        self._served: dict[str, int] = {}  # student -> when they were last handed out (a count)
        self._turn = 0
        self._known: set[int] = set()  # ids waiting or being graded
        self._closed = False

    def put(self, sid: int, student: str) -> None:
        """Queue a submission (one already waiting or being graded is not queued twice)."""
        with self._cond:
            if sid in self._known:
                return
            self._known.add(sid)
            self._waiting.setdefault(student, []).append(sid)
            self._cond.notify()

    def get(self, timeout_s: float | None = None) -> tuple[int, str] | None:
        """The next submission and its student (now counted as being graded), or None when closed or
        after ``timeout_s`` with nothing to hand out."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while not self._closed:
                best = self._next()
                if best is not None:
                    sid, student = best
                    mine = self._waiting[student]
                    mine.remove(sid)
                    if not mine:
                        del self._waiting[student]
                    self._grading[student] = self._grading.get(student, 0) + 1
                    self._turn += 1
                    self._served[student] = self._turn
                    return sid, student
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return None

    def _next(self) -> tuple[int, str] | None:
        """The oldest waiting submission of the student with the fewest being graded, served longest ago."""
        best: tuple[int, int, int, str] | None = None
        for student, ids in self._waiting.items():
            key = (self._grading.get(student, 0), self._served.get(student, -1), ids[0], student)
            if best is None or key < best:
                best = key
        return None if best is None else (best[2], best[3])

    def done(self, sid: int, student: str) -> None:
        """Submission ``sid`` of ``student``, handed out by ``get``, has its verdict."""
        with self._cond:
            self._known.discard(sid)
            left = self._grading.get(student, 0) - 1
            if left > 0:
                self._grading[student] = left
            else:
                self._grading.pop(student, None)
            self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing waits and nothing is being graded."""
        with self._cond:
            return not self._waiting and not self._grading

    def waiting(self) -> int:
        with self._cond:
            return sum(len(ids) for ids in self._waiting.values())

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def disk_name(file: str | None, trace: str) -> str:
    """What a hand-in's file is called where its grader reads it: the student's name for it when
    that is a plain file name of a hand-in, else ``hand-in`` with the suffix its text calls for."""
    json_text = trace.lstrip().startswith(("[", "{"))
    if file and SAFE_NAME.match(file) and (file.endswith((".json", ".jsonl")) == json_text):
        return file
    return "hand-in.json" if json_text else "hand-in.py"


def shown_as(value: object, disk: str, shown: str) -> object:
    """``value`` (a grader's result) with the hand-in's file name on disk written as the student's."""
    if disk == shown:
        return value
    if isinstance(value, str):
        return value.replace(disk, shown)
    if isinstance(value, list):
        return [shown_as(v, disk, shown) for v in value]
    if isinstance(value, dict):
        return {k: shown_as(v, disk, shown) for k, v in value.items()}
    return value


class Grader:
    """One persistent grading child of a class server (started on demand, started again after it
    dies, hangs or grows too large), in its own folder ``DIR/grading/gN-…``."""

    def __init__(self, server, slot: int) -> None:
        self.server = server  # the ClassServer: its store, assignment, runner, limits
        self.slot = slot
        self.proc: subprocess.Popen | None = None
        self.folder: Path | None = None
        self.jobs = 0
        self._lock = threading.Lock()  # close() from the server's stop, while a job may run

    # --- the child --------------------------------------------------------------------------------

    def _start(self) -> subprocess.Popen:
        store = self.server.store
        grading = store.dir / "grading"
        grading.mkdir(mode=0o700, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(dir=grading, prefix=f"g{self.slot}-"))
        scratch = self.folder / "tmp"
        scratch.mkdir(mode=0o700)
        cmd = child_argv("grade_class", str(self.server.assignment_path))
        if self.server.runner:
            cmd += ["--runner", self.server.runner]
        if self.server.unsafe_same_user:
            cmd.append("--unsafe-same-user")
        env = {
            reaper.MARK: reaper.mark(store, f"g{self.slot}"),  # found by the next server if this one dies
            "TMPDIR": str(scratch),
            SCRATCH_ENV: str(scratch),
        }
        if not self.server.runner:  # timings on this machine: one at a time
            env[LOCK_ENV] = str(store.dir / "timing.lock")
        with open(self.folder / "child.log", "wb") as log:  # its last words, for a crash's verdict
            proc = launch(
                cmd,
                "persistent",
                cwd=str(self.folder),
                env=env,
                stderr=log,
                preexec_fn=reaper.die_with(os.getpid()),  # a SIGKILLed server takes its graders with it
            )
        self.jobs = 0
        store.child_started(proc.pid, reaper.started_at(proc.pid) or time.time(), str(self.folder), 0)
        return proc

    def close(self) -> None:
        """Kill the child and everything it started, and remove its folder."""
        with self._lock:
            proc, self.proc = self.proc, None
            folder, self.folder = self.folder, None
        if proc is not None:
            stop_child(proc, wait_s=5.0)
            self.server.store.child_ended(proc.pid)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _ensure(self) -> tuple[subprocess.Popen, Path]:
        """The child, started now when there is none alive, and its folder."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None and self.folder is not None:
                return self.proc, self.folder
        self.close()  # a dead child's folder and record go first
        with self._lock:
            self.proc = self._start()
            assert self.folder is not None
            return self.proc, self.folder

    def _ask(self, proc: subprocess.Popen, job: dict, timeout_s: float) -> dict | str:
        """Send one job and read its answer: the answer, or "timeout" / "crash"."""
        try:
            proc.stdin.write((json.dumps(job) + "\n").encode())  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):
            return "crash"
        line = _read_line(proc, timeout_s)
        if line is None:
            return "timeout"
        if not line:  # the child's end of file: it died
            return "crash"
        try:
            answer = decode_result("grade_class", json.loads(line))  # a verdict, or timings
        except (ValueError, MeasureError):
            return "crash"
        self.jobs += 1
        return answer

    def _recycle_if_due(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if self.jobs >= RECYCLE_JOBS or _tree_mb(proc.pid) > RECYCLE_MB:
            self.close()

    # --- the jobs ---------------------------------------------------------------------------------

    def grade(self, sid: int) -> dict:
        """Grade one stored submission: its verdict (``failed_verdict`` when the child could not)."""
        trace, _task, file = self.server.store.hand_in(sid)
        proc, folder = self._ensure()
        disk = disk_name(file, trace)
        job_dir = Path(tempfile.mkdtemp(dir=folder, prefix=f"s{sid}_"))
        timeout_s = self.server.grade_timeout_s
        try:
            path = job_dir / disk
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(trace)
            answer = self._ask(proc, {"op": "grade", "path": str(path)}, timeout_s)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
        if isinstance(answer, str):
            last_words = _tail(folder / "child.log")
            self.close()  # dead or stuck: killed with all it started, its folder with it
            return _failure(answer, timeout_s, last_words)
        self._recycle_if_due()
        return shown_as(answer, disk, file or "your hand-in")  # type: ignore[return-value]

    def retime(self, traces: list[str], rounds: int, timeout_s: float) -> list[dict] | None:
        """The submissions' traces timed again, interleaved (``mlc_lab.classroom.timing.retime``),
        or None when the child could not."""
        proc, _folder = self._ensure()
        answer = self._ask(proc, {"op": "retime", "traces": traces, "rounds": rounds}, timeout_s)
        if isinstance(answer, str):
            self.close()
            return None
        self._recycle_if_due()
        timings = answer.get("timings")
        return timings if isinstance(timings, list) and len(timings) == len(traces) else None


def _failure(kind: str, timeout_s: float, detail: str = "") -> dict:
    if kind == "timeout":
        summary = f"grading this submission took longer than {timeout_s:g} s; it was stopped"
        return failed_verdict({"type": kind, "summary": summary})
    summary = "the grader's process died on this submission; the other submissions are graded"
    return failed_verdict({"type": kind, "summary": summary, **({"detail": detail} if detail else {})})


def _tail(path: Path, limit: int = 2000) -> str:
    """The end of a child's log (what it said before it died), or ""."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def _read_line(proc: subprocess.Popen, timeout_s: float) -> bytes | None:
    """One line of the child's answers; ``b""`` when it died; None past the deadline."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    deadline = time.monotonic() + timeout_s
    buf = b""
    while b"\n" not in buf and len(buf) < MAX_LINE:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], min(left, 1.0))[0]:
            if left <= 0:
                return None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b""
        buf += chunk
    return buf.split(b"\n", 1)[0] if b"\n" in buf else b""


def _tree_mb(pid: int) -> float:
    """The resident memory of a process and its descendants, in MB."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def empty_scratch() -> None:
    """In a grading child, after each job: empty its scratch folder (its ``TMPDIR``) of what the job
    left there (a timing worker killed mid-build leaves TVM's folders), keeping only the timing
    worker's log, which the worker holds open. Nothing happens outside a class server's child."""
    scratch = os.environ.get(SCRATCH_ENV)
    if not scratch or os.path.realpath(tempfile.gettempdir()) != os.path.realpath(scratch):
        return
    from mlc_lab.core.worker import worker

    keep = worker().log_path
    for entry in Path(scratch).iterdir():
        if keep and os.path.realpath(entry) == os.path.realpath(keep):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            try:
                entry.unlink()
            except OSError:
                pass


def grading_child(argv: list[str]) -> int:
    """The grading child a `Grader` starts (``python -m mlc_lab.core.worker_main --child grade_class
    ASSIGNMENT [--runner rpc://HOST:PORT/KEY] [--unsafe-same-user]``): one job a line on stdin
    (``{"op": "grade", "path": FILE}``, or ``{"op": "retime", "traces", "rounds"}``), each answered with one
    line on stdout: the hand-in's `ClassGrade` (``mlc_lab.grading.judge.judge_for_class``, timed in the
    class's turn), or the traces' new timings (``mlc_lab.classroom.timing.retime``). Its scratch folder is
    emptied after each job; what anything prints goes to stderr."""
    from mlc_lab.classroom.timing import retime, timing_turn
    from mlc_lab.grading import load_assignment
    from mlc_lab.grading.judge import judge_for_class

    out = os.fdopen(os.dup(1), "wb")  # the answers; what anything prints goes to stderr
    os.dup2(2, 1)
    options = argv[1:]
    runner = options[options.index("--runner") + 1] if "--runner" in options[:-1] else None
    unsafe = "--unsafe-same-user" in options
    assignment = load_assignment(argv[0])
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if job.get("op") == "retime":
            traces = [str(t) for t in job["traces"]]
            answer = {"timings": retime(assignment, traces, int(job.get("rounds", 3)), unsafe)}
        else:
            answer = judge_for_class(assignment, str(job["path"]), runner, unsafe, turn=timing_turn)
        out.write(json.dumps(answer).encode("utf-8") + b"\n")
        out.flush()
        empty_scratch()
    return 0
