"""Run a student's schedule file or notebook in this (child) process and write its schedule as TVM's
JSON trace: ``python -m mlc_lab.tvm.grade_child PROGRAM SUBMISSION OUT [FUNC]``.

The parent (``mlc_lab.grading``) starts this with time and memory limits, in its own process group,
without network where the OS allows; whatever the submission does happens here. It must define
``schedule(sch)`` (or ``apply_trace(sch)``); it is called on ``tvm.s_tir.Schedule`` of the program,
and what it did is written to OUT as ``{"trace": [...]}``, or ``{"error": ..., "line": ...}``.
"""

from __future__ import annotations

import json
import sys
import traceback


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


def _write(path: str, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def _line_in(tb, filename: str) -> int | None:
    line = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == filename:
            line = frame.lineno
    return line


def main(argv: list[str]) -> int:
    program, submission, out = argv[:3]
    func = argv[3] if len(argv) > 3 else None
    with open(submission, encoding="utf-8") as fh:
        text = fh.read()
    if submission.endswith(".ipynb"):
        try:
            text = _notebook_code(text)
        except (ValueError, AttributeError) as exc:
            _write(out, {"error": "not_a_notebook", "message": f"the notebook cannot be read: {exc}"})
            return 0
    from mlc_lab.errors import ConvertError
    from mlc_lab.tvm.compat import convert, looks_legacy

    try:  # the course's older spelling (sch.get_block, tvm.tir.Schedule) runs as it would have then
        if looks_legacy(text):
            text = convert(text)
    except ConvertError:
        pass  # compile() below says what is wrong with it
    try:
        code = compile(text, submission, "exec")
    except SyntaxError as exc:
        _write(out, {"error": "syntax", "line": exc.lineno, "message": f"Python syntax error: {exc.msg}"})
        return 0
    namespace = {"__name__": "submission", "__file__": submission}
    try:
        exec(code, namespace)  # noqa: S102  (the point of this process: it runs the submission, nowhere else)
    except MemoryError:
        _write(out, {"error": "memory", "message": "the submission ran out of memory"})
        return 0
    except BaseException as exc:  # noqa: BLE001
        _write(
            out,
            {
                "error": "raised",
                "line": _line_in(exc.__traceback__, submission),
                "message": f"the submission raised {type(exc).__name__}: {exc}",
            },
        )
        return 0
    fn = namespace.get("schedule") or namespace.get("apply_trace")
    if not callable(fn):
        _write(
            out,
            {"error": "no_function", "message": "the submission defines no schedule(sch) or apply_trace(sch) function"},
        )
        return 0
    import tvm
    from tvm import s_tir

    from mlc_lab.tvm.program import load
    from mlc_lab.tvm.schedule import to_plain

    mod = load(program, func)
    sch = s_tir.Schedule(mod, debug_mask="none")
    if func:
        sch.work_on(func)
    try:
        fn(sch)
    except MemoryError:
        _write(out, {"error": "memory", "message": "the schedule function ran out of memory"})
        return 0
    except BaseException as exc:  # noqa: BLE001
        message = str(exc).strip().splitlines()
        first = next((ln for ln in message if ln.strip() and not ln.startswith(("Traceback", "  "))), "")
        _write(
            out,
            {
                "error": "raised",
                "line": _line_in(exc.__traceback__, submission),
                "message": f"the schedule function raised {type(exc).__name__}: {first}"[:2000],
            },
        )
        return 0
    del tvm
    _write(out, {"trace": to_plain(sch.trace.as_json(remove_postproc=False))})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
