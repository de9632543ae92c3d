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
from typing import Any

import numpy as np

from mlc_lab.core.access.budget import BUDGET_BYTES
from mlc_lab.core.access.footprint import footprint
from mlc_lab.model.access.program import AccessProgram, Leaf, Loop, Seq
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
            whole[fp.box_slices()] |= fp.box_touched
    return {name: int(np.count_nonzero(arr)) * itemsize[name] for name, arr in touched.items()}


def function_traffic(mod: Any, func_name: str, inputs: list[np.ndarray]) -> tuple[float, str, dict]:
    """(bytes, which count, bytes per buffer) for the roofline: the distinct bytes of the whole
    function from the footprint analysis, or the arguments' sizes where the analysis cannot say
    (symbolic shapes, accesses it cannot place). Runs in the worker, beside the timing."""
    from mlc_lab.tvm import access as access_ir
    from mlc_lab.tvm.measure.build import FOOTPRINT, compulsory_traffic

    try:
        by_buffer = function_bytes(access_ir.lower(mod[func_name]))
        if by_buffer:
            return float(sum(by_buffer.values())), FOOTPRINT, by_buffer
    except Exception:  # noqa: BLE001 - the analysis is a refinement; the compulsory count stands
        pass
    return compulsory_traffic(inputs)


def measure_request(req: dict) -> dict:
    """The worker's "measure" request: `mlc_lab.tvm.measure.build.measure_request` (build, check, time),
    its bytes counted by `function_traffic` (core's analysis, which the tvm layer may not import)."""
    from mlc_lab.tvm.measure.build import measure_request as build_and_time

    return build_and_time(req, traffic=function_traffic)
