"""The distinct bytes a whole function touches, from the footprints of its outermost loops.

The roofline's byte count for a measurement: every element of every buffer in global memory that
the function reads or writes, once. The footprint analysis gives it exactly for each block nest
(the footprint of the nest's outermost loop covers all its iterations); the nests' footprints are
united per buffer, so an element two nests touch counts once. Unlike "every element of every
argument", it sees arguments only partly read (a slice, a padded border) and global intermediates
a schedule adds (`cache_write` to "global").
"""

from __future__ import annotations

import math

import numpy as np

from mlc_lab.core.access.budget import BUDGET_BYTES
from mlc_lab.core.access.footprint import footprint
from mlc_lab.core.access.program import AccessProgram, Leaf, Loop, Seq
from mlc_lab.errors import AccessAnalysisError


def outermost_loops(program: AccessProgram) -> list[Loop]:
    """The outermost loop of every block nest, in program order. Accesses outside any loop
    cannot be placed by the footprint analysis: they raise AccessAnalysisError."""
    out: list[Loop] = []

    def visit(node) -> None:
        if node is None:
            return
        if isinstance(node, Loop):
            out.append(node)
        elif isinstance(node, Seq):
            for child in node.children:
                visit(child)
        elif isinstance(node, Leaf):
            if node.accesses:
                raise AccessAnalysisError("the function accesses buffers outside any loop")
        else:
            raise AccessAnalysisError(f"unexpected node {type(node).__name__} at the top of the function")

    visit(program.root)
    return out


def function_bytes(program: AccessProgram, scopes: tuple[str, ...] = ("global",)) -> dict[str, int]:
    """Distinct bytes touched per buffer (in `scopes`) over the whole function."""
    touched: dict[str, np.ndarray] = {}
    itemsize: dict[str, int] = {}
    for loop in outermost_loops(program):
        for name, fp in footprint(program, loop.id).items():
            if fp.scope not in scopes or not fp.distinct:
                continue
            whole = touched.get(name)
            if whole is None:
                if not all(isinstance(d, int) for d in fp.shape) or math.prod(fp.shape) > BUDGET_BYTES:
                    raise AccessAnalysisError(f"buffer {name} is symbolic or too large to count element by element")
                whole = touched[name] = np.zeros(fp.shape, dtype=bool)
                itemsize[name] = fp.itemsize
            whole[fp._box_slices()] |= fp.box_touched
    return {name: int(np.count_nonzero(arr)) * itemsize[name] for name, arr in touched.items()}
