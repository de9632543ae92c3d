"""The explorer's Compiler panel, Python side: what one request for a step's lowering returns.

The panel (js/lowering/compiler.ts) asks for a step and a target; `Session.lower` compiles in the
worker process and caches per step, so asking again (undo, goto, switching views) is free.

The target is text as the panel's field holds it: "cpu", "cuda", a CUDA architecture ("sm_75"), a
TVM target tag ("nvidia/geforce-rtx-3080") or a target as JSON ('{"kind": "cuda", "arch": "sm_80"}').
The request's parameters are the record key of a saved notebook's reply, so the text is sent and
recorded as typed (trimmed); a target the panel cannot use is one sentence (`bad_target`).
"""

from __future__ import annotations

import json
from typing import Any

from mlc_lab.core.protocol import Lowering
from mlc_lab.errors import MlcLabError

# What the panel's picker offers; any other architecture or tag may be typed.
COMMON_TARGETS = ("cpu", "cuda", "sm_75", "sm_80", "sm_86", "sm_90")


class BadTarget(MlcLabError):
    """A target the Compiler view cannot compile for (one sentence)."""

    kind = "bad_target"


def parse_target(text: Any) -> Any:
    """The target the panel's text names: a dict for JSON, else the trimmed text. Checks it, raising
    `BadTarget` with one sentence naming the text and what the field accepts."""
    from mlc_lab.core.lowering import target_info

    if isinstance(text, dict):
        spec: Any = text
    else:
        spec = str(text if text is not None else "").strip()
        if not spec:
            raise BadTarget(
                "the Compiler view's target is empty: give cpu, cuda, a CUDA architecture such as "
                "sm_75, a TVM target tag or a target as JSON"
            )
        if spec.startswith("{"):
            try:
                spec = json.loads(spec)
            except json.JSONDecodeError as exc:
                raise BadTarget(
                    f"the Compiler view's target {spec!r} is not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
    try:
        target_info(spec)
    except MlcLabError as exc:
        # target_info's sentence, without TVM's own words in parentheses, and naming the panel.
        text = str(exc).split(" (")[0].replace("lower()", "the Compiler view")
        raise BadTarget(text) from None
    return spec


def lower_payload(session: Lowering, step: Any, target: Any) -> dict:
    """The Lowering of `step` for `target` as the panel draws it: passes with their scripts, the
    generated code, loop facts (with the assembly lines of each loop; for CUDA, what each loop
    became), per CUDA kernel its figures (`facts_from`: ptxas, or the source alone) and the verdict."""
    spec = parse_target(target)
    low = session.lower(step=step, target=spec)
    data = low.to_json(texts=True)
    data["step"] = step
    return data
