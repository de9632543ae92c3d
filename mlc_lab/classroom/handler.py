"""The class server's HTTP side: every request gets an answer, and no client can hold the server.

- Each connection has a timeout (``CONNECTION_TIMEOUT_S`` for every read and write: an idle or a
  trickling client is let go, and its thread with it) and the server holds at most
  ``MAX_CONNECTIONS`` at once; past that a new one is answered 503 at once, without a thread.
- Every request is answered in JSON: a body too large 413 (after reading it away, so the client
  hears the answer rather than a reset), without a length 411, cut short 408, not JSON or nested
  too deep 400, an id past any submission 404, and a fault of the server's own 500 with one sentence.
- A client that goes away before its answer is one line in the log, never a traceback.

Routes and answers: see ``mlc_lab.classroom.server``.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from mlc_lab.classroom.identity import OPEN_NOTICE, NotIdentified, Who, bearer
from mlc_lab.errors import MlcLabError

log = logging.getLogger("mlc_lab.classroom.server")

MAX_BODY = 400_000  # bytes of a submission's JSON
MAX_DRAIN = 16 << 20  # a body over MAX_BODY is read away (to answer 413) up to this size
MAX_WAIT_S = 600.0
CONNECTION_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024  # open at once (a student waiting for a verdict holds one)
MAX_ID = 2**62  # past any submission's id (SQLite's integers end at 2**63)
ROUTES = "/api/submit, /api/leaderboard, /api/assignment, /api/submissions/N, /api/history, /api/me and /api/summary"


class ClassHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server with a cap on open connections and one log line per dropped client."""

    daemon_threads = True
    # connections the kernel holds until they are accepted (socketserver's 5 overflowed under a class's
    # burst of hand-ins: the kernel dropped connections and fell back to SYN cookies)
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler: type, max_connections: int = MAX_CONNECTIONS) -> None:
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.open_connections = 0
        self.dropped = 0  # clients that went away before their answer
        self._count = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            full = self.open_connections >= self.max_connections
            if not full:
                self.open_connections += 1
        if full:
            _answer_busy(request, self.max_connections)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            with self._count:
                self.open_connections -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._count:
                self.open_connections -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002  (socketserver's)
        exc = sys.exc_info()[1]
        where = ":".join(str(p) for p in client_address) if isinstance(client_address, tuple) else str(client_address)
        if isinstance(exc, (ConnectionError, TimeoutError)):
            self.dropped += 1
            log.info("mlc_lab: the client %s went away before its answer (%s)", where, type(exc).__name__)
        else:
            log.error("mlc_lab: a request from %s failed", where, exc_info=exc)


def _answer_busy(request: socket.socket, limit: int) -> None:
    body = json.dumps(
        {"error": f"the class server holds {limit} connections already; try again in a few seconds"}
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\n"
        f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        request.settimeout(2.0)
        request.sendall(head + body)
    except OSError:
        pass


class SubmissionRefused(MlcLabError):
    """A submission the server does not take (the sentence says why); nothing was stored."""


class BodyRefused(Exception):
    """A request body the server does not read as a submission (``status``, the sentence)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Handler(BaseHTTPRequestHandler):
    """The class server's HTTP answers (the ``ClassServer`` is its HTTP server's ``class_server``)."""

    protocol_version = "HTTP/1.1"
    server_version = "mlc-lab-class/1"
    timeout = CONNECTION_TIMEOUT_S  # every read and write of the connection (socketserver sets it)

    @property
    def cs(self) -> Any:
        return self.server.class_server  # type: ignore[attr-defined]

    def log_message(self, fmt: str, *args: Any) -> None:  # requests are not worth a line each
        log.debug("%s " + fmt, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:  # noqa: ARG002
        """http.server's own refusals (a request line too long, a method not served...) in JSON too."""
        try:
            short = HTTPStatus(code).phrase
        except ValueError:
            short = "error"
        self.close_connection = True
        self._send(code, {"error": f"{message or short}: the class server answers {ROUTES}"})

    def _send(self, status: int, body: dict) -> None:
        if self.cs.mode == "open":
            body = {**body, "notice": OPEN_NOTICE}
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if self.cs.mode == "open":
            self.send_header("X-Mlc-Lab-Class", "open (demo: names are not checked)")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    def _who(self, what: str) -> Who | None:
        """The request's identity (``NotIdentified`` without one, naming ``what`` needs it); None
        only on a demo server, which takes anyone."""
        token = bearer(self.headers.get("Authorization", "")) or self.headers.get("X-Class-Token", "")
        if self.cs.mode == "open":
            return self.cs.identities.who(token)
        return self.cs.identities.required(token, what)

    def _answering(self, route: Any) -> None:
        """Run a route; whatever it raises becomes an answer (never a connection closed without one)."""
        try:
            route()
        except NotIdentified as exc:
            self._error(exc.status, str(exc))
        except BodyRefused as exc:
            self.close_connection = True
            self._error(exc.status, str(exc))
        except (ConnectionError, TimeoutError):
            raise  # the client is gone, or too slow: the server's handle_error says so in one line
        except Exception as exc:  # noqa: BLE001  (a fault of the server: an answer, a log entry)
            log.exception("mlc_lab: %s %s failed", self.command, self.path[:200])
            self.close_connection = True
            self._error(500, f"the class server failed on this request ({type(exc).__name__}); tell the course staff")

    def do_GET(self) -> None:  # noqa: N802  (http.server's spelling)
        self._answering(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._answering(self._post)

    def _get(self) -> None:
        url = urlparse(self.path)
        path, query = url.path.rstrip("/"), parse_qs(url.query)
        store = self.cs.store
        if path == "/api/assignment":
            self._send(200, self.cs.assignment_info())
        elif path == "/api/leaderboard":
            who = self._who("the leaderboard")
            board = store.leaderboard(store.labels(), you=who.student if who else None)
            self._send(200, {"title": self.cs.assignment.title, **board})
        elif path == "/api/summary":
            who = self._who("the teacher's summary")
            if who is None or not who.teacher:
                raise NotIdentified(
                    "the teacher's summary needs the teacher's token, printed when the server started "
                    "(header 'Authorization: Bearer TOKEN')",
                    status=HTTPStatus.FORBIDDEN,
                )
            self._send(200, {"title": self.cs.assignment.title, **store.summary(store.labels(teacher=True))})
        elif path == "/api/me":
            who = self._who("who you are")
            if who is None or who.teacher:
                self._send(200, {"teacher": who is not None, "student": None, "name": None})
            else:
                self._send(200, {"teacher": False, "student": who.student, "name": store.labels().get(who.student)})
        elif path == "/api/history":
            who = self._who("your history")
            student = who.student if who else None
            if who and who.teacher:
                student = (query.get("student") or [None])[0]
            if not student:
                raise NotIdentified("whose history? (the teacher adds ?student=ID)", status=400)
            self._send(200, {"student": student, "submissions": store.history(student, store.labels())})
        elif path.startswith("/api/submissions/") and path.rsplit("/", 1)[1].isdigit():
            self._verdict(path.rsplit("/", 1)[1])
        else:
            self._error(404, f"no such page {path[:200] or '/'}: the class server answers {ROUTES}")

    def _verdict(self, digits: str) -> None:
        who = self._who("a verdict")
        sid = int(digits) if len(digits) <= 19 else MAX_ID
        store = self.cs.store
        mine = sid < MAX_ID and (
            self.cs.mode == "open" or (who is not None and (who.teacher or store.owner(sid) == who.student))
        )
        v = store.verdict(sid, store.labels()) if mine else None
        if v is None:  # another student's and one that does not exist: the same answer
            self._error(404, "there is no such submission of yours")
        else:
            self._send(200, v)

    def _body(self) -> dict:
        """The request's JSON object (``BodyRefused`` saying why not; a body too large is read away
        first, so that the client hears the 413 rather than a reset connection)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise BodyRefused(HTTPStatus.LENGTH_REQUIRED, "send the submission with a Content-Length header")
        raw = (self.headers.get("Content-Length") or "0").strip()
        if not raw.isdigit() or len(raw) > 18:
            raise BodyRefused(400, f"the Content-Length header must be a number of bytes, not {raw[:40]!r}")
        length = int(raw)
        if length > MAX_BODY:
            if length <= MAX_DRAIN:
                self._drain(length)
            raise BodyRefused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a submission is at most {MAX_BODY:,} bytes of JSON"
            )
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            raise BodyRefused(
                HTTPStatus.REQUEST_TIMEOUT, f"the body did not arrive within {CONNECTION_TIMEOUT_S:g} s"
            ) from None
        if len(data) < length:
            raise BodyRefused(400, f"the body ended after {len(data)} of its {length} bytes")
        try:
            body = json.loads(data.decode("utf-8"))
        except RecursionError:
            raise BodyRefused(400, "the submission's JSON is nested too deeply") from None
        except (ValueError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            raise BodyRefused(400, 'a submission is a JSON object {"trace": ..., "task": ..., "client_id": ...}')
        return body

    def _drain(self, length: int) -> None:
        left = length
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 1 << 16))
                if not chunk:
                    return
                left -= len(chunk)
        except OSError:
            return

    def _post(self) -> None:
        path = urlparse(self.path).path.rstrip("/")
        if path != "/api/submit":
            self.close_connection = True  # its body, if any, is not read
            self._error(404, "submissions go to /api/submit")
            return
        try:
            who = self._who("handing in")
        except NotIdentified:
            self._body()  # read (or refuse) the body first: the answer is then the identity's
            raise
        body = self._body()
        if who is None or (self.cs.mode == "open" and not who.teacher):  # a demo: the typed name
            who = self.cs.identities.open_name(body.get("name"))
        try:
            sid = self.cs.submit(who, body.get("trace"), body.get("task"), body.get("client_id"), body.get("file"))
        except SubmissionRefused as exc:
            self._error(400, str(exc))
            return
        wait = body.get("wait", 0)
        if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 0:
            self.cs.wait(sid, min(float(wait), MAX_WAIT_S))
        labels = self.cs.store.labels()
        self._send(200, self.cs.store.verdict(sid, labels) or {"id": sid, "status": "queued"})
