"""A schedule call as a Session keeps it: values drawn by sample_* (Sampled), the call's label and its
arguments as JSON."""

from __future__ import annotations

from typing import Any

from mlc_lab.tvm import schedule as tsch


class Sampled:
    """A value drawn by ``sample_*``; pass it as a split factor. ``int(x)`` gives its current value."""

    def __init__(self, session: Any, step: int, handle: tsch.Handle, value: Any):  # the Session that drew it
        self.session = session
        self.step = step
        self.handle = handle
        self.value = value

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    def __repr__(self) -> str:
        return f"Sampled({self.value!r})"


def _has_sampled(value: Any) -> bool:
    if isinstance(value, Sampled):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_sampled(v) for v in value)
    if isinstance(value, dict):
        return any(_has_sampled(v) for v in value.values())
    return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, Sampled):
        return {"sampled": _jsonable(value.value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sampled):
        return f"~{value.value}"
    if isinstance(value, list):
        return "[" + ", ".join(_arg_text(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_arg_text(v) for v in value) + ")"
    return repr(value)


def _call_label(primitive: str, call: tsch.Call) -> str:
    """``split(Y/j, factors=[None, 4])``: the same text however the call was spelled (``Call.parts``),
    under the primitive's name as the user gave it."""
    parts = [_arg_text(v) if k is None else f"{k}={_arg_text(v)}" for k, v in call.parts()]
    return f"{primitive}({', '.join(parts)})"


def _given_label(primitive: str, args: tuple, kwargs: dict) -> str:
    """The label of a call that does not fit its primitive (it fails): the arguments as given."""
    parts = [_arg_text(a) for a in args] + [f"{k}={_arg_text(v)}" for k, v in kwargs.items()]
    return f"{primitive}({', '.join(parts)})"
