"""Converting a Jupyter notebook's code cells with ``compat.convert``, as one program where they make one.

No TVM: text work only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mlc_lab.errors import ConvertError
from mlc_lab.text.compat import MARKER, convert, parse

__all__ = ["NotebookReport", "convert_notebook"]


@dataclass
class NotebookReport:
    """What ``convert_notebook`` did: 1-based numbers of code cells (as Jupyter counts them from the top)."""

    code_cells: int = 0
    changed: list = None  # type: ignore[assignment]
    skipped: list = None  # type: ignore[assignment]  # (cell, reason)
    marked: list = None  # type: ignore[assignment]  # cells with a "could not convert" line

    def __post_init__(self) -> None:
        self.changed = list(self.changed or [])
        self.skipped = list(self.skipped or [])
        self.marked = list(self.marked or [])

    def summary(self, name: str) -> str:
        if not self.changed:
            parts = [
                f"{name}: nothing to convert: its {self.code_cells - len(self.skipped)} Python code cell(s) "
                "are valid TVM 0.27 code"
            ]
        else:
            parts = [
                f"{name}: converted {len(self.changed)} of {self.code_cells} code cell(s) "
                f"(cells {', '.join(map(str, self.changed))})"
            ]
        parts += [f"cell {cell} left as it is: {why}" for cell, why in self.skipped]
        if self.marked:
            parts.append(f"cells {', '.join(map(str, self.marked))} hold lines to fix by hand ({MARKER.strip()})")
        return "; ".join(parts)


_CELL_BOUNDARY = "# mlc_lab: cell boundary {}"


def convert_notebook(text: str) -> tuple[str, NotebookReport]:
    """Convert the code cells of a Jupyter notebook (its JSON text) for TVM 0.27.

    The cells are converted as one program, so a module built in one cell and read in another is
    followed; a cell that is not Python (``%%bash``, a syntax error) is left as it is and reported.
    Returns the notebook's text (unchanged, byte for byte, when nothing needed converting) and a report.
    """
    import json

    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConvertError(
            f"not a notebook: its JSON does not parse (line {exc.lineno}: {exc.msg})", line=exc.lineno
        ) from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise ConvertError("not a notebook: it has no list of cells")
    report = NotebookReport()
    sources: dict[int, str] = {}
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        report.code_cells += 1
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        try:
            parse(source)
        except ConvertError as exc:
            report.skipped.append((index + 1, str(exc)))
            continue
        sources[index] = source
    joined = "".join(
        f"{_CELL_BOUNDARY.format(i)}\n{src}{'' if src.endswith(chr(10)) or not src else chr(10)}"
        for i, src in sources.items()
    )
    try:
        converted = _split_cells(convert(joined), list(sources))
    except ConvertError:  # the cells do not make one program (they parse one by one): convert each alone
        converted = {i: convert(src) for i, src in sources.items()}
    for index, new in converted.items():
        old = sources[index]
        if not old.endswith("\n") and new.endswith("\n"):
            new = new[:-1]
        if new == old:
            continue
        report.changed.append(index + 1)
        if MARKER in new:
            report.marked.append(index + 1)
        cells[index]["source"] = new.splitlines(keepends=True)
    if not report.changed:
        return text, report
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", report


def _split_cells(joined: str, order: list[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    pieces = re.split(r"(?m)^# mlc_lab: cell boundary (\d+)\n", joined)
    if [int(x) for x in pieces[1::2]] != order:
        raise ConvertError("the cell boundaries did not survive conversion")
    for number, body in zip(pieces[1::2], pieces[2::2]):
        out[int(number)] = body
    if pieces[0] and order:  # an import added at the very top (import tvm_ffi) opens the first cell
        out[order[0]] = pieces[0] + out[order[0]]
    return out
