"""The one table of requests (mlc_lab.model.requests): every request has a handler, every handler a request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlc_lab.model import requests as table
from mlc_lab.model.errors import ERROR_KINDS
from mlc_lab.widgets._base import RpcWidget
from mlc_lab.widgets.access_view import AccessView
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
    monkeypatch.setitem(table.REQUESTS, "new_panel_request", table.Request(table.NoParams))
    handled = {name for w in _all_widgets() for name in w.handlers}
    assert set(table.REQUESTS) - handled == {"new_panel_request"}


def test_the_table_names_only_known_error_kinds_and_its_policies_hold_together():
    for name, r in table.REQUESTS.items():
        assert set(r.errors) <= set(ERROR_KINDS), name
        assert not r.step_implied or r.keep, name
    with pytest.raises(ValueError):
        table.Request(table.NoParams, errors=("no_such_kind",))  # type: ignore[arg-type]
    assert table.step_implied() == ["access_footprint", "access_gpu_stats"]
    assert {n for n, r in table.REQUESTS.items() if r.background} == {"measure", "cuda_source", "lower"}


def test_record_keys_match_the_shared_cases():
    """tests/fixtures/record_keys.json: js/__tests__/offline.test.ts runs the same cases against recordKey."""
    cases = json.loads((ROOT / "tests" / "fixtures" / "record_keys.json").read_text(encoding="utf-8"))["cases"]
    for case in cases:
        assert table.record_key(case["method"], case["params"]) == case["key"]


def _keys(td: type) -> tuple[set[str], set[str]]:
    """(every key, the required keys) of a TypedDict of the table."""
    from typing import NotRequired, get_origin, get_type_hints

    hints = get_type_hints(td, include_extras=True)
    return set(hints), {k for k, tp in hints.items() if get_origin(tp) is not NotRequired}


def test_the_explorer_answers_with_the_declared_results(explorer):
    """A reply carries the keys its result type declares (so the generated TypeScript types hold)."""
    c = explorer.comm
    asked = [
        ("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}}),
        ("undo", {}),
        ("redo", {}),
        ("goto", {"step": 0}),
        ("history", {}),
        ("select_name", {"name": "Y/i", "kind": "loop"}),
    ]
    for name, params in asked:
        reply = c.request(name, params)
        assert reply["ok"] is True, (name, reply)
        every, required = _keys(table.REQUESTS[name].result)
        assert required <= set(reply["result"]) <= every, (name, reply["result"])


def test_an_error_of_a_kind_the_table_does_not_declare_is_logged(explorer, caplog, monkeypatch):
    caplog.set_level("WARNING", logger="mlc_lab.widgets._base")
    assert explorer.comm.request("goto", {"step": 99})["error"]["type"] == "unknown_step"  # declared
    assert "does not declare" not in caplog.text
    monkeypatch.setitem(table.REQUESTS, "goto", table.Request(table.StepParams, table.StepResult))
    assert explorer.comm.request("goto", {"step": 99}, req_id="r2")["ok"] is False
    assert "'goto' answered an error of kind 'unknown_step'" in caplog.text
