"""A class's widgets: the students' leaderboard, the teacher's dashboard, and the explorer's Submit bar.

The widgets take plain data (traits ``board`` and ``summary``: the class server's JSON, see
``mlc_lab.classroom.store``); ``leaderboard(server, token)`` and ``class_dashboard(server, token)`` are the
facades that fetch it from the server, in a background thread of the kernel every ``refresh_s``
seconds (the kernel, not the browser, talks to the server: on a JupyterHub the server is reachable
from the kernels, not necessarily from the students' browsers). The explorer's Submit bar calls
``submit_from_explorer`` (the explorer's ``class_submit`` request), which hands the current step's
``Session.submission()`` in, off the kernel's message loop, as the student whose class token the
kernel holds (``explore(..., class_token=T)`` or ``$MLC_LAB_CLASS_TOKEN``; never a trait, so a saved
notebook does not keep it).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import traitlets as t

from mlc_lab.classroom import client
from mlc_lab.core.protocol import SessionLike, Submitting
from mlc_lab.errors import MlcLabError
from mlc_lab.model.traits import ClassDashboardTraits, LeaderboardTraits
from mlc_lab.widgets._base import RequestError, RpcWidget, bundle

log = logging.getLogger(__name__)

TOKEN_ENV = client.TOKEN_ENV
ASSIGNMENT_TIMEOUT_S = 5.0  # an explorer does not wait longer for the class's assignment


class _Polled(RpcWidget):
    """A widget whose data a background thread refreshes from ``fetch`` (a plain callable)."""

    server = t.Unicode("").tag(sync=True)
    error = t.Unicode("").tag(sync=True)  # why the last refresh failed ("" when it worked)
    updated = t.Float(0.0).tag(sync=True)  # time.time() of the last refresh that worked
    refresh_s = t.Float(3.0).tag(sync=True)

    def __init__(self, fetch: Callable[[], dict] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fetch = fetch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if fetch is not None and self.refresh_s > 0:
            self._thread = threading.Thread(target=self._poll, name=f"mlc-lab-{type(self).__name__}", daemon=True)
            self._thread.start()

    def _apply(self, data: dict) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        """Fetch now (also what the ⟳ button asks)."""
        if self._fetch is None:
            return
        import time

        try:
            data = self._fetch()
        except client.ClassServerError as exc:
            self.error = str(exc)
            return
        with self.hold_sync():
            self._apply(data)
            self.error = ""
            self.updated = time.time()

    # The requests of mlc_lab.model.requests.REQUESTS it answers, and the method answering each.
    handlers = {"class_refresh": "_refresh_request"}

    def _refresh_request(self) -> dict:
        self.refresh()
        return {"error": self.error}

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception:  # noqa: BLE001  (a closed comm, a bad answer: try again later)
                log.debug("mlc_lab: refreshing %s failed", type(self).__name__, exc_info=True)
            self._stop.wait(max(0.5, float(self.refresh_s)))

    def close(self) -> None:
        self._stop.set()
        super().close()


class Leaderboard(_Polled):
    """The class's leaderboard by approved pseudonym (``board``: the server's ``/api/leaderboard``
    JSON; the row of the token's student has ``you``)."""

    _esm = bundle("leaderboard")
    _mlc_entry_name = "leaderboard"
    traits_type = LeaderboardTraits
    board = t.Dict().tag(sync=True)
    highlight = t.Unicode("").tag(sync=True)  # a pseudonym to mark (yours)

    def _apply(self, data: dict) -> None:
        self.board = data

    def mlc_what(self) -> str:
        return "class leaderboard"


class ClassDashboard(_Polled):
    """The teacher's view (``summary``: the server's ``/api/summary``; ``board``: the leaderboard)."""

    _esm = bundle("class_dashboard")
    _mlc_entry_name = "class_dashboard"
    traits_type = ClassDashboardTraits
    summary = t.Dict().tag(sync=True)
    board = t.Dict().tag(sync=True)

    def _apply(self, data: dict) -> None:
        self.summary = data.get("summary", {})
        self.board = data.get("board", {})

    def mlc_what(self) -> str:
        return "class dashboard (teacher's view)"


def leaderboard(
    server: str | None = None, token: str | None = None, *, refresh_s: float = 3.0, highlight: str = ""
) -> Leaderboard:
    """The leaderboard of a class server (default ``$MLC_LAB_CLASS_SERVER``), refreshed every
    ``refresh_s`` seconds while it is open; ``token``: your class token (default
    ``$MLC_LAB_CLASS_TOKEN``), which marks your row (``highlight``: a name to mark instead)."""
    url = client.server_url(server)
    token = client.class_token(url, token)
    first = client.leaderboard(url, token)  # a wrong address or token says so here, not in an empty widget
    if not highlight:
        highlight = next((r["name"] for r in first.get("rows", []) if r.get("you")), "")
    return Leaderboard(
        lambda: client.leaderboard(url, token), server=url, board=first, refresh_s=refresh_s, highlight=highlight
    )


def class_dashboard(server: str | None = None, token: str | None = None, *, refresh_s: float = 3.0) -> ClassDashboard:
    """The teacher's dashboard: per-task pass rates, the latency distribution, the most common
    failures, who is stuck at which task, and the leaderboard; ``token`` is the one ``mlc-lab class
    serve`` printed (default ``$MLC_LAB_CLASS_TOKEN``)."""
    url = client.server_url(server)
    token = token or os.environ.get(TOKEN_ENV)
    if not token:
        raise client.ClassServerError(
            f"the teacher's dashboard needs the token printed by `mlc-lab class serve` "
            f"(pass token=... or set ${TOKEN_ENV})"
        )

    def fetch() -> dict:
        return {"summary": client.summary(url, token), "board": client.leaderboard(url, token)}

    first = fetch()
    return ClassDashboard(fetch, server=url, summary=first["summary"], board=first["board"], refresh_s=refresh_s)


# --- the explorer's Submit bar ---------------------------------------------------------------------------


def classroom_setup(classroom: str | None, token: str | None = None) -> dict:
    """The explorer's ``classroom`` trait: ``{"server": URL, "identified"}`` when a class server is
    given (or ``$MLC_LAB_CLASS_SERVER`` is set), else ``{}`` (no Submit bar). ``identified``: a class
    token is at hand (given, or in the environment), so the bar asks for no pseudonym."""
    url = classroom or os.environ.get(client.ENV)
    if not url:
        return {}
    identified = bool(token or os.environ.get(client.TOKEN_ENV) or os.environ.get(client.HUB_TOKEN_ENV))
    return {"server": client.server_url(url), "identified": identified}


@dataclass(frozen=True)
class ClassAssignment:
    """A class server's assignment as the Checks tab scores it (what ``load_assignment`` gives for a
    file: ``title``, ``target``, ``tasks`` of ``mlc_lab.grading.assignment.Task``, ``hazards_fail``)."""

    title: str
    target: str
    tasks: tuple
    hazards_fail: frozenset


def class_assignment(setup: dict) -> ClassAssignment | None:
    """Ask the class server in ``setup`` (``classroom_setup``'s) for its assignment; adds its
    ``title`` and ``tasks`` (name, title, points, checks) to ``setup`` for the Submit bar, or
    ``assignment_error`` (the sentence) when the server cannot say: the explorer opens all the same."""
    from mlc_lab.grading.assignment import Task

    try:
        data = client.assignment(setup["server"], timeout_s=ASSIGNMENT_TIMEOUT_S)
        tasks = tuple(
            Task(
                name=str(t["name"]),
                title=str(t.get("title") or t["name"]),
                checks=tuple(str(c) for c in t["checks"]),
                points=float(t.get("points") or 0.0),
                max_latency_ms=t.get("max_latency_ms"),
            )
            for t in data["tasks"]
        )
        a = ClassAssignment(
            title=str(data.get("title") or ""),
            target=str(data.get("target") or "cpu"),
            tasks=tasks,
            hazards_fail=frozenset(data.get("hazards_fail") or ("correctness",)),
        )
    except client.ClassServerError as exc:
        setup["assignment_error"] = f"the class's assignment could not be read: {exc}"
        return None
    except (KeyError, TypeError, ValueError) as exc:
        setup["assignment_error"] = f"the class server's assignment lacks or mangles {exc}"
        return None
    setup["title"] = a.title
    setup["tasks"] = [{"name": t.name, "title": t.title, "points": t.points, "checks": list(t.checks)} for t in tasks]
    return a


def submit_from_explorer(
    widget: Any, session: SessionLike, name: Any, task: Any = None, token: str | None = None, client_id: Any = None
) -> dict:
    """Hand in the current step's submission (as the token's student; ``name``: the pseudonym typed,
    for a demo server); the verdict arrives in the widget's ``class_submission`` trait (``{"state":
    "sending"|"graded"|"queued"|"error", "name", "step", "text", "verdict"}``). Returns at once:
    grading takes seconds and the kernel's message loop stays free. ``client_id``: the page's id of
    this intent (a double click sends it twice: the server stores it once and answers both with it)."""
    setup = widget.classroom or {}
    server = setup.get("server")
    if not server:
        raise RequestError(
            "this explorer was opened without a class server (explore(..., classroom=URL))", type="usage"
        )
    name = str(name or "").strip()
    if not name and not setup.get("identified"):
        raise RequestError(
            "type a pseudonym first (a demo server), or open the explorer with your class token "
            f"(explore(..., class_token=T) or ${client.TOKEN_ENV})",
            type="usage",
        )
    client_id = str(client_id or uuid.uuid4())[:100]
    last = widget.class_submission or {}
    if last.get("state") == "sending":
        if last.get("client_id") == client_id:  # the same intent again: the same submission
            return {"step": last.get("step")}
        raise RequestError("a submission is being graded; wait for its verdict", type="busy")
    if not isinstance(session, Submitting):
        raise MlcLabError(f"a {type(session).__name__} cannot be handed in (it has no submission())")
    step = session.current.id
    trace = session.submission(step)
    widget.class_submission = {
        "state": "sending",
        "name": name,
        "step": step,
        "text": "grading…",
        "client_id": client_id,
    }

    def retrying(text: str) -> None:  # from the first failed try on, the bar says so (never a silent wait)
        widget.class_submission = {"state": "sending", "name": name, "step": step, "text": text, "client_id": client_id}

    def run() -> None:
        try:
            v = client.submit(
                server,
                trace,
                task or None,
                token=token,
                name=name or None,
                client_id=client_id,
                file=f"step {step}",
                on_retry=retrying,
            )
            state = {
                "state": "graded" if v.get("status") == "graded" else "queued",
                "verdict": v,
                "text": client.verdict_text(v),
            }
        except client.ClassServerError as exc:
            state = {"state": "error", "text": str(exc)}
        except Exception as exc:  # noqa: BLE001  (the bar says it; the kernel goes on)
            log.exception("mlc_lab: submitting to %s failed", server)
            state = {"state": "error", "text": f"the submission failed ({type(exc).__name__}: {exc})"}
        verdict = state.get("verdict")
        shown = verdict.get("name", name) if isinstance(verdict, dict) else name
        widget.class_submission = {"name": shown, "step": step, "client_id": client_id, **state}

    threading.Thread(target=run, name="mlc-lab-class-submit", daemon=True).start()
    return {"step": step}
