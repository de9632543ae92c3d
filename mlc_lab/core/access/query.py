"""Any failure inside an access analysis of a Session's step as a plain AccessAnalysisError (what the
analysis is asked is ``mlc_lab.tvm.access.query``)."""

from __future__ import annotations

import contextlib

from mlc_lab.errors import MlcLabError


@contextlib.contextmanager
def analysis_errors(loop: str):
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
