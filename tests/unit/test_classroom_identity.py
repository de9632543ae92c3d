"""The class server knows who is who (mlc_lab.classroom: roster, identity, reaper): a student hands in
and reads as the token's student only, limits hold per student, the leaderboard shows approved
pseudonyms, a retried hand-in is one submission, JupyterHub's user is trusted when the server runs
as a Hub service (against a stand-in Hub on 127.0.0.1), and a SIGKILLed server, restarted, loses
nothing, tells every client the truth and leaves no grading child or folder behind."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.classroom import client, reaper
from mlc_lab.classroom.identity import OPEN_NOTICE
from mlc_lab.classroom.roster import RosterError, load_roster, skeleton
from mlc_lab.classroom.server import ClassServer, ServerSetupError
from mlc_lab.classroom.store import Store
from mlc_lab.model.classroom import ClassIdentity, History, Verdict
from mlc_lab.model.conform import problems

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "classroom"
ASSIGNMENT = LAB / "assignment.toml"
TRACE = "b0 = sch.get_sblock('Y')\nl0, l1, l2 = sch.get_loops(b0)\nsch.parallel(l0)\n"
ROSTER = "student_id,name,pseudonym\nada01,Ada Lovelace,fastcat\nbo02,Bo Kim,\ncy03,Cy Young,\n"


def _roster(tmp_path: Path, text: str = ROSTER, name: str = "roster.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _request(url: str, token: str | None = None, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def http_only(tmp_path):
    """A rostered server that answers HTTP but grades nothing (hand-ins stay queued): fast."""
    srv = ClassServer(ASSIGNMENT, tmp_path / "class", port=0, roster=load_roster(_roster(tmp_path)), per_hour=4)
    th = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    th.start()
    srv._threads = [th]
    srv.tokens = {sid: token for sid, _name, token in srv.issued}
    yield srv
    srv.stop()


# --- the roster ---------------------------------------------------------------------------------------


def test_a_roster_is_read_or_refused_with_its_line(tmp_path):
    students = load_roster(_roster(tmp_path))
    assert [(s.id, s.name, s.pseudonym) for s in students] == [
        ("ada01", "Ada Lovelace", "fastcat"),
        ("bo02", "Bo Kim", None),
        ("cy03", "Cy Young", None),
    ]
    toml = _roster(
        tmp_path, '[roster]\nada01 = {name = "Ada", pseudonym = "fastcat"}\nbo02 = {name = "Bo"}\n', "r.toml"
    )
    assert [(s.id, s.pseudonym) for s in load_roster(toml)] == [("ada01", "fastcat"), ("bo02", None)]
    for text, phrase in [
        ("id,name\nada,Ada\n", "line 1 must be the header"),
        ("student_id,name\nada,Ada\nada,Ada again\n", "'ada' is listed twice"),
        ("student_id,name\nada,Ada\nbad id!,Bo\n", "line 3: the student id 'bad id!'"),
        ("student_id,name,pseudonym\nada,Ada,fastcat\nbo,Bo,Fast-Cat\n", "'fastcat' and 'Fast-Cat' look alike"),
        ("student_id,name,pseudonym\nada,Ada,\u0430da\n", "line 2: the pseudonym"),  # U+0430, a Cyrillic a
        ("student_id,name,pseudonym\nada,Ada,Student 2\n", "looks like the leaderboard's 'student N'"),
        ("student_id,name\n", "lists no student"),
    ]:
        with pytest.raises(RosterError, match=phrase):
            load_roster(_roster(tmp_path, text))


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=12))
def test_a_look_alike_has_the_skeleton_of_what_it_imitates(name):
    assert skeleton(name.upper()) == skeleton(name.lower()) == skeleton(name)
    assert skeleton(f" {name}-") == skeleton(name)


def test_without_a_roster_the_server_refuses_to_start_unless_open(tmp_path):
    with pytest.raises(ServerSetupError, match="--roster roster.csv.*--jupyterhub.*--open"):
        ClassServer(ASSIGNMENT, tmp_path / "class", port=0)
    demo = ClassServer(ASSIGNMENT, tmp_path / "class", port=0, mode="open").start()
    try:
        v = client.submit(demo.url, TRACE, name="ada", wait_s=0)
        assert v["notice"] == OPEN_NOTICE and v["name"] == "ada"
        for page in ("/api/leaderboard", "/api/me", f"/api/submissions/{v['id']}"):
            assert _request(demo.url + page)[1]["notice"] == OPEN_NOTICE, page
        # a look-alike of a name taken, or a non-ASCII one, is refused on a demo server too
        for name in ("ADA", "a.d.a", "\u0430da"):
            with pytest.raises(client.ClassServerError, match="pseudonym"):
                client.submit(demo.url, TRACE, name=name, wait_s=0)
    finally:
        demo.stop()


def test_tokens_are_issued_once_and_kept_hashed(tmp_path, http_only):
    assert sorted(http_only.tokens) == ["ada01", "bo02", "cy03"]
    raw = b"".join(p.read_bytes() for p in (tmp_path / "class").glob("class.sqlite*"))
    assert not any(t.encode() in raw for t in http_only.tokens.values())
    assert http_only.token and http_only.token.encode() not in raw  # the teacher's too: only its hash
    assert http_only.store.issue_tokens() == []  # everyone has one: none is re-issued by accident
    (new,) = http_only.store.issue_tokens(["bo02"])  # a lost token replaced: the old one stops working
    assert _request(http_only.url + "/api/me", http_only.tokens["bo02"])[0] == 401
    assert _request(http_only.url + "/api/me", new[2])[1]["student"] == "bo02"


def test_a_class_folder_of_the_server_before_identities_opens_with_everything(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    old = sqlite3.connect(folder / "class.sqlite")
    old.executescript(
        "CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, task TEXT, "
        "trace TEXT NOT NULL, submitted_at REAL NOT NULL, status TEXT NOT NULL DEFAULT 'queued', score REAL, "
        "max_score REAL, passed_tasks TEXT, passing INTEGER, latency_ms REAL, error TEXT, result TEXT, "
        "graded_at REAL);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO submissions (name, trace, submitted_at) VALUES ('ada', 't', 1.0);"
        "INSERT INTO meta VALUES ('token', 'the-old-token');"
    )
    old.commit()
    old.close()
    os.chmod(folder, 0o755)
    os.chmod(folder / "class.sqlite", 0o644)  # as an older server left them: readable by anyone
    store = Store(folder, [])
    try:
        # the old server kept the teacher's token itself: it keeps working, now kept as its hash only
        assert store.teacher_token() == "the-old-token" and store.teacher_token() is None
        assert store.is_teacher("the-old-token") and not store.is_teacher("the-old-toke")
        assert store.pending() == [1]
        assert store.add("ada", None, "t2", "a-client-id") == store.add("ada", None, "t2", "a-client-id") == 2
        assert not store.has_roster()  # the server asks for one (or --open) before it starts
        # the folder and its files are the teacher's alone now
        assert folder.stat().st_mode & 0o777 == 0o700
        for path in folder.glob("class.sqlite*"):
            assert path.stat().st_mode & 0o777 == 0o600, path
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        raw = b"".join(p.read_bytes() for p in folder.glob("class.sqlite*"))
        assert b"the-old-token" not in raw
    finally:
        store.close()


# --- who hands in, who reads what ------------------------------------------------------------------


def test_a_student_cannot_hand_in_as_another_or_read_anothers(http_only):
    url, tok = http_only.url, http_only.tokens
    # the body's name is never who hands in: ada's token with bo's name is ada's hand-in
    status, v = _request(url + "/api/submit", tok["ada01"], {"trace": TRACE, "name": "bo02", "client_id": "a" * 12})
    assert status == 200 and v["student"] == "ada01" and v["name"] == "fastcat" and problems(v, Verdict) == []
    # no token, a wrong one, a look-alike name: nothing is stored
    for token, body in [
        (None, {"trace": TRACE, "name": "ada01"}),
        ("x" * 32, {"trace": TRACE}),
        (tok["ada01"][:-1], {"trace": TRACE}),
        (None, {"trace": TRACE, "name": "\u0430da01"}),
    ]:
        status, answer = _request(url + "/api/submit", token, body)
        assert status == 401 and "token" in answer["error"], answer
    assert http_only.store.counts()["submissions"] == 1

    bo_sid = http_only.submit(http_only.identities.who(tok["bo02"]), TRACE)
    # another student's id is "not found", exactly as an id that does not exist: ids leak nothing
    theirs = _request(f"{url}/api/submissions/{bo_sid}", tok["ada01"])
    nobody = _request(f"{url}/api/submissions/999", tok["ada01"])
    assert theirs == nobody and theirs[0] == 404
    assert _request(f"{url}/api/submissions/{bo_sid}")[0] == 401
    assert _request(f"{url}/api/submissions/{bo_sid}", tok["bo02"])[1]["student"] == "bo02"
    assert _request(f"{url}/api/submissions/{bo_sid}", http_only.token)[1]["student"] == "bo02"  # the teacher
    # a history is one's own, whatever is asked; the teacher reads anyone's
    mine = client.history(url, tok["ada01"])
    assert problems(mine, History) == [] and [s["id"] for s in mine["submissions"]] == [v["id"]]
    assert _request(f"{url}/api/history?student=bo02", tok["ada01"])[1]["student"] == "ada01"
    assert [s["id"] for s in client.history(url, http_only.token, student="bo02")["submissions"]] == [bo_sid]
    me = client.me(url, tok["bo02"])
    assert problems(me, ClassIdentity) == [] and me == {"teacher": False, "student": "bo02", "name": "student 2"}
    # the teacher's summary is the teacher's; the teacher hands nothing in
    assert _request(url + "/api/summary", tok["ada01"])[0] == 403
    status, answer = _request(url + "/api/submit", http_only.token, {"trace": TRACE})
    assert status == 400 and "teacher's token hands nothing in" in answer["error"]


def test_the_limits_hold_per_student_not_per_name(http_only):
    url, tok = http_only.url, http_only.tokens
    for i in range(3):  # three waiting: the fourth is refused, whatever name it carries
        assert _request(url + "/api/submit", tok["cy03"], {"trace": TRACE, "name": f"cy{i}"})[0] == 200
    status, answer = _request(url + "/api/submit", tok["cy03"], {"trace": TRACE, "name": "someone-else"})
    assert status == 400 and "3 submissions waiting" in answer["error"]
    # graded ones free the queue, but not the hour: per_hour=4
    for sid in http_only.store.pending():
        http_only.store.record(sid, {"tasks": [], "error": "graded for the test"})
    assert _request(url + "/api/submit", tok["cy03"], {"trace": TRACE})[0] == 200
    status, answer = _request(url + "/api/submit", tok["cy03"], {"trace": TRACE, "name": "new-name"})
    assert status == 400 and "4 times in the last hour" in answer["error"]
    assert _request(url + "/api/submit", tok["bo02"], {"trace": TRACE})[0] == 200  # another student still can
    big = {"trace": "b0 = sch.get_sblock('Y')\n" * 9000}
    assert "at most 200,000" in _request(url + "/api/submit", tok["bo02"], big)[1]["error"]


def test_the_leaderboard_shows_only_approved_pseudonyms(http_only):
    store, tok = http_only.store, http_only.tokens
    for sid in ("ada01", "bo02", "cy03"):
        store.record(
            store.add(sid, None, TRACE),
            {"score": {"ada01": 10, "bo02": 5, "cy03": 0}[sid], "tasks": [], "latency_ms": None},
        )
    status, board = _request(http_only.url + "/api/leaderboard", tok["bo02"])
    assert status == 200
    assert [(r["name"], r.get("you", False)) for r in board["rows"]] == [
        ("fastcat", False),
        ("student 2", True),
        ("student 3", False),
    ]
    text = json.dumps(board)
    assert not any(secret in text for secret in ("ada01", "bo02", "cy03", "Lovelace", "Bo Kim", "Cy Young"))
    assert _request(http_only.url + "/api/leaderboard")[0] == 401  # not for strangers
    # the teacher's summary names the students
    summary = client.summary(http_only.url, http_only.token)
    assert {s["name"] for s in summary["stuck"]} == {"Ada Lovelace (ada01)", "Bo Kim (bo02)", "Cy Young (cy03)"}
    # the teacher approves a pseudonym (the roster again): the board follows, the rest keep their number
    http_only.store.sync_roster(
        load_roster(_roster(http_only.store.dir, ROSTER.replace("bo02,Bo Kim,", "bo02,Bo Kim,owl")))
    )
    names = [r["name"] for r in client.leaderboard(http_only.url, tok["ada01"])["rows"]]
    assert names == ["fastcat", "owl", "student 3"]


def test_a_retry_with_the_same_client_id_is_one_submission(http_only):
    url, tok = http_only.url, http_only.tokens
    body = {"trace": TRACE, "client_id": "5b275ea1-5618-4740-a232-7308eeb37c7c", "task": "parallel"}
    first = _request(url + "/api/submit", tok["ada01"], body)[1]
    again = _request(url + "/api/submit", tok["ada01"], body)[1]
    assert first["id"] == again["id"] and again["client_id"] == body["client_id"]
    assert http_only.store.counts()["submissions"] == 1
    # the same id from another student is their own hand-in (ids are per student)
    other = _request(url + "/api/submit", tok["bo02"], body)[1]
    assert other["id"] != first["id"] and other["student"] == "bo02"
    # the same id for a different hand-in is refused, not silently merged
    status, answer = _request(url + "/api/submit", tok["ada01"], {**body, "trace": TRACE + "\n"})
    assert status == 400 and "was used for another hand-in" in answer["error"]
    status, answer = _request(url + "/api/submit", tok["ada01"], {**body, "client_id": "no"})
    assert status == 400 and "client id" in answer["error"]
    assert http_only.store.counts()["submissions"] == 2


def test_a_client_that_cannot_reach_the_server_says_it_was_not_stored(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(client.ClassServerError, match=r"^not stored: .* cannot be reached .*tries in 1\.5 s") as err:
        client.submit(f"http://127.0.0.1:{port}", TRACE, token="t", retry_s=1.5)
    # it waited between tries (0.5 s, then 1 s, cut at 1.5 s): at least 1 s, whatever the load; no
    # upper bound on wall time, which a loaded machine stretches (a hang is pytest's to catch)
    assert time.monotonic() - started >= 1.0
    # with backoff (0.5 s, then 1 s, cut at the deadline): three tries, not a busy loop
    assert re.search(r"; (\d+) tries in", str(err.value)).group(1) == "3"


def test_a_client_cut_off_after_sending_says_it_is_not_known_and_how_to_find_out():
    """A server that takes the request and closes the connection without an answer, every time: the
    client cannot know whether the hand-in was stored, and says so with the client id to ask with."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    seen: list[bytes] = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.settimeout(5)
            data = b""
            while not data.endswith(b"}"):  # the headers, then the JSON body: all of it, then hang up
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            seen.append(data)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        with pytest.raises(client.ClassServerError) as err:
            client.submit(f"http://127.0.0.1:{port}", TRACE, token="t", client_id="c0ffee00-1234", retry_s=1.2)
    finally:
        listener.close()
    text = str(err.value)
    assert "whether this hand-in was stored is not known" in text and "--client-id c0ffee00-1234" in text
    assert len(seen) >= 2 and all(b"c0ffee00-1234" in s for s in seen)  # every retry carried the same id
    queued = client.verdict_text({"id": 12, "status": "queued"})
    assert queued.startswith("stored as #12, graded later")


# --- JupyterHub -----------------------------------------------------------------------------------------


@pytest.fixture
def hub():
    """A stand-in for JupyterHub's API: ``GET /hub/api/user`` with ``Authorization: token T``."""
    users = {
        "hub-ada": {"kind": "user", "name": "ada01", "admin": False},
        "hub-zed": {"kind": "user", "name": "zed", "admin": False},
        "hub-prof": {"kind": "user", "name": "prof", "admin": True},
        "hub-svc": {"kind": "service", "name": "cull"},
    }
    asked: list[str] = []

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            scheme, _, token = self.headers.get("Authorization", "").partition(" ")
            asked.append(token)
            model = users.get(token) if scheme == "token" and self.path == "/hub/api/user" else None
            data = json.dumps(model or {"status": 403, "message": "no"}).encode()
            self.send_response(200 if model else 403)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hub/api", asked
    httpd.shutdown()
    httpd.server_close()


def test_as_a_jupyterhub_service_the_hub_says_who_is_who(tmp_path, hub, monkeypatch):
    api, asked = hub
    with pytest.raises(ServerSetupError, match="JUPYTERHUB_API_TOKEN"):
        ClassServer(ASSIGNMENT, tmp_path / "a", port=0, mode="jupyterhub", hub_api=api)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-service-token")
    srv = ClassServer(ASSIGNMENT, tmp_path / "b", port=0, mode="jupyterhub", hub_api=api)
    th = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    th.start()
    srv._threads = [th]
    try:
        # the notebook's own Hub token, sent because the server says it is the Hub's service
        monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-ada")
        v = client.submit(srv.url, TRACE, name="zed", wait_s=0)
        assert v["student"] == "ada01" and v["name"] == "student 1"
        assert "hub-ada" in asked
        assert client.me(srv.url, "hub-zed")["student"] == "zed"  # without a roster: any Hub user
        assert _request(f"{srv.url}/api/submissions/{v['id']}", "hub-zed")[0] == 404
        assert _request(srv.url + "/api/summary", "hub-prof")[0] == 200  # a Hub admin is a teacher
        for token in ("hub-svc", "not-a-hub-token"):
            assert _request(srv.url + "/api/me", token)[0] == 401
    finally:
        srv.stop()
    # with a roster, a Hub user not on it gets nothing
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-service-token")
    roster = load_roster(_roster(tmp_path))
    srv = ClassServer(ASSIGNMENT, tmp_path / "c", port=0, mode="jupyterhub", hub_api=api, roster=roster)
    th = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    th.start()
    srv._threads = [th]
    try:
        assert srv.issued == []  # the Hub's tokens are the students': none issued
        status, answer = _request(srv.url + "/api/submit", "hub-zed", {"trace": TRACE})
        assert status == 403 and "not on this class's roster" in answer["error"]
        assert client.me(srv.url, "hub-ada")["name"] == "fastcat"
    finally:
        srv.stop()


# --- a restart after SIGKILL ---------------------------------------------------------------------


def test_the_reaper_kills_only_the_dead_servers_children(tmp_path):
    store = Store(tmp_path / "class", [])
    grading = store.dir / "grading"
    (grading / "s1_x").mkdir(parents=True)
    (grading / "s1_x" / "result.json").write_text("{}")
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    orphan = subprocess.Popen(sleep, start_new_session=True)  # a grading child left running
    stranger = subprocess.Popen(sleep, start_new_session=True)  # a reused pid: not ours
    marked = subprocess.Popen(  # a grading child's own child, in a session of its own
        sleep, start_new_session=True, env={**os.environ, reaper.MARK: reaper.mark(store, 7)}
    )
    other_class = subprocess.Popen(
        sleep, start_new_session=True, env={**os.environ, reaper.MARK: f"{tmp_path / 'other'}#7"}
    )
    try:
        time.sleep(0.3)
        store.child_started(orphan.pid, reaper.started_at(orphan.pid), str(grading / "s1_x"), 1)
        store.child_started(stranger.pid, reaper.started_at(stranger.pid) - 50.0, str(grading / "s2_y"), 2)
        killed = reaper.reap(store)
        assert orphan.pid in killed and marked.pid in killed
        # (reap waited for them: their exit status is taken, so only "gone" is seen here)
        assert not psutil.pid_exists(orphan.pid) and not psutil.pid_exists(marked.pid)
        assert stranger.poll() is None and other_class.poll() is None
        assert list(grading.iterdir()) == [] and store.children() == []
    finally:
        for p in (orphan, stranger, marked, other_class):
            p.kill()
            p.wait()
        store.close()


def _serve(folder: Path, port: int, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mlc_lab.cli", "class", "serve", str(ASSIGNMENT), "--dir", str(folder)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), *extra],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    lines = []
    while not any("teacher's token" in ln for ln in lines):
        line = proc.stderr.readline()
        assert line, "the server exited: " + "".join(lines)
        lines.append(line)
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
    proc.lines = lines
    return proc


def _graders(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children(recursive=True) if "grade_class" in c.cmdline()]
    except psutil.Error:
        return []


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := cond()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


def test_a_sigkilled_server_restarted_loses_nothing_and_tells_every_client_the_truth(tmp_path):
    folder = tmp_path / "class"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    first = _serve(folder, port, "--roster", str(_roster(tmp_path)))
    made = next(ln for ln in first.lines if "tokens in" in ln).split("tokens in ", 1)[1].split(":")[0]
    with open(made, newline="") as fh:
        tokens = {row["student_id"]: row["token"] for row in csv.DictReader(fh)}
    assert sorted(tokens) == ["ada01", "bo02", "cy03"]
    answers: dict[str, object] = {}

    def hand_in(who: str, task: str | None = None) -> None:  # who: "student#n", the student's n-th hand-in
        token = tokens[who.split("#")[0]]
        try:
            answers[who] = client.submit(url, TRACE, task, token=token, wait_s=300, retry_s=180)
        except Exception as exc:  # noqa: BLE001  (what the client would tell its student)
            answers[who] = exc

    try:
        clients = ["ada01#1", "ada01#2", "bo02#1", "bo02#2"]
        waiting = [threading.Thread(target=hand_in, args=(c,)) for c in clients]
        for th in waiting:  # all stored; the server grades one while the others wait: none is answered
            th.start()
        db = sqlite3.connect(f"file:{folder / 'class.sqlite'}?mode=ro", uri=True)
        _wait(lambda: db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 4, 60, "not stored")
        graders = _wait(lambda: _graders(first.pid), 60, "no grading child started")
        folders = _wait(lambda: [Path(f) for (f,) in db.execute("SELECT folder FROM children")], 10, "not recorded")
        assert all(f.is_dir() for f in folders)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        # the kernel kills the grading children with their server (PR_SET_PDEATHSIG)
        _gone, alive = psutil.wait_procs(graders, timeout=2)
        assert not alive, "a grading child outlived its SIGKILLed server"
        assert all(f.is_dir() for f in folders)  # the next server removes them
        late = threading.Thread(target=hand_in, args=("cy03#1", "parallel"))
        late.start()  # while the server is down: the client retries until it is back
        time.sleep(1.5)
        assert all(th.is_alive() for th in [*waiting, late]), answers  # nobody was told "cannot be reached"

        second = _serve(folder, port)  # no roster: the one given before is kept
        try:
            for th in [*waiting, late]:
                th.join(timeout=300)
            for who in [*clients, "cy03#1"]:  # five clients, each told the truth: its own, graded
                v = answers[who]
                assert isinstance(v, dict), f"{who} was told: {v}"
                assert v["student"] == who.split("#")[0] and v["status"] == "graded" and v["retries"] >= 1, v
                assert v["error"] is None and v["score"] == 5, v
            assert len({answers[c]["id"] for c in answers}) == 5
            rows = db.execute("SELECT name, COUNT(*) FROM submissions GROUP BY name ORDER BY name").fetchall()
            assert rows == [("ada01", 2), ("bo02", 2), ("cy03", 1)]  # nothing lost, nothing twice
            assert not any(f.exists() for f in folders)
            board = client.leaderboard(url, tokens["bo02"])["rows"]
            assert sorted(r["name"] for r in board) == ["fastcat", "student 2", "student 3"]
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(timeout=30)
        db.close()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    marked = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(reaper.MARK, "").startswith(str(folder.resolve())):
                marked.append(proc)
        except psutil.Error:
            continue
    assert marked == [], (
        f"a grading process of the class is still running: {[(p.pid, p.ppid(), p.cmdline()[-2:], p.environ().get(reaper.MARK)) for p in marked]}"
    )
