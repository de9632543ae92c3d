"""Whether a value is what the contract says: the runtime check behind the strict wire and the tests.

``problems(value, tp)`` walks a JSON-like value against a type of the contract (a TypedDict, a
dataclass as its encoding, a Literal, a union, ``list[...]``, ``dict[str, ...]``, the scalars) and
names each place where it differs: a missing key, a key the type does not declare, a wrong type. A
TypedDict's keys are closed here: a key sent but not declared is a drift, the kind this exists to catch.

``decode(tp, data)`` is the one strict reading of a value that crossed a process: a dataclass built field by
field (its nested dataclasses too), anything else checked as ``problems`` checks it; what departs raises
`WireError` naming the place. `WireData` gives a dataclass that reading as ``from_json`` and its encoding as
``to_json``.

The strict wire: with ``MLC_LAB_STRICT_WIRE`` set (the test suite sets it, tests/conftest.py), what
departs from its type where it crosses (a widget's reply or trait, a worker's answer, a grading child's
result) is logged and kept in `wire_violations`, and a test that leaves anything there fails. A path
instead of 1: each is also appended to that file (the e2e suite's kernels run in JupyterLab;
tests/e2e/conftest.py reads it after each test). Off, nothing more is checked than each reader's own
strictness.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import types
import typing
from functools import cache
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

__all__ = [
    "STRICT_WIRE",
    "WireData",
    "WireError",
    "check_wire",
    "decode",
    "fields_of",
    "problems",
    "wire_violation",
    "wire_violations",
]

log = logging.getLogger(__name__)
STRICT = os.environ.get("MLC_LAB_STRICT_WIRE", "")
STRICT_WIRE = STRICT not in ("", "0")
wire_violations: list[str] = []


def wire_violation(text: str) -> None:
    """Say that the wire departs from the model (logged, kept; appended to the strict wire's file)."""
    log.error("mlc_lab: the wire departs from mlc_lab.model: %s", text)
    wire_violations.append(text)
    if os.sep in STRICT:
        with open(STRICT, "a", encoding="utf-8") as f:
            f.write(text.replace("\n", " ") + "\n")


def check_wire(value: Any, tp: Any, where: str) -> bool:
    """On the strict wire, each place where ``value`` departs from ``tp`` is a `wire_violation`;
    whether it conforms (True when the strict wire is off)."""
    if not STRICT_WIRE:
        return True
    found = problems(value, tp, where)
    for text in found:
        wire_violation(text)
    return not found


class WireError(ValueError):
    """A value that is not what its type of the contract says (the message says where)."""


T = TypeVar("T")


def decode(tp: Any, data: Any, where: str = "") -> Any:
    """``data`` read strictly as ``tp``: a dataclass is built from an object whose keys it declares (its
    wire properties too, which are not stored), with every field that has no default, each value of its
    field's type (nested dataclasses built in turn, in lists, dicts and optionals); any other type is
    checked as `problems` checks it and the value returned as it is. Raises `WireError` at the first
    place that departs."""
    where = where or _name(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, data, where)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType) and _builds(tp):
        if data is None and type(None) in args:
            return None
        present = [a for a in args if a is not type(None)]
        if len(present) == 1:
            return decode(present[0], data, where)
    elif origin is list and _builds(args[0]):
        if not isinstance(data, list):
            raise WireError(f"{where}: {_short(data)} is not a list")
        return [decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(data)]
    elif origin is dict and _builds(args[1]):
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise WireError(f"{where}: {_short(data)} is not an object with text keys")
        return {k: decode(args[1], v, f"{where}.{k}") for k, v in data.items()}
    bad = problems(data, tp, where, limit=1)
    if bad:
        raise WireError(bad[0])
    return data


def _builds(tp: Any) -> bool:
    """Whether reading ``tp`` builds a dataclass somewhere (else checking it is reading it)."""
    if dataclasses.is_dataclass(tp):
        return True
    return any(_builds(a) for a in get_args(tp) if a is not Ellipsis)


def _dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise WireError(f"{where}: {_short(data)} is not a {cls.__name__}")
    hints = fields_of(cls)[0]
    stored = {f.name: f for f in dataclasses.fields(cls) if f.init}
    extra = sorted(k for k in data if k not in hints)
    if extra:
        raise WireError(f"{where}: {cls.__name__} declares no key {extra[0]!r}")
    for name, f in stored.items():
        if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise WireError(f"{where}.{name}: missing (required by {cls.__name__})")
    for name in hints.keys() - stored.keys():  # a wire property: checked, not stored
        if name in data:
            decode(hints[name], data[name], f"{where}.{name}")
    return cls(**{k: decode(hints[k], v, f"{where}.{k}") for k, v in data.items() if k in stored})


class WireData:
    """A dataclass's one encoding (``to_json``: its fields, as plain JSON) and its strict reading
    (``from_json``: `decode`)."""

    def to_json(self) -> dict:
        return cast(dict, dataclasses.asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        return cast(T, decode(cls, data))


def problems(value: Any, tp: Any, where: str = "", *, limit: int = 20) -> list[str]:
    """Where ``value`` departs from ``tp`` (empty: it conforms), at most ``limit`` places."""
    out: list[str] = []
    _walk(value, tp, where or "value", out, limit)
    return out[:limit]


@cache
def fields_of(tp: type) -> tuple[dict[str, Any], frozenset[str]]:
    """The keys of a TypedDict or the fields of a dataclass's encoding, and the required ones."""
    import sys

    scope: dict[str, Any] = {}
    for cls in getattr(tp, "__mro__", (tp,)):
        scope.update(vars(sys.modules.get(cls.__module__, object())))
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp, scope)
        found = {f.name: hints[f.name] for f in dataclasses.fields(tp)}
        for name in getattr(tp, "__wire_properties__", ()):
            found[name] = get_type_hints(getattr(tp, name).fget, scope)["return"]
        return found, frozenset(found)
    extras = get_type_hints(tp, scope, include_extras=True)
    found = {}
    required = set()
    for name, hint in extras.items():
        optional = get_origin(hint) is typing.NotRequired
        if optional:
            hint = get_args(hint)[0]
        elif get_origin(hint) is typing.Required:
            hint = get_args(hint)[0]
        found[name] = hint
        if not optional and name in tp.__required_keys__:  # type: ignore[attr-defined]  # a TypedDict here
            required.add(name)
    return found, frozenset(required)


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _walk(value: Any, tp: Any, where: str, out: list[str], limit: int) -> bool:
    if len(out) >= limit:
        return False
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return _expect(value is None, value, "null", where, out)
    if tp is bool:
        return _expect(isinstance(value, bool), value, "a boolean", where, out)
    if tp is int:
        return _expect(isinstance(value, int) and not isinstance(value, bool), value, "an integer", where, out)
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return _expect(ok, value, "a number", where, out)
    if tp is str:
        return _expect(isinstance(value, str), value, "a string", where, out)
    if tp is bytes:
        return _expect(isinstance(value, (bytes, bytearray, memoryview)), value, "bytes", where, out)
    if origin is Literal:
        return _expect(value in args, value, " or ".join(map(repr, args)), where, out)
    if origin in (Union, types.UnionType):
        for arg in args:
            trial: list[str] = []
            if _walk(value, arg, where, trial, limit):
                return True
        # None of them: say why against the closest one (X of an optional X, a dict against the dict types)
        present = [a for a in args if a is not type(None)]
        if len(present) == 1:
            return _walk(value, present[0], where, out, limit)
        closest = [
            a
            for a in args
            if isinstance(value, dict)
            and (_is_typeddict(a) or dataclasses.is_dataclass(a))
            and (fields_of(a)[0] or not value)
        ]
        if len(closest) == 1:
            return _walk(value, closest[0], where, out, limit)
        return _expect(False, value, " | ".join("null" if a is type(None) else _name(a) for a in args), where, out)
    if tp in (list, tuple) or origin in (list, tuple):
        if not _expect(isinstance(value, (list, tuple)), value, "a list", where, out):
            return False
        inner = args[0] if args and (origin is list or Ellipsis in args or len(args) == 1) else Any
        if origin is tuple and args and Ellipsis not in args:
            if len(value) != len(args):
                return _expect(False, value, f"a list of {len(args)}", where, out)
            return all([_walk(v, a, f"{where}[{i}]", out, limit) for i, (v, a) in enumerate(zip(value, args))])
        return all([_walk(v, inner, f"{where}[{i}]", out, limit) for i, v in enumerate(value)])
    if tp is dict or origin is dict:
        if not _expect(isinstance(value, dict), value, "an object", where, out):
            return False
        if not args:
            return True
        ok = all(isinstance(k, str) for k in value) or _expect(False, value, "an object with text keys", where, out)
        return all([_walk(v, args[1], f"{where}.{k}", out, limit) for k, v in value.items()]) and ok
    if _is_typeddict(tp) or dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = value.to_json() if hasattr(value, "to_json") else dataclasses.asdict(value)
        if not _expect(isinstance(value, dict), value, f"a {tp.__name__}", where, out):
            return False
        keys, required = fields_of(tp)
        ok = True
        for k in sorted(required - set(value)):
            ok = _expect(False, None, "", f"{where}.{k}", out, missing=tp.__name__)
        for k in sorted(set(value) - set(keys)):
            ok = False
            if len(out) < limit:
                out.append(f"{where}.{k}: {tp.__name__} declares no key {k!r}")
        for k, v in value.items():
            if k in keys:
                ok = _walk(v, keys[k], f"{where}.{k}", out, limit) and ok
        return ok
    raise TypeError(f"conform cannot check against {tp!r}")


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or repr(tp)


def _expect(ok: bool, value: Any, what: str, where: str, out: list[str], *, missing: str = "") -> bool:
    if not ok:
        out.append(
            f"{where}: missing (required by {missing})" if missing else f"{where}: {_short(value)} is not {what}"
        )
    return ok


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
