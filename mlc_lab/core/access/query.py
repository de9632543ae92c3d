"""What the access analyses are asked about a step: enclosing-loop values by the analysis's loop ids,
and any failure inside an analysis as a plain AccessAnalysisError."""

from __future__ import annotations

import contextlib
from typing import Any

from mlc_lab.errors import MlcLabError


@contextlib.contextmanager
def _analysis_errors(loop: str):
    """A failure inside the analysis that it did not put in words is still an MlcLabError."""
    from mlc_lab.errors import AccessAnalysisError

    try:
        yield
    except MlcLabError:
        raise
    except MemoryError:
        raise AccessAnalysisError(f"the access analysis of loop {loop} ran out of memory; pick an inner loop") from None
    except Exception as exc:  # noqa: BLE001 - an unexpected failure: say where, keep TVM's/numpy's text
        raise AccessAnalysisError(
            f"the access analysis of loop {loop} failed on a construct it does not handle "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc


def _plain_at(state: Any, func: Any, at: dict[str, int] | None) -> dict[int, int] | None:
    """Enclosing-loop values keyed by the analysis's loop ids: each name (``i``, ``Y/i``,
    ``func:Y/i``) is looked up like the loop argument, so a qualification picks its own loop."""
    if not at:
        return None
    from mlc_lab.errors import AccessAnalysisError
    from mlc_lab.tvm import access as access_ir

    out: dict[int, int] = {}
    for name, value in at.items():
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise AccessAnalysisError(f"the value of loop {name} in 'at' must be an integer, not {value!r}") from None
        owner, node = state.loop_node(state.find_loop(str(name)))
        if not owner.same_as(func):
            raise AccessAnalysisError(f"loop {name} in 'at' belongs to another function")
        out[access_ir.loop_id(func, node)] = value
    return out
