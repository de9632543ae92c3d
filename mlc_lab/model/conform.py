"""Whether a value is what the contract says: the runtime check behind the strict wire and the tests.

``problems(value, tp)`` walks a JSON-like value against a type of the contract (a TypedDict, a
dataclass as its encoding, a Literal, a union, ``list[...]``, ``dict[str, ...]``, the scalars) and
names each place where it differs: a missing key, a key the type does not declare, a wrong type. A
TypedDict's keys are closed here: a key sent but not declared is a drift, the kind this exists to catch.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["fields_of", "problems"]


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
