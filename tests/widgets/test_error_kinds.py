"""Errors as values: every error a request answers with names its kind in one vocabulary
(mlc_lab.model.errors.ERROR_KINDS), which also says which are transient and which a measurement's."""

from __future__ import annotations

import ast
from pathlib import Path

from mlc_lab.errors import DecisionError, MeasureError, MlcLabError, NameResolutionError, error_kind
from mlc_lab.model.errors import ERROR_KINDS
from mlc_lab.widgets import _base

ROOT = Path(__file__).resolve().parents[2]
_RAISERS = {
    "RequestError",
    "MeasureError",
    "NoGPUError",
    "MeasureFailure",
    "RequestFailure",
    "Measurement",
    "BadTarget",
}


def kinds_in_source() -> dict[str, list[str]]:
    """Every kind mlc_lab's code writes as a constant: ``type=``/``kind=``/``error_kind=`` of the error
    constructors, the first argument of the worker's failures, ``kind = "..."`` in an error class, and
    ``"type": "..."`` in the widgets' error dicts (those with a summary). {kind: [where]}."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "mlc_lab").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            hits: list[ast.AST] = []
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in _RAISERS:
                    hits += [k.value for k in node.keywords if k.arg in ("type", "kind", "error_kind")]
                    if name in ("MeasureFailure", "RequestFailure") and node.args:
                        hits.append(node.args[0])
            elif isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", "").endswith(("Error", "Target")) for b in node.bases
            ):
                hits += [
                    s.value
                    for s in node.body
                    if isinstance(s, ast.Assign) and any(getattr(t, "id", None) == "kind" for t in s.targets)
                ]
            elif isinstance(node, ast.Dict) and rel.startswith("mlc_lab/widgets/"):  # an error: it has a summary
                keys = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
                hits += [keys["type"]] if "type" in keys and "summary" in keys else []
            for h in hits:
                if isinstance(h, ast.Constant) and isinstance(h.value, str):
                    found.setdefault(h.value, []).append(f"{rel}:{h.lineno}")
    return found


def test_every_kind_the_code_writes_is_in_the_vocabulary():
    found = kinds_in_source()
    assert len(found) > 15  # the scan sees the constructors (it is not vacuous)
    unknown = {k: where for k, where in found.items() if k not in ERROR_KINDS}
    assert unknown == {}, "add these kinds to mlc_lab/model/errors.py ERROR_KINDS"


def test_an_exception_is_named_by_its_kind_never_by_its_class():
    assert error_kind(MeasureError("x", kind="timeout")) == "timeout"
    assert error_kind(DecisionError("x")) == "decision"
    assert error_kind(NameResolutionError("x", primitive="split")) == "unknown_name"
    assert error_kind(MlcLabError("x")) == "error"
    assert error_kind(ValueError("x")) == "internal"


def test_transient_kinds_come_from_the_vocabulary():
    transient = {k for k in ERROR_KINDS if _base._transient(k)}
    assert transient == {k for k, v in ERROR_KINDS.items() if v.transient}
    assert {
        "timeout",
        "crash",
        "busy",
        "bad_request",
        "unknown",
        "unknown_step",
        "no_kernel",
        "cancelled",
        "elsewhere",
    } == transient


def test_a_failed_request_answers_with_a_kind_of_the_vocabulary(explorer):
    c = explorer.comm
    c.request("apply", {"primitive": "sample_perfect_tile", "kwargs": {"loop": "k", "n": 2}})
    bad_tiling = c.request("set_decision", {"index": 0, "value": [3, 5]})
    assert bad_tiling["ok"] is False and bad_tiling["error"]["type"] == "decision"  # was "DecisionError"
    no_step = c.request("goto", {"step": 42})
    assert no_step["ok"] is False and no_step["error"]["type"] in ERROR_KINDS
    replay = c.request("replay", {"trace": "print('not a schedule call')"})
    assert replay["ok"] is False and replay["error"]["type"] == "trace"


def test_an_unexpected_failure_is_internal_with_its_class_in_the_detail(explorer, monkeypatch):
    def boom(*_a, **_k):
        raise KeyError("surprise")

    monkeypatch.setattr(explorer, "full_history", boom)
    reply = explorer.comm.request("history", {})
    assert reply["ok"] is False and reply["error"]["type"] == "internal"  # was "KeyError"
    assert reply["error"]["detail"].startswith("KeyError")


def test_the_page_reads_the_vocabulary_it_is_generated_from():
    model_ts = (ROOT / "js" / "lib" / "model.ts").read_text()
    assert all(f"  {k}: " in model_ts for k in ERROR_KINDS)
    measuring = (ROOT / "js" / "explorer" / "measuring.ts").read_text()  # the explorer's Measure
    assert "ERROR_KINDS[kind].measurement" in measuring
