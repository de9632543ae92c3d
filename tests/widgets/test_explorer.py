"""Headless tests of the Explorer widget: a recording comm stands in for the front end.

Every request the front end can send (js/explorer/*.ts) is fed in as a custom message, and the
response and the trait updates that reach the front end are checked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlc_lab.errors import MlcLabError
from mlc_lab.widgets._base import REQUEST, RESPONSE
from mlc_lab.widgets.explorer import Explorer, explore
from tests.widgets.fakes import step_of

JS = Path(__file__).resolve().parents[2] / "js"


def test_opening_sends_the_whole_state(explorer, session):
    opened = explorer.comm.opened()
    step = step_of(opened)
    assert step["script"] == session.script
    assert opened["func"] == "mm_relu"
    assert step["id"] == 0
    assert step["parent"] is None and explorer.can_undo is False and explorer.can_redo is False
    assert opened["history"] == {
        "from": 0,
        "steps": [{"id": 0, "parent": None, "kind": "root", "primitive": None, "label": "original program"}],
    }
    assert ["step"] in explorer.comm.open_data["buffer_paths"]  # sent as a binary buffer
    assert explorer.loop_tree["functions"][0]["children"][0]["qualified"] == "Y/i"
    assert step["loop_tree"] == explorer.loop_tree
    assert opened["error"] == {} and opened["failures"] == []
    assert explorer._esm  # the bundle (or the build hint) is there


def test_apply_request_goes_through_the_session_and_updates_the_state(explorer, session):
    c = explorer.comm
    mark = len(c.sent)
    reply = c.request("apply", {"primitive": "split", "args": [], "kwargs": {"loop": "Y/j", "factors": [None, 4]}})
    assert reply["kind"] == RESPONSE and reply["id"] == "r1" and reply["ok"] is True
    assert reply["result"] == {"names": ["j_0", "j_1"], "step": 1}
    assert session.current.id == 1 and session.current.primitive == "split"
    (state,) = c.updates(mark)  # one state message for the whole click
    step = step_of(state)
    assert step["script"] == session.script
    assert step["id"] == 1
    assert step["parent"] == 0 and explorer.can_undo is True
    assert step["changed_lines"] == [len(session.script.splitlines())]
    assert step["created"] == ["j_0", "j_1"]
    assert state["selection"] == {"kind": "loop", "name": "j_0"}  # the new outer loop is selected
    assert state["history"]["from"] == 1 and [s["id"] for s in state["history"]["steps"]] == [1]  # only what changed
    assert explorer.steps[-1]["label"].startswith("split(")


@pytest.mark.parametrize(
    "request_",
    [
        ("apply", {"primitive": "split", "kwargs": {"loop": "Y/j", "factors": [None, 4]}}),
        ("apply", {"primitive": "sample_perfect_tile", "then_split": True, "kwargs": {"loop": "k", "n": 2}}),
        ("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}}),  # a failure: the error and the attempt
        ("goto", {"step": 0}),  # a move to a step the page does not hold
        ("replay", {"trace": "sch.parallel(loop=Y/i)\nsch.unroll(loop=k)"}),
    ],
)
def test_one_click_is_one_state_message(explorer, request_):
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "C/i"}})
    explorer.select("C/j")
    mark = len(c.sent)
    c.request(*request_, req_id="click")
    kinds = [m["data"].get("method") for m in c.sent[mark:]]
    assert kinds == ["update", "custom"], kinds  # one state update, then the reply


def test_goto_sends_no_history(explorer):
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    mark = len(c.sent)
    c.request("goto", {"step": 0})
    (state,) = c.updates(mark)
    assert "history" not in state and step_of(state)["id"] == 0


def test_a_page_reload_gets_the_whole_history(explorer):
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    c.request("apply", {"primitive": "unroll", "kwargs": {"loop": "C/j"}})
    assert explorer.history["from"] == 2  # the trait holds the last delta
    assert [s["id"] for s in explorer.get_state()["history"]["steps"]] == [0, 1, 2]
    reply = c.request("history")
    assert reply["result"]["from"] == 0 and [s["label"] for s in reply["result"]["steps"]][0] == "original program"


def test_state_arrives_before_the_response(explorer):
    """The front end renders on the trait update; the response only settles the request."""
    c = explorer.comm
    mark = len(c.sent)
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    kinds = [m["data"]["method"] for m in c.sent[mark:]]
    assert kinds.index("update") < kinds.index("custom")


def test_failed_apply_reports_the_error_and_changes_nothing(explorer, session):
    c = explorer.comm
    script = session.script
    reply = c.request("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}})
    assert reply["ok"] is False
    err = reply["error"]
    assert err["summary"] == "k is a reduction loop and cannot be vectorized"
    assert err["involved"] == ["k", "Y"]
    assert err["primitive"] == "vectorize" and "reduction iterator" in err["detail"]
    assert session.script == script and len(session.steps) == 1
    assert explorer.error["source"] == "apply" and explorer.error["involved"] == ["k", "Y"]
    (failure,) = explorer.failures
    assert failure["parent"] == 0 and failure["label"] == "vectorize(loop=k)" == explorer.error["label"]
    assert failure["summary"] == err["summary"]


def test_failed_attempts_are_the_sessions(comms, session):
    """The Session keeps failed attempts (Python users and records see them); the explorer shows them:
    those made before it opened, by clicks, and by cells (with the next change)."""
    from mlc_lab.errors import ScheduleStepError
    from mlc_lab.widgets.explorer import Explorer

    with pytest.raises(ScheduleStepError):
        session.apply("vectorize", loop="k")
    explorer = Explorer(session)
    assert [f["label"] for f in explorer.failures] == ["vectorize(loop=k)"]
    explorer.comm.request("apply", {"primitive": "split", "kwargs": {"loop": "i", "factors": [None, 2]}})
    assert [f.to_json() for f in session.failed] == explorer.failures and len(explorer.failures) == 2
    with pytest.raises(ScheduleStepError):
        session.apply("vectorize", loop="k")  # from a cell
    session.apply("parallel", "Y/i")
    assert len(explorer.failures) == 3 and explorer.failures[-1]["parent"] == 0
    assert "vectorize(loop=k)" in explorer.to_html()
    explorer.close()


def test_unknown_or_ambiguous_names_are_plain_errors(explorer):
    reply = explorer.comm.request("apply", {"primitive": "split", "kwargs": {"loop": "i", "factors": [None, 2]}})
    assert reply["ok"] is False
    assert "ambiguous" in reply["error"]["summary"]
    assert sorted(reply["error"]["involved"]) == ["C/i", "Y/i"]


def test_a_successful_step_clears_the_error(explorer):
    explorer.comm.request("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}})
    assert explorer.error
    explorer.comm.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    assert explorer.error == {}
    assert len(explorer.failures) == 1  # the failed attempt stays in the history


def test_sample_perfect_tile_then_split(explorer, session):
    reply = explorer.comm.request(
        "apply",
        {
            "primitive": "sample_perfect_tile",
            "then_split": True,
            "kwargs": {"loop": "k", "n": 2, "max_innermost_factor": 16},
        },
    )
    assert reply["ok"] is True
    assert [s.primitive for s in session.steps[1:]] == ["sample_perfect_tile", "split"]
    assert explorer.decisions[0]["kind"] == "SamplePerfectTile"
    assert explorer.decisions[0]["value"] == [32, 4]


def test_goto(explorer, session):
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    c.request("apply", {"primitive": "unroll", "kwargs": {"loop": "C/j"}})
    assert c.request("goto", {"step": 1})["result"] == {"step": 1}
    assert explorer.current == 1 and explorer.can_redo is True
    assert c.request("goto", {"step": 2})["result"] == {"step": 2}
    assert c.request("goto", {"step": 0})["ok"] is True
    assert explorer.current == 0 and explorer.script == session.script_at(0)
    assert c.request("goto", {"step": "2"})["ok"] is True  # ids may come back as text
    assert explorer.current == 2


def test_the_retired_requests_are_refused(explorer):
    """undo, redo and select_name: the page moves through the steps it holds and sets the selection trait."""
    for method in ("undo", "redo", "select_name"):
        reply = explorer.comm.request(method, {})
        assert reply["ok"] is False, method
    assert explorer.current == 0


def test_goto_unknown_step(explorer):
    reply = explorer.comm.request("goto", {"step": 42})
    assert reply["ok"] is False and "no step" in reply["error"]["summary"]


def test_branching_after_undo_keeps_both_branches(explorer, session):
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    c.request("goto", {"step": 0})
    c.request("apply", {"primitive": "unroll", "kwargs": {"loop": "Y/i"}})
    root = explorer.steps[0]
    assert root["children"] == [1, 2]
    assert explorer.current == 2


def test_set_decision(explorer, session):
    c = explorer.comm
    c.request("apply", {"primitive": "sample_perfect_tile", "kwargs": {"loop": "k", "n": 2}})
    reply = c.request("set_decision", {"index": 0, "value": [16, 8]})
    assert reply["ok"] is True
    assert explorer.decisions[0]["value"] == [16, 8]
    assert session.current.kind == "decision"


def test_invalid_decision_is_an_error_state(explorer):
    c = explorer.comm
    c.request("apply", {"primitive": "sample_perfect_tile", "kwargs": {"loop": "k", "n": 2}})
    reply = c.request("set_decision", {"index": 0, "value": [3, 5]})
    assert reply["ok"] is False and "perfect tiling" in reply["error"]["summary"]
    assert explorer.error["source"] == "decision"
    reply = c.request("set_decision", {"index": 7, "value": [1, 128]})
    assert reply["ok"] is False


def test_replay(explorer, session):
    reply = explorer.comm.request("replay", {"trace": "sch.parallel(loop=Y/i)\nsch.unroll(loop=k)"})
    assert reply["ok"] is True
    assert session.current.kind == "replay" and session.current.parent == 0
    assert explorer.trace == "sch.parallel(loop=Y/i)\nsch.unroll(loop=k)"


def test_replay_error_points_at_its_line(explorer, session):
    reply = explorer.comm.request("replay", {"trace": "sch.parallel(loop=Y/i)\nimport os"})
    assert reply["ok"] is False
    assert reply["error"]["line"] == 2
    assert explorer.error["source"] == "replay" and explorer.error["line"] == 2
    assert explorer.error["summary"].startswith("not a schedule call")  # no "line 2:" prefix twice
    assert len(session.steps) == 1


def test_script_at_comes_as_a_binary_buffer(explorer, session):
    explorer.comm.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    reply = explorer.comm.request("script_at", {"step": 0})
    assert reply["ok"] is True and reply["result"]["step"] == 0
    assert reply["buffers"][0].decode("utf-8") == session.script_at(0)
    assert reply["result"]["bytes"] == len(reply["buffers"][0])


@pytest.mark.parametrize("fmt", ["json", "text", "python"])
def test_export_trace(explorer, session, fmt):
    explorer.comm.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    reply = explorer.comm.request("export_trace", {"format": fmt})
    text = reply["buffers"][0].decode()
    if fmt == "json":
        assert json.loads(text) == session.trace_json
    elif fmt == "text":
        assert text == session.trace
    else:
        assert text.startswith("def schedule(sch):")


def test_export_trace_unknown_format(explorer):
    reply = explorer.comm.request("export_trace", {"format": "yaml"})
    assert reply["ok"] is False and "unknown trace format" in reply["error"]["summary"]


def test_export_html_request(explorer):
    explorer.comm.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    reply = explorer.comm.request("export_html")
    html = reply["buffers"][0].decode()
    assert html.startswith("<!DOCTYPE html>")
    assert "parallel(loop=Y/i)" in html


def test_clear_error(explorer):
    explorer.comm.request("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}})
    assert explorer.error
    assert explorer.comm.request("clear_error")["ok"] is True
    assert explorer.error == {}


def test_selection_from_the_front_end(explorer):
    explorer.comm.deliver(
        {"method": "update", "state": {"selection": {"kind": "block", "name": "Y"}}, "buffer_paths": []}
    )
    assert explorer.selection == {"kind": "block", "name": "Y"}


def test_selection_of_a_vanished_loop_is_cleared(explorer):
    explorer.select("Y/j")
    explorer.comm.request("apply", {"primitive": "split", "kwargs": {"loop": "Y/j", "factors": [None, 4]}})
    assert explorer.selection["name"] == "j_0"
    explorer.select("j_1")
    explorer.comm.request("goto", {"step": 0})
    assert explorer.selection == {}


def test_python_side_steps_reach_the_front_end(explorer, session):
    c = explorer.comm
    mark = len(c.sent)
    session.apply("parallel", "Y/i")
    state = {k: v for u in c.updates(mark) for k, v in u.items()}
    assert step_of(state)["id"] == 1 and step_of(state)["script"] == session.script
    assert len(c.updates(mark)) == 1  # one message per step (hold_sync)


def test_unknown_request_and_foreign_messages(explorer):
    reply = explorer.comm.request("format_disk")
    assert reply["ok"] is False and reply["error"]["type"] == "unknown"
    mark = len(explorer.comm.sent)
    explorer.comm.deliver({"method": "custom", "content": {"kind": "something-else"}})
    assert explorer.comm.sent[mark:] == []


def test_bad_parameters_do_not_raise(explorer):
    reply = explorer.comm.request("goto", {"nope": 1})
    assert reply["ok"] is False and reply["error"]["type"] == "bad_request"


def test_close_unsubscribes(comms, session):
    w = Explorer(session)
    w.close()
    session.apply("parallel", "Y/i")  # must not touch the closed widget
    assert w.current == 0


def test_to_html_is_self_contained(explorer, session, tmp_path):
    session.apply("split", "Y/j", factors=[None, 4])
    session.apply("parallel", "Y/i")
    path = tmp_path / "explorer.html"
    html = explorer.to_html(path)
    assert path.read_text() == html
    assert html.count('<section class="step"') == 3
    assert 'class="hl"' in html  # Pygments
    assert '<table class="diff">' in html
    assert not re.search(r'(src|href)="(https?:)?//', html), "the page must not load anything from the network"
    assert 'data-current="2"' in html


def test_select_api(explorer):
    explorer.select("Y")
    assert explorer.selection == {"kind": "block", "name": "Y"}
    explorer.select(None)
    assert explorer.selection == {}
    with pytest.raises(MlcLabError):
        explorer.select("zz")


def test_explore_accepts_a_session(comms, session):
    w = explore(session, height="400px")
    assert w.session is session and w.height == "400px"
    w.close()


def test_explorer_refuses_other_objects(comms):
    with pytest.raises(TypeError, match="mlc_lab.Session"):
        Explorer(object())


def test_every_front_end_request_has_a_handler():
    """The JS sends exactly the requests the Python side answers."""
    sent = set()
    for path in (JS / "explorer").glob("*.ts"):
        text = path.read_text()
        sent |= set(re.findall(r'rpc\.(?:request|call)(?:<[^>]*>)?\(\s*"(\w+)"', text))
        sent |= set(re.findall(r'this\.call\(\s*"(\w+)"', text))
    assert sent, "no requests found in js/explorer"
    assert sent <= set(Explorer.handlers), sent - set(Explorer.handlers)
    assert REQUEST == "mlc-request"


def test_the_widgets_layer_does_not_import_tvm():
    """Layer rule: widgets take plain data; importing them must not start TVM."""
    import subprocess
    import sys

    code = (
        "import sys, mlc_lab.widgets.explorer, mlc_lab.widgets.export; "
        "bad = [m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


# --- the page owns the history (js/explorer/view.ts, moveTo); the Session follows --------------------


def _follow(explorer, step) -> None:
    explorer.comm.deliver({"method": "custom", "content": {"kind": "mlc-follow", "step": step}})


def test_the_session_follows_the_page_and_sends_nothing_back(explorer, session):
    """Undo, redo and "go to step" are answered by the page from the steps it holds: the note that
    follows is not answered, and the step the page already shows is not sent to it again."""
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    c.request("apply", {"primitive": "unroll", "kwargs": {"loop": "C/j"}})
    mark = len(c.sent)
    _follow(explorer, 1)
    _follow(explorer, "0")  # ids may come back as text
    assert c.sent[mark:] == []
    assert session.current.id == 0 and explorer.current == 0 and step_of({"step": explorer.step})["id"] == 0
    assert explorer.can_redo is True
    # Python sees the same step; a move from a cell is sent to the page as before
    session.goto(2)
    (state,) = c.updates(mark)
    assert step_of(state)["id"] == 2


def test_following_the_page_to_an_unknown_step_changes_nothing(explorer, session):
    c = explorer.comm
    mark = len(c.sent)
    _follow(explorer, 42)
    assert c.sent[mark:] == [] and session.current.id == 0


def test_a_new_step_is_one_state_update_and_one_reply_and_no_record(explorer):
    """A click that makes a step sends one update and the reply; the step's record for saved
    notebooks comes later, in its own message, off the click's path."""
    explorer.wait()
    c = explorer.comm
    mark = len(c.sent)
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}}, req_id="click")
    kinds = [m["data"].get("method") for m in c.sent[mark:]]
    assert kinds == ["update", "custom"], kinds
    (state,) = c.updates(mark)
    assert "_mlc_recorded" not in state and "record_cut" not in state
    explorer.wait()
    assert "step:1" in explorer._mlc_recorded


def test_records_are_made_after_a_pause(comms, session, monkeypatch):
    import time

    from mlc_lab.widgets.explorer import Explorer

    monkeypatch.setattr(Explorer, "RECORD_DELAY_S", 0.05)
    w = Explorer(session)
    session.apply("parallel", "Y/i")
    deadline = time.monotonic() + 5
    while "step:1" not in w._mlc_recorded and time.monotonic() < deadline:
        time.sleep(0.02)
    assert {"step:0", "step:1"} <= set(w._mlc_recorded)
    w.close()


def test_a_reloaded_page_is_told_where_redo_goes(comms):
    """The whole history carries the Session's "child visited last" per step (the page's rule)."""
    from mlc_lab.widgets.explorer import Explorer

    from tests.widgets.fakes import FakeSession

    class VisitingSession(FakeSession):
        visited_children = {0: 1, 1: 3}

    w = Explorer(VisitingSession())
    assert w.get_state()["history"]["visited"] == {"0": 1, "1": 3}
    w.close()


def test_a_step_the_page_set_comes_back_without_an_echo_and_is_not_taken(explorer, session):
    """After a move the page's next change (a selection) carries the step it set: Python neither
    takes it (the FOLLOW note moved the Session) nor echoes it (a late echo would undo a later move)."""
    c = explorer.comm
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    page_set = explorer.step
    _follow(explorer, 0)
    mark = len(c.sent)
    c.deliver(
        {
            "method": "update",
            "state": {"selection": {"kind": "loop", "name": "Y/i"}, "step": page_set},
            "buffer_paths": [],
        }
    )
    echoes = [m["data"] for m in c.sent[mark:] if m["data"].get("method") == "echo_update"]
    assert all("step" not in e["state"] for e in echoes) and echoes  # the selection is echoed, the step not
    assert explorer.selection == {"kind": "loop", "name": "Y/i"}
    assert session.current.id == 0 and step_of({"step": explorer.step})["id"] == 0
