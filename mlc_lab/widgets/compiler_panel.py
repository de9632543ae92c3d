"""The explorer's Compiler panel, Python side: what one request for a step's lowering returns.

The panel (js/explorer/compiler.ts) asks for a step and a target; `Session.lower` compiles in the
worker process and caches per step, so asking again (undo, goto, switching views) is free.
"""

from __future__ import annotations

from typing import Any

LOWER_TARGETS = ("cpu", "cuda")


def lower_payload(session: Any, step: Any, target: str) -> dict:
    """The Lowering of `step` for `target` as the panel draws it: passes with their scripts, the
    generated code, loop facts (with the assembly lines of each loop) and the verdict."""
    low = session.lower(step=step, target=target)
    data = low.to_json(texts=True)
    data["step"] = step
    return data
