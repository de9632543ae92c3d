"""Writes js/lib/model.ts, the TypeScript types of mlc_lab.model.steps (run it after changing the model).

    .venv/bin/python -m mlc_lab.core.model_ts        # rewrites js/lib/model.ts
    .venv/bin/python -m mlc_lab.core.model_ts --check  # exit 1 when the file is stale

tests/unit/test_model.py fails when the file is stale.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from mlc_lab.model import steps as model

TARGET = Path(__file__).resolve().parents[2] / "js" / "lib" / "model.ts"
# In the order they are written; LoopTree (a dict class) is written by hand below.
TYPES = ["BufferInfo", "IterVar", "LoopNode", "BlockNode", "FuncNode", "LoopTree", "Decision", "StepSummary", "FailedAttempt",
         "StepView"]
_LOOP_TREE = """export interface LoopTree {
  func: string | null;
  functions: FuncNode[];
}"""


def ts_type(tp: Any) -> str:
    origin, args = get_origin(tp), get_args(tp)
    if tp is type(None) or tp is None:
        return "null"
    if tp is Any:
        return "unknown"
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is dict or origin is dict:
        return "Record<string, unknown>"
    if isinstance(tp, type) and tp.__name__ in TYPES:
        return tp.__name__
    if origin is Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(dict.fromkeys(ts_type(a) for a in args))
    if tp in (list, tuple):
        return "unknown[]"
    if origin in (list, tuple):
        inner = ts_type(args[0]) if args else "unknown"
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    raise TypeError(f"no TypeScript for {tp!r}")


def _fields(cls: type) -> list[tuple[str, str, bool]]:
    hints = get_type_hints(cls, vars(model))
    if dataclasses.is_dataclass(cls):
        return [(f.name, ts_type(hints[f.name]), False) for f in dataclasses.fields(cls)]
    extras = get_type_hints(cls, vars(model), include_extras=True)  # NotRequired[...] marks optional keys
    optional = {n for n, tp in extras.items() if get_origin(tp) is typing.NotRequired}
    return [(name, ts_type(tp), name in optional) for name, tp in hints.items()]


def render() -> str:
    out = ["// Generated from mlc_lab/model/steps.py by `python -m mlc_lab.core.model_ts`: do not edit.", ""]
    for name in TYPES:
        cls = getattr(model, name)
        doc = (cls.__doc__ or "").strip().splitlines()
        if doc and not doc[0].startswith(name + "("):
            out.append(f"/** {doc[0]} */")
        if name == "LoopTree":
            out.append(_LOOP_TREE)
        else:
            out.append(f"export interface {name} {{")
            out += [f"  {field}{'?' if optional else ''}: {tp};" for field, tp, optional in _fields(cls)]
            out.append("}")
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        return 0 if TARGET.exists() and TARGET.read_text() == text else 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
