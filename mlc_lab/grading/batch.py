"""A batch of hand-ins graded by persistent child processes, so that no hand-in can cost the batch.

Each of ``jobs`` threads owns a judging child (the worker's ``--child grade_batch``:
``mlc_lab.grading.judge.judge_batch``) that grades one
hand-in at a time: it replays the trace, runs the checks, the numeric check and the timing, and runs
student code only through the sandbox. A child that dies (a segfault in the compiler, a recursion
the parser let through) or runs past its time makes that hand-in's row (``crash`` or ``timeout``)
and is started again for the next one. The children get the assignment once, as data, with a private
copy of its program: a hand-in that edits the assignment file changes nothing of this batch.

Results arrive as they are made (``on_result``), with a progress line (done, failed, left, time to go).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlc_lab.core.processes import overloaded, tree_usage
from mlc_lab.core.worker import child_argv, decode_result, launch, stop
from mlc_lab.errors import MeasureError
from mlc_lab.grading.assignment import Assignment
from mlc_lab.grading.report import GradeResult
from mlc_lab.model.errors import ErrorInfo
from mlc_lab.model.worker_ops import WORKER_OPS

_MAX_LINE = 8 << 20  # a result line of a judging child; more is a child gone wrong


def result_keys(paths: list[str]) -> list[str]:
    """Each hand-in's key: its path relative to the hand-ins' common folder (never the bare file name:
    two students' ``lab.py`` are two keys)."""
    resolved = [Path(os.path.abspath(p)) for p in paths]
    if len(resolved) == 1:
        return [resolved[0].name]
    root = Path(os.path.commonpath([str(p.parent) for p in resolved]))
    return [str(p.relative_to(root)) for p in resolved]


@dataclass(frozen=True)
class JudgeLimits:
    """What one judging child's whole tree (the child, its worker, the OpenCL runs; a sandbox has its own
    limits) may use on one hand-in: memory (summed RSS), CPU seconds, and wall seconds, a backstop: a child past it
    on an overloaded machine was starved, not stuck, and its hand-in is graded again."""

    memory_mb: int
    cpu_s: float
    wall_s: float

    @classmethod
    def of(cls, assignment: Assignment) -> JudgeLimits:
        cpu = assignment.grader_time_s or (
            assignment.time_s + (assignment.numeric or {}).get("timeout_s", 0) + WORKER_OPS["grade_batch"].timeout_s
        )
        # the sandbox's wall clock (2 time_s + 30) and the numeric check's fit inside the backstop
        return cls(assignment.grader_memory_mb, cpu, 2 * cpu + 60)


_SAMPLE_S = 0.25  # how often the judging tree's memory and CPU are read
SANDBOX_INIT = "_sandbox_init.py"  # a hand-in's run, under the sandbox's own limits: not the grader's


class _Judge:
    """One judging child: started on demand, restarted after it dies or is stopped at a limit."""

    def __init__(self, payload: bytes, limits: JudgeLimits):
        self.payload = payload
        self.limits = limits
        self.proc: subprocess.Popen | None = None
        self.overloaded: str | None = None  # why the last hand-in should be graded again, if it should

    def _start(self) -> subprocess.Popen:
        proc = launch(
            child_argv("grade_batch"),
            "persistent",
            # one thread each (the judges run side by side); the numeric check's budget counts this process
            env={
                "TVM_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
                "POCL_MAX_PTHREAD_COUNT": "1",
                "MLC_LAB_BUDGET_PARENT": str(os.getpid()),
            },
        )
        assert proc.stdin is not None
        proc.stdin.write(len(self.payload).to_bytes(8, "big") + self.payload)
        proc.stdin.flush()
        return proc

    def grade(self, path: str) -> GradeResult | ErrorInfo:
        """The child's result, decoded, or its failure (kind ``crash``, ``timeout`` or ``protocol``);
        ``self.overloaded`` says when a stop at the wall clock came from the machine's load."""
        self.overloaded = None
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        try:
            proc.stdin.write((json.dumps({"path": path}) + "\n").encode())  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            return self._died("crash")
        line = self._read_line(proc)
        if isinstance(line, dict):
            return line
        if line == b"":  # end of file: the child is gone (or going)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            return self._died("crash")
        try:
            raw = json.loads(line)
        except ValueError:  # a line cut short: the child went wrong
            return self._died("crash")
        try:
            return decode_result("grade_batch", raw, GradeResult)  # the table's type, with the report's forms
        except MeasureError as exc:
            return {
                "type": "protocol",
                "summary": "the grader's child gave a result it cannot read; tell the course staff",
                "detail": exc.summary,
            }

    def _read_line(self, proc: subprocess.Popen) -> bytes | ErrorInfo:
        """One line of the child's; ``b""`` at end of file (it died); the failure when the child's tree
        passed a limit (it is stopped), read every `_SAMPLE_S` while waiting."""
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        started = time.monotonic()
        _rss, cpu0 = tree_usage(proc.pid, apart=SANDBOX_INIT)
        buf = b""
        while b"\n" not in buf and len(buf) < _MAX_LINE:
            if select.select([fd], [], [], _SAMPLE_S)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b""
                buf += chunk
                continue
            rss, cpu = tree_usage(proc.pid, apart=SANDBOX_INIT)
            passed = self._passed(rss, cpu - cpu0, time.monotonic() - started)
            if passed is not None:
                return passed
        return buf.split(b"\n", 1)[0] if b"\n" in buf else b""

    def _passed(self, rss: int, cpu_s: float, wall_s: float) -> ErrorInfo | None:
        lim = self.limits
        if rss > lim.memory_mb << 20:
            return self._died(
                "crash",
                f"grading this hand-in took more than the grader's memory limit of {lim.memory_mb} MB "
                f"([limits] grader_memory_mb) and was stopped; the other hand-ins are graded",
            )
        if cpu_s > lim.cpu_s:
            return self._died("timeout", f"the grader did not finish this hand-in within {lim.cpu_s:g} s of CPU time")
        if wall_s > lim.wall_s:
            self.overloaded = overloaded()
            why = f" ({self.overloaded}; it used {cpu_s:.0f} s of CPU)" if self.overloaded else ""
            return self._died("timeout", f"the grader did not finish this hand-in within {lim.wall_s:g} s{why}")
        return None

    def _died(self, kind: str, summary: str | None = None) -> ErrorInfo:
        proc, self.proc = self.proc, None
        code = proc.poll() if proc else None
        self.close(proc)
        if summary is not None:
            return {"type": kind, "summary": summary}
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        return {
            "type": kind,
            "summary": f"the grader's process died on this hand-in ({how}); the other hand-ins are graded",
        }

    def close(self, proc: subprocess.Popen | None = None) -> None:
        proc = proc or self.proc
        if proc is not None:
            stop(proc, wait_s=5.0)


def grade_batch(
    assignment: Assignment,
    paths: list[str],
    *,
    jobs: int = 2,
    unsafe_same_user: bool = False,
    on_result: Callable[[int, GradeResult], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[GradeResult]:
    """Grade every hand-in, ``jobs`` at a time; a failure of one is its own row. A hand-in stopped at
    a wall-clock limit while the machine was overloaded is graded again (at most `TRIES` times in all),
    and its row says so."""
    private = tempfile.mkdtemp(prefix="mlc_lab_batch_")
    try:
        program = Path(private) / assignment.program.name
        shutil.copyfile(assignment.program, program)
        frozen = dataclasses.replace(assignment, program=program)
        payload = pickle.dumps({"assignment": frozen, "unsafe_same_user": unsafe_same_user})
        return _Batch(frozen, paths, payload, on_result, progress).run(jobs)
    finally:
        shutil.rmtree(private, ignore_errors=True)


TRIES = 3  # tries of a hand-in stopped by the machine's load


class _Batch:
    """The queue of hand-ins, their rows, the retries of those the machine's load stopped, and the
    progress line."""

    def __init__(self, assignment: Assignment, paths: list[str], payload: bytes, on_result, progress) -> None:
        self.assignment, self.paths, self.payload = assignment, paths, payload
        self.on_result, self.progress = on_result, progress
        self.results: list[GradeResult | None] = [None] * len(paths)
        self.todo: list[tuple[int, int]] = [(i, 1) for i in range(len(paths))]  # (index, try)
        self.lock = threading.Lock()
        self.raised: list[BaseException] = []  # a callback's error (a closed stdout): stops the batch, said once
        self.stopped: dict[int, list[str]] = {}  # index -> why each earlier try was stopped
        self.eta = _Estimate(paths)

    def run(self, jobs: int) -> list[GradeResult]:
        threads = [
            threading.Thread(target=self._worker, daemon=True) for _ in range(max(1, min(jobs, len(self.paths))))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.raised:
            raise self.raised[0]
        return [r for r in self.results if r is not None]

    def _worker(self) -> None:
        judge = _Judge(self.payload, JudgeLimits.of(self.assignment))
        try:
            while True:
                with self.lock:
                    if not self.todo or self.raised:
                        return
                    i, attempt = self.todo.pop(0)
                    self.eta.begin(i)
                started = time.monotonic()
                answer = judge.grade(self.paths[i])
                r = _result(self.assignment, self.paths[i], answer)
                why = judge.overloaded if not isinstance(answer, GradeResult) else r.overloaded
                with self.lock:
                    self.eta.end(i, r.seconds if isinstance(answer, GradeResult) else time.monotonic() - started)
                    if why and attempt < TRIES:
                        self.stopped.setdefault(i, []).append(why)
                        self.todo.append((i, attempt + 1))  # at the end: the load may pass
                        continue
                    self._finish(i, r, why)
        finally:
            judge.close()

    def _finish(self, i: int, r: GradeResult, why: str | None) -> None:
        earlier = self.stopped.get(i, [])
        if why:  # every try stopped by the machine's load: not the hand-in's result
            sentence = (
                f"the machine was too loaded to grade this hand-in: it was stopped at the wall-clock limit "
                f"{len(earlier) + 1} times ({why}); it is not scored: grade it again"
            )
            r = GradeResult.failed(self.assignment, self.paths[i], {"type": "internal", "summary": sentence})
        elif earlier:
            r.notes.insert(
                0,
                f"graded again: {len(earlier)} earlier {'try was' if len(earlier) == 1 else 'tries were'} stopped "
                f"at the wall-clock limit while {earlier[-1].removeprefix('the machine was ')}, which says "
                "nothing of the hand-in",
            )
        self.results[i] = r
        self.eta.record(r)
        try:
            if self.on_result:
                self.on_result(i, r)
            if self.progress:
                self.progress(self.eta.line([j for j, _try in self.todo]))
        except Exception as exc:  # noqa: BLE001  (raised again in the caller's thread)
            self.raised.append(exc)


def _result(assignment: Assignment, path: str, answer: GradeResult | ErrorInfo) -> GradeResult:
    return answer if isinstance(answer, GradeResult) else GradeResult.failed(assignment, path, answer)


class _Estimate:
    """The progress line: rows with full marks, scored 0 and not graded counted apart, and the time to
    go from what is left: each hand-in left at the mean time of the finished ones of its kind (a
    trace, a schedule file, a notebook, a folder), the judges working in parallel."""

    def __init__(self, paths: list[str]) -> None:
        self.kinds = [_kind_of_path(p) for p in paths]
        self.total = len(paths)
        self.started = time.monotonic()
        self.seconds: dict[str, list[float]] = {}
        self.running: dict[int, float] = {}
        self.counts = {"done": 0, "zero": 0}
        self.failed: dict[str, int] = {}
        self.judges = 1

    def begin(self, i: int) -> None:
        self.running[i] = time.monotonic()
        self.judges = max(self.judges, len(self.running))

    def end(self, i: int, seconds: float) -> None:
        self.running.pop(i, None)
        self.seconds.setdefault(self.kinds[i], []).append(max(0.0, seconds))

    def record(self, r: GradeResult) -> None:
        self.counts["done"] += 1
        if r.status != "graded":
            self.failed[r.status] = self.failed.get(r.status, 0) + 1
        elif r.score == 0:
            self.counts["zero"] += 1

    def _mean(self, kind: str) -> float:
        own = self.seconds.get(kind)
        every = [x for xs in self.seconds.values() for x in xs]
        pool = own or every
        return sum(pool) / len(pool) if pool else 0.0

    def line(self, queued: list[int]) -> str:
        """The line, ``queued`` the hand-ins waiting for a judge (by index)."""
        done = self.counts["done"]
        left = self.total - done
        now = time.monotonic()
        work = sum(self._mean(self.kinds[i]) for i in queued)
        work += sum(max(0.0, self._mean(self.kinds[i]) - (now - t)) for i, t in self.running.items())
        eta = work / max(1, self.judges)
        failed = sum(self.failed.values())
        how = ", ".join(f"{n} {k}" for k, n in sorted(self.failed.items()))
        parts = [f"{self.counts['zero']} scored 0", f"{failed} not graded" + (f" ({how})" if how else "")]
        return (
            f"graded {done}/{self.total}: {', '.join(parts)}, {left} left, about {_clock(eta)} to go "
            f"({_clock(now - self.started)} so far)"
        )


def _kind_of_path(path: str) -> str:
    """What a hand-in is, from its name (and for a .py, whether it defines a scheduling function), for
    the time to go: a schedule file or notebook runs in the sandbox, a trace is only parsed."""
    p = Path(path)
    if p.is_dir():
        return "folder"
    if p.suffix == ".ipynb":
        return "notebook"
    if p.suffix != ".py":
        return "trace"
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return "trace"
    # a .py defining anything but apply_trace(sch) is a schedule file (run in the sandbox)
    return "schedule" if re.search(r"^def\s+(?!apply_trace\b)\w+\s*\(", head, re.M) else "trace"


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
