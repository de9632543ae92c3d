"""The plain-data model every view reads: one frozen ``StepView`` per step, pushed as a ``Change``.

This module imports nothing from TVM and nothing from the rest of mlc_lab's layers, so every layer
may use it (the widgets and their tests, core, and the one door to TVM). Each type has exactly one
JSON encoding (``to_json``); the TypeScript types in ``js/lib/model.ts`` are generated from the
dataclasses here (``scripts/gen_model_ts.py``; a test fails when they are stale).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

__all__ = ["Change", "StepSummary", "StepView", "changed_lines", "replace"]


@dataclass(frozen=True)
class StepSummary:
    """What the history shows of a step: enough to draw its row. Never changes once made."""

    id: int
    parent: int | None
    kind: str  # "root" | "apply" | "decision" | "replay" | "run"
    primitive: str | None
    label: str

    def to_json(self) -> dict:
        return {"id": self.id, "parent": self.parent, "kind": self.kind, "primitive": self.primitive,
                "label": self.label}


@dataclass(frozen=True)
class StepView:
    """Everything a view shows of one step, computed once when the step is first looked at.

    ``changed_lines`` are the 1-based lines of ``script`` that the step inserted or rewrote against
    its parent (indentation-only changes do not count); ``created`` the names of the loops and blocks
    the step made, as the step's primitive returned them; ``decisions`` one entry per sampling
    instruction of the step's trace; ``measurement`` the step's latest measurement, if any.
    """

    id: int
    parent: int | None
    kind: str
    primitive: str | None
    label: str
    script: str
    loop_tree: dict  # the LoopTree as JSON
    trace: str
    changed_lines: tuple[int, ...] = ()
    created: tuple[str, ...] = ()
    decisions: tuple[dict, ...] = ()
    measurement: Any = None  # mlc_lab.core.measure.Measurement

    @property
    def summary(self) -> StepSummary:
        return StepSummary(self.id, self.parent, self.kind, self.primitive, self.label)

    def to_json(self) -> dict:
        m = self.measurement
        return {
            "id": self.id, "parent": self.parent, "kind": self.kind, "primitive": self.primitive,
            "label": self.label, "script": self.script, "loop_tree": self.loop_tree, "trace": self.trace,
            "changed_lines": list(self.changed_lines), "created": list(self.created),
            "decisions": [dict(d) for d in self.decisions],
            "measurement": None if m is None else (m.to_json() if hasattr(m, "to_json") else _asdict(m)),
        }

    @cached_property
    def json_bytes(self) -> bytes:
        """``to_json`` as compact UTF-8 JSON, encoded once (a step is sent again on undo/redo/goto)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Change:
    """What a Session tells its listeners: ``kind`` of change and the step it is about.

    ``step`` is the session's current step after the change, except for ``"measure"`` where it is
    the step that was measured. ``added`` holds the steps the change created, oldest first (a
    replayed trace adds several); undo, redo, goto and measure add none.
    """

    kind: str  # "apply" | "decision" | "replay" | "run" | "undo" | "redo" | "goto" | "measure"
    step: StepView
    added: tuple[StepSummary, ...] = field(default_factory=tuple)


def changed_lines(before: str, after: str) -> list[int]:
    """1-based lines of ``after`` that are new or rewritten against ``before``.

    Lines are compared without their indentation: a reorder or compute_at re-indents whole nests,
    and only what the step really rewrote should light up.
    """
    a = [ln.strip() for ln in before.splitlines()]
    b = [ln.strip() for ln in after.splitlines()]
    # A step usually rewrites one region: match the common head and tail cheaply first.
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    out: list[int] = []
    matcher = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail], autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(head + j1 + 1, head + j2 + 1))
    return out


def _asdict(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _asdict(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_asdict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _asdict(v) for k, v in obj.items()}
    return obj
