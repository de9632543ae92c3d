"""Helpers shared by the subcommands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mlc_lab.errors import UsageError


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not a file")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None


def open_session(program_path: str, func: str | None = None, trace_path: str | None = None) -> Any:
    """A Session on the program file (``-``: standard input), with the trace file replayed when one is
    given; a bad program or trace is reported naming its file (and the trace's line)."""
    from mlc_lab.core.session import Session
    from mlc_lab.errors import LoadError, TraceParseError

    text = read_text(program_path)
    try:
        session = Session(text, func=func)
    except LoadError as exc:  # said of the file: "lab.py, line 4: ..." (not "of the program text")
        message, own = str(exc), f"line {exc.line} of the program text: "
        if exc.line and message.startswith(own):
            raise LoadError(f"{program_path}, line {exc.line}: {message[len(own) :]}", line=exc.line) from None
        raise LoadError(f"{program_path}: {message}", line=exc.line) from None
    if trace_path:
        trace = read_text(trace_path)
        try:
            session.replay(trace)
        except TraceParseError as exc:
            where = f"{trace_path}, line {exc.line}" if exc.line else trace_path
            message = str(exc).split(": ", 1)[1] if exc.line else str(exc)
            raise TraceParseError(f"{where}: {message}") from None
    return session
