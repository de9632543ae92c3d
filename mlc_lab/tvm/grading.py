"""Grading's side under the door to TVM: the hand-in's child, which runs a student's schedule file or
notebook in this (sandboxed) process and gives its schedule as TVM's JSON trace:
``python -m mlc_lab.core.worker_main --child handin PROGRAM HANDIN OUT [FUNC [FUNCTION]]`` (`handin_child`).

The grader (``mlc_lab.grading.handin``) starts this only through ``mlc_lab.core.sandbox``; whatever the
hand-in does happens here. OUT is a file, or ``-`` for the sandbox's result descriptor (fd 3). The
hand-in defines the scheduling function FUNCTION, or else one of ``schedule(sch)`` (edits ``sch`` or
returns a schedule), ``manual_schedule()`` (returns a schedule; the file holds the program) or
``apply_trace(sch)``. The result is a ``mlc_lab.model.grading.HandinResult``: the trace (TVM's JSON),
whether it changes nothing and the function that made it, or the error, its line and message. A returned schedule is the one graded; its trace is
replayed on the assignment's program by the grader, so a program the file defines does not count.
"""

from __future__ import annotations

import json
import linecache
import os
import traceback

from mlc_lab.model.grading import HandinResult

_FUNCTIONS = ("schedule", "manual_schedule", "apply_trace")


def _notebook_code(text: str) -> str:
    """The code cells of a notebook as one script, as Jupyter runs them top to bottom; cell magics'
    cells and line magics (``%time``, ``!pip``) are left out."""
    nb = json.loads(text)
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        if src.lstrip().startswith("%%"):
            out.append("\n" * src.count("\n"))
            continue
        lines = []
        for line in src.splitlines():
            stripped = line.lstrip()
            if stripped.startswith(("%time ", "%timeit ")):
                line = line[: len(line) - len(stripped)] + stripped.split(" ", 1)[1]
            elif stripped.startswith(("%", "!")):
                line = ""
            lines.append(line)
        out.append("\n".join(lines))
    return "\n".join(out) + "\n"


def _write(path: str, result: HandinResult | dict) -> None:
    """The child's one answer, a `HandinResult` (a dict is read as one first: nothing else is written)."""
    data = result if isinstance(result, HandinResult) else HandinResult.from_json(result)
    text = json.dumps(data.to_json())
    if path == "-":
        with os.fdopen(3, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _line_in(tb, filename: str) -> int | None:
    line = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == filename:
            line = frame.lineno
    return line


def _raised(exc: BaseException, submission: str, what: str) -> HandinResult:
    if isinstance(exc, MemoryError):
        return HandinResult(error="memory", message=f"{what} ran out of memory")
    message = str(exc).strip().splitlines()
    first = next((ln for ln in message if ln.strip() and not ln.startswith(("Traceback", "  "))), "")
    return HandinResult(
        error="raised",
        line=_line_in(exc.__traceback__, submission),
        message=f"{what} raised {type(exc).__name__}: {first}"[:2000],
    )


def _source(submission: str) -> str | HandinResult:
    with open(submission, encoding="utf-8") as fh:
        text = fh.read()
    if submission.endswith(".ipynb"):
        try:
            text = _notebook_code(text)
        except (ValueError, AttributeError, TypeError) as exc:
            return HandinResult(error="not_a_notebook", message=f"the notebook cannot be read: {exc}")
    from mlc_lab.errors import ConvertError
    from mlc_lab.text.compat import convert, looks_legacy

    try:  # the course's older spelling (sch.get_block, tvm.tir.Schedule) runs as it would have then
        if looks_legacy(text):
            text = convert(text)
    except (ConvertError, SyntaxError, RecursionError):
        pass  # compile() below says what is wrong with it
    return text


def _schedule_of(fn, program: str, func: str | None):
    """Call the scheduling function: with a fresh schedule of the program when it takes one; the
    schedule it returns is the one graded, else the one it edited."""
    import inspect

    from tvm import s_tir

    from mlc_lab.tvm.program import load

    try:
        takes = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        takes = 1
    if takes == 0:
        returned = fn()
        if not isinstance(returned, s_tir.Schedule):
            raise TypeError(
                f"{fn.__name__}() must return the schedule (a tvm.s_tir.Schedule), not {type(returned).__name__}"
            )
        return returned
    sch = s_tir.Schedule(load(program, func), debug_mask="none")
    if func:
        sch.work_on(func)
    returned = fn(sch)
    return returned if isinstance(returned, s_tir.Schedule) else sch


def _scheduled_program(program: str, submission: str, out: str, func: str | None) -> int:
    """The hand-in is the scheduled program itself: parse it here (TVMScript parsing evaluates
    Python) and find the schedule that turns the assignment's program into it; give that schedule."""
    from mlc_lab.errors import MlcLabError
    from mlc_lab.tvm import program as programs
    from mlc_lab.tvm.path.way import find_way, target_function
    from mlc_lab.tvm.schedule import State

    try:
        original = programs.load(program, func)
        names = programs.prim_func_names(original)
        name = func or ("main" if "main" in names else names[0])
        target = target_function(submission, name, original)
    except MlcLabError as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _write(out, HandinResult(error="load", line=getattr(exc, "line", None), message=message[:2000]))
        return 0
    way = find_way(State.initial(original, name), target)
    if way.status == "unreached":
        said = f"no schedule of the assignment's program makes this program: {way.sentence()}"
        _write(out, HandinResult(error="unreachable", message=said[:2000]))
        return 0
    _write(out, HandinResult(trace=way.trace, unchanged=not way.steps, function="the scheduled program"))
    return 0


def handin_child(argv: list[str]) -> int:
    if "--scheduled-program" in argv:
        argv = [a for a in argv if a != "--scheduled-program"]
        return _scheduled_program(argv[0], argv[1], argv[2], (argv[3] if len(argv) > 3 else "") or None)
    program, submission, out = argv[:3]
    func = (argv[3] if len(argv) > 3 else "") or None
    wanted = (argv[4] if len(argv) > 4 else "") or None
    text = _source(submission)
    if not isinstance(text, str):
        _write(out, text)
        return 0
    if submission.endswith(".ipynb"):
        submission += ".py"  # the notebook's code as a script: no file of that name, its lines below
    # TVMScript reads a decorated function's source (inspect): give it the text that runs, not the
    # notebook's JSON or the file before conversion (an mtime of None keeps it in the cache).
    linecache.cache[submission] = (len(text), None, text.splitlines(keepends=True), submission)
    try:
        code = compile(text, submission, "exec")
    except SyntaxError as exc:
        _write(out, HandinResult(error="syntax", line=exc.lineno, message=f"Python syntax error: {exc.msg}"))
        return 0
    except (RecursionError, MemoryError, ValueError) as exc:
        _write(out, HandinResult(error="syntax", message=f"the file cannot be compiled: {type(exc).__name__}"))
        return 0
    namespace = {"__name__": "handin", "__file__": submission}  # not __main__: a lab's own main block stays off
    try:
        exec(code, namespace)  # noqa: S102  (the point of this process: it runs the hand-in, nowhere else)
    except BaseException as exc:  # noqa: BLE001
        _write(out, _raised(exc, submission, "the hand-in"))
        return 0
    names = (wanted,) if wanted else _FUNCTIONS
    name = next((n for n in names if callable(namespace.get(n))), None)
    if name is None:
        said = f"{wanted}()" if wanted else "schedule(sch), manual_schedule() or apply_trace(sch)"
        _write(out, HandinResult(error="no_function", message=f"the hand-in defines no {said} function"))
        return 0
    try:
        sch = _schedule_of(namespace[name], program, func)
    except BaseException as exc:  # noqa: BLE001
        _write(out, _raised(exc, submission, f"{name}()"))
        return 0
    from mlc_lab.tvm.schedule import to_plain

    trace = to_plain(sch.trace.as_json(remove_postproc=False))
    unchanged = not any(inst[0] not in _LOOKUPS for inst in trace[0])
    _write(out, HandinResult(trace=json.dumps(trace), unchanged=unchanged, function=name))
    return 0


# Instructions that only look things up: a trace of these alone changes nothing.
_LOOKUPS = {"GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks"}
