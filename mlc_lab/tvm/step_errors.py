"""A failed primitive as a ScheduleStepError: one plain sentence, TVM's rendering, the names involved.

The names come first from the user's own arguments, then from what TVM's rendering underlines.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mlc_lab.errors import ScheduleStepError
from mlc_lab.tvm.messages import plain_summary

if TYPE_CHECKING:
    from mlc_lab.tvm.schedule import State

_UNDERLINE = re.compile(r"^\s*\^+\s*$")
_NAME_IN_LINE = [
    re.compile(r"for ([A-Za-z_][\w, ]*) in "),
    re.compile(r'T\.sblock\("([^"]+)"\)'),
]


def step_error(name: str, exc: Exception, mentioned: list[str], before: "State") -> ScheduleStepError:
    detail = str(exc).strip()
    named = list(dict.fromkeys(mentioned))
    # The user's own arguments first, then what TVM underlined (often the block around them).
    involved = list(dict.fromkeys(named + _underlined_names(detail)))
    reduction = bool(named) and _is_reduction_loop(before, named[0])
    summary = plain_summary(name, detail, named or involved, reduction_loop=reduction)
    return ScheduleStepError(summary, primitive=name, detail=detail, involved=involved)


def _is_reduction_loop(state: "State", name: str) -> bool:
    """Does the loop called ``name`` bind a reduction iterator of a block below it (plain loop tree)?"""
    try:
        info = state.find_loop(name)
    except Exception:  # noqa: BLE001  (not a loop, e.g. a block name: no loop to judge)
        return False
    target = info.qualified

    def find(nodes: list) -> dict | None:
        for node in nodes:
            if node.get("kind") == "loop" and (node.get("qualified") or node.get("name")) == target:
                return node
            hit = find(node.get("children", []))
            if hit is not None:
                return hit
        return None

    def reduces(node: dict, var: str) -> bool:
        if node.get("kind") == "block":
            for iv in node.get("iter_vars", []):
                if iv.get("kind") in ("reduce", "R") and re.search(rf"\b{re.escape(var)}\b", str(iv.get("binding", ""))):
                    return True
        return any(reduces(c, var) for c in node.get("children", []))

    for fn in state.loop_tree().get("functions", []):
        node = find(fn.get("children", []))
        if node is not None:
            return reduces(node, str(node.get("name")))
    return False


def _underlined_names(detail: str) -> list[str]:
    """TVM's detailed rendering underlines the statements an error is about: read their names."""
    lines = detail.splitlines()
    names: list[str] = []
    for i, line in enumerate(lines[1:], start=1):
        if not _UNDERLINE.match(line) or not line.strip():
            continue
        above = lines[i - 1]
        col = line.index("^")
        for pattern in _NAME_IN_LINE:
            m = pattern.search(above)
            if not m:
                continue
            if pattern is _NAME_IN_LINE[0]:
                targets = [t.strip() for t in m.group(1).split(",")]
                # With `for a, b in T.grid(...)` the carets sit under the one that is meant.
                hit = [t for t in targets if above.find(t, m.start(1)) <= col + len(t)]
                chosen = targets[len(hit) - 1] if hit else targets[0]
                names.append(chosen)
            else:
                names.append(m.group(1))
            break
    return list(dict.fromkeys(names))
