"""The contract between the Session and its views (mlc_lab.core.protocol.SessionLike), checked on
the real Session and on the fake the widget tests use: the same calls, the same answers."""

from __future__ import annotations

import inspect

import pytest

from mlc_lab.model.steps import Change, LoopTree, StepView
from mlc_lab.core.protocol import SessionLike
from mlc_lab.errors import MlcLabError, ScheduleStepError, TraceParseError
from tests.widgets.fakes import FakeSession


def _real():
    from mlc_lab.core.session import Session
    from tests.fixtures.programs import MM_RELU

    return Session(MM_RELU)


@pytest.fixture(params=["real", "fake"])
def s(request):
    return _real() if request.param == "real" else FakeSession()


def _members():
    for name, member in vars(SessionLike).items():
        if not name.startswith("_") and (callable(member) or isinstance(member, property)):
            yield name, member


def test_it_has_every_member_with_a_compatible_signature(s):
    assert isinstance(s, SessionLike)
    for name, member in _members():
        if isinstance(member, property):
            getattr(s, name)  # readable
            continue
        want = inspect.signature(member)
        have = inspect.signature(getattr(type(s), name))
        takes_any = any(p.kind is p.VAR_KEYWORD for p in have.parameters.values())
        for p in list(want.parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                assert any(q.kind is p.kind for q in have.parameters.values()), (name, p)
            else:
                assert p.name in have.parameters or takes_any, (name, p.name)


def test_a_step_is_pushed_as_a_change_with_its_view(s):
    changes: list[Change] = []
    s.on_change(changes.append)
    names = s.apply("split", loop="Y/j", factors=[None, 4])
    assert isinstance(names, list) and len(names) == 2
    (change,) = changes
    view = change.step
    assert change.kind == "apply" and isinstance(view, StepView)
    assert view.id == s.current.id == 1 and view.parent == 0 and [a.id for a in change.added] == [1]
    assert view.script == s.script == s.script_at(1) and view.script != s.script_at(0)
    assert isinstance(view.loop_tree, LoopTree) and view.loop_tree.find(names[0], "loop") is not None
    assert view.created == tuple(names) and view.changed_lines
    assert view.label == s.current.label and view.label.startswith("split(")
    assert s.step_view(0).parent is None and s.step_view(0).script == s.script_at(0)


def test_a_failed_step_changes_nothing_and_tells_no_one(s):
    changes: list[Change] = []
    s.on_change(changes.append)
    before = (s.current.id, s.script, len(s.steps))
    with pytest.raises(ScheduleStepError) as info:
        s.apply("vectorize", loop="k")
    assert info.value.summary and "k" in info.value.involved
    with pytest.raises(ScheduleStepError):
        s.apply("split", loop="i", factors=[None, 2])  # ambiguous: Y/i or C/i
    with pytest.raises(TraceParseError):
        s.replay("import os")
    assert (s.current.id, s.script, len(s.steps)) == before and changes == []


def test_failed_attempts_are_kept_under_the_step_they_were_tried_from(s):
    s.apply("split", loop="Y/j", factors=[None, 4])
    assert s.failed == []
    with pytest.raises(ScheduleStepError):
        s.apply("vectorize", loop="k")
    with pytest.raises(ScheduleStepError):
        s.apply("split", loop="i", factors=[None, 2])  # ambiguous
    s.undo()
    first, second = s.failed
    assert (first.parent, first.primitive) == (1, "vectorize")
    assert first.label.startswith("vectorize(") and "k" in first.label  # labelled as the step would be
    assert first.summary and "k" in first.involved and second.id > first.id
    assert first.to_json() == {
        "id": first.id,
        "parent": 1,
        "primitive": "vectorize",
        "label": first.label,
        "summary": first.summary,
        "detail": first.detail,
        "involved": list(first.involved),
    }
    s.apply("parallel", "Y/i")  # steps that work add none
    assert len(s.failed) == 2


def test_history_moves(s):
    s.apply("parallel", "Y/i")
    changes: list[Change] = []
    unsubscribe = s.on_change(changes.append)
    s.undo()
    s.redo()
    s.goto(0)
    assert [(c.kind, c.step.id, c.added) for c in changes] == [("undo", 0, ()), ("redo", 1, ()), ("goto", 0, ())]
    with pytest.raises(MlcLabError):
        s.undo()
    with pytest.raises(MlcLabError):
        s.goto(99)
    unsubscribe()
    s.goto(1)
    assert len(changes) == 3
    for step in s.steps:
        assert {"id", "parent", "children", "kind", "primitive", "label"} <= set(dir(step))
    assert s.steps[0].children == [1]


def test_decisions(s):
    s.apply("sample_perfect_tile", loop="k", n=2, max_innermost_factor=16)
    (d,) = s.decisions
    assert d["kind"] == "SamplePerfectTile" and d["loop"] == "k" and d["extent"] == 128
    other = next(c for c in d["choices"] if list(c) != list(d["value"]))
    s.set_decision(0, list(other))
    assert s.current.kind == "decision" and list(s.decisions[0]["value"]) == list(other)
    assert [dict(x) for x in s.step_view().decisions] == s.decisions
