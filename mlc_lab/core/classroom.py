"""Talking to a class server (``mlc-lab class serve``, ``mlc_lab.classroom``) from a notebook or the
command line: plain JSON over HTTP with the standard library. Every failure is a ``ClassServerError`` that says what
went wrong in one sentence."""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from mlc_lab.errors import MlcLabError

ENV = "MLC_LAB_CLASS_SERVER"
TOKEN_ENV = "MLC_LAB_CLASS_TOKEN"
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"  # sent only to a server that says it runs as the Hub's service
RETRY_S = 60.0  # how long a hand-in is retried while the server cannot be reached (a restart takes seconds)
FIRST_DELAY_S, MAX_DELAY_S = 0.5, 8.0  # the backoff between tries: 0.5 s, 1 s, 2 s ... 8 s
# answers that say "not now" (a proxy whose server went away, a server at its connections' limit,
# JupyterHub not answering): tried again like a connection that broke
_TRANSIENT = {502: True, 503: False, 504: True}  # code -> whether the request may have been taken


class ClassServerError(MlcLabError):
    """The class server could not be reached, or refused the request (its sentence)."""


class _Lost(Exception):
    """No answer: ``sent`` when the request may have reached the server (the connection broke after)."""

    def __init__(self, reason: object, sent: bool) -> None:
        super().__init__(str(reason))
        self.reason, self.sent = reason, sent


def server_url(server: str | None) -> str:
    """The server's base URL: the one given, or ``$MLC_LAB_CLASS_SERVER``."""
    url = server or os.environ.get(ENV, "")
    if not url:
        raise ClassServerError(f"no class server given: pass its address (http://HOST:PORT) or set ${ENV}")
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


def class_token(server: str | None, token: str | None = None) -> str | None:
    """The token to send: the one given, ``$MLC_LAB_CLASS_TOKEN``, or (to a server running as a
    JupyterHub service) the Hub's token of this notebook server, ``$JUPYTERHUB_API_TOKEN``."""
    token = token or os.environ.get(TOKEN_ENV)
    if token:
        return token
    hub = os.environ.get(HUB_TOKEN_ENV)
    if hub and assignment(server).get("mode") == "jupyterhub":
        return hub
    return None


def _once(url: str, body: dict | None, token: str | None, timeout_s: float) -> dict:
    data = json.dumps(body).encode("utf-8") if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read().decode("utf-8")).get("error")
        except (ValueError, UnicodeDecodeError, AttributeError, OSError):
            message = None
        if exc.code in _TRANSIENT:
            raise _Lost(message or f"HTTP {exc.code}", sent=_TRANSIENT[exc.code]) from None
        raise ClassServerError(message or f"the class server at {url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Lost(reason or type(exc).__name__, sent=not isinstance(reason, ConnectionRefusedError)) from None
    except ValueError:
        raise ClassServerError(f"{url} did not answer as a class server does (not JSON)") from None


def _call(
    server: str | None, path: str, body: dict | None = None, token: str | None = None, timeout_s: float = 30.0
) -> dict:
    try:
        return _once(server_url(server) + path, body, token, timeout_s)
    except _Lost as lost:
        raise ClassServerError(f"the class server at {server_url(server)} cannot be reached ({lost.reason})") from None


def tries_within(retry_s: float) -> int:
    """How many times a hand-in is sent within ``retry_s`` seconds of backoff (the last at the deadline)."""
    tries, at, delay = 1, 0.0, FIRST_DELAY_S
    while at < retry_s:
        at = min(at + delay, retry_s)
        tries += 1
        delay = min(2 * delay, MAX_DELAY_S)
    return tries


def submit(
    server: str | None,
    trace: str,
    task: str | None = None,
    *,
    token: str | None = None,
    name: str | None = None,
    client_id: str | None = None,
    wait_s: float = 300.0,
    retry_s: float | None = None,
    file: str | None = None,
    on_retry: Callable[[str], Any] | None = None,
) -> dict:
    """Hand in a trace as the student whose ``token`` it is (default ``$MLC_LAB_CLASS_TOKEN``;
    ``name``: the pseudonym, on a demo server only); the verdict (score, per-task verdicts, latency,
    rank) once graded, or ``{"status": "queued", "id"}`` when grading takes longer than ``wait_s``.
    ``file``: what the hand-in is called (its file's name, or "step 3"), the name its verdict uses.

    The hand-in carries ``client_id`` (a new UUID unless given): when the connection breaks, it is
    sent again with backoff for ``retry_s`` seconds (default ``RETRY_S``), and the server answers a retry with the
    submission it stored the first time, never a second one. From the first failure on,
    ``on_retry`` is told each try to come ("... cannot be reached (...), retrying (2 of 12)"). What
    is raised says the truth: not stored, or not known (with the client id that finds out)."""
    url = server_url(server)
    retry_s = RETRY_S if retry_s is None else retry_s
    client_id = client_id or str(uuid.uuid4())
    body: dict[str, Any] = {"trace": trace, "wait": wait_s, "client_id": client_id}
    if name:
        body["name"] = name
    if task is not None:
        body["task"] = task
    if file:
        body["file"] = file
    token = class_token(url, token)
    deadline, delay, tries, sent = time.monotonic() + retry_s, FIRST_DELAY_S, 0, False
    planned = tries_within(retry_s)
    while True:
        tries += 1
        try:
            v = _once(url + "/api/submit", body, token, wait_s + 30)
            if tries > 1:
                v["retries"] = tries - 1
            return v
        except _Lost as lost:
            sent = sent or lost.sent
            reason = lost.reason
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if on_retry is not None:
            on_retry(
                f"the class server at {url} cannot be reached ({reason}), retrying "
                f"({min(tries + 1, planned)} of {planned})"
            )
        time.sleep(min(delay, left))  # backoff: 0.5 s, 1 s, 2 s ... 8 s, the last try at the deadline
        delay = min(2 * delay, MAX_DELAY_S)
    if sent:
        raise ClassServerError(
            f"the class server at {url} stopped answering and was not back within {retry_s:g} s ({reason}): "
            f"whether this hand-in was stored is not known; submit it again with client_id={client_id!r} "
            f"(mlc-lab submit --client-id {client_id}) to find out: it is never stored twice"
        )
    raise ClassServerError(
        f"not stored: the class server at {url} cannot be reached ({reason}; {tries} tries in {retry_s:g} s)"
    )


def verdict(server: str | None, sid: int, token: str | None = None) -> dict:
    """One of your submissions (the teacher's token: anyone's)."""
    return _call(server, f"/api/submissions/{int(sid)}", token=class_token(server, token))


def history(server: str | None, token: str | None = None, student: str | None = None) -> dict:
    """Your submissions, oldest first (the teacher's token and ``student``: that student's)."""
    query = f"?student={urllib.parse.quote(student)}" if student else ""
    return _call(server, "/api/history" + query, token=class_token(server, token))


def me(server: str | None, token: str | None = None) -> dict:
    """Who the server takes you for: ``{"student", "name", "teacher"}``."""
    return _call(server, "/api/me", token=class_token(server, token))


def leaderboard(server: str | None, token: str | None = None) -> dict:
    return _call(server, "/api/leaderboard", token=class_token(server, token))


def assignment(server: str | None, timeout_s: float = 30.0) -> dict:
    """The class's assignment: title, target, tasks (name, title, points, checks), hazards_fail."""
    return _call(server, "/api/assignment", timeout_s=timeout_s)


def summary(server: str | None, token: str) -> dict:
    """The teacher's figures (the token printed by ``mlc-lab class serve``)."""
    return _call(server, "/api/summary", token=token)


def verdict_text(v: dict) -> str:
    """One line for a person: the score, the rank, the latency, or why it was not graded."""
    if v.get("status") != "graded":
        return f"stored as #{v.get('id')}, graded later (its verdict: mlc_lab.classroom.client.verdict(SERVER, {v.get('id')}))"
    if v.get("error"):
        return f"#{v.get('id')} not graded: {v['error']}"
    parts = [f"{_num(v.get('score', 0))}/{_num(v.get('max_score', 0))} points"]
    if v.get("latency_ms") is not None:
        parts.append(f"{v['latency_ms']:.4g} ms")
    if v.get("rank"):
        parts.append(f"rank {v['rank']} of {v.get('students')}" + (" (a tie)" if v.get("tie") else ""))
    failed = [t["name"] for t in v.get("tasks") or [] if not t.get("passed")]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    return ", ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
