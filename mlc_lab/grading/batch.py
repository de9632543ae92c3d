"""A batch of hand-ins graded by persistent child processes, so that no hand-in can cost the batch.

Each of ``jobs`` threads owns a judging child (``python -m mlc_lab.grading.batch``) that grades one
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
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlc_lab.core.worker import decode_result, launch, stop
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


class _Judge:
    """One judging child: started on demand, restarted after it dies or is killed."""

    def __init__(self, payload: bytes, timeout_s: float):
        self.payload = payload
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        proc = launch(
            [sys.executable, "-m", WORKER_OPS["grade_batch"].entry],
            "persistent",
            env={"TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        )
        assert proc.stdin is not None
        proc.stdin.write(len(self.payload).to_bytes(8, "big") + self.payload)
        proc.stdin.flush()
        return proc

    def grade(self, path: str) -> GradeResult | ErrorInfo:
        """The child's result, decoded, or its failure (kind ``crash``, ``timeout`` or ``protocol``)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        try:
            proc.stdin.write((json.dumps({"path": path}) + "\n").encode())  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            return self._died("crash")
        line = self._read_line(proc)
        if line is None:
            return self._died("timeout")
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

    def _read_line(self, proc: subprocess.Popen) -> bytes | None:
        """One line of the child's; ``b""`` at end of file (it died); None past the deadline."""
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + self.timeout_s
        buf = b""
        while b"\n" not in buf and len(buf) < _MAX_LINE:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            buf += chunk
        return buf.split(b"\n", 1)[0] if b"\n" in buf else b""

    def _died(self, kind: str) -> ErrorInfo:
        proc, self.proc = self.proc, None
        code = proc.poll() if proc else None
        self.close(proc)
        if kind == "timeout":
            return {"type": kind, "summary": f"the grader did not finish this hand-in within {self.timeout_s:g} s"}
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
    """Grade every hand-in, ``jobs`` at a time; a failure of one is its own row."""
    private = tempfile.mkdtemp(prefix="mlc_lab_batch_")
    try:
        program = Path(private) / assignment.program.name
        shutil.copyfile(assignment.program, program)
        frozen = dataclasses.replace(assignment, program=program)
        payload = pickle.dumps({"assignment": frozen, "unsafe_same_user": unsafe_same_user})
        timeout = (
            assignment.time_s + (assignment.numeric or {}).get("timeout_s", 0) + WORKER_OPS["grade_batch"].timeout_s
        )
        return _run(frozen, paths, jobs, payload, timeout, on_result, progress)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _run(assignment, paths, jobs, payload, timeout, on_result, progress) -> list[GradeResult]:
    results: list[GradeResult | None] = [None] * len(paths)
    lock = threading.Lock()
    todo = list(enumerate(paths))
    started = time.monotonic()
    counts = {"done": 0, "failed": 0}
    raised: list[BaseException] = []  # a callback's error (a closed stdout): stops the batch, said once

    def worker() -> None:
        judge = _Judge(payload, timeout)
        try:
            while True:
                with lock:
                    if not todo or raised:
                        return
                    i, path = todo.pop(0)
                answer = judge.grade(path)
                r = _result(assignment, path, answer)
                with lock:
                    results[i] = r
                    counts["done"] += 1
                    counts["failed"] += r.status != "graded"
                    try:
                        if on_result:
                            on_result(i, r)
                        if progress:
                            progress(_progress_line(counts, len(paths), started))
                    except Exception as exc:  # noqa: BLE001  (raised again in the caller's thread)
                        raised.append(exc)
        finally:
            judge.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, min(jobs, len(paths))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if raised:
        raise raised[0]
    return [r for r in results if r is not None]


def _result(assignment: Assignment, path: str, answer: GradeResult | ErrorInfo) -> GradeResult:
    return answer if isinstance(answer, GradeResult) else GradeResult.failed(assignment, path, answer)


def _progress_line(counts: dict, total: int, started: float) -> str:
    done, failed = counts["done"], counts["failed"]
    left = total - done
    elapsed = time.monotonic() - started
    eta = elapsed / done * left if done else 0.0
    return f"graded {done}/{total}: {failed} failed, {left} left, about {_clock(eta)} to go ({_clock(elapsed)} so far)"


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _child() -> int:
    """The judging child: the assignment once (a pickle from the parent), then one JSON line per
    hand-in in, one JSON line per result out, on a copy of stdout (the real fd 1 goes to stderr)."""
    from mlc_lab.grading.grade import grade

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    size = int.from_bytes(stdin.read(8), "big")
    setup: dict[str, Any] = pickle.loads(stdin.read(size))  # noqa: S301  (from the parent, never a hand-in)
    assignment = setup["assignment"]
    for line in stdin:
        path = json.loads(line)["path"]
        r = grade(assignment, path, unsafe_same_user=setup["unsafe_same_user"])
        r.visibility = assignment.visibility
        out.write(json.dumps(r.to_json()).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
