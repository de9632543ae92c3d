"""What travels between the kernel and the worker process (`mlc_lab.core.worker`): one JSON object
per line, numpy arrays inside it as {"__ndarray__": dtype, "shape": [...], "b64": raw bytes}.
No TVM here: both sides import it. numpy is imported on the first array, so that importing the model
loads no numpy.
"""

from __future__ import annotations

import base64
from typing import Any


class RequestFailure(Exception):
    """Raised by a request handler in the worker: `kind` (build, run, check, gpu_check, no_gpu,
    ...) and a plain sentence travel back to the caller, which raises `MeasureError`."""

    def __init__(self, kind: str, message: str, detail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


def encode(obj: Any) -> Any:
    """``obj`` with every numpy array and scalar inside it made JSON."""
    import numpy as np

    def walk(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            arr = np.ascontiguousarray(value)
            return {
                "__ndarray__": str(arr.dtype),
                "shape": list(arr.shape),
                "b64": base64.b64encode(arr.tobytes()).decode(),
            }
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        return value

    return walk(obj)


def decode(obj: Any) -> Any:
    """``obj`` as ``encode`` wrote it, its arrays numpy arrays again."""
    import numpy as np

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if "__ndarray__" in value:
                data = base64.b64decode(value["b64"])
                return np.frombuffer(data, dtype=np.dtype(value["__ndarray__"])).reshape(value["shape"]).copy()
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(obj)
