"""Files JupyterLab opens as mlc_lab views (the labextension's documents and Launcher commands):
a course program to explore, a schedule trace, a tuning run's work directory.

The extension writes a notebook that calls these, so the work goes through the kernel; without a
kernel it shows the same files read-only. Traces are parsed by the whitelist parser, never run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mlc_lab.errors import TraceParseError, UsageError
from mlc_lab.model.tuning import JOB_FILE, RECORDS_FILE

TRACE_SUFFIXES = (".trace.json", ".trace")


def course_programs() -> dict[str, str]:
    """Course program names and titles (what the Launcher offers)."""
    from mlc_lab.tvm.course_programs import COURSE_PROGRAMS

    return {name: title for name, (title, _text) in COURSE_PROGRAMS.items()}


def course_program(name: str) -> str:
    """A course program's TVMScript text, e.g. ``mlc_lab.explore(mlc_lab.course_program("mm_relu"))``:
    any program of the course catalog (the Launcher offers a few of them)."""
    from mlc_lab.tvm.course_programs import PROGRAMS

    if name not in PROGRAMS:
        raise UsageError(f"no course program called {name!r}; there are: {', '.join(PROGRAMS)}")
    return PROGRAMS[name].text


def program_of_trace(trace_path: str | os.PathLike) -> Path:
    """The program a trace file applies to: the ``.py`` beside it with the same stem."""
    path = Path(trace_path)
    name = path.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            candidate = path.with_name(name[: -len(suffix)] + ".py")
            if candidate.is_file():
                return candidate
            raise UsageError(
                f"{path.name} needs its program: save the program as {candidate.name} in the same folder "
                f"and open the trace again (from Python: mlc_lab.open_trace({str(path)!r}, program=...))"
            )
    raise UsageError(f"{path}: not a trace file (.trace or .trace.json)")


def open_trace(trace_path: str | os.PathLike, program: Any = None) -> Any:
    """The explorer on ``program`` (default: the .py beside the trace) with the trace replayed step by step."""
    from mlc_lab.widgets.explorer import explore

    path = Path(trace_path)
    try:
        if not path.is_file():
            raise UsageError(f"{path}: no such trace file")
        text = path.read_text()
        explorer = explore(program if program is not None else str(program_of_trace(path)))
        try:
            explorer.session.replay(text)
        except TraceParseError as exc:  # its "line N" is a line of this file: say which file
            raise TraceParseError(f"{path.name}, {exc}") from None
    except (UsageError, TraceParseError) as exc:
        # A double-clicked document runs this for the user: the file is what to look at, not our call.
        exc.about_a_file = True
        raise
    return explorer


def work_dir_of(path: str | os.PathLike) -> Path:
    """A tuning run's work directory, from itself or its database_tuning_record.json."""
    p = Path(path)
    wd = p.parent if p.name == RECORDS_FILE else p
    if not (wd / RECORDS_FILE).is_file() and not (wd / JOB_FILE).is_file():
        raise UsageError(f"{p}: not a tuning work directory (no {RECORDS_FILE} in {wd})")
    return wd


def open_tuning_run(path: str | os.PathLike, session: Any = None) -> Any:
    """The tuning dashboard of the run kept in ``path`` (its work dir or its record file)."""
    from mlc_lab.widgets.tuning import dashboard

    return dashboard(str(work_dir_of(path)), session)
