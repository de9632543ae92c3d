"""Redo goes to the child visited last, in the Session and in the explorer's page alike.

The page answers undo, redo and "go to step" from the steps it holds (js/explorer/view.ts) and the
Session follows it; a redo typed in a cell (``session.redo()``) must land where the page's Redo
button would. One walk over a branching history, recorded in
js/__tests__/fixtures/history_walk.json, is driven through the real Session here and through the
page in js/__tests__/history_rule.test.ts: both must reach the step the walk names after each move.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlc_lab.core.session import Session
from tests.fixtures.programs import MM_RELU

WALK = Path(__file__).resolve().parents[2] / "js" / "__tests__" / "fixtures" / "history_walk.json"


def run_walk(session: Session, walk: list[dict]) -> list[int]:
    reached = []
    for move in walk:
        op = move["op"]
        if op == "apply":
            session.apply(move["primitive"], *move.get("args", []), **move.get("kwargs", {}))
        elif op == "goto":
            session.goto(move["step"])
        else:
            getattr(session, op)()
        reached.append(session.current.id)
    return reached


def test_the_session_redoes_as_the_page_does():
    walk = json.loads(WALK.read_text())["walk"]
    session = Session(MM_RELU)
    assert run_walk(session, walk) == [m["current"] for m in walk]
    # the rule the page starts from after a reload (Explorer sends it with the whole history)
    assert session.visited_children == {0: 2, 2: 3}
