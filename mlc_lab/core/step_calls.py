"""A schedule call as a Session keeps it: values drawn by sample_* (Sampled), the call's label and its
arguments as JSON."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names for the annotations only: the widgets read labels without loading TVM
    from mlc_lab.tvm import schedule


class Sampled:
    """A value drawn by ``sample_*``; pass it as a split factor. ``int(x)`` gives its current value."""

    def __init__(self, session: Any, step: int, handle: schedule.Handle, value: Any):  # the Session that drew it
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


def has_sampled(value: Any) -> bool:
    if isinstance(value, Sampled):
        return True
    if isinstance(value, (list, tuple)):
        return any(has_sampled(v) for v in value)
    if isinstance(value, dict):
        return any(has_sampled(v) for v in value.values())
    return False


def jsonable(value: Any) -> Any:
    if isinstance(value, Sampled):
        return {"sampled": jsonable(value.value)}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
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


def step_label(primitive: str, parts: Iterable[tuple[str | None, Any]]) -> str:
    """A step's label, the one writer of it: ``split(Y/j, factors=[None, 4])``, the primitive's name as
    the user gave it, then each argument (``key=value`` when named). A made step, a failed attempt
    (``MlcLabError.label``) and the explorer's banner all read this text."""
    return f"{primitive}({', '.join(_arg_text(v) if k is None else f'{k}={_arg_text(v)}' for k, v in parts)})"


def call_label(primitive: str, call: schedule.Call) -> str:
    """The label of a call bound to its primitive: the same text however the call was spelled
    (``Call.parts``)."""
    return step_label(primitive, call.parts())


def given_label(primitive: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The label of a call that does not fit its primitive (it fails): the arguments as given."""
    return step_label(primitive, [*((None, a) for a in args), *kwargs.items()])
