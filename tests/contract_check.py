"""Does a JSON value (what a packer sends) have the shape its contract type in mlc_lab.model declares?

``problems(value, FootprintResult)`` lists every place where it does not: a key the type lacks, a
required key missing, a value of the wrong kind. The types are read the way the TypeScript generator
reads them (``mlc_lab.core.model_ts.hints``), so what passes here is what the page's type says.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from mlc_lab.core import model_ts


def problems(value: Any, tp: Any, where: str = "$") -> list[str]:
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is none of {args}"]
    if origin in (Union, types.UnionType):
        for a in args:
            if not problems(value, a, where):
                return []
        return [f"{where}: {value!r} matches none of {tp}"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{where}: {value!r} is not a boolean"]
    if tp in (int, float):
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and (tp is float or float(value).is_integer())
        )
        return [] if ok else [f"{where}: {value!r} is not a{'n integer' if tp is int else ' number'}"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{where}: {value!r} is not text"]
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not an object"]
        return [p for k, v in value.items() for p in (problems(v, args[1], f"{where}.{k}") if args else [])]
    if tp in (list, tuple) or origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return [f"{where}: {type(value).__name__} is not an array"]
        if origin is tuple and args and Ellipsis not in args:
            if len(value) != len(args):
                return [f"{where}: {len(value)} items, not {len(args)}"]
            return [p for i, (v, a) in enumerate(zip(value, args)) for p in problems(v, a, f"{where}[{i}]")]
        return [p for i, v in enumerate(value) for p in (problems(v, args[0], f"{where}[{i}]") if args else [])]
    if isinstance(tp, type) and (typing.is_typeddict(tp) or dataclasses.is_dataclass(tp)):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__} is not a {tp.__name__} object"]
        declared = {name: (t, optional) for name, t, optional in model_ts.hints(tp)}
        out = [f"{where}.{k}: no such key in {tp.__name__}" for k in value if k not in declared]
        for name, (t, optional) in declared.items():
            if name in value:
                out += problems(value[name], t, f"{where}.{name}")
            elif not optional:
                out.append(f"{where}: {tp.__name__} key {name} is missing")
        return out
    raise TypeError(f"no check for {tp!r}")
