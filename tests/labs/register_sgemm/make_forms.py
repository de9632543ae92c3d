"""Write every hand-in of this lab in the seven forms the grader takes, from its ``schedule.py``.

    .venv/bin/python tests/labs/register_sgemm/make_forms.py

``hand_ins/NAME/schedule.py`` is what a student wrote (a ``schedule(sch)``); the other forms are made
from it as a student would make them: ``apply_trace.py`` (TVM's trace as the course's function,
``s.submission()``), ``trace.txt`` (TVM's printed trace as plain ``sch.…`` statements), ``trace.json`` (TVM's JSON
trace), ``manual.py`` (the program and ``manual_schedule()``), ``lab4.ipynb`` (a notebook of both) and
``folder/`` (a student's folder holding ``lab4.py``). The schedules are the lab's own (trusted): they
run here, in this process; the grader never runs a hand-in outside its sandbox.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FORMS = ("schedule.py", "apply_trace.py", "trace.txt", "trace.json", "manual.py", "lab4.ipynb", "folder")


def _trace_of(schedule_py: Path) -> dict:
    """The trace of the student's ``schedule(sch)`` on the lab's program, as JSON and as text."""
    import tvm

    from mlc_lab.core.session import Session
    from mlc_lab.tvm import program as tprogram

    mod = tprogram.load(str(HERE / "sgemm.py"), None)
    sch = tvm.s_tir.Schedule(mod)
    space: dict = {}
    exec(compile(schedule_py.read_text(), str(schedule_py), "exec"), space)  # noqa: S102 - the lab's own
    space["schedule"](sch)
    session = Session.from_trace(mod, sch.trace)
    return {"json": session.trace_json, "text": session.trace, "submission": session.submission()}


def _manual(schedule: str) -> str:
    program = (HERE / "sgemm.py").read_text()
    body = textwrap.indent(schedule.split("def schedule(sch):\n", 1)[1], "")
    head, _, _ = schedule.partition("def schedule(sch):\n")
    constants = "\n".join(line for line in head.splitlines() if not line.startswith("#")).strip()
    return (
        f"{program}\n\n{constants}\n\n\ndef manual_schedule():\n    sch = tvm.s_tir.Schedule(sgemm)\n"
        f"{body}    return sch\n"
    )


def _notebook(schedule: str) -> str:
    def cell(kind: str, text: str) -> dict:
        lines = text.strip("\n").splitlines(keepends=True)
        out = {"cell_type": kind, "metadata": {}, "source": lines}
        if kind == "code":
            out |= {"execution_count": None, "outputs": []}
        return out

    program = (HERE / "sgemm.py").read_text().split('"""', 2)[2]
    cells = [
        cell("markdown", "# Lab 4: register-tiled SGEMM\nMy schedule, then a check that it builds."),
        cell("code", program),
        cell("code", schedule),
        cell("code", "%%time\nsch = tvm.s_tir.Schedule(sgemm)\nschedule(sch)\n!nvidia-smi"),
    ]
    doc = {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=1) + "\n"


def write(name: str) -> None:
    folder = HERE / "hand_ins" / name
    schedule = (folder / "schedule.py").read_text()
    trace = _trace_of(folder / "schedule.py")
    (folder / "apply_trace.py").write_text(trace["submission"])
    body = [line for line in trace["text"].splitlines() if line.startswith((" ", "\t"))]  # the calls, as printed
    (folder / "trace.txt").write_text(textwrap.dedent("\n".join(body)) + "\n")
    (folder / "trace.json").write_text(json.dumps(trace["json"]) + "\n")
    (folder / "manual.py").write_text(_manual(schedule))
    (folder / "lab4.ipynb").write_text(_notebook(schedule))
    (folder / "folder").mkdir(exist_ok=True)
    (folder / "folder" / "lab4.py").write_text(schedule)


if __name__ == "__main__":
    for path in sorted((HERE / "hand_ins").iterdir()):
        if (path / "schedule.py").is_file():
            write(path.name)
            print("wrote", path.name)
