"""Talking to a class server (``mlc-lab class serve``, ``mlc_lab.classroom``) from a notebook or the
command line: plain JSON over HTTP with the standard library. Every failure is a ``ClassServerError`` that says what
went wrong in one sentence."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from mlc_lab.errors import MlcLabError

ENV = "MLC_LAB_CLASS_SERVER"


class ClassServerError(MlcLabError):
    """The class server could not be reached, or refused the request (its sentence)."""


def server_url(server: str | None) -> str:
    """The server's base URL: the one given, or ``$MLC_LAB_CLASS_SERVER``."""
    url = server or os.environ.get(ENV, "")
    if not url:
        raise ClassServerError(f"no class server given: pass its address (http://HOST:PORT) or set ${ENV}")
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


def _call(
    server: str | None, path: str, body: dict | None = None, token: str | None = None, timeout_s: float = 30.0
) -> dict:
    url = server_url(server) + path
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
        except (ValueError, UnicodeDecodeError, AttributeError):
            message = None
        raise ClassServerError(message or f"the class server at {server_url(server)} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ClassServerError(f"the class server at {server_url(server)} cannot be reached ({reason})") from None
    except ValueError:
        raise ClassServerError(f"{url} did not answer as a class server does (not JSON)") from None


def submit(server: str | None, name: str, trace: str, task: str | None = None, wait_s: float = 300.0) -> dict:
    """Hand in a trace under a pseudonym; the verdict (score, per-task verdicts, latency, rank) once
    graded, or ``{"status": "queued", "id"}`` when grading takes longer than ``wait_s``."""
    body: dict[str, Any] = {"name": name, "trace": trace, "wait": wait_s}
    if task is not None:
        body["task"] = task
    return _call(server, "/api/submit", body, timeout_s=wait_s + 30)


def verdict(server: str | None, sid: int) -> dict:
    return _call(server, f"/api/submissions/{int(sid)}")


def leaderboard(server: str | None) -> dict:
    return _call(server, "/api/leaderboard")


def assignment(server: str | None) -> dict:
    return _call(server, "/api/assignment")


def summary(server: str | None, token: str) -> dict:
    """The teacher's figures (the token printed by ``mlc-lab class serve``)."""
    return _call(server, "/api/summary", token=token)


def verdict_text(v: dict) -> str:
    """One line for a person: the score, the rank, the latency, or why it was not graded."""
    if v.get("status") != "graded":
        return f"submission {v.get('id')} is queued for grading"
    if v.get("error"):
        return f"not graded: {v['error']}"
    parts = [f"{_num(v.get('score', 0))}/{_num(v.get('max_score', 0))} points"]
    if v.get("latency_ms") is not None:
        parts.append(f"{v['latency_ms']:.4g} ms")
    if v.get("rank"):
        parts.append(f"rank {v['rank']} of {v.get('students')}")
    failed = [t["name"] for t in v.get("tasks") or [] if not t.get("passed")]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    return ", ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
