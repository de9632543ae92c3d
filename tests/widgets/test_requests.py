"""The one table of requests (mlc_lab.model.requests): every request has a handler, every handler a request."""

from __future__ import annotations

import json
from pathlib import Path

import types
from typing import Any, Literal, TypedDict, Union, get_args, get_origin

import anywidget
import pytest
import traitlets as t

from mlc_lab.model import requests as table
from mlc_lab.model.conform import fields_of, problems
from mlc_lab.widgets import _base as base
from mlc_lab.model.errors import ERROR_KINDS
from mlc_lab.widgets._base import RpcWidget
from mlc_lab.widgets.access.view import AccessView
from mlc_lab.widgets.classroom import ClassDashboard, Leaderboard
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.widgets.tuning import TuningDashboard

ROOT = Path(__file__).resolve().parents[2]
WIDGETS = (Explorer, AccessView, TuningDashboard, Leaderboard, ClassDashboard)


def _all_widgets() -> set[type]:
    found, todo = set(), [RpcWidget]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("mlc_lab.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_request_in_the_table_has_a_handler():
    handled = {name for w in _all_widgets() for name in w.handlers}
    assert set(table.REQUESTS) <= handled, set(table.REQUESTS) - handled
    assert set(WIDGETS) <= _all_widgets()


def test_every_handler_answers_a_request_of_the_table():
    for widget in _all_widgets():
        assert set(widget.handlers) <= set(table.REQUESTS), (widget, set(widget.handlers) - set(table.REQUESTS))
        for attr in widget.handlers.values():
            assert callable(getattr(widget, attr)), (widget, attr)


def test_a_handler_for_a_request_the_table_lacks_is_refused():
    with pytest.raises(TypeError, match="does not declare"):
        type("Rogue", (RpcWidget,), {"handlers": {"no_such_request": "close"}, "__module__": __name__})
    with pytest.raises(TypeError, match="no such method"):
        type("Rogue", (RpcWidget,), {"handlers": {"refresh": "no_such_method"}, "__module__": __name__})


def test_adding_a_request_without_a_handler_fails(monkeypatch):
    monkeypatch.setitem(table.REQUESTS, "new_panel_request", table.Request(table.NoParams, table.NoResult))
    handled = {name for w in _all_widgets() for name in w.handlers}
    assert set(table.REQUESTS) - handled == {"new_panel_request"}


def test_the_table_names_only_known_error_kinds_and_its_policies_hold_together():
    for name, r in table.REQUESTS.items():
        assert set(r.errors) <= set(ERROR_KINDS), name
        assert not r.step_implied or r.keep, name
    with pytest.raises(ValueError):
        table.Request(table.NoParams, table.NoResult, errors=("no_such_kind",))  # type: ignore[arg-type]
    assert table.step_implied() == ["access_footprint", "access_gpu_stats"]
    assert {n for n, r in table.REQUESTS.items() if r.background} == {
        "measure",
        "cuda_source",
        "lower",
        "checks",
        "path",
        "access_footprint",
        "access_gpu_stats",
    }


def test_every_request_says_how_long_the_page_waits_and_a_background_one_waits_longer():
    """timeout_s is the page's wait (js/lib/rpc.ts reads it from the generated table): a request that
    builds, runs or analyses in the background waits longer than one the kernel answers from memory."""
    waits = {n: r.timeout_s for n, r in table.REQUESTS.items()}
    quick = {"apply", "history", "goto", "script_at", "replay", "set_decision", "export_trace", "clear_error"}
    slow = {"measure", "cuda_source", "lower", "access_footprint", "access_gpu_stats"}
    assert min(waits[n] for n in slow) > max(waits[n] for n in quick)
    # a Cancel is sent on the same connection as what it cancels and waits as long
    assert waits["measure_cancel"] == waits["measure"] and waits["access_cancel"] == waits["access_footprint"]
    assert waits["class_submit"] == max(waits.values())  # the class server grades before it answers
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout_s"):
            table.Request(table.NoParams, table.NoResult, timeout_s=bad)
    generated = (Path(__file__).resolve().parents[2] / "js" / "lib" / "model.ts").read_text(encoding="utf-8")
    assert f'export const FOLLOW = "{table.FOLLOW}";' in generated and '"timeout_s": 300.0' in generated


def test_the_explorer_follows_the_note_the_table_declares(explorer, session):
    """FOLLOW is declared beside the requests (model/requests.py), not by the widget: the explorer
    answers that spelling, and a request kind it does not know moves nothing."""
    assert explorer.comm.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})["ok"]
    assert session.current.id == 1
    explorer.comm.deliver({"method": "custom", "content": {"kind": table.FOLLOW, "step": 0}})
    assert session.current.id == 0
    explorer.comm.deliver({"method": "custom", "content": {"kind": "mlc-follow-not", "step": 1}})
    assert session.current.id == 0


def test_record_keys_match_the_shared_cases():
    """tests/fixtures/record_keys.json: js/__tests__/offline.test.ts runs the same cases against recordKey."""
    cases = json.loads((ROOT / "tests" / "fixtures" / "record_keys.json").read_text(encoding="utf-8"))["cases"]
    for case in cases:
        assert table.record_key(case["method"], case["params"]) == case["key"]


def test_the_explorer_answers_with_the_declared_results(explorer):
    """A reply is what its result type declares, key for key (so the generated TypeScript types hold)."""
    c = explorer.comm
    asked = [
        ("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}}),
        ("goto", {"step": 0}),
        ("history", {}),
        ("clear_error", {}),
    ]
    for name, params in asked:
        reply = c.request(name, params)
        assert reply["ok"] is True, (name, reply)
        assert problems(reply["result"], table.REQUESTS[name].result) == [], (name, reply["result"])


def test_an_error_of_a_kind_the_table_does_not_declare_fails_the_strict_wire(explorer, caplog, monkeypatch):
    caplog.set_level("WARNING", logger="mlc_lab.widgets._base")
    assert explorer.comm.request("goto", {"step": 99})["error"]["type"] == "unknown_step"  # declared
    assert "does not declare" not in caplog.text and base.wire_violations == []
    monkeypatch.setitem(table.REQUESTS, "goto", table.Request(table.StepParams, table.StepResult))
    assert explorer.comm.request("goto", {"step": 99}, req_id="r2")["ok"] is False
    assert "'goto' answered an error of kind 'unknown_step'" in caplog.text
    assert base.wire_violations == ["'goto' answered an error of undeclared kind 'unknown_step'"]
    base.wire_violations.clear()


def test_a_result_that_departs_from_its_declared_type_fails_the_strict_wire(explorer, monkeypatch):
    class Narrow(TypedDict):
        step: str  # the explorer answers an int

    monkeypatch.setitem(table.REQUESTS, "goto", table.Request(table.StepParams, Narrow))
    assert explorer.comm.request("goto", {"step": 0})["ok"] is True  # the page still gets its answer
    assert base.wire_violations == ["goto result.step: 0 is not a string"]
    base.wire_violations.clear()


# ipywidgets' and anywidget's own traits (layout, _model_name, _esm, ...): not mlc_lab's to declare.
_HOST_TRAITS = set(anywidget.AnyWidget.class_traits(sync=True))
_TRAIT_TYPES = {
    t.Unicode: str,
    t.Int: int,
    t.Float: float,
    t.Bool: bool,
    t.Bytes: bytes,
    t.List: list,
    t.Dict: dict,
}


def _is(tp: Any, kind: type) -> bool:
    """Whether a declared type is (or, a union, may only be) a value of the trait's Python type."""
    if get_origin(tp) in (Union, types.UnionType):
        return all(_is(a, kind) or a is type(None) for a in get_args(tp)) and any(_is(a, kind) for a in get_args(tp))
    if get_origin(tp) is Literal:
        return all(isinstance(a, kind) for a in get_args(tp))
    if kind is dict:
        return tp is dict or get_origin(tp) is dict or (isinstance(tp, type) and issubclass(tp, dict))
    if kind is list:
        return tp is list or get_origin(tp) is list
    return tp is kind


@pytest.mark.parametrize("widget", sorted(_all_widgets(), key=lambda w: w.__name__), ids=lambda w: w.__name__)
def test_every_synced_trait_is_declared_in_the_contract_and_every_declared_one_synced(widget):
    """mlc_lab.model.traits names each widget's traits (the page's model type is generated from it)."""
    if widget.traits_type is None:
        assert widget.__name__ in ("RpcWidget", "_Polled") or widget.__module__ == __name__, widget
        return
    synced = {n: tr for n, tr in widget.class_traits(sync=True).items() if n not in _HOST_TRAITS}
    declared = fields_of(widget.traits_type)[0]
    assert set(synced) == set(declared), set(synced) ^ set(declared)
    for name, trait in synced.items():
        kind = next((py for cls, py in _TRAIT_TYPES.items() if isinstance(trait, cls)), None)
        if kind is not None and name != "explorer":
            assert _is(declared[name], kind), (widget.__name__, name, type(trait).__name__, declared[name])


def test_a_trait_value_that_departs_from_its_declared_type_fails_the_strict_wire(explorer):
    explorer.selection = {"kind": "loop"}  # no name
    assert base.wire_violations == ["Explorer.selection.name: missing (required by Selection)"]
    base.wire_violations.clear()
    explorer.selection = {}
    assert base.wire_violations == []


def test_a_kernel_on_the_strict_wire_writes_what_departs_to_the_file_it_is_given(tmp_path):
    """The e2e suite's kernels run inside JupyterLab: they append to the file tests/e2e/conftest.py reads."""
    import os
    import subprocess
    import sys

    log = tmp_path / "wire.log"
    code = (
        "from mlc_lab.widgets.explorer import Explorer\n"
        "from tests.widgets.fakes import FakeSession\n"
        "w = Explorer(FakeSession())\n"
        "w.selection = {'kind': 'loop'}\n"
    )
    env = {**os.environ, "MLC_LAB_STRICT_WIRE": str(log), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, capture_output=True)
    assert log.read_text().splitlines() == ["Explorer.selection.name: missing (required by Selection)"]
