"""The step tree as plain data (mlc_lab/core/history.py), with no TVM and no Session.

The recorded walk of js/__tests__/fixtures/history_walk.json drives ``History`` here, the explorer's
page in js/__tests__/history_rule.test.ts and the real Session in test_history_rule.py: all three
must reach the step the walk names after each move. Random walks then hold the tree's invariants.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.core.history import History
from mlc_lab.errors import MlcLabError, ScheduleStepError

WALK = Path(__file__).resolve().parents[2] / "js" / "__tests__" / "fixtures" / "history_walk.json"


def test_the_recorded_walk_reaches_the_same_steps_as_the_page():
    walk = json.loads(WALK.read_text())["walk"]
    history = History()
    for n, move in enumerate(walk):
        op = move["op"]
        if op == "apply":
            before = history.current_id
            step = history.add("apply", move["primitive"], f"{move['primitive']}{move.get('args')}")
            assert step.parent == move["parent"] == before, f"move {n}"
        elif op == "goto":
            history.goto(move["step"])
        else:
            getattr(history, op)()
        assert history.current_id == move["current"], f"move {n}: {move}"
    assert history.visited_children == {0: 2, 2: 3}
    assert [s.children for s in history.steps] == [[1, 2], [], [3], []]


def test_history_imports_no_tvm():
    code = "import sys, mlc_lab.core.history; print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith(('tvm.', 'mlc_lab.tvm'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_moves_past_the_ends_and_to_unknown_steps_are_refused_in_words():
    history = History()
    with pytest.raises(MlcLabError, match="nothing to undo: this is the original program"):
        history.undo()
    with pytest.raises(MlcLabError, match="nothing to redo"):
        history.redo()
    history.add("apply", "split", "split(j)")
    for bad in (2, -1, "1", True, None):
        with pytest.raises(MlcLabError, match=r"there is no step .*; steps are 0\.\.1"):
            history.goto(bad)
    assert history.current_id == 1  # a refused move moves nothing


def test_a_new_step_goes_under_the_parent_it_names():
    history = History()
    a = history.add("replay", "split", "split(j)", parent=0)
    b = history.add("replay", "fuse", "fuse(i, j_0)", parent=a.id)
    history.goto(0)
    c = history.add("replay", "parallel", "parallel(i)", parent=0)
    assert (a.parent, b.parent, c.parent) == (0, 1, 0)
    assert history[0].children == [1, 3] and history.path(2) == [0, 1, 2]


def test_an_apply_child_is_found_by_its_label_and_only_an_apply():
    history = History()
    history.add("decision", "SamplePerfectTile", "split(j)")
    history.goto(0)
    history.add("apply", "split", "split(j)")
    history.goto(0)
    assert history.child_labelled("split(j)").id == 2
    assert history.child_labelled("split(i)") is None


def test_failed_attempts_hang_under_the_step_they_were_tried_from_and_the_oldest_go_first():
    history = History(max_failed=3)
    history.add("apply", "split", "split(j)")
    for n in range(5):
        history.fail(ScheduleStepError(f"no loop k{n}", primitive="fuse"), "fuse", f"fuse(k{n})")
    failed = history.failed
    assert [f.id for f in failed] == [3, 4, 5]
    assert {f.parent for f in failed} == {1} and failed[-1].summary == "no loop k4"
    assert failed[0].label == "fuse(k2)" and len(history) == 2  # the tree did not grow


# --- random walks ------------------------------------------------------------------------------

Op = tuple  # ("apply",) | ("undo",) | ("redo",) | ("goto", n) | ("fail",)
OPS = st.one_of(
    st.just(("apply",)),
    st.just(("undo",)),
    st.just(("redo",)),
    st.just(("fail",)),
    st.tuples(st.just("goto"), st.integers(0, 40)),
)


class Oracle:
    """Redo's rule written again from its words: the child of a step that was current last, else the
    newest child. It keeps every step that was ever current, in order."""

    def __init__(self) -> None:
        self.seen: list[int] = [0]

    def redo_target(self, history: History, step: int) -> int | None:
        children = history[step].children
        for sid in reversed(self.seen):
            if sid in children:
                return sid
        return children[-1] if children else None


def check_tree(history: History) -> None:
    steps = history.steps
    assert [s.id for s in steps] == list(range(len(steps)))  # ids are places: never reused
    for s in steps[1:]:
        assert s.parent is not None and s.parent < s.id and s.id in steps[s.parent].children
    for s in steps:
        assert s.children == sorted(s.children)  # in the order they were made
    cur = history.current
    if cur.parent is not None:  # the current step is where redo from its parent goes
        assert history.visited_children[cur.parent] == cur.id


def do(history: History, oracle: Oracle, op: Op, n: int) -> None:
    before = history.current_id
    if op[0] == "apply":
        made = history.add("apply", "split", f"split(#{n})")
        assert (made.id, made.parent) == (len(history) - 1, before)
        assert history.undo().id == before  # undo after apply returns to the parent
        assert history.redo().id == made.id  # and redo comes back to the step just made
    elif op[0] == "undo":
        parent = history.current.parent
        if parent is None:
            with pytest.raises(MlcLabError):
                history.undo()
            return
        assert history.undo().id == parent
        assert history.redo().id == before  # redo after undo returns to the same child
        history.undo()
    elif op[0] == "redo":
        want = oracle.redo_target(history, before)
        assert history.redo_target() == want
        if want is None:
            with pytest.raises(MlcLabError):
                history.redo()
            return
        assert history.redo().id == want and history.current.parent == before
    elif op[0] == "goto":
        goal = op[1] % len(history)
        history.goto(goal)
        path = history.path()
        assert path[0] == 0 and path[-1] == goal
        assert all(history[b].parent == a for a, b in zip(path, path[1:]))
    else:
        count = len(history.failed)
        attempt = history.fail(ScheduleStepError("refused", primitive="fuse"), "fuse", f"fuse(#{n})")
        assert attempt.parent == before and history.failed[-1] == attempt
        assert len(history.failed) == min(count + 1, history.max_failed)
        assert history.current_id == before
    oracle.seen.append(history.current_id)


@settings(max_examples=200, deadline=None)
@given(st.lists(OPS, max_size=60), st.integers(1, 6))
def test_random_walks_keep_the_tree_and_redo_rule(ops, max_failed):
    history, oracle = History(max_failed=max_failed), Oracle()
    for n, op in enumerate(ops):
        do(history, oracle, op, n)
        check_tree(history)
    assert [f.id for f in history.failed] == sorted({f.id for f in history.failed})
