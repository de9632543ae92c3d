"""A failed primitive as a ScheduleStepError: one plain sentence, TVM's rendering, the names involved.

The names come first from the user's own arguments, then from what TVM's rendering underlines.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from mlc_lab.errors import ScheduleStepError
from mlc_lab.text.messages import plain_summary


class State(Protocol):
    """What a failed step's message reads of the schedule before it (schedule.State has both)."""

    def find_loop(self, text: str, /) -> Any: ...

    def loop_tree(self) -> Any: ...


_UNDERLINE = re.compile(r"^\s*\^+\s*$")
_NAME_IN_LINE = [
    re.compile(r"for ([A-Za-z_][\w, ]*) in "),
    re.compile(r'T\.sblock\("([^"]+)"\)'),
]


def step_error(name: str, exc: Exception, mentioned: list[str], before: "State") -> ScheduleStepError:
    raw = str(exc).strip()
    detail = without_placeholders(raw)
    named = list(dict.fromkeys(mentioned))
    # The user's own arguments first, then what TVM underlined (often the block around them).
    involved = list(dict.fromkeys(named + _underlined_names(detail)))
    reduction = bool(named) and _is_reduction_loop(before, named[0])
    summary = without_placeholders(
        plain_summary(name, detail, named or involved, reduction_loop=reduction), _placeholder_names(raw)
    )
    return ScheduleStepError(summary, primitive=name, detail=detail, involved=involved)


# TVM names the statements an error is about by placeholders (``tirx.For#0``, ``s_tir.SBlock#1``), and
# its rendering prints each as a comment above the statement: ``# tirx.For#0`` then ``for j_1 in ...``.
_PLACEHOLDER = re.compile(r"(?:[a-z_]+\.)*(For|SBlock|Block)#(\d+)(?!\d)")
_COMMENT = re.compile(r"^\s*#\s*((?:[a-z_]+\.)*(?:For|SBlock|Block)#\d+)\s*$")
_FOR_LINE = re.compile(r"^\s*for ([A-Za-z_]\w*)\b")
_BLOCK_LINE = re.compile(r'T\.s?block\("([^"]+)"\)')


def _placeholder_names(text: str) -> dict[str, str]:
    """``For#0`` / ``SBlock#1`` -> the name printed on the statement under TVM's comment for it."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    for i, line in enumerate(lines):
        m = _COMMENT.match(line)
        if not m or i + 1 >= len(lines):
            continue
        key = _key(m.group(1))
        nxt = lines[i + 1]
        f, b = _FOR_LINE.match(nxt), _BLOCK_LINE.search(nxt)
        if key.startswith("For") and f:
            out[key] = f"loop {f.group(1)}"
        elif "Block" in key and b:
            out[key] = f"block {b.group(1)}"
    return out


def _key(placeholder: str) -> str:
    m = _PLACEHOLDER.search(placeholder)
    return f"{m.group(1)}#{m.group(2)}" if m else placeholder


def without_placeholders(text: str, names: dict[str, str] | None = None) -> str:
    """``text`` with TVM's placeholders replaced by the names the user sees (from TVM's own rendering
    in ``text``, or ``names``) and the placeholder comments of the rendering dropped; a placeholder
    no rendering names becomes "a loop" / "a block"."""
    names = dict(names or {})
    names.update(_placeholder_names(text))
    kept = [ln for ln in text.splitlines() if not _COMMENT.match(ln)]
    text = "\n".join(kept)

    def sub(m: re.Match) -> str:
        key = f"{m.group(1)}#{m.group(2)}"
        name = names.get(key) or ("a loop" if m.group(1) == "For" else "a block")
        glued = m.string[m.end() : m.end() + 1].isalnum()  # TVM lists them with no separator
        return name + (", " if glued else "")

    text = _PLACEHOLDER.sub(sub, text)
    # "the loop loop j_1" / "The block block Y" when TVM's sentence already said what it is
    return re.sub(r"\b(loop|block) (\1) ", r"\1 ", text, flags=re.I)


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
                if iv.get("kind") in ("reduce", "R") and re.search(
                    rf"\b{re.escape(var)}\b", str(iv.get("binding", ""))
                ):
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
