"""How an mlc_lab error reads in a notebook: the plain sentence first, then where in the student's own
code it happened (cells and their files, never mlc_lab's, IPython's or TVM's frames), then the detail.

IPython calls ``_render_traceback_`` on an exception that has one (``MlcLabError`` does) and shows the
returned lines instead of its own traceback. Plain Python only; IPython is looked up when present.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import TracebackType

_RED = "\x1b[31m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


def _package_dir(name: str) -> str | None:
    mod = sys.modules.get(name)
    path = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


def _hidden_dirs() -> list[str]:
    """Frames from these packages are ours or the machinery's, not the student's."""
    return [d for d in (_package_dir(n) for n in ("mlc_lab", "tvm", "tvm_ffi", "IPython", "ipykernel")) if d]


@dataclass(frozen=True)
class Frame:
    filename: str
    lineno: int
    name: str
    line: str


def user_frames(tb: TracebackType | None) -> list[Frame]:
    """The frames of a traceback that are the user's own code, outermost first."""
    hidden = _hidden_dirs()
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.abspath(code.co_filename) if not code.co_filename.startswith("<") else code.co_filename
        if not any(path.startswith(d) for d in hidden) and not code.co_filename.startswith("<frozen"):
            text = linecache.getline(code.co_filename, tb.tb_lineno, tb.tb_frame.f_globals).strip()
            out.append(Frame(code.co_filename, tb.tb_lineno, code.co_name, text))
        tb = tb.tb_next
    return out


def _shell():
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # noqa: BLE001  (an IPython that cannot say: plain file names then)
        return None


def where_label(filename: str, lineno: int) -> str:
    """``Cell In[4], line 2`` for a notebook cell, ``file.py, line 2`` for a file."""
    shell = _shell()
    named = None
    if shell is not None:
        try:
            named = shell.compile.format_code_name(filename)
        except Exception:  # noqa: BLE001
            named = None
    if named:
        return f"{named[0]} {named[1]}, line {lineno}"
    return f"{filename}, line {lineno}"


def _cells() -> list[tuple[str, str]]:
    """(label, text) of the cells run so far, newest first (IPython's ``In`` list)."""
    shell = _shell()
    if shell is None:
        return []
    inputs = shell.user_ns.get("In") or shell.user_ns.get("_ih") or []
    return [(f"Cell In[{n}]", text) for n, text in reversed(list(enumerate(inputs))) if n and isinstance(text, str)]


def text_line_in_user_code(source: str, line: int, frames: list[Frame]) -> str | None:
    """Where line ``line`` (1-based) of the text ``source`` is in the student's cell or file:
    ``Cell In[3], line 12``, when the text is written out there (a string literal); else None."""
    lines = source.splitlines()
    if not (0 < line <= len(lines)):
        return None
    places: list[tuple[str, str, bool]] = []  # (label prefix, text, is_cell)
    for f in frames:
        text = "".join(linecache.getlines(f.filename))
        if text:
            places.append((f.filename, text, False))
    places += [(label, text, True) for label, text in _cells()]
    wanted = lines[line - 1].strip()
    for name, text, is_cell in places:
        at = text.find(source) if source.strip() else -1
        if at >= 0:
            cell_line = text.count("\n", 0, at) + line
        else:
            hits = [i for i, t in enumerate(text.splitlines(), 1) if wanted and t.strip() == wanted]
            if len(hits) != 1:
                continue
            cell_line = hits[0]
        return f"{name}, line {cell_line}" if is_cell else where_label(name, cell_line)
    return None


def render(exc: BaseException) -> list[str]:
    """The lines IPython shows for an mlc_lab error."""
    text = str(exc)
    head, _, rest = text.partition("\n")
    out = [f"{_RED}{_BOLD}{type(exc).__name__}{_RESET}: {head}"]
    frames = user_frames(exc.__traceback__)
    line, source = getattr(exc, "line", None), getattr(exc, "source", None)
    if isinstance(line, int) and isinstance(source, str):
        place = text_line_in_user_code(source, line, frames)
        if place is not None:
            shown = source.splitlines()[line - 1].strip()
            out.append(f"  line {line} of the program text is {place}: {shown}")
    if getattr(exc, "about_a_file", False):
        frames = []  # the sentence names the file and its line; the code that opened it is not the student's
    for f in frames:
        out.append(
            f"  in {where_label(f.filename, f.lineno)}: {f.line}"
            if f.line
            else f"  in {where_label(f.filename, f.lineno)}"
        )
    detail = rest.strip("\n").splitlines()
    if detail and detail[0].startswith("  involved: "):  # said already when the sentence lists them
        names = detail[0][len("  involved: ") :].split(", ")
        if all(n in head for n in names):
            detail = detail[1:]
    while detail and not detail[0].strip():
        detail = detail[1:]
    if detail:
        out += [""] + detail
    return out
