"""The class server (mlc_lab.classroom): submissions in SQLite that survive a restart, hostile
submissions that get a verdict (or a refusal) and never take the server down, the teacher's token,
the leaderboard and the teacher's figures, `mlc-lab class serve` / `mlc-lab submit`, and timing on
the class's measurement machines through TVM's RPC tracker. The lab is mm_relu at 64x64 on the CPU
(tests/labs/classroom), so grading and timing one submission takes seconds."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import mlc_lab
from mlc_lab.classroom import client
from mlc_lab.classroom.identity import Who
from mlc_lab.classroom.roster import Student
from mlc_lab.classroom.server import ClassServer, SubmissionRefused
from mlc_lab.classroom.store import Store
from mlc_lab.core.session import Session
from mlc_lab.model.classroom import Board, ClassSummary, Verdict
from mlc_lab.model.conform import problems
from tests.unit.test_rpc import KEY, tracker  # noqa: F401  (the fixture: a tracker and two sandboxed servers)
from tests.unit.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "classroom"
ASSIGNMENT = LAB / "assignment.toml"
TASKS = [
    {"name": "parallel", "title": "Run the rows in parallel", "points": 5.0},
    {"name": "vectorize", "title": "Vectorize the inner loop", "points": 5.0},
]


def trace(*steps: tuple) -> str:
    s = Session(mlc_lab.load(str(LAB / "mm_relu.py")))
    for primitive, *args in steps:
        s.apply(primitive, *args)
    return s.submission()


PARALLEL = ("parallel", "Y/i")
SPLIT = ("split", "Y/j", [None, 8])
VECTORIZE = ("vectorize", "Y/j_1")


# the class: ada and bo have approved pseudonyms, cy and mallory are "student 3" and "student 4"
ROSTER = [Student("ada", "Ada", "ada"), Student("bo", "Bo", "bo"), Student("cy", "Cy"), Student("mallory", "Mal")]


def _server(folder: Path, **kwargs) -> ClassServer:
    srv = ClassServer(ASSIGNMENT, folder, port=0, roster=ROSTER, **kwargs)
    srv.tokens = {sid: token for sid, _name, token in srv.issued}
    return srv


@pytest.fixture
def server(tmp_path):
    srv = _server(tmp_path / "class").start()
    yield srv
    srv.stop()


def _post(url: str, data: bytes, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/api/submit", data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# --- the store alone (no grading) -----------------------------------------------------------------


def _result(passed: list[str], latency: float | None = None, error: str | None = None) -> dict:
    tasks = [
        {
            "name": t["name"],
            "title": t["title"],
            "points": t["points"] if t["name"] in passed else 0.0,
            "max_points": t["points"],
            "passed": t["name"] in passed,
            "messages": [] if t["name"] in passed else [error or f"{t['name']} is missing"],
        }
        for t in TASKS
    ]
    return {
        "score": sum(t["points"] for t in tasks),
        "max_score": 10.0,
        "tasks": tasks,
        "error": error,
        "latency_ms": latency,
        "correct": True if latency else None,
    }


def test_store_ranks_and_summarises_and_keeps_everything_when_reopened(tmp_path):
    store = Store(tmp_path, TASKS)
    token = store.teacher_token()
    for name, task, result in [
        ("ada", None, _result(["parallel", "vectorize"], 2.0)),
        ("ada", None, _result(["parallel", "vectorize"], 1.5)),  # her best counts
        ("bo", None, _result(["parallel", "vectorize"], 1.0)),  # same score, faster: first
        ("cy", "parallel", _result(["parallel"], 3.0)),  # passing the task asked for: timed on the board
        ("dee", None, _result(["parallel"], 0.5)),  # fast but failing a task: no latency on the board
        ("dee", None, _result(["parallel"])),
        ("dee", None, _result(["parallel"])),
        ("eve", None, _result([], error="the trace is refused: line 1: not a schedule call")),
    ]:
        store.record(store.add(name, task, "trace"), result)
    store.close()

    store = Store(tmp_path, TASKS)  # a restart: the same figures, the same token (kept as its hash only)
    assert store.teacher_token() is None and store.is_teacher(token) and not store.is_teacher(token[:-1])
    rows = store.leaderboard()["rows"]
    assert [(r["name"], r["rank"], r["score"], r["best_latency_ms"]) for r in rows] == [
        ("bo", 1, 10.0, 1.0),
        ("ada", 2, 10.0, 1.5),
        ("cy", 3, 5.0, 3.0),
        ("dee", 4, 5.0, None),
        ("eve", 5, 0.0, None),
    ]
    assert rows[1]["submissions"] == 2 and rows[2]["tasks_passed"] == ["parallel"]

    summary = store.summary()
    assert summary["students"] == 5 and summary["submissions"] == 8
    assert {t["name"]: (t["passed"], t["pass_rate"]) for t in summary["tasks"]} == {
        "parallel": (4, 0.8),
        "vectorize": (2, 0.4),
    }
    assert summary["latency"]["min"] == 1.0 and summary["latency"]["max"] == 3.0 and summary["latency"]["median"] == 1.5
    stuck = {s["name"]: s for s in summary["stuck"]}
    assert set(stuck) == {"cy", "dee", "eve"}
    assert stuck["dee"]["task"] == "vectorize" and stuck["dee"]["failed_attempts"] == 3 and stuck["dee"]["stuck"]
    assert stuck["eve"]["task"] == "parallel" and not stuck["eve"]["stuck"]
    assert stuck["dee"]["last_message"] == "vectorize is missing" and stuck["cy"]["failed_attempts"] == 1
    named = store.summary({"bo": "Bo B", "dee": "Dee D"})  # the teacher's labels name every list
    assert [s["name"] for s in named["latency"]["students"]] == ["Bo B", "ada", "cy"]
    assert named["stuck"][0]["name"] == "Dee D" and named["tasks"] == summary["tasks"]
    top = summary["common_failures"][0]
    assert top["task"] == "vectorize" and top["message"] == "vectorize is missing" and top["students"] == 2
    refused = [f for f in summary["common_failures"] if f["task"] is None]
    assert refused and refused[0]["count"] == 1  # one refused hand-in is one failure, not one per task
    renewed = store.teacher_token(renew=True)
    assert renewed != token and store.is_teacher(renewed) and not store.is_teacher(token)


# --- the server -------------------------------------------------------------------------------------


def test_a_submission_is_graded_timed_and_ranked(server):
    tok = server.tokens
    v = client.submit(server.url, trace(PARALLEL, SPLIT, VECTORIZE), token=tok["ada"])
    assert v["status"] == "graded" and v["error"] is None, v
    assert v["score"] == 10 and v["passing"] and v["rank"] == 1
    assert v["latency_ms"] > 0 and v["correct"] is True
    assert "median of 3 repeats" in v["timing"]["method"]  # mlc_lab's one method, the assignment's repeats
    partial = client.submit(server.url, trace(PARALLEL), "parallel", token=tok["bo"])
    assert partial["passing"] and partial["score"] == 5 and partial["rank"] == 2
    assert [t["passed"] for t in partial["tasks"]] == [True, False]
    assert "no loop is vectorized" in partial["tasks"][1]["messages"][0]
    board = client.leaderboard(server.url, tok["bo"])
    assert [(r["name"], r["rank"]) for r in board["rows"]] == [("ada", 1), ("bo", 2)]
    assert board["rows"][1]["best_latency_ms"] == pytest.approx(partial["latency_ms"])


def test_hostile_submissions_get_a_verdict_and_the_server_stays_up(server, tmp_path):
    marker = tmp_path / "the_server_ran_it"
    mal, ada = server.tokens["mallory"], server.tokens["ada"]
    mine = {"Authorization": f"Bearer {mal}"}
    # refused before anything is stored
    for body, phrase in [
        (b"{not json", "is a JSON object"),
        (b"[1, 2]", "is a JSON object"),
        (json.dumps({"trace": "x", "client_id": "<script>"}).encode(), "client id"),
        (json.dumps({"name": "ada", "trace": ""}).encode(), "has no trace"),
        (json.dumps({"name": "ada", "trace": 7}).encode(), "has no trace"),
        (json.dumps({"name": "ada", "trace": "x" * 200_001}).encode(), "at most 200,000"),
        (json.dumps({"name": "ada", "trace": "b0 = sch.get_sblock('Y')", "task": "nope"}).encode(), "no task 'nope'"),
        (
            json.dumps({"name": "ada", "trace": f"def schedule(sch):\n    open({str(marker)!r}, 'w')\n"}).encode(),
            "not schedule files",
        ),
    ]:
        status, answer = _post(server.url, body, mine)
        assert status == 400 and phrase in answer["error"], (body[:60], answer)
    status, answer = _post(server.url, b"x" * 10, {"Content-Length": "999999999", **mine})
    assert status == 413
    assert server.store.counts()["submissions"] == 0

    # stored and graded: the trace is parsed, never run
    evil = (
        "from tvm import s_tir\n\ndef apply_trace(sch: s_tir.Schedule) -> None:\n"
        f"    open({str(marker)!r}, 'w').write('x')\n    sch.get_sblock('Y')\n"
    )
    v = client.submit(server.url, evil, token=mal)
    assert v["status"] == "graded" and "the trace is refused" in v["error"] and v["score"] == 0
    garbage = client.submit(server.url, "\x00\x01 not a trace at all ((((", token=mal)
    assert garbage["status"] == "graded" and garbage["error"] and garbage["score"] == 0
    assert not marker.exists()

    # a grader that hangs is stopped and gets a verdict; the server answers the next one
    server.grade_timeout_s = 0.5
    slow = client.submit(server.url, trace(PARALLEL), token=mal)
    assert "took longer than 0.5 s" in slow["error"]
    stored = server.store._db.execute("SELECT result FROM submissions WHERE id=?", (slow["id"],)).fetchone()[0]
    assert json.loads(stored)["error_info"] == {"type": "timeout", "summary": slow["error"]}  # kept, with its kind
    server.grade_timeout_s = 120
    ok = client.submit(server.url, trace(PARALLEL), token=ada)
    assert ok["error"] is None and ok["score"] == 5
    assert [r["name"] for r in client.leaderboard(server.url, ada)["rows"]] == ["ada", "student 4"]


def test_one_student_cannot_fill_the_queue(tmp_path):
    srv = _server(tmp_path / "class")  # not started: nothing is graded
    try:
        for _ in range(3):
            srv.submit(Who("ada"), "b0 = sch.get_sblock('Y')")
        with pytest.raises(SubmissionRefused, match="you have 3 submissions waiting"):
            srv.submit(Who("ada"), "b0 = sch.get_sblock('Y')")
        srv.submit(Who("bo"), "b0 = sch.get_sblock('Y')")  # the others still can
        assert srv.store.counts() == {"submissions": 4, "queued": 4}
    finally:
        srv.httpd.server_close()
        srv.store.close()
        os.close(srv._lock_fd)


def test_no_token_begins_with_a_dash_so_the_command_line_takes_it(monkeypatch):
    """A token is typed after ``--token``; argparse reads one beginning with ``-`` as an option
    (``token_urlsafe`` gives one in 64 so). The store draws again until it does not."""
    import secrets

    from mlc_lab.classroom import store as store_module
    from mlc_lab.cli import build_parser

    with pytest.raises(SystemExit):  # what a student with such a token met
        build_parser().parse_args(["submit", "http://x", "--token", "-dash-first"])
    draws = iter(["-dash-first", "_fine-token"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: next(draws))
    token = store_module.new_token(24)
    assert token == "_fine-token"
    assert build_parser().parse_args(["submit", "http://x", "--token", token]).token == token


def test_the_teachers_summary_needs_the_token(server):
    client.submit(server.url, trace(PARALLEL), token=server.tokens["ada"], wait_s=0)  # queued: counted
    # no token, a wrong one, one without its scheme: 401 (who are you?)
    assert _get(server.url + "/api/summary")[0] == 401
    assert _get(server.url + "/api/summary", {"Authorization": "Bearer wrong"})[0] == 401
    assert _get(server.url + "/api/summary", {"Authorization": server.token})[0] == 401
    with pytest.raises(client.ClassServerError, match="not one the class server issued"):
        client.summary(server.url, "wrong")
    status, summary = _get(server.url + "/api/summary", {"Authorization": f"Bearer {server.token}"})
    assert status == 200 and summary["submissions"] == 1
    assert client.summary(server.url, server.token)["title"] == "Lab 1: mm_relu on the CPU"
    # the students' pages need theirs, not the teacher's
    assert _get(server.url + "/api/leaderboard", {"Authorization": f"Bearer {server.tokens['cy']}"})[0] == 200
    cy = _get(server.url + "/api/summary", {"Authorization": f"Bearer {server.tokens['cy']}"})
    assert cy[0] == 403 and "needs the teacher's token" in cy[1]["error"]  # a student's: 403


def test_a_restart_loses_nothing(tmp_path):
    folder = tmp_path / "class"
    first = _server(folder).start()
    tok = first.tokens
    try:
        graded = client.submit(first.url, trace(PARALLEL, SPLIT, VECTORIZE), token=tok["ada"])
        token = first.token
        board = client.leaderboard(first.url, token)
    finally:
        first.stop()
    # a submission the server had taken but not graded when it stopped
    store = Store(folder, TASKS)
    waiting = store.add("bo", None, trace(PARALLEL))
    store.close()

    second = ClassServer(ASSIGNMENT, folder, port=0).start()  # the roster and the tokens are kept
    try:
        assert second.token is None and second.issued == []  # kept as a hash: the first one still works (below)
        assert client.verdict(second.url, graded["id"], tok["ada"])["score"] == 10
        deadline = time.monotonic() + 120
        while client.verdict(second.url, waiting, tok["bo"])["status"] != "graded":
            assert time.monotonic() < deadline, "the waiting submission was not graded after the restart"
            time.sleep(0.5)
        rows = client.leaderboard(second.url, token)["rows"]
        assert rows[0] == board["rows"][0]
        assert [r["name"] for r in rows] == ["ada", "bo"]
        assert client.summary(second.url, token)["students"] == 2
    finally:
        second.stop()


def test_session_submit(server):
    s = Session(mlc_lab.load(str(LAB / "mm_relu.py")))
    s.apply(*PARALLEL)
    v = s.submit(server.url, "bo", token=server.tokens["cy"], task="parallel")  # the name is not who
    assert v["passing"] and v["name"] == "student 3" and v["student"] == "cy"
    with pytest.raises(client.ClassServerError, match="^not stored: .*cannot be reached"):
        s.submit("http://127.0.0.1:9", token=server.tokens["cy"], retry_s=0.5)
    with pytest.raises(client.ClassServerError, match="needs your class token"):
        s.submit(server.url, "cy")


CLI = [sys.executable, "-m", "mlc_lab.cli"]


def _cli(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_the_commands(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    port, db_port = free_port(), free_port()
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,pseudonym\nada,Ada,ada\nbo,Bo,\n")
    # no roster, no hub, no --open: the server says what it needs
    refused = _cli("class", "serve", str(ASSIGNMENT), "--dir", str(tmp_path / "none"), env=env)
    assert refused.returncode == 2 and "needs to know its students" in refused.stderr, refused.stderr
    serve = subprocess.Popen(
        [*CLI, "class", "serve", str(ASSIGNMENT), "--dir", str(tmp_path / "class"), "--port", str(port)]
        + ["--tuning-db-port", str(db_port), "--roster", str(roster)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        lines = []
        while not any("teacher's token" in ln for ln in lines):
            line = serve.stderr.readline()
            assert line, "the server exited: " + "".join(lines)
            lines.append(line)
        token = lines[-1].rsplit(":", 1)[1].strip()
        made = next(ln for ln in lines if "tokens in" in ln).split("tokens in ", 1)[1].split(":")[0]
        assert oct(os.stat(made).st_mode & 0o777) == "0o600"
        with open(made) as fh:
            tokens = {r["student_id"]: r["token"] for r in csv.DictReader(fh)}
        url = f"http://127.0.0.1:{port}"
        assert any(url in ln for ln in lines)
        # one command also serves the class's tuning database (`mlc-lab database serve`)
        assert any(f"database='rpc://127.0.0.1:{db_port}'" in ln for ln in lines), lines
        socket.create_connection(("127.0.0.1", db_port), timeout=5).close()
        # a second server on the same port says why it cannot start
        again = _cli(
            "class",
            "serve",
            str(ASSIGNMENT),
            "--dir",
            str(tmp_path / "other"),
            "--port",
            str(port),
            "--open",
            env=env,
            timeout=60,
        )
        assert again.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in again.stderr, again.stderr
        hand_in = tmp_path / "lab1.py"
        hand_in.write_text(trace(PARALLEL))
        out = _cli("submit", url, "--token", tokens["ada"], str(hand_in), env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        assert "5/10 points" in out.stdout and "rank 1 of 1" in out.stdout and "FAIL vectorize" in out.stdout
        program = _cli(
            *("submit", url, "--token", tokens["bo"], "--program", str(LAB / "mm_relu.py"), "--trace", str(hand_in)),
            "--json",
            env=env,
            timeout=300,
        )
        assert json.loads(program.stdout)["score"] == 5
        bad = _cli("submit", url, "--name", "ada", str(hand_in), env=env, timeout=60)
        assert bad.returncode == 2 and "needs your class token" in bad.stderr and "Traceback" not in bad.stderr
        assert client.summary(url, token)["students"] == 2
        # a lost token: a new one, in a new file; the old one stops working
        again = _cli("class", "tokens", "--dir", str(tmp_path / "class"), "--reissue", "bo", env=env)
        assert again.returncode == 0 and "1 tokens in" in again.stdout, again.stderr
        with open(again.stdout.split("tokens in ", 1)[1].split(" (")[0]) as fh:
            (row,) = list(csv.DictReader(fh))
        assert row["student_id"] == "bo" and row["token"] != tokens["bo"]
        assert client.me(url, row["token"])["student"] == "bo"
        with pytest.raises(client.ClassServerError, match="not one the class server issued"):
            client.me(url, tokens["bo"])
        unknown = _cli("class", "tokens", "--dir", str(tmp_path / "class"), "--reissue", "zed", env=env)
        assert unknown.returncode == 2 and "'zed' is not a student on the roster" in unknown.stderr
    finally:
        os.killpg(serve.pid, 15)
        serve.wait(timeout=30)
    assert serve.returncode == 0
    with pytest.raises(OSError):  # the tuning database stopped with it
        socket.create_connection(("127.0.0.1", db_port), timeout=5).close()


def test_timed_on_the_measurement_machines_through_the_tracker(tmp_path, tracker):  # noqa: F811
    runner = f"rpc://127.0.0.1:{tracker}/{KEY}"
    srv = _server(tmp_path / "class", runner=runner, workers=2).start()
    tok = srv.tokens
    try:
        first = client.submit(srv.url, trace(PARALLEL), token=tok["bo"], wait_s=0)  # two graders side by side
        v = client.submit(srv.url, trace(PARALLEL, SPLIT, VECTORIZE), token=tok["ada"])
        assert v["error"] is None and v["timing_error"] is None, v
        assert v["timing"]["where"] == runner and v["correct"] is True and v["latency_ms"] > 0
        assert KEY in v["timing"]["method"]
        assert srv.wait(first["id"], 120)
        assert client.verdict(srv.url, first["id"], tok["bo"])["timing"]["where"] == runner
    finally:
        srv.stop()


def test_what_the_store_sends_is_the_contracts_class_types(tmp_path):
    """mlc_lab.model.classroom declares the server's JSON (the page's types are generated from it):
    the leaderboard, the summary and a verdict are exactly those types, key for key."""
    store = Store(tmp_path, TASKS)
    store.record(store.add("ada", None, "t"), _result(["parallel", "vectorize"], 1.0))
    for _ in range(3):
        store.record(store.add("bo", None, "t"), _result(["parallel"]))
    queued = store.add("cy", None, "t")
    board, summary = store.leaderboard(), store.summary()
    assert board["rows"] and problems({"title": "Lab", **board}, Board) == []
    assert summary["common_failures"] and summary["stuck"] and problems(summary, ClassSummary) == []
    assert problems(store.verdict(1), Verdict) == [] and store.verdict(1)["status"] == "graded"
    assert problems(store.verdict(queued), Verdict) == []
    assert problems({**board, "rows": [{**board["rows"][0], "latency": 1}]}, Board) == [
        "value.rows[0].latency: BoardRow declares no key 'latency'"
    ]
