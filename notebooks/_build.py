"""The writer of the lecture notebooks 01-05 (outputs empty); their cells are in ``notebooks/_0N_*.py``.

    .venv/bin/python notebooks/_build.py          # rewrite notebooks/0[1-5]_*.ipynb

A cell that shows a course program prints it from the course catalog (mlc_lab/tvm/course_programs.py),
so the notebooks, the Launcher and the tests show the same text. Edit the cells there and rebuild;
tests/notebooks/test_notebooks.py checks that the committed notebooks match this file (a notebook
edited in JupyterLab would drift from it). Cell ids come
from the notebook name and position, so a rebuild gives a stable diff.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # the catalog of this checkout, however the builder is started
    sys.path.insert(0, str(HERE.parent))

#: notebook -> the module beside this file that holds its cells
PARTS = {
    "01_tensorir.ipynb": "_01_tensorir",
    "02_exercises.ipynb": "_02_exercises",
    "03_auto_opt.ipynb": "_03_auto_opt",
    "04_gpu.ipynb": "_04_gpu",
    "05_playground.ipynb": "_05_playground",
}


def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    # As ipykernel's kernelspec names itself: JupyterLab writes the running kernel's spec into the
    # notebook, and a different display name marked every lecture changed as soon as it was opened.
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for pos, (kind, src) in enumerate(cells):
        src = src.strip("\n")
        hidden = kind.endswith("!")  # "code!": a solution cell, collapsed in JupyterLab
        kind = kind.rstrip("!")
        cell = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        cell["id"] = hashlib.sha1(f"{name}:{pos}".encode()).hexdigest()[:8]
        if hidden:
            cell.metadata["jupyter"] = {"source_hidden": True}
            cell.metadata["tags"] = ["solution"]
        nb.cells.append(cell)
    return nb


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        path = HERE / name
        nbformat.write(build(name, cells), str(path))
        print("wrote", path)


def _cells(stem: str) -> list[tuple[str, str]]:
    """A part's cells, read by path: the builder is run as a script and loaded by path by the tests."""
    spec = importlib.util.spec_from_file_location(f"notebooks_{stem.lstrip('_')}", HERE / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CELLS


NOTEBOOKS: dict[str, list[tuple[str, str]]] = {name: _cells(stem) for name, stem in PARTS.items()}

if __name__ == "__main__":
    main()
