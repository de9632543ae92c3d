"""Grading one hand-in against an assignment, in this process.

A hand-in is one of the forms of ``mlc_lab.grading.handin``: a trace (parsed, never run) or a
schedule file or notebook (run only in the sandbox, its schedule back as a JSON trace). It may also be
a student's folder: each part of the assignment grades its own hand-in file there. The kernel its
schedule compiles to is the student's code too: it is built here and runs only in the sandbox, for
the timing and the numeric check alike (``mlc_lab.core.kernel_sandbox``).

The replayed schedule is judged by the named checks, the hazards and the numeric check, and
``score_tasks`` gives the points. ``grade()`` never raises for a bad hand-in: its ``status`` says how it
ended (``graded``, ``refused``, ``crash``, ``timeout``, ``grader error``) and ``error`` why.
A batch runs this in child processes (``mlc_lab.grading.batch``, each child ``mlc_lab.grading.judge``), so a crash is one row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mlc_lab.core.sandbox import SandboxUnavailable
from mlc_lab.errors import MlcLabError
from mlc_lab.grading.assignment import Assignment, Part
from mlc_lab.grading.handin import Crashed, Refused, forms, kind_of, read_handin, run_student_code
from mlc_lab.grading.report import GradeResult
from mlc_lab.grading.scoring import TaskResult, failed_task, score_tasks
from mlc_lab.model.checks import numeric_failure

STATUSES = ("graded", "refused", "crash", "timeout", "grader error")
HANDIN_SUFFIXES = (".py", ".ipynb", ".json", ".jsonl", ".txt", ".trace")


def grade(assignment: Assignment, submission: str | Path, *, unsafe_same_user: bool = False) -> GradeResult:
    """Grade one hand-in (a file, or a student's folder holding each part's file)."""
    path = Path(submission)
    started = time.monotonic()
    result = GradeResult(str(submission), "folder" if path.is_dir() else "", [], visibility=assignment.visibility)
    if path.is_dir():
        parts = [(part, _file_in(path, part)) for part in assignment.parts]
    else:
        part = assignment.part_for(path.name)
        if part is None:
            names = ", ".join(p.hand_in.file or "" for p in assignment.parts)
            result.status, result.error = "refused", f"{path.name} is none of this assignment's hand-ins ({names})"
            result.tasks = [failed_task(t, result.error) for t in assignment.tasks]
            return result
        parts = [(part, path)]
    done: list = []
    for part, file in parts:
        _grade_part(assignment, part, file, result, unsafe_same_user, done)
    _settle(result, done)
    result.seconds = time.monotonic() - started
    return result


def _file_in(folder: Path, part: Part) -> Path | str:
    """The part's hand-in file in a student's folder, or the sentence saying why there is none."""
    if part.hand_in.file:
        found = folder / part.hand_in.file
        return found if found.is_file() else f"the folder has no {part.hand_in.file}"
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in HANDIN_SUFFIXES)
    if len(files) != 1:
        listed = ", ".join(p.name for p in files[:10]) or "none"
        return f"the folder must hold one hand-in file ({forms()}); it holds {listed}"
    return files[0]


def _grade_part(
    assignment: Assignment, part: Part, path: Path | str, result: GradeResult, unsafe: bool, parts: list
) -> None:
    """Grade one part into ``result``: its tasks, and when it could not be graded, why. A folder's part
    that fails costs that part's tasks only: the row is ``graded`` when any part was, and the part's
    sentence is a note (named by its part) and its tasks' message."""
    status, error, tasks = "graded", None, []
    try:
        if isinstance(path, str):
            raise Refused(path)
        tasks = _judge(assignment, part, path, result, unsafe)
    except Refused as exc:
        status, error = "refused", str(exc)
    except Crashed as exc:
        status, error = exc.status, str(exc)
        result.overloaded = exc.overloaded
    except SandboxUnavailable as exc:
        status = "grader error"
        error = f"{exc}; a hand-in's code, and every kernel compiled from it, runs only in the sandbox"
    except MlcLabError as exc:
        status, error = "refused", f"the schedule could not be replayed on the program: {exc}"
    except Exception as exc:  # noqa: BLE001  (a fault of the grader itself must not stop the other hand-ins)
        status = "grader error"
        error = f"the grader failed on this hand-in ({type(exc).__name__}: {str(exc)[:300]}); tell the course staff"
    result.tasks.extend(tasks if error is None else [failed_task(t, error) for t in part.tasks])
    parts.append((part.name or part.title, status, error))


def _settle(result: GradeResult, parts: list) -> None:
    """The row's status and error from its parts': ``graded`` when any part was graded (a failed part's
    sentence is then a note naming it), else the first failure's status with every part's sentence."""
    failed = [p for p in parts if p[1] != "graded"]
    if not failed:
        return
    if len(failed) < len(parts):
        result.notes[:0] = [f"part {name}: {why}" for name, _st, why in failed]
    else:
        result.status = failed[0][1]
        result.error = "; ".join(str(why) for _n, _st, why in failed)


_PROGRAMS: dict = {}


def warm_up(assignment: Assignment) -> None:
    """Import what grading needs and load the assignment's program (a judging child, before its first
    hand-in); a program that does not load is said by each hand-in's row instead."""
    import mlc_lab.core.checks  # noqa: F401
    import mlc_lab.core.session  # noqa: F401

    try:
        _program(assignment)
    except Exception:  # noqa: BLE001 - each hand-in's row says it
        pass


def _program(assignment: Assignment) -> Any:
    from mlc_lab.tvm import program

    key = (str(assignment.program), assignment.func, assignment.program.stat().st_mtime_ns)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = program.load(str(assignment.program), assignment.func)
    return _PROGRAMS[key]


def _judge(assignment: Assignment, part: Part, path: Path, result: GradeResult, unsafe: bool) -> list[TaskResult]:
    from mlc_lab.core.checks import check_session
    from mlc_lab.core.session import Session
    from mlc_lab.errors import TraceParseError

    text = read_handin(path)
    kind = kind_of(path, text, part.hand_in.function)
    result.kind = kind if result.kind in ("", kind) else "folder"
    unchanged = None
    trace: Any = text
    if kind != "trace":
        ran = run_student_code(
            assignment, path, text, part.hand_in.function, unsafe_same_user=unsafe, scheduled=kind == "program"
        )
        trace, unchanged = ran.trace, ran.unchanged
    try:
        session = Session.from_trace(_program(assignment), trace, assignment.func)
    except TraceParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Refused(f"{path.name}: the trace is refused: {first[:500]}") from None
    if unchanged is None:
        unchanged = len(session.steps) <= 1  # lookups alone make no step
    names = sorted({c for t in part.tasks for c in t.checks})
    report = check_session(session, names, target=assignment.target)
    result.hazards += [h.to_json() | {"class": h.severity} for h in report.hazards]
    result.trace = session.submission()
    timing_problem = _time(assignment, session, result, unsafe) if assignment.timed else None
    wrong = _numeric(assignment, session, result, unsafe) if assignment.numeric else None
    tasks = score_tasks(
        part.tasks,
        report,
        hazards_fail=assignment.hazards_fail,
        wrong=wrong,
        latency_ms=result.latency_ms,
        timing_problem=timing_problem,
    )
    if unchanged:
        note = f"{path.name}: the schedule changes nothing: it is graded as the unscheduled program"
        result.notes.append(note)
        for t in tasks:
            t.messages.insert(0, note)
    return tasks


def kernel_sandbox(assignment: Assignment, unsafe: bool) -> Any:
    """How a hand-in's kernel is confined: the assignment's time and memory, in the sandbox."""
    from mlc_lab.core.kernel_sandbox import KernelSandbox

    return KernelSandbox(wall_s=assignment.time_s, memory_mb=assignment.memory_mb, unsafe_same_user=unsafe)


def _numeric(assignment: Assignment, session: Any, result: GradeResult, unsafe: bool) -> str | None:
    """Run the schedule at the assignment's smaller sizes (a GPU schedule, on the CPU, in the sandbox,
    within the numeric check's memory and time) and compare it with the unscheduled program; the
    sentence that fails every task when it is wrong, or None."""
    from functools import partial

    from mlc_lab.core.checks.numeric_gpu import numeric_check_sandboxed
    from mlc_lab.core.checks.numeric_sizes import numeric_check_sizes

    spec = assignment.numeric or {}
    sizes = spec["sizes"]
    kw = {k: spec[k] for k in ("rtol", "atol", "timeout_s", "memory_mb")}
    check_at = partial(numeric_check_sandboxed, sandbox=kernel_sandbox(assignment, unsafe))
    if sizes is None or isinstance(sizes, list):  # a plan of sizes
        r = numeric_check_sizes(session, sizes, check=check_at, **kw)
    else:
        r = check_at(session, sizes=sizes, **kw)
    check = r.to_check()
    if check["verdict"] == "timeout":  # stopped by the wall clock: on an overloaded machine, not a verdict
        from mlc_lab.core.processes import overloaded

        load = overloaded()
        if load:
            result.overloaded = load
            check = {**check, "ok": False, "verdict": "could_not_run"}  # type: ignore[typeddict-item]
            check["message"] = (
                f"the numbers were not checked: the kernel's run was stopped while {load.removeprefix('the ')}"
            )
    result.numeric = dict(check)
    if check["verdict"] == "could_not_run":
        said = check["message"]
        result.notes.append(
            said if said.startswith("the numbers were not checked") else f"the numbers were not checked: {said}"
        )
    return numeric_failure(check)


def _time(assignment: Assignment, session: Any, result: GradeResult, unsafe: bool) -> str | None:
    """Time the scheduled program (checked against the original on random inputs), its kernel run
    in the sandbox; the sentence that says why a threshold cannot be judged, or None."""
    m = measure_in_sandbox(assignment, session, unsafe)
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


def measure_in_sandbox(assignment: Assignment, session: Any, unsafe: bool) -> Any:
    """A hand-in's scheduled program timed and checked against its original on random inputs, its kernel
    built here and run in the sandbox under the assignment's time and memory (``kernel_sandbox.measure``):
    one way for a grade's timing, a class's and its timing again."""
    from mlc_lab.core import kernel_sandbox as ks
    from mlc_lab.core.checks import Target

    target = "cuda" if Target.of(assignment.target).gpu else "cpu"
    return ks.measure(
        session.module,
        session.original,
        session.func_name,
        target,
        assignment.repeats,
        sandbox=kernel_sandbox(assignment, unsafe),
    )


__all__ = ["STATUSES", "GradeResult", "TaskResult", "grade"]
