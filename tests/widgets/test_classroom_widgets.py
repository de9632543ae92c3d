"""The class widgets, Python side: the explorer's Submit bar (a real Session handing its current step
in to a real class server), the leaderboard and the teacher's dashboard fed by a polling thread
from plain data, and their refusals."""

from __future__ import annotations

import pytest

import mlc_lab
from mlc_lab.classroom import client
from mlc_lab.classroom.server import ClassServer
from mlc_lab.core.session import Session
from mlc_lab.widgets.classroom import ClassDashboard, Leaderboard, class_dashboard, classroom_setup, leaderboard
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.core import classroom as class_client
from tests.unit.test_classroom import ASSIGNMENT, LAB, ROSTER
from tests.widgets.fakes import wait_until


@pytest.fixture
def server(tmp_path, monkeypatch):
    for name in (client.TOKEN_ENV, class_client.HUB_TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)
    srv = ClassServer(ASSIGNMENT, tmp_path / "class", port=0, roster=ROSTER).start()
    srv.tokens = {sid: token for sid, _name, token in srv.issued}
    yield srv
    srv.stop()


def test_the_submit_bar_hands_in_the_current_step(comms, server):
    token = server.tokens["ada"]
    w = Explorer(Session(mlc_lab.load(str(LAB / "mm_relu.py"))), classroom=server.url, class_token=token)
    try:
        # the class's assignment, from the server: its title and its tasks with their checks and points
        assert w.classroom["server"] == server.url and w.classroom["identified"] is True
        assert w.classroom["title"] == "Lab 1: mm_relu on the CPU"
        assert [(t["name"], t["checks"], t["points"]) for t in w.classroom["tasks"]] == [
            ("parallel", ["parallel"], 5.0),
            ("vectorize", ["vectorize"], 5.0),
        ]
        assert token not in str(w.get_state())  # the token stays in the kernel
        # the Checks tab lists the class's 2 checks (not all 6 CPU checks) and scores its 2 tasks
        assert w.checks_setup["names"] == ["parallel", "vectorize"]
        assert w.checks_setup["title"] == "Lab 1: mm_relu on the CPU"
        assert w.comm.request("apply", {"primitive": "parallel", "args": ["Y/i"]})["ok"]
        wait_until(lambda: (w.checks or {}).get("step") == 1 and "tasks" in w.checks, 60)
        assert [(t["name"], t["passed"], t["points"]) for t in w.checks["tasks"]] == [
            ("parallel", True, 5.0),
            ("vectorize", False, 0.0),
        ]
        # a double click: the same intent (client id) twice is one submission
        reply = w.comm.request("class_submit", {"name": "", "client_id": "intent-1"})
        assert reply["ok"] and reply["result"] == {"step": 1}
        again = w.comm.request("class_submit", {"name": "", "client_id": "intent-1"}, req_id="again")
        assert again["ok"], again
        wait_until(lambda: w.class_submission.get("state") != "sending", 120)
        if w.class_submission["verdict"]["id"] == 1:  # graded before the second click: sent again, stored once
            assert w.comm.request("class_submit", {"name": "", "client_id": "intent-1"}, req_id="3")["ok"]
            wait_until(lambda: w.class_submission.get("state") != "sending", 120)
        sub = w.class_submission
        assert sub["state"] == "graded", sub
        assert sub["verdict"]["score"] == 5 and sub["verdict"]["rank"] == 1 and sub["step"] == 1
        assert "5/10 points" in sub["text"] and "rank 1 of 1" in sub["text"]
        assert sub["verdict"]["student"] == "ada"
        board = client.leaderboard(server.url, token)
        assert [r["name"] for r in board["rows"]] == ["ada"] and board["submissions"] == 1
    finally:
        w.close()
    # without a token the bar asks for a pseudonym (a demo server), and nothing is sent
    w = Explorer(Session(mlc_lab.load(str(LAB / "mm_relu.py"))), classroom=server.url)
    try:
        assert w.classroom["identified"] is False and w.classroom["title"] == "Lab 1: mm_relu on the CPU"
        bad = w.comm.request("class_submit", {"name": "  "}, req_id="r2")
        assert not bad["ok"] and "pseudonym" in bad["error"]["summary"]
        assert client.leaderboard(server.url, token)["submissions"] == 1
    finally:
        w.close()


def test_a_server_that_is_gone_is_a_sentence_in_the_bar(comms, monkeypatch):
    monkeypatch.setattr(class_client, "RETRY_S", 1.0)
    w = Explorer(Session(mlc_lab.load(str(LAB / "mm_relu.py"))), classroom="http://127.0.0.1:9")
    seen: list[dict] = []
    w.observe(lambda change: seen.append(dict(change["new"])), names="class_submission")
    try:
        assert w.comm.request("class_submit", {"name": "ada"})["ok"]
        wait_until(lambda: w.class_submission.get("state") not in (None, "sending"), 30)
        text = w.class_submission["text"]
        assert w.class_submission["state"] == "error" and text.startswith("not stored:") and "cannot be reached" in text
        # from the first refused try on, the bar says so and counts the tries (never a silent "grading…")
        sending = [s["text"] for s in seen if s.get("state") == "sending"]
        assert sending[0] == "grading…"
        assert sending[1].startswith("the class server at http://127.0.0.1:9 cannot be reached")
        assert [t.rsplit("retrying ", 1)[1] for t in sending[1:]] == ["(2 of 3)", "(3 of 3)"]
    finally:
        w.close()


def test_no_bar_without_a_server_unless_the_environment_names_one(comms, session, monkeypatch):
    monkeypatch.delenv(client.ENV, raising=False)
    monkeypatch.delenv(client.TOKEN_ENV, raising=False)
    monkeypatch.delenv(class_client.HUB_TOKEN_ENV, raising=False)
    w = Explorer(session)
    try:
        assert w.classroom == {}
        reply = w.comm.request("class_submit", {"name": "ada"})
        assert not reply["ok"] and "without a class server" in reply["error"]["summary"]
    finally:
        w.close()
    monkeypatch.setenv(client.ENV, "127.0.0.1:8765")
    assert classroom_setup(None) == {"server": "http://127.0.0.1:8765", "identified": False}
    monkeypatch.setenv(client.TOKEN_ENV, "a-token")
    w = Explorer(session)
    assert w.classroom["server"] == "http://127.0.0.1:8765" and w.classroom["identified"] is True
    w.close()


def test_session_view_takes_the_class_server(comms, monkeypatch):
    monkeypatch.delenv(client.TOKEN_ENV, raising=False)
    monkeypatch.delenv(class_client.HUB_TOKEN_ENV, raising=False)
    s = Session(mlc_lab.load(str(LAB / "mm_relu.py")))
    w = s.view(classroom="http://127.0.0.1:8765/")
    try:
        assert isinstance(w, Explorer) and w.classroom["server"] == "http://127.0.0.1:8765"
        assert w.classroom["identified"] is False and "tasks" not in w.classroom
        assert w.classroom["assignment_error"].startswith("the class's assignment could not be read")
    finally:
        w.close()


def test_leaderboard_and_dashboard_refresh_live(comms, server):
    with pytest.raises(client.ClassServerError, match="needs your class token"):
        leaderboard(server.url)
    board = leaderboard(server.url, server.tokens["bo"], refresh_s=0.5)
    dash = class_dashboard(server.url, server.token, refresh_s=0.5)
    try:
        assert board.board["rows"] == [] and dash.summary["students"] == 0
        s = Session(mlc_lab.load(str(LAB / "mm_relu.py")))
        s.apply("parallel", "Y/i")
        s.submit(server.url, token=server.tokens["bo"])
        wait_until(lambda: [(r["name"], r.get("you")) for r in board.board["rows"]] == [("bo", True)], 30)
        wait_until(lambda: dash.summary["students"] == 1, 30)
        assert dash.summary["tasks"][0]["passed"] == 1 and dash.board["rows"][0]["name"] == "bo"
        assert dash.summary["stuck"][0]["task"] == "vectorize"
        assert board.updated > 0 and board.error == ""
    finally:
        board.close()
        dash.close()
    with pytest.raises(client.ClassServerError, match="token"):
        class_dashboard(server.url, "")
    with pytest.raises(client.ClassServerError, match="not one the class server issued"):
        class_dashboard(server.url, "wrong")


def test_widgets_take_plain_data_and_say_why_a_refresh_failed(comms):
    calls = []
    row = {"name": "ada", "rank": 1, "score": 1.0, "tasks_passed": ["t"], "best_latency_ms": 2.5, "submissions": 1}
    board = {"max_score": 1.0, "tasks": [{"name": "t", "title": "T", "points": 1}], "rows": [row]}
    board |= {"submissions": 1, "queued": 0}

    def fetch():
        calls.append(1)
        if len(calls) > 1:
            raise client.ClassServerError("the class server at http://x cannot be reached (refused)")
        return board

    w = Leaderboard(fetch, refresh_s=0)  # no thread: refreshed when asked
    try:
        w.refresh()
        assert w.board == board and w.error == ""
        reply = w.comm.request("class_refresh")
        assert reply["ok"] and "cannot be reached" in reply["result"]["error"]
        assert w.board == board, "the last figures stay on screen"
    finally:
        w.close()
    summary = {"students": 2, "submissions": 3, "queued": 0, "tasks": [], "latency": {"students": []}}
    d = ClassDashboard(None, summary={**summary, "common_failures": [], "stuck": []}, board={})
    assert d.summary["students"] == 2
    d.close()
    assert mlc_lab.leaderboard is leaderboard and mlc_lab.class_dashboard is class_dashboard


def _graded(store, name, score, latency_ms, spread_ms=None, quiet=True, load=0.1, status="graded", error=None):
    sid = store.add(name, None, "[]")
    tasks = [{"name": "parallel", "passed": score >= 5}, {"name": "vectorize", "passed": score >= 10}]
    timing = {"where": "the class server", "method": "m", "quiet": quiet, "spread_ms": spread_ms, "load": load}
    result = {"status": status, "score": score, "max_score": 10, "tasks": tasks, "latency_ms": latency_ms}
    if error:
        result = {"status": status, "error": error, "score": 0, "max_score": 10, "tasks": []}
    store.record(sid, {**result, "timing": timing} if not error else result)
    return sid


def test_latencies_within_the_spread_of_the_two_timings_are_ties_and_a_refusal_is_flagged(tmp_path):
    from mlc_lab.classroom.store import Store
    from tests.unit.test_classroom import TASKS

    store = Store(tmp_path / "s", TASKS)
    try:
        ada = _graded(store, "ada", 10, 146.5, spread_ms=2.0)
        _graded(store, "bo", 10, 145.5, spread_ms=1.5)  # 1 ms apart, within their spreads: a tie
        _graded(store, "cy", 10, 200.0, spread_ms=1.0)  # clearly slower on a quiet machine
        _graded(store, "di", 5, 100.0, spread_ms=1.0)
        _graded(store, "ed", 10, 230.0, spread_ms=0.5, quiet=False, load=2.1)  # busy: a wider band reaches cy's
        _graded(store, "gus", 10, 600.0, spread_ms=500.0, quiet=False, load=3.0)  # busy, but 2.6x ed's: no tie
        _graded(store, "fay", 0, None, status="refused", error="lab.py: the trace is refused: line 1 calls __import__")
        rows = store.leaderboard()["rows"]
        got = [(r["name"], r["rank"], r["tie"]) for r in rows]
        assert got == [
            ("bo", 1, True),
            ("ada", 1, True),
            ("cy", 3, True),
            ("ed", 3, True),
            ("gus", 5, False),
            ("di", 6, False),
        ]
        v = store.verdict(ada)
        assert v["rank"] == 1 and v["tie"] is True
        assert "rank 1 of 6 (a tie)" in client.verdict_text({**v, "students": 6})
        ed = next(r for r in rows if r["name"] == "ed")
        assert ed["load"] == 2.1 and ed["quiet"] is False and ed["spread_ms"] == 0.5
        summary = store.summary()
        assert [(s["name"], s["spread_ms"], s["tie"]) for s in summary["latency"]["students"]][:2] == [
            ("bo", 1.5, True),
            ("ada", 2.0, True),
        ]
        # the refused hand-in is flagged apart, and is no ordinary failure
        assert [(r["name"], "__import__" in r["message"]) for r in summary["refused"]] == [("fay", True)]
        assert not any("__import__" in f["message"] for f in summary["common_failures"])
        # it takes no place on the board, but its student handed in: counted, and at the first task
        assert "fay" not in [r["name"] for r in rows]
        assert summary["students"] == 7 and summary["tasks"][0]["students"] == 7
        fay = next(s for s in summary["stuck"] if s["name"] == "fay")
        assert fay["task"] == "parallel" and fay["failed_attempts"] == 1 and "__import__" in fay["last_message"]
    finally:
        store.close()
