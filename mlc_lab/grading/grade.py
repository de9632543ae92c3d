"""Grading one submission against an assignment.

A submission is one of:
- a trace: TVM's JSON (``.json``), a tuning record, or a ``.py``/``.txt`` file holding the course's
  ``apply_trace(sch)`` function or printed trace statements. It is parsed by the whitelist parser
  and replayed; it is never executed, so a trace that calls anything but schedule methods is refused.
- a schedule file (``.py`` defining ``schedule(sch)``) or a notebook (``.ipynb``): run only in a child
  process (own process group, CPU-time, wall-time and address-space limits, no network where the
  OS allows), whose schedule comes back as a JSON trace and is replayed like a trace.

The replayed schedule is judged by the named checks of each task (``mlc_lab.core.checks``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlc_lab.errors import MlcLabError
from mlc_lab.grading.assignment import Assignment


@dataclass
class TaskResult:
    name: str
    title: str
    points: float
    max_points: float
    passed: bool
    messages: list = field(default_factory=list)  # one sentence per check (and hazard), in a student's words

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "messages": list(self.messages),
        }


@dataclass
class GradeResult:
    submission: str
    kind: str  # "trace" | "schedule" | "notebook"
    tasks: list
    error: str | None = None  # why nothing could be graded (one sentence)
    hazards: list = field(default_factory=list)
    trace: str | None = None  # the schedule as the course's apply_trace function
    seconds: float = 0.0
    latency_ms: float | None = None  # when the assignment times submissions
    numeric: dict | None = None  # {"ok", "verdict", "message"} when the assignment runs the schedule smaller
    correct: bool | None = None  # its output against the original program's, on random inputs

    @property
    def score(self) -> float:
        return float(sum(t.points for t in self.tasks))

    @property
    def max_score(self) -> float:
        return float(sum(t.max_points for t in self.tasks))

    def to_json(self) -> dict:
        return {
            "submission": self.submission,
            "kind": self.kind,
            "score": self.score,
            "max_score": self.max_score,
            "error": self.error,
            "hazards": list(self.hazards),
            "tasks": [t.to_json() for t in self.tasks],
            "trace": self.trace,
            "seconds": round(self.seconds, 3),
            "latency_ms": self.latency_ms,
            "correct": self.correct,
            "numeric": self.numeric,
        }

    def to_text(self) -> str:
        lines = [
            f"{self.submission} ({self.kind}): {_num(self.score)}/{_num(self.max_score)}"
            + (f", {self.latency_ms:.4g} ms" if self.latency_ms is not None else "")
        ]
        if self.error:
            lines.append(f"  {self.error}")
        for t in self.tasks:
            lines.append(
                f"  {'PASS' if t.passed else 'FAIL'} {t.name} ({_num(t.points)}/{_num(t.max_points)}): {t.title}"
            )
            if not t.passed and not self.error:  # an error is said once, above
                lines += [f"       {m}" for m in t.messages]
        return "\n".join(lines)

    def to_gradescope(self) -> dict:
        """Gradescope's results.json: one test per task, the score, and a leaderboard entry."""
        tests = []
        for t in self.tasks:
            output = "\n".join(t.messages) if t.messages else ""
            if self.error and not t.passed:
                output = self.error
            tests.append(
                {
                    "name": t.title,
                    "number": t.name,
                    "score": t.points,
                    "max_score": t.max_points,
                    "status": "passed" if t.passed else "failed",
                    "output": output,
                }
            )
        return {
            "score": self.score,
            "execution_time": round(self.seconds, 3),
            "output": self.error or f"{_num(self.score)} of {_num(self.max_score)} points",
            "tests": tests,
            "leaderboard": [
                {"name": "Score", "value": self.score, "order": "desc"},
                {"name": "Tasks passed", "value": sum(1 for t in self.tasks if t.passed), "order": "desc"},
            ]
            + (
                [{"name": "Latency (ms)", "value": round(self.latency_ms, 6), "order": "asc"}]
                if self.latency_ms is not None
                else []
            ),
        }


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def grade(assignment: Assignment, submission: str | Path) -> GradeResult:
    """Grade one submission; never raises for a bad submission (its verdict says what was wrong)."""
    path = Path(submission)
    started = time.monotonic()
    kind = _kind_of(path)
    result = GradeResult(str(submission), kind, [])
    try:
        if not path.is_file():
            raise _Refused(f"{path}: no such file")
        if kind == "trace":
            trace: Any = path.read_text(encoding="utf-8")
        else:
            trace = _run_in_child(assignment, path)
        _judge(assignment, trace, result)
    except _Refused as exc:
        result.error = str(exc)
        result.tasks = [_failed(t, str(exc)) for t in assignment.tasks]
    except MlcLabError as exc:
        result.error = f"the schedule could not be replayed on the program: {exc}"
        result.tasks = [_failed(t, result.error) for t in assignment.tasks]
    except Exception as exc:  # noqa: BLE001  (a fault of the grader itself must not stop the other submissions)
        result.error = (
            f"the grader failed on this submission ({type(exc).__name__}: {exc}); "
            "it is not graded: tell the course staff"
        )
        result.tasks = [_failed(t, result.error) for t in assignment.tasks]
    result.seconds = time.monotonic() - started
    return result


class _Refused(Exception):
    """A submission that cannot be graded, with the sentence that says why."""


def _failed(task, message: str) -> TaskResult:
    return TaskResult(task.name, task.title, 0.0, task.points, False, [message])


def _kind_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        return "notebook"
    if path.suffix in (".json", ".jsonl"):
        return "trace"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "trace"  # _judge says what is wrong with it
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return "schedule" if "def schedule" in text else "trace"
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    # The course's hand-in is apply_trace(sch) (TVM's printed trace): a trace, parsed and never run.
    return "schedule" if "schedule" in names and "apply_trace" not in names else "trace"


_PROGRAMS: dict = {}


def _program(assignment: Assignment) -> Any:
    from mlc_lab.tvm import program

    key = (str(assignment.program), assignment.func, assignment.program.stat().st_mtime)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = program.load(str(assignment.program), assignment.func)
    return _PROGRAMS[key]


def _judge(assignment: Assignment, trace: Any, result: GradeResult) -> None:
    from mlc_lab.core.checks import check_session
    from mlc_lab.core.session import Session
    from mlc_lab.errors import TraceParseError

    try:
        session = Session.from_trace(_program(assignment), trace, assignment.func)
    except TraceParseError as exc:
        hint = ""
        if isinstance(trace, str) and "def apply_trace" in trace and "not a " in str(exc):
            hint = (
                " (a trace holds schedule calls only; a file with other Python hands in "
                "`def schedule(sch):` instead, which is run in a sandbox)"
            )
        raise _Refused(f"the trace is refused: {exc}{hint}") from None
    names = sorted({c for t in assignment.tasks for c in t.checks})
    report = check_session(session, names, target=assignment.target)
    by_name = {c.name: c for c in report.checks}
    result.hazards = [h.message for h in report.hazards]
    result.trace = session.submission()
    timing_problem = _time(assignment, session, result) if assignment.timed else None
    wrong = _numeric(assignment, session, result) if assignment.numeric else None
    for task in assignment.tasks:
        checks = [by_name[n] for n in task.checks]
        messages = [c.message for c in checks if not c.ok]
        if task.max_latency_ms is not None:
            if timing_problem:
                messages.append(timing_problem)
            elif result.latency_ms > task.max_latency_ms:
                messages.append(
                    f"the program takes {result.latency_ms:.4g} ms; this task asks for at most "
                    f"{task.max_latency_ms:g} ms"
                )
        passed = not messages
        if assignment.hazards_fail and report.hazards:
            passed = False
            messages += [f"{h.kind.replace('_', ' ')}: {h.message}" for h in report.hazards]
        if wrong:
            passed = False
            messages.append(wrong)
        kept = [c.message for c in checks] + (
            [f"the program takes {result.latency_ms:.4g} ms (at most {task.max_latency_ms:g} ms asked)"]
            if task.max_latency_ms is not None and passed
            else []
        )
        result.tasks.append(
            TaskResult(
                task.name,
                task.title,
                task.points if passed else 0.0,
                task.points,
                passed,
                messages if not passed else kept,
            )
        )


def _numeric(assignment: Assignment, session: Any, result: GradeResult) -> str | None:
    """Run the schedule at the assignment's smaller size (a GPU schedule, on the CPU) and compare it
    with the unscheduled program; the sentence that fails every task when it is wrong, or None."""
    from mlc_lab.core.numeric_gpu import numeric_check

    spec = assignment.numeric or {}
    r = numeric_check(session, sizes=spec["sizes"], rtol=spec["rtol"], atol=spec["atol"], timeout_s=spec["timeout_s"])
    result.numeric = {"ok": r.ok, "verdict": r.verdict, "message": r.message}
    return None if r.ok else f"wrong result at a smaller size: {r.message}"


def _time(assignment: Assignment, session: Any, result: GradeResult) -> str | None:
    """Time the scheduled program (checked against the original on random inputs) in the worker;
    the sentence that says why a threshold cannot be judged, or None."""
    from mlc_lab.core.checks import Target

    target = "cuda" if Target.of(assignment.target).gpu else "cpu"
    m = session.measure(target, repeats=assignment.repeats, raise_errors=False, roofline=False)
    if m.error:
        return f"the program could not be timed: {m.error.splitlines()[0]}"
    result.correct = bool(m.correct)
    if not m.correct:
        return (
            f"the program computes a wrong result (max error {m.max_abs_error:.3g} against the original "
            "program on random inputs)"
        )
    result.latency_ms = m.latency_s * 1e3
    return None


def _run_in_child(assignment: Assignment, path: Path) -> list:
    """Run a schedule file or notebook in a child process with limits; its schedule as a JSON trace."""
    memory = assignment.memory_mb * 1024 * 1024
    cpu = max(1, int(assignment.time_s))

    def limits() -> None:  # in the child, before it starts Python
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    with tempfile.TemporaryDirectory(prefix="mlc_lab_grade_") as work:
        out = os.path.join(work, "result.json")
        local = os.path.join(work, path.name)
        shutil.copyfile(path, local)
        cmd = [sys.executable, "-m", "mlc_lab.tvm.grade_child", str(assignment.program), local, out]
        if assignment.func:
            cmd.append(assignment.func)
        cmd = _without_network() + cmd
        env = {
            **os.environ,
            "PYTHONPATH": _package_root() + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "TVM_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        }
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limits,
            start_new_session=True,
            env=env,
        )
        try:
            _stdout, stderr = proc.communicate(timeout=assignment.time_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise _Refused(
                f"the submission did not finish within the time limit of {_num(assignment.time_s)} s (an endless loop?)"
            ) from None
        finally:
            _kill(proc)
        if not os.path.exists(out):
            if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL) or "SIGXCPU" in (stderr or ""):
                raise _Refused(f"the submission used more than {cpu} s of CPU time")
            if "MemoryError" in (stderr or "") or "std::bad_alloc" in (stderr or ""):
                raise _Refused(f"the submission needed more than the memory limit of {assignment.memory_mb} MB")
            tail = (stderr or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            raise _Refused(f"the submission's process died: {tail[0][:300]}")
        with open(out, encoding="utf-8") as fh:
            data = json.load(fh)
    if "error" in data:
        where = f"line {data['line']}: " if data.get("line") else ""
        name = path.name
        if data["error"] == "memory":
            raise _Refused(f"{name}: {data['message']} (limit {assignment.memory_mb} MB)")
        raise _Refused(f"{name}: {where}{data['message']}")
    return data["trace"]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


_NETLESS: list | None = None


def _without_network() -> list:
    """``unshare -rn`` (a new user and network namespace: no network) where the OS allows it."""
    global _NETLESS
    if _NETLESS is None:
        _NETLESS = []
        exe = shutil.which("unshare")
        if exe:
            try:
                ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                _NETLESS = [exe, "-rn"]
    return list(_NETLESS)


def _package_root() -> str:
    import mlc_lab

    return str(Path(mlc_lab.__file__).resolve().parents[1])
