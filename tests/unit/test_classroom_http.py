"""The class server's HTTP side (mlc_lab.classroom.handler) and its client's retries: every request
gets an answer in JSON (a huge id 404, a deeply nested body 400, a body too large 413 that the
client hears, a body cut short 408), each connection has a timeout and their number a cap, a
client that goes away is one line in the log (no traceback), and the client says it is retrying
from the first refused connection on. The server here answers HTTP and grades nothing: fast."""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
import time
import urllib.error
import urllib.request

import pytest

from mlc_lab.classroom import client
from mlc_lab.classroom.handler import Handler
from mlc_lab.classroom.server import ClassServer
from tests.unit.test_classroom import ASSIGNMENT, ROSTER

TRACE = "b0 = sch.get_sblock('Y')\nl0, l1, l2 = sch.get_loops(b0)\nsch.parallel(l0)\n"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setattr(Handler, "timeout", 1.0)  # every read and write of a connection: a second here
    srv = ClassServer(ASSIGNMENT, tmp_path / "class", port=0, roster=ROSTER, max_connections=4)
    th = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    th.start()
    srv._threads = [th]
    srv.tokens = {sid: token for sid, _name, token in srv.issued}
    yield srv
    srv.stop()


def raw(srv: ClassServer, data: bytes, *, pause_s: float = 0.0, more: bytes = b"") -> tuple[int, dict]:
    """Send bytes as they are (then ``more`` after ``pause_s``), read the whole answer: status, JSON."""
    with socket.create_connection((srv.host, srv.port), timeout=30) as s:
        s.sendall(data)
        if pause_s:
            time.sleep(pause_s)
            try:
                s.sendall(more)
            except OSError:
                pass
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            length = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")]
            if length and len(body) >= length[0]:
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def post(srv: ClassServer, body: bytes, headers: dict[str, str]) -> bytes:
    lines = ["POST /api/submit HTTP/1.1", f"Host: {srv.host}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def test_every_request_gets_an_answer(server, caplog):
    auth = {"Authorization": f"Bearer {server.tokens['ada']}"}

    def get(path: str) -> tuple[int, dict]:
        head = f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth['Authorization']}\r\n\r\n"
        return raw(server, head.encode())

    # an id past any submission: 404, as any id not one's own (it closed the connection before)
    for path in ("/api/submissions/99999999999999999999999999", "/api/submissions/9223372036854775808"):
        status, body = get(path)
        assert status == 404 and body["error"] == "there is no such submission of yours"
    # a body nested past what a parser takes: 400 (it closed the connection before)
    nested = json.dumps({"trace": "x"})[:-1].encode() + b', "deep": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    status, body = raw(server, post(server, nested, {**auth, "Content-Length": str(len(nested))}))
    assert status == 400 and "nested too deeply" in body["error"]
    # what a length says, or does not
    status, body = raw(server, post(server, b"{}", {**auth, "Content-Length": "two"}))
    assert status == 400 and "Content-Length" in body["error"]
    status, body = raw(server, post(server, b"2\r\n{}\r\n0\r\n\r\n", {**auth, "Transfer-Encoding": "chunked"}))
    assert status == 411 and "Content-Length" in body["error"]
    status, body = raw(server, post(server, b'{"trace"', {**auth, "Content-Length": "200"}))  # and then nothing
    assert status == 408 and "did not arrive" in body["error"]
    # a body too large is read away first: the client hears the 413, not a reset connection
    big = json.dumps({"trace": "x" * 1_000_000}).encode()
    req = urllib.request.Request(server.url + "/api/submit", data=big, headers=auth, method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    assert err.value.code == 413 and "at most 400,000 bytes" in json.loads(err.value.read())["error"]
    # http.server's own refusals answer in JSON too
    status, body = raw(server, b"PUT /api/submit HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 501 and "the class server answers /api/submit" in body["error"]
    status, body = raw(server, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
    assert status == 414
    # a fault of the server's own: an answer with one sentence, and the log has it
    server.store.leaderboard = lambda *a, **k: 1 / 0
    with caplog.at_level(logging.ERROR, logger="mlc_lab.classroom"):
        status, body = get("/api/leaderboard")
    assert (
        status == 500
        and body["error"] == "the class server failed on this request (ZeroDivisionError); tell the course staff"
    )
    assert any("GET /api/leaderboard failed" in r.getMessage() for r in caplog.records)
    assert server.store.counts()["submissions"] == 0


def test_idle_connections_are_let_go_and_their_number_is_capped(server):
    idle = [socket.create_connection((server.host, server.port)) for _ in range(4)]  # the cap: 4
    try:
        time.sleep(0.3)
        started = time.monotonic()
        status, body = raw(server, b"GET /api/assignment HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503 and "holds 4 connections already" in body["error"]
        assert time.monotonic() - started < 1.0  # answered at once, without a thread
        for s in idle:  # each is closed after the connection's timeout (1 s here), its thread freed
            s.settimeout(10)
            assert s.recv(10) == b""
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while server.httpd.open_connections:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert raw(server, b"GET /api/assignment HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 200


def test_a_busy_server_is_tried_again(server):
    held = [socket.create_connection((server.host, server.port)) for _ in range(4)]  # full for a second
    try:
        v = client.submit(server.url, TRACE, token=server.tokens["bo"], wait_s=0, retry_s=10)
        assert v["status"] == "queued" and v["retries"] >= 1  # the 503 was a "not now", tried again
    finally:
        for s in held:
            s.close()


def test_a_client_gone_before_its_answer_is_one_line_in_the_log(server, caplog, capfd):
    body = json.dumps({"trace": TRACE, "wait": 1.5}).encode()  # nothing grades here: it waits 1.5 s, then answers
    request = post(server, body, {"Authorization": f"Bearer {server.tokens['cy']}", "Content-Length": str(len(body))})
    with caplog.at_level(logging.INFO, logger="mlc_lab.classroom"):
        s = socket.create_connection((server.host, server.port))
        s.sendall(request)
        time.sleep(0.3)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # gone: a reset
        s.close()
        deadline = time.monotonic() + 10
        while server.httpd.dropped == 0:
            assert time.monotonic() < deadline, "the server did not see the client go"
            time.sleep(0.05)
        time.sleep(0.2)
    lines = [r for r in caplog.records if r.name.startswith("mlc_lab.classroom")]
    assert len(lines) == 1 and "went away before its answer" in lines[0].getMessage(), [r.getMessage() for r in lines]
    assert lines[0].exc_info is None
    assert "Traceback" not in capfd.readouterr().err


def test_the_client_says_it_is_retrying_from_the_first_refusal():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there
    said: list[tuple[float, str]] = []
    started = time.monotonic()
    with pytest.raises(client.ClassServerError, match="^not stored: .*3 tries in 1.5 s"):
        client.submit(
            f"http://127.0.0.1:{port}",
            TRACE,
            token="t",
            retry_s=1.5,
            on_retry=lambda t: said.append((time.monotonic(), t)),
        )
    assert [t.rsplit("retrying ", 1)[1] for _, t in said] == ["(2 of 3)", "(3 of 3)"]
    assert said[0][1].startswith(f"the class server at http://127.0.0.1:{port} cannot be reached")
    assert said[0][0] - started < 0.4  # at the first refusal, not after the minute of tries
    assert client.tries_within(60) == 12  # the default: "retrying (2 of 12)"


def test_a_burst_of_connections_is_answered(tmp_path):
    """A class's burst: 300 clients connecting at once are all answered (socketserver's listen backlog
    of 5 overflowed under the load test: the kernel dropped connections and fell back to SYN cookies)."""
    srv = ClassServer(ASSIGNMENT, tmp_path / "class", port=0, roster=ROSTER)
    th = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    th.start()
    srv._threads = [th]
    try:
        assert srv.httpd.request_queue_size >= 1024
        answers: list[object] = []
        gate = threading.Barrier(300)

        def one() -> None:
            gate.wait()
            try:
                answers.append(raw(srv, b"GET /api/assignment HTTP/1.1\r\nHost: x\r\n\r\n")[0])
            except OSError as exc:
                answers.append(exc)

        clients = [threading.Thread(target=one) for _ in range(300)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=60)
        assert answers == [200] * 300
    finally:
        srv.stop()
