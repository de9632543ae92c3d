"""The step model, re-exported from the bottom layer (``mlc_lab.model.steps``) for the many users that
import it from here, plus the model types that live with the code computing them, found by name."""

from __future__ import annotations

from typing import Any

from mlc_lab.model import steps as _steps
from mlc_lab.model.steps import *  # noqa: F403 - the step model, under its old address

__all__ = list(_steps.__all__)

# The rest of the model lives with the code that computes it; found here by name, imported on first
# use (importing this module loads no numpy, TVM or worker).
_ELSEWHERE = {
    "Footprint": "mlc_lab.core.access.model",
    "LoopFootprint": "mlc_lab.core.access.model",
    "WarpAccess": "mlc_lab.core.access.model",
    "GpuStats": "mlc_lab.core.access.model",
    "Measurement": "mlc_lab.model.measurement",
    "TuneRecord": "mlc_lab.core.tune",
}


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
