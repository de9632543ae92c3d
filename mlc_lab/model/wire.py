"""What travels between the kernel and the worker process (`mlc_lab.core.worker`): one JSON object
per line, numpy arrays inside it as {"__ndarray__": dtype, "shape": [...], "b64": raw bytes}.
No TVM here: both sides import it.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


class RequestFailure(Exception):
    """Raised by a request handler in the worker: `kind` (build, run, check, gpu_check, no_gpu,
    ...) and a plain sentence travel back to the caller, which raises `MeasureError`."""

    def __init__(self, kind: str, message: str, detail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


def encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {
            "__ndarray__": str(arr.dtype),
            "shape": list(arr.shape),
            "b64": base64.b64encode(arr.tobytes()).decode(),
        }
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            data = base64.b64decode(obj["b64"])
            return np.frombuffer(data, dtype=np.dtype(obj["__ndarray__"])).reshape(obj["shape"]).copy()
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj
