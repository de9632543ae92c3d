"""The forms a hand-in takes, and the schedule each gives.

- a printed trace (``def apply_trace(sch):`` of schedule calls, or plain ``sch.…`` statements; ``.py``
  or ``.txt``) and TVM's JSON trace (``.json``, a tuning record): parsed, never run;
- a ``.py`` holding the program and a scheduling function (``schedule(sch)`` that edits or returns a
  schedule, ``manual_schedule()`` that returns one, or the assignment's ``hand_in.function``), and a
  notebook (``.ipynb``) that does the same: run only in the sandbox (``mlc_lab.core.sandbox``) by
  ``mlc_lab.tvm.grading`` (the worker's ``--child handin``), whose schedule comes back as TVM's
  JSON trace and is parsed like one;
- a ``.py`` holding the scheduled program itself (TVMScript, no scheduling function): parsed in the
  sandbox too (parsing TVMScript evaluates Python), where the path engine finds the schedule that
  turns the assignment's program into it (``mlc_lab.tvm.path``); that schedule comes back as a trace
  and is graded as one, and a program no schedule reaches is refused with the why.

A hand-in is read as bytes once: over the size limit or not UTF-8, it is refused with the byte.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from mlc_lab.errors import MlcLabError, TraceParseError
from mlc_lab.model.grading import HandinResult

MAX_HANDIN_BYTES = 4 * 1024 * 1024  # a schedule file or notebook; a trace has its own, smaller limit
MAX_RESULT_BYTES = 1 << 20
FUNCTIONS = ("schedule", "manual_schedule", "apply_trace")
_SCRIPT = re.compile(r"^\s*@\s*(?:\w+\.)*(?:ir_module|prim_func)\b", re.M)  # a TVMScript definition


class Refused(MlcLabError):
    """A hand-in that cannot be graded, with the sentence that says why (its row: ``refused``)."""


class Crashed(MlcLabError):
    """The hand-in's code died, or ran past a limit (its row: ``crash`` or ``timeout``)."""

    def __init__(self, message: str, status: str = "crash", overloaded: str | None = None):
        super().__init__(message)
        self.status = status
        self.overloaded = overloaded  # a wall-clock stop on an overloaded machine: grade it again


def forms(function: str | None = None) -> str:
    """The sentence listing the forms accepted."""
    fn = f"{function}()" if function else "schedule(sch) or manual_schedule()"
    return (
        f"a hand-in is one of: a .py file holding the program and {fn} that edits or returns the "
        "schedule; a notebook (.ipynb) that does the same; a .py file holding the scheduled program "
        "(TVMScript), graded through the schedule that reaches it; a printed trace (apply_trace(sch), "
        "or sch.… statements, in a .py or .txt); TVM's JSON trace (.json)"
    )


def read_handin(path: Path) -> str:
    """The hand-in's text: refused when missing, too large or not UTF-8 (with the byte)."""
    from mlc_lab.text.trace_limits import decode_text

    if path.is_symlink():  # it could name any file of the grader's machine
        raise Refused(f"{path.name} is a symbolic link; a hand-in is a plain file")
    if not path.is_file():
        raise Refused(f"{path.name}: no such file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Refused(f"{path.name} cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(MAX_HANDIN_BYTES + 1)
    if len(raw) > MAX_HANDIN_BYTES:
        raise Refused(f"{path.name}: the file is over the limit of {MAX_HANDIN_BYTES} bytes for a hand-in")
    try:
        return decode_text(raw, path.name)
    except TraceParseError as exc:
        raise Refused(str(exc)) from None


def kind_of(path: Path, text: str, function: str | None) -> str:
    """``"trace"``, ``"schedule"`` (a .py run in the sandbox), ``"program"`` (a .py holding the scheduled
    TVMScript and no scheduling function) or ``"notebook"``; a .py that is none of these is refused
    with the trace parser's reason and the forms."""
    from mlc_lab.tvm import trace_io

    if path.suffix == ".ipynb":
        return "notebook"
    if path.suffix in (".json", ".jsonl") or trace_io.looks_like_json(text):
        return "trace"
    names = (function,) if function else FUNCTIONS
    defined = {m.group(1) for m in re.finditer(r"^def\s+([A-Za-z_]\w*)\s*\(", text, re.M)}
    try:
        trace_io.parse_trace_text(text)
        return "trace"
    except TraceParseError as exc:
        if path.suffix == ".py" and defined & set(names) - {"apply_trace"}:
            return "schedule"
        if path.suffix == ".py" and function == "apply_trace" and "apply_trace" in defined:
            return "schedule"
        if path.suffix == ".py" and _SCRIPT.search(text):
            return "program"
        raise Refused(f"{path.name}: the trace is refused: {exc}; {forms(function)}") from None


def run_student_code(
    assignment: Any, path: Path, text: str, function: str | None, *, unsafe_same_user: bool, scheduled: bool = False
) -> HandinResult:
    """Run a schedule file or notebook in the sandbox, or (``scheduled``) parse a scheduled program
    there and find the schedule that reaches it; its schedule (``trace``: TVM's JSON, or the
    ``apply_trace`` text of the way found; ``unchanged``)."""
    from mlc_lab.core.worker import child_argv, package_root, sandboxed

    name = "handin.ipynb" if path.suffix == ".ipynb" else "handin.py"
    argv = child_argv("handin", "/input/program.py", f"/input/{name}", "-")
    argv += [assignment.func or "", "" if scheduled else function or ""]
    if scheduled:
        argv.append("--scheduled-program")
    env = {"PYTHONPATH": package_root(), "TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    out = sandboxed(
        "handin",
        argv,
        inputs={"program.py": assignment.program.read_bytes(), name: text.encode("utf-8")},
        env=env,
        unsafe_same_user=unsafe_same_user,
        wall_s=wall_clock(assignment.time_s),  # the limit is CPU time: the wall clock only stops what waits
        cpu_s=assignment.time_s,
        memory_mb=assignment.memory_mb,
        output_bytes=MAX_RESULT_BYTES,
    )
    return _outcome(out, assignment, path.name)


def _outcome(out: Any, assignment: Any, name: str) -> HandinResult:
    """The sandbox's ``Outcome`` as the child's result, or the sentence of how it ended."""
    from mlc_lab.core.worker import decode_result
    from mlc_lab.errors import MeasureError

    if out.status == "timeout":
        from mlc_lab.core.processes import overloaded

        wall = wall_clock(assignment.time_s)
        raise Crashed(f"{name} did not finish within {wall:g} s of wall-clock time", "timeout", overloaded())
    if out.status == "cpu":
        raise Crashed(f"{name} used more than {assignment.time_s:g} s of CPU time", "timeout")
    if out.status == "memory":
        raise Crashed(f"{name} needed more than the memory limit of {assignment.memory_mb} MB")
    if out.status in ("processes", "output"):
        raise Crashed(f"{name}: {out.message}")
    data = _result_json(out.result)
    if data is None:
        how = out.message or f"exit status {out.returncode}"
        raise Crashed(f"{name} ended before it gave a schedule ({how})")
    try:
        result: HandinResult = decode_result("handin", data)
    except MeasureError:
        raise Crashed(f"{name} wrote a result that is not the grader's") from None
    if result.error is not None:
        where = f"line {result.line}: " if result.line is not None else ""
        limit = f" (limit {assignment.memory_mb} MB)" if result.error == "memory" else ""
        raise Refused(f"{name}: {where}{result.message[:2000]}{limit}")
    if result.trace is None:
        raise Crashed(f"{name} wrote a result that is not the grader's")
    return result


def wall_clock(time_s: float) -> float:
    """The wall-clock limit of a hand-in's run, whose limit is ``time_s`` of CPU time."""
    return 2 * time_s + 30


def _result_json(raw: bytes) -> dict | None:
    if not raw or len(raw) > MAX_RESULT_BYTES:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
