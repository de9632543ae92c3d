"""How the explorer words what it shows: a step's history entry, a target's name, an
error's first line and detail; the names a step made and the loop tree, as plain data."""

from __future__ import annotations

import json
from typing import Any

from mlc_lab.core.history import Step
from mlc_lab.model.measure import Measurement
from mlc_lab.model.steps import LoopTree
from mlc_lab.model.steps import plain as _plain


def step_summary(step: Step) -> dict:
    """A history entry (as StepSummary.to_json) of a Session's step."""
    return {
        "id": step.id,
        "parent": step.parent,
        "kind": step.kind,
        "primitive": step.primitive,
        "label": step.label,
    }


def target_label(target: Any) -> str:
    """ "cpu", "cuda" or the target's kind, from what a Measurement records (often TVM's target JSON)."""
    text = str(target or "")
    kind = text
    if text.startswith("{"):
        try:
            kind = str(json.loads(text).get("kind", text))
        except (ValueError, AttributeError):
            kind = text
    return {"llvm": "cpu", "c": "cpu"}.get(kind, kind)


def measurement_info(m: Measurement) -> dict:
    """A Measurement in its one encoding (mlc_lab.model.measure; the page's type is generated from
    it), with the target as the page names it ("cpu", "cuda")."""
    return {**m.to_json(), "target": target_label(m.target)}


def summary_detail(exc: BaseException) -> tuple[str, str]:
    """First line of an error, and the rest (with the error's own detail) for a details box."""
    text = str(getattr(exc, "summary", None) or exc)
    first, _, rest = text.partition("\n")
    detail = getattr(exc, "detail", "") or ""
    rest = rest.strip("\n")
    return first.strip() or type(exc).__name__, "\n\n".join(p for p in (rest, detail) if p)


def first_line(exc: BaseException) -> str:
    return (str(exc).split("\n", 1)[0] or type(exc).__name__).strip()


def strip_line_prefix(text: str, line: int | None) -> str:
    prefix = f"line {line}: "
    return text[len(prefix) :] if line is not None and text.startswith(prefix) else text


def made_names(result: Any) -> Any:
    """What a step made (loops, blocks), as plain data for the page."""
    if result is None or isinstance(result, str):
        return result
    if isinstance(result, (list, tuple)):
        return [made_names(r) for r in result]
    return _plain(result)


def as_loop_tree(tree: dict) -> LoopTree:
    return tree if isinstance(tree, LoopTree) else LoopTree(tree)
