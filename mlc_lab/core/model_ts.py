"""Writes js/lib/model.ts, the TypeScript side of the wire contract in mlc_lab.model (run it after changing the model).

The types come from the dataclasses' and TypedDicts' annotations (mlc_lab.model.steps, .measurement);
a dataclass's defaults give ``EMPTY_<NAME>`` (its encoding with every field at its default), and the
fields whose metadata says ``hover`` (mlc_lab.model.measure.hover) give ``<NAME>_HOVER``, the
fields the page lists in its hover text. The thresholds of the quiet rule are written out as constants.

    .venv/bin/python -m mlc_lab.core.model_ts        # rewrites js/lib/model.ts
    .venv/bin/python -m mlc_lab.core.model_ts --check  # exit 1 when the file is stale

tests/unit/test_model.py fails when the file is stale.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from mlc_lab.model import checks, classroom, errors, lowering, requests, traits
from mlc_lab.model.access import payload as access_payload
from mlc_lab.model import tuning as tuning_view
from mlc_lab.model import measure as measurement_model
from mlc_lab.model import path as path_model
from mlc_lab.model import steps as model

TARGET = Path(__file__).resolve().parents[2] / "js" / "lib" / "model.ts"
# The modules whose types are written, in this order; each lists its own in ``WIRE`` (in the order they
# are written). LoopTree (a dict class) is written by hand below.
_MODULES = (
    model,
    measurement_model,
    access_payload,
    tuning_view,
    lowering,
    checks,
    classroom,
    path_model,
    errors,
    traits,
    requests,
)


def contract() -> dict[str, type]:
    """The types written, by name, in order."""
    out: dict[str, type] = {}
    for m in _MODULES:
        for name in getattr(m, "WIRE", ()):
            if name in out:
                raise TypeError(f"{name} is written by {out[name].__module__} and {m.__name__}: names must be unique")
            out[name] = getattr(m, name)
    return out


_LOOP_TREE = """export interface LoopTree {
  func: string | null;
  functions: FuncNode[];
}"""


def ts_type(tp: Any, names: Any = ()) -> str:
    origin, args = get_origin(tp), get_args(tp)
    if tp is type(None) or tp is None:
        return "null"
    if tp is Any:
        return "unknown"
    if tp == errors.ErrorKind:
        return "ErrorKind"
    if tp == checks.HazardKind:
        return "HazardKind"
    if tp is str:
        return "string"
    if tp is bytes:  # a Bytes trait: the page gets a DataView (an empty one, or null, before it is set)
        return "Bytes"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is dict or (origin is dict and not args):
        return "Record<string, unknown>"
    if origin is dict:
        return f"Record<string, {ts_type(args[1], names)}>"
    if isinstance(tp, type) and tp.__name__ in names:
        return tp.__name__
    if origin is Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(dict.fromkeys(ts_type(a, names) for a in args))
    if tp in (list, tuple):
        return "unknown[]"
    if origin is tuple and args and Ellipsis not in args:
        return "[" + ", ".join(ts_type(a, names) for a in args) + "]"
    if origin in (list, tuple):
        inner = ts_type(args[0], names) if args else "unknown"
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    raise TypeError(f"no TypeScript for {tp!r}")


def hints(cls: type) -> list[tuple[str, Any, bool]]:
    """(field or key, its annotation, optional?) of a contract type, in order."""
    scope = {k: v for m in _MODULES for k, v in vars(m).items()}
    found = get_type_hints(cls, scope)
    if dataclasses.is_dataclass(cls):  # and the properties its to_json sends with the fields
        computed = [
            (name, get_type_hints(getattr(cls, name).fget, scope)["return"], False)
            for name in getattr(cls, "__wire_properties__", ())
        ]
        return [(f.name, found[f.name], False) for f in dataclasses.fields(cls)] + computed
    extras = get_type_hints(cls, scope, include_extras=True)  # NotRequired[...] marks optional keys
    optional = {n for n, tp in extras.items() if get_origin(tp) is typing.NotRequired}
    if not getattr(cls, "__total__", True):  # every key of a total=False TypedDict (its own, not its bases')
        optional |= set(cls.__annotations__)
    return [(name, tp, name in optional) for name, tp in found.items()]


def _fields(cls: type, names: Any = ()) -> list[tuple[str, str, bool]]:
    return [(name, ts_type(tp, names), optional) for name, tp, optional in hints(cls)]


def _upper(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _values(cls: type) -> list[str]:
    """``EMPTY_<NAME>`` and ``<NAME>_HOVER`` of a dataclass whose fields all have defaults."""
    out = []
    flds = dataclasses.fields(cls)
    if all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING for f in flds):
        empty = cls().to_json() if hasattr(cls, "to_json") else dataclasses.asdict(cls())
        out += [
            f"/** A {cls.__name__} with every field at its default (its encoding, as Python writes it). */",
            f"export const EMPTY_{_upper(cls.__name__)}: {cls.__name__} = {json.dumps(empty)};",
            "",
        ]
    shown = [{"field": f.name, **f.metadata["hover"]} for f in flds if "hover" in f.metadata]
    if shown:
        out += [
            f"/** The {cls.__name__} fields a hover text lists (field metadata `hover`): label, unit. */",
            f"export const {_upper(cls.__name__)}_HOVER: ReadonlyArray<{{ field: keyof {cls.__name__}; "
            "label: string; unit: string }> = [",
        ]
        out += [f"  {json.dumps(h)}," for h in shown]
        out += ["];", ""]
    return out


# The record key (mlc_lab.model.requests.record_key), written out for the page: JSON with sorted keys and
# no spaces, as Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) writes it.
_RECORD_KEY = """/** JSON with sorted keys and no spaces: Python's json.dumps(sort_keys=True, separators=(",", ":")). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** The key of a recorded reply (mlc_lab.model.requests.record_key): the method, a space, its parameters. */
export const recordKey = (method: string, params: object = {}): string => `${method} ${canonicalJson(params)}`;
"""


def _request_types() -> dict[str, type]:
    """The parameter and result TypedDicts of mlc_lab.model.requests, in the table's order."""
    found: dict[str, type] = {}
    for name, value in vars(requests).items():  # nested types first, in the module's order
        if (
            isinstance(value, type)
            and value.__module__ == requests.__name__
            and hasattr(value, "__total__")
            and name not in ("NoParams",)
        ):
            if any(value is r.params or value is r.result for r in requests.REQUESTS.values()):
                continue
            found[name] = value
    for r in requests.REQUESTS.values():
        for tp in (r.params, r.result):
            if isinstance(tp, type) and tp.__module__ == requests.__name__:
                found.setdefault(tp.__name__, tp)
    return found


def _requests(names: Any) -> list[str]:
    """The table of requests: their policy (REQUESTS), and the types of their parameters and results."""
    out = [
        "/** Every request a widget answers (mlc_lab/model/requests.py): background, kept replies (0: not",
        " *  recorded), step-implied (recorded under the current step), the reply has buffers, its error kinds,",
        " *  how long the page waits for its answer (js/lib/rpc.ts). */",
        "export const REQUESTS = {",
    ]
    for name, r in requests.REQUESTS.items():
        policy = {
            "background": r.background,
            "keep": r.keep,
            "step_implied": r.step_implied,
            "buffers": r.buffers,
            "errors": list(r.errors),
            "timeout_s": r.timeout_s,
        }
        out.append(f"  {name}: {json.dumps(policy)},")
    out += [
        "} as const;",
        "export type RequestName = keyof typeof REQUESTS;",
        f"export const REQUEST = {json.dumps(requests.REQUEST)};",
        f"export const RESPONSE = {json.dumps(requests.RESPONSE)};",
        "/** The explorer page's note that it shows another step (FollowMessage; no answer). */",
        f"export const FOLLOW = {json.dumps(requests.FOLLOW)};",
        "",
        "/** The requests that ask about the current step without naming it. */",
        f"export const STEP_IMPLIED: ReadonlySet<string> = new Set({json.dumps(requests.step_implied())});",
    ]
    for interface, field, doc in (
        ("RequestParams", "params", "Each request's parameters."),
        ("RequestResults", "result", "Each request's result (the reply's JSON; its buffers travel beside it)."),
    ):
        out += ["", f"/** {doc} */", f"export interface {interface} {{"]
        out += [f"  {name}: {ts_type(getattr(r, field), names)};" for name, r in requests.REQUESTS.items()]
        out.append("}")
    out += ["", _RECORD_KEY]
    return out


def render(types: dict[str, type] | None = None) -> str:
    """The file's text, for the contract's types (``types``: name -> class, in order; tests pass a variant)."""
    types = contract() if types is None else types
    types = {**types, **{k: v for k, v in _request_types().items() if k not in types}}
    out = [
        "// Generated from mlc_lab/model/ by `python -m mlc_lab.core.model_ts`: do not edit.",
        "",
    ]
    out += [f"export const {k} = {v!r};" for k, v in measurement_model.CONSTANTS.items()]
    out += [
        "",
        "/** The one vocabulary of error kinds: what each means, whether it is transient (a saved notebook",
        " *  does not keep it) and whether it is a measurement's failure (the explorer's banner shows it). */",
        "export const ERROR_KINDS = {",
    ]
    out += [f"  {k}: {json.dumps(dataclasses.asdict(v))}," for k, v in errors.ERROR_KINDS.items()]
    out += ["} as const;", "export type ErrorKind = keyof typeof ERROR_KINDS;", ""]
    out += ["/** Every kind of GPU kernel hazard, and what the page calls it. */"]
    out += [
        f"export const HAZARD_KINDS = {json.dumps(checks.HAZARD_KINDS)} as const;",
        "export type HazardKind = keyof typeof HAZARD_KINDS;",
        "",
        "/** The thread axes bind takes, as the explorer's form offers them (mlc_lab/model/steps.py). */",
        f"export const THREAD_AXES = {json.dumps(list(model.THREAD_AXES))} as const;",
        "",
        "/** The primitives whose loops are passed positionally (mlc_lab/model/path.py: PathStep.call). */",
        f"export const PATH_VARIADIC = {json.dumps(path_model.VARIADIC)} as const;",
        "",
    ]
    out += [
        "/** A Bytes trait as the page reads it. */",
        "export type Bytes = DataView | ArrayBuffer | Uint8Array | null | undefined;",
        "",
    ]
    for name, cls in types.items():
        doc = (cls.__doc__ or "").strip().splitlines()
        if doc and not doc[0].startswith(name + "("):
            out.append(f"/** {doc[0]} */")
        if name == "LoopTree":
            out.append(_LOOP_TREE)
        elif not hints(cls):
            out.append(f"export type {name} = Record<string, never>;")
        else:
            out.append(f"export interface {name} {{")
            out += [f"  {field}{'?' if optional else ''}: {tp};" for field, tp, optional in _fields(cls, types)]
            out.append("}")
        out.append("")
        if dataclasses.is_dataclass(cls):
            out += _values(cls)
    out += _requests(types)
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.exists() and TARGET.read_text() == text:
            return 0
        print(f"{TARGET} is not what mlc_lab/model generates: run `python -m mlc_lab.core.model_ts`", file=sys.stderr)
        return 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
