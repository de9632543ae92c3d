"""The schedule explorer: TVMScript, loop nest, primitives, history and trace of one Session.

The widget is a view of a :class:`mlc_lab.Session`; it holds no schedule state of its own. Every
click reaches Python as a request that calls the same Session methods a user calls, and every
Session change (from a click or from ``explorer.session.apply(...)`` in a cell) arrives through
``Session.on_change`` as a :class:`~mlc_lab.model.steps.Change` carrying the finished step. The view
never pulls: a click is one request, one state message (the step, the history delta, the selection
and the error together, inside ``hold_sync``), one reply. This module never imports TVM.

Wire protocol (traits): ``step`` is the current :class:`StepView` as UTF-8 JSON in a binary buffer
(script, loop tree, changed lines, decisions, trace); ``history`` is what changed in the step tree,
``{"from": n, "steps": [summaries of steps n, n+1, ...]}`` (the whole list when the front end gets
the whole state: opening, a page reload; then with ``visited``, where redo goes from each step);
``selection``, ``error``, ``failures``, ``measurements``, ``measuring`` as before. A front end that
finds a gap in the history asks for it (request ``history``).

The page owns the history: undo, redo, go to step and diffs are answered in js/explorer/view.ts from
the steps it holds (sent to it, or recorded), live and in saved views alike; it then sends a FOLLOW
note (no answer) and the Session moves there, with nothing sent back. Only new steps, measurements
and analyses are requests. Records for saved notebooks (each step, each checks report) are made
after a pause, at the end of a cell or in ``wait()``: never on a click's path (``explorer_records.py``).

The Checks panel (``checks_setup``, ``checks``, ``hazards``; see ``checks.py``) and the way to a target
program (``path_setup``, ``path``; see ``path.py``) are not sent with the click: the named checks and
the way from the new step follow its state as a second message, from worker threads.

Measuring (``Session.measure``) and the CUDA view (``Session.cuda_source``) take seconds in the
measure worker, so those two requests are answered from a background thread: the ``measuring``
trait says what runs, ``measurements`` mirrors ``Session.measurements`` as plain data.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

import traitlets as t

from mlc_lab.core.protocol import FullSession, Lowering, SessionLike
from mlc_lab.model.steps import Change, LoopTree, StepView, ref_of
from mlc_lab.model.steps import plain as _plain
from mlc_lab.core.step_calls import given_label
from mlc_lab.errors import MlcLabError, ScheduleStepError, TraceParseError, error_kind

# The module by its full name: the package re-exports the function `access_view` under the same name.
from mlc_lab.widgets.access.view import AccessRequests
from mlc_lab.model.requests import FOLLOW
from mlc_lab.model.traits import ExplorerTraits
from mlc_lab.widgets._base import Reply, RequestError, RpcWidget, bundle
from mlc_lab.widgets.checks import ChecksWorker, checks_setup
from mlc_lab.widgets.classroom import class_assignment, classroom_setup, submit_from_explorer
from mlc_lab.widgets.lowering import BadTarget, lower_payload
from mlc_lab.widgets.path import PathPanel, split_target
from mlc_lab.widgets.export import collect_export, render_html
from mlc_lab.widgets.explorer_records import StepRecords
from mlc_lab.widgets.explorer_text import (
    step_summary,
    measurement_info,
    summary_detail,
    first_line,
    strip_line_prefix,
    made_names,
    as_loop_tree,
)

log = logging.getLogger(__name__)

MEASURE_TARGETS = ("cpu", "cuda")
# FOLLOW (mlc_lab.model.requests): the page's note that it moved to a step it holds (undo, redo, go to
# step: js/explorer/view.ts answers those from its own steps); the Session follows, nothing answers.


class Explorer(AccessRequests, PathPanel, StepRecords, RpcWidget):
    """Interactive view of a schedule session (see :func:`explore`)."""

    _esm = bundle("explorer")
    # The requests of mlc_lab.model.requests.REQUESTS this widget answers, and the method answering each.
    handlers = {
        "apply": "apply",
        "history": "full_history",
        "goto": "goto",
        "set_decision": "set_decision",
        "replay": "replay",
        "script_at": "script_at",
        "export_trace": "export_trace",
        "export_html": "export_html",
        "access_footprint": "access_footprint",
        "access_gpu_stats": "access_gpu_stats",
        "access_cancel": "access_cancel",
        "measure": "measure",
        "measure_cancel": "measure_cancel",
        "cuda_source": "cuda_source",
        "lower": "lower",
        "clear_error": "clear_error",
        "class_submit": "class_submit",
        "checks": "check_report",
        "path": "path_report",
    }
    traits_type = ExplorerTraits

    func = t.Unicode("").tag(sync=True)
    # The current step as UTF-8 JSON in a binary buffer: encoded once per step by the StepView, and
    # no walk by ipywidgets through hundreds of nested dicts of the loop tree.
    # The page also sets it, when it moves to a step it holds (undo, redo, go to: js/explorer/view.ts,
    # moveTo) and says so by FOLLOW; the bytes its next change carries back are not taken (set_state)
    # nor echoed: an echo arriving after a later move would take the page back.
    step = t.Bytes(b"{}").tag(sync=True, echo_update=False)
    history = t.Dict().tag(sync=True)  # {"from": n, "steps": [step summaries n, n+1, ...]}
    selection = t.Dict().tag(sync=True)
    error = t.Dict().tag(sync=True)
    failures = t.List(t.Dict()).tag(sync=True)
    # step id (as text) -> the Session's Measurement of that step, as plain data (see measurement_info)
    measurements = t.Dict().tag(sync=True)
    measuring = t.Dict().tag(sync=True)  # {"step", "target"} while a measurement runs, else {}
    height = t.Unicode("640px").tag(sync=True)
    # What the saved record leaves out ({} when nothing): {"max_steps", "steps", "steps_recorded",
    # "replies_dropped"}; a saved view says so (js/explorer/view.ts).
    record_cut = t.Dict().tag(sync=True)
    # The Checks panel (mlc_lab/widgets/checks.py): what it lists, the report of the current
    # step (sent after the step's state, from a worker thread) and the hazards of each step.
    checks_setup = t.Dict().tag(sync=True)
    checks = t.Dict().tag(sync=True)
    hazards = t.Dict().tag(sync=True)
    # The Submit bar (mlc_lab/widgets/classroom.py, js/classroom/submit.ts): {"server"} when the
    # explorer was given a class server, and the last submission's state and verdict.
    classroom = t.Dict().tag(sync=True)
    class_submission = t.Dict().tag(sync=True)
    # The Compiler view's target as its field holds it ("cpu", "cuda", "sm_75", a tag, JSON): the
    # last one that compiled, kept per explorer (and in a saved notebook, with its recorded replies).
    compiler_target = t.Unicode("cpu").tag(sync=True)
    # The explorer's target, "cpu" or "cuda" ("": each step's, cuda once it binds threads): where the
    # toolbar's Measure runs and, unless named checks or an assignment fix one, whose checks are listed
    # from step 0 on. The toolbar sets it; so does explore(..., target=) (a device, or "cuda" for a
    # target program that binds threads).
    target = t.Unicode("").tag(sync=True)
    # The way to a target program (mlc_lab/widgets/path.py): the target, and the way from the current
    # step (sent after the step's own state, from a worker thread, as the checks are).
    path_setup = t.Dict().tag(sync=True)
    path = t.Dict().tag(sync=True)

    def __init__(
        self,
        session: SessionLike,
        *,
        height: str = "640px",
        checks: list[str] | None = None,
        tasks: list[dict] | None = None,
        assignment: Any = None,
        classroom: str | None = None,
        class_token: str | None = None,
        target: Any = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(session, SessionLike):  # the protocol, checked: every member it declares
            raise TypeError(f"Explorer needs a mlc_lab.Session (or a SessionLike); got {type(session).__name__}")
        self._session: SessionLike = session
        self._class_token = class_token  # kept in the kernel: never a trait (saved notebooks keep traits)
        self._lock = threading.RLock()
        self._view: StepView = session.step_view()
        self._history_len = 0
        self._error_ids = itertools.count(1)
        self._page_shows: Any = None  # the step the page moved to itself (see _follow)
        self._page_holds: tuple[str, Any] | None = None  # (trait, value) the page holds already: not sent
        self._records_start()
        self._checks_sent: dict[Any, dict] = {}  # step id -> the report the page was sent (it keeps them)
        self._measuring_thread: int | None = None  # the thread measuring now (see measure_cancel)
        classroom_info = classroom_setup(classroom, class_token)
        if classroom_info and assignment is None and tasks is None and checks is None:
            assignment = class_assignment(classroom_info)  # the class's tasks, scored as its grader does
        target, way = split_target(session, target, assignment, MEASURE_TARGETS)
        self._checks_args = {"checks": checks, "tasks": tasks, "assignment": assignment}
        setup = checks_setup(session, **self._checks_args, target=target)
        # The first comm message already carries the whole state (no empty first render).
        super().__init__(
            target=target or "",
            height=height,
            func=self._func_name(),
            step=self._view.json_bytes,
            history=self._full_history(),
            measurements=self._read_measurements(),
            failures=self._read_failures(),
            checks_setup=setup,
            classroom=classroom_info,
            path_setup=way.setup() if way is not None else {},
            **kwargs,
        )
        self._checks = ChecksWorker(session, setup, self._publish_checks, assignment)
        self._checks.schedule(self._view.id, [s.id for s in session.steps])
        self._path_start(way)
        self._unsubscribe: Callable[[], None] | None = session.on_change(self._on_session_change)
        for step in list(session.steps)[-self.MAX_RECORDED_STEPS :]:  # steps made before this view
            if step.id != self._view.id:
                self._record_step_id(step.id)
        self._record_step(self._view)  # the step on screen, last (the first a saved view shows)

    # --- public API: the current step, read from the StepView (plain data) -------------------------
    @property
    def current(self) -> Any:
        return self._view.id

    @property
    def script(self) -> str:
        return self._view.script

    @property
    def loop_tree(self) -> LoopTree:
        """The loop tree of the current step, as the Session reports it (plain data)."""
        return as_loop_tree(self._view.loop_tree)

    @property
    def changed_lines(self) -> list[int]:
        return list(self._view.changed_lines)

    @property
    def decisions(self) -> list[dict]:
        return [dict(d) for d in self._view.decisions]

    @property
    def trace(self) -> str:
        return self._view.trace

    @property
    def steps(self) -> list[dict]:
        """Every step of the session's history, with its children."""
        return [{**step_summary(s), "children": list(s.children)} for s in self._session.steps]

    @property
    def can_undo(self) -> bool:
        return self._view.parent is not None

    @property
    def can_redo(self) -> bool:
        return bool(self._session.current.children)

    @property
    def session(self) -> SessionLike:
        """The Session this explorer shows; changes made through it appear here at once."""
        return self._session

    def select(self, name: str | None, kind: str | None = None) -> None:
        """Select a loop or block by the name shown in the script (None clears the selection)."""
        if not name:
            self.selection = {}
            return
        found = self.loop_tree.match(name, kind)
        if len(found) != 1:
            which = "no" if not found else "more than one"
            raise MlcLabError(f"there is {which} loop or block called {name!r} in the current program")
        self.selection = {"kind": found[0]["kind"], "name": ref_of(found[0])}

    def to_html(self, path: str | Path | None = None, *, title: str | None = None) -> str:
        """A self-contained HTML page of every step (script, diff, loop tree, trace); written to ``path`` if given."""
        data = collect_export(self._session)
        data.measurements = self._read_measurements()
        html = render_html(data, title=title)
        if path is not None:
            Path(path).write_text(html, encoding="utf-8")
        return html

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for running background requests (a measurement, a CUDA compile) and for the checks
        of the current step; False on timeout. Records the steps not yet recorded for saved views."""
        self._flush_records()
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in list(self._mlc_jobs):
            job.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if job.is_alive():
                return False
        done = self._checks.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        done = self._path.wait(None if deadline is None else max(0.0, deadline - time.monotonic())) and done
        self._flush_records()  # what the checks reported, too
        return done

    def set_checks(
        self, checks: list[str] | None = None, *, tasks: list[dict] | None = None, assignment: Any = None
    ) -> None:
        """List other checks in the Checks panel (as ``explore``'s ``checks=``, ``tasks=``,
        ``assignment=``; nothing: every check of the explorer's target). Every step is judged again."""
        self._checks_args = {"checks": checks, "tasks": tasks, "assignment": assignment}
        setup = checks_setup(self._session, **self._checks_args, target=self.target or None)
        with self._lock:
            self._checks.close()
            self._checks = ChecksWorker(self._session, setup, self._publish_checks, assignment)
            with self.hold_sync():
                self.checks_setup, self.checks, self.hazards = setup, {}, {}
                self._checks_sent = {}
        self._checks.schedule(self._session.current.id, [s.id for s in self._session.steps])

    @t.observe("target")
    def _target_changed(self, change: Any) -> None:
        """The toolbar (or Python) picked a target: the checks of that target, every step judged again."""
        if change.new not in ("", *MEASURE_TARGETS):
            self.target = change.old  # the page sends what its menu offers; anything else is dropped
            return
        if getattr(self, "_checks", None) is not None:
            self.set_checks(**self._checks_args)

    def check_report(self, step: Any = None) -> dict:
        """The Checks panel's report of a step (default: the current one), as the panel shows it."""
        return self._checks.report(self._session.current.id if step is None else self._step_id(step))

    def close(self) -> None:
        self._records_close()
        unsubscribe = getattr(self, "_unsubscribe", None)
        if unsubscribe is not None:
            unsubscribe()
            self._unsubscribe = None
        for helper in (getattr(self, "_checks", None), getattr(self, "_path", None)):
            if helper is not None:
                helper.close()
        super().close()

    # --- session -> traits ------------------------------------------------------------------------
    def _on_session_change(self, change: Change) -> None:
        with self._lock, self.hold_sync():
            if change.kind == "measure":  # only a measurement changed (maybe from a worker thread)
                self.measurements = self._read_measurements()
                if self.error.get("source") == "measure":
                    self.error = {}
                return
            for added in change.added:  # a replayed trace adds several: a saved view steps through each
                if added.id != change.step.id:
                    self._record_step_id(added.id)
            self._show(change.step)
            self._sync_failures()  # attempts that failed in cells (session.apply) since the last change
            if change.added:
                self.history = {"from": self._history_len, "steps": [a.to_json() for a in change.added]}
                self._history_len += len(change.added)
            self.error = {}
        # After the step's state: its checks, the new steps' hazards and its way come as a second message.
        self._checks.schedule(change.step.id, [a.id for a in change.added])
        self._path.schedule(change.step.id)

    def _publish_checks(self, what: str, sid: Any, data: dict, worker: Any = None) -> None:
        """From the checks worker: the report of the current step, or one step's hazards."""
        with self._lock, self.hold_sync():
            if (worker is not None and worker is not self._checks) or self.comm is None:  # replaced, or closed
                return
            if what == "checks":
                self._send_answer("checks", sid, _plain(data), self._checks_sent)
            elif data.get("new") or data.get("resolved"):  # steps that create or resolve a hazard
                self.hazards = {**self.hazards, str(_plain(sid)): _plain(data)}

    def _send_answer(self, name: str, sid: Any, data: dict, sent: dict) -> None:
        """Set trait ``name`` (checks, path) to a step's answer, recorded for saved views later (off the
        click's path) under the request of that name. The page keeps each step's answer (js/explorer/
        view.ts): one it was sent before (back at that step) is not sent again."""
        known = sent.get(sid) == data
        sent[sid] = data
        if not known:
            self._record_answer(name, sid, data)
        self._set_held(name, data, held=known)

    def refresh(self) -> None:
        """Read the Session's current step and whole history again (one comm message)."""
        with self._lock, self.hold_sync():
            self._show(self._session.step_view())
            self.history = self._full_history()
            self.measurements = self._read_measurements()
            self._sync_failures()
        self._checks.schedule(self._view.id)
        self._path.schedule(self._view.id)

    def _show(self, view: StepView) -> None:
        self._view = view
        # A step the page moved to itself is on screen already: the trait follows, nothing is sent.
        self._set_held("step", view.json_bytes, held=self._page_shows is not None and view.id == self._page_shows)
        self._record_step(view)
        if (
            self.selection
            and as_loop_tree(view.loop_tree).find(self.selection.get("name", ""), self.selection.get("kind")) is None
        ):
            self.selection = {}

    def _full_history(self) -> dict:
        steps = self._session.steps
        self._history_len = len(steps)
        # Where redo goes from each step (the child visited last): a reloaded page starts from it.
        visited = self._session.visited_children
        history: dict = {"from": 0, "steps": [step_summary(s) for s in steps]}
        if visited:
            history["visited"] = {str(_plain(p)): _plain(c) for p, c in dict(visited).items()}
        return history

    def set_state(self, sync_data: dict) -> None:
        state = {k: v for k, v in sync_data.items() if k != "step"}  # the Session follows FOLLOW notes
        if state:
            super().set_state(state)

    def _set_held(self, name: str, value: Any, *, held: bool) -> None:
        """Set a trait; when ``held``, the page holds that value already and it is not sent."""
        self._page_holds = (name, value) if held else None
        try:
            setattr(self, name, value)
        finally:
            self._page_holds = None

    def notify_change(self, change: Any) -> None:
        """A trait changed: ipywidgets sends it to the page, unless the page holds that value already
        (then only the observers run: traitlets' own notify_change)."""
        held = self._page_holds
        if held is not None and change["name"] == held[0] and change["new"] == held[1]:
            t.HasTraits.notify_change(self, change)
            return
        super().notify_change(change)

    def _follow(self, step: Any) -> None:
        """The page moved to a step it holds (undo, redo, go to): the Session follows, so Python
        sees what the page shows. No reply: the page does not wait for this."""
        with self._lock:
            try:
                target = self._step_id(step)
            except RequestError:
                log.warning("mlc_lab: the page moved to step %r, which this session does not have", step)
                return
            if target == self._session.current.id:
                return
            self._page_shows = target
            try:
                self._session.goto(target)
            except MlcLabError:
                log.exception("mlc_lab: following the page to step %r failed", target)
            finally:
                self._page_shows = None

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict:
        state = super().get_state(key, drop_defaults)
        if key is None and "history" in state:  # the whole state (opening, a page reload): the whole history
            state["history"] = self._full_history()
        return state

    def _func_name(self) -> str:
        return str(self._view.loop_tree.get("func") or self._session.func_name or "")

    def _read_failures(self) -> list[dict]:
        """The Session's failed attempts (it keeps them; this view only shows them)."""
        return [f.to_json() for f in self._session.failed]

    def _sync_failures(self) -> None:
        failures = self._read_failures()
        if failures != self.failures:
            self.failures = failures

    def _read_measurements(self) -> dict[str, dict]:
        found = self._session.measurements
        return {str(_plain(sid)): measurement_info(m) for sid, m in list(found.items())}

    def _step_id(self, value: Any) -> Any:
        """The Session's own id for an id that came back from the front end (JSON may stringify)."""
        for step in self._session.steps:
            if step.id == value or str(step.id) == str(value):
                return step.id
        raise RequestError(f"there is no step {value!r}", type="unknown_step")

    # --- front-end requests -------------------------------------------------------------------------
    def apply(
        self, primitive: str, args: list | None = None, kwargs: dict | None = None, then_split: bool = False
    ) -> dict:
        args = list(args or [])
        kwargs = dict(kwargs or {})
        # One state message for the whole click: the new step, the history delta, the selection.
        with self._lock, self.hold_sync():
            try:
                result = self._session.apply(primitive, *args, **kwargs)
                if primitive == "sample_perfect_tile" and then_split:
                    loop = kwargs.get("loop", args[0] if args else None)
                    result = self._session.apply("split", loop, factors=result)
            except ScheduleStepError as exc:
                self._record_failure(exc, primitive, args, kwargs)
                raise RequestError(
                    exc.summary,
                    detail=exc.detail,
                    involved=list(exc.involved),
                    primitive=getattr(exc, "primitive", primitive),
                    type="step",
                ) from None
            except MlcLabError as exc:
                self._record_failure(exc, primitive, args, kwargs)
                raise RequestError(str(exc), primitive=primitive, type=error_kind(exc)) from None
            names = made_names(result)
            self._select_new(names)
        return {"names": names, "step": _plain(self._session.current.id)}

    def full_history(self) -> dict:
        """The whole history, for a front end that missed part of it."""
        return self._full_history()

    def goto(self, step: Any) -> dict:
        target = self._step_id(step)
        with self._lock, self.hold_sync():
            try:
                self._session.goto(target)
            except MlcLabError as exc:
                self._set_error(source="history", primitive="goto", summary=str(exc))
                raise RequestError(str(exc), type="history") from None
        return {"step": _plain(self._session.current.id)}

    def set_decision(self, index: int, value: Any) -> dict:
        with self._lock, self.hold_sync():
            try:
                self._session.set_decision(int(index), value)
            except MlcLabError as exc:
                self._set_error(
                    source="decision", primitive=f"decision #{index}", summary=first_line(exc), detail=str(exc)
                )
                raise RequestError(first_line(exc), type=error_kind(exc)) from None
        return {"step": _plain(self._session.current.id)}

    def replay(self, trace: str) -> dict:
        with self._lock, self.hold_sync():
            return self._replay(trace)

    def _replay(self, trace: str) -> dict:
        try:
            self._session.replay(trace)
        except TraceParseError as exc:
            line = getattr(exc, "line", None)
            summary = strip_line_prefix(first_line(exc), line)
            self._set_error(source="replay", primitive="replay", summary=summary, detail=str(exc), line=line)
            raise RequestError(summary, line=line, detail=str(exc), type="trace") from None
        except MlcLabError as exc:
            self._set_error(source="replay", primitive="replay", summary=first_line(exc), detail=str(exc))
            raise RequestError(first_line(exc), detail=str(exc), type=error_kind(exc)) from None
        return {"step": _plain(self._session.current.id)}

    def script_at(self, step: Any) -> Reply:
        step_id = self._step_id(step)
        return Reply.text(self._session.script_at(step_id), step=_plain(step_id))

    def export_trace(self, format: str = "text") -> Reply:  # noqa: A002  (the front end's word)
        s = self._session
        if format == "json":
            text = json.dumps(_plain(s.trace_json), indent=1)
        elif format == "python":
            text = s.trace_python
        elif format == "text":
            text = s.trace
        else:
            raise RequestError(f"unknown trace format {format!r}; use json, text or python", type="bad_request")
        return Reply.text(text, format=format)

    def export_html(self) -> Reply:
        return Reply.text(self.to_html())

    # Measuring and CUDA: both run in the measure worker; answered from a background thread.
    def _handle_request(self, widget: Any, content: Any, buffers: list[Any] | None) -> None:
        if isinstance(content, dict) and content.get("kind") == FOLLOW:
            self._follow(content.get("step"))
            return
        super()._handle_request(widget, content, buffers)

    def measure(self, target: str = "cpu", step: Any = None) -> dict:
        target = str(target)
        if target not in MEASURE_TARGETS:
            raise RequestError(f"unknown target {target!r}; use {' or '.join(MEASURE_TARGETS)}", type="bad_request")
        sid = self._session.current.id if step is None else self._step_id(step)
        with self._lock:
            if self.measuring:
                raise RequestError(
                    f"step {self.measuring.get('step')} is being measured; wait for it to finish", type="busy"
                )
            self.measuring = {"step": _plain(sid), "target": target}
            self._measuring_thread = threading.get_ident()  # what measure_cancel stops
        try:
            result = self._session.measure(target=target, step=sid)
        except MlcLabError as exc:
            summary, detail = summary_detail(exc)
            if error_kind(exc) == "cancelled":  # the person asked for it: no banner
                with self._lock:
                    self.measuring = {}
                raise RequestError(f"the measurement of step {_plain(sid)} was cancelled", type="cancelled") from None
            with self._lock, self.hold_sync():
                self.measuring = {}
                self._set_error(
                    source="measure",
                    primitive=f"measure on {target}",
                    summary=summary,
                    detail=detail,
                    type=error_kind(exc),
                )
            raise RequestError(summary, detail=detail, type=error_kind(exc)) from None
        except BaseException:
            with self._lock:
                self.measuring = {}
            raise
        with self._lock, self.hold_sync():
            self.measuring = {}
            self.measurements = self._read_measurements()
        return {"step": _plain(sid), "measurement": measurement_info(result)}

    def measure_cancel(self) -> dict:
        """Stop this explorer's measurement in flight: its worker process is killed (the next
        measurement starts a fresh one) and the measure request answers "cancelled"."""
        from mlc_lab.core.worker import worker  # core: the one worker mechanism

        with self._lock:
            owner = self._measuring_thread if self.measuring else None
        if owner is not None:
            worker().cancel(owner=owner)
        return {}

    def cuda_source(self, step: Any = None, ptx: bool = True) -> dict:
        """The CUDA kernels of a step, or (type "gpu_check") why it cannot be compiled for a GPU."""
        sid = self._session.current.id if step is None else self._step_id(step)
        try:
            build = self._session.cuda_source(step=sid, ptx=bool(ptx))
        except MlcLabError as exc:
            summary, detail = summary_detail(exc)
            raise RequestError(summary, detail=detail, step=_plain(sid), type=error_kind(exc)) from None
        return {
            "step": _plain(sid),
            "source": str(build.source),
            "kernels": _plain(list(build.kernels or [])),
            "ptx": build.ptx,
            "ptx_error": build.ptx_error,
        }

    def lower(self, step: Any = None, target: Any = "cpu") -> dict:
        """The Compiler panel: passes, code and loop facts of a step (see compiler_panel.py); the
        target is "cpu", "cuda", a CUDA arch, a TVM target tag or a target as JSON."""
        sid = self._session.current.id if step is None else self._step_id(step)
        if not isinstance(self._session, Lowering):
            raise MlcLabError(f"a {type(self._session).__name__} cannot be lowered (it has no lower())")
        try:
            return lower_payload(self._session, _plain(sid), target)
        except BadTarget as exc:  # the panel keeps its last good view and says this under its field
            raise RequestError(str(exc), type="bad_target") from None
        except MlcLabError as exc:
            summary, detail = summary_detail(exc)
            raise RequestError(summary, detail=detail, step=_plain(sid), type=error_kind(exc)) from None

    def clear_error(self) -> dict:
        self.error = {}
        return {}

    # --- errors -----------------------------------------------------------------------------------
    def _set_error(self, **fields: Any) -> None:
        self.error = {"id": next(self._error_ids), **{k: _plain(v) for k, v in fields.items()}}

    def _record_failure(self, exc: BaseException, primitive: str, args: list, kwargs: dict) -> None:
        """Show a failed click: the Session keeps the attempt (``Session.failed``); the banner says why."""
        with self.hold_sync():
            self._sync_failures()
            self._set_error(
                source="apply",
                primitive=primitive,
                summary=getattr(exc, "summary", None) or first_line(exc),
                detail=getattr(exc, "detail", "") or "",
                involved=[str(n) for n in getattr(exc, "involved", []) or []],
                # the error's field (the Session writes it); else the same writer's text of the call as sent
                label=exc.label if isinstance(exc, MlcLabError) and exc.label else given_label(primitive, args, kwargs),
            )

    def _select_new(self, names: Any) -> None:
        """After a step, select the first new loop/block it made (split -> the outer loop)."""
        flat = names if isinstance(names, list) else [names]
        for name in flat:
            if isinstance(name, str):
                node = self.loop_tree.find(name)
                if node is not None:
                    self.selection = {"kind": node["kind"], "name": ref_of(node)}
                    return

    def class_submit(self, name: str = "", task: str | None = None, client_id: str | None = None) -> dict:
        """The Submit bar: hand the current step in to the class server (verdict in class_submission)."""
        return submit_from_explorer(self, self._session, name, task, token=self._class_token, client_id=client_id)

    def mlc_what(self) -> str:
        return f"schedule explorer of `{self.func}`" if self.func else "schedule explorer"


def explore(x: Any, func: str | None = None, **kwargs: Any) -> Explorer:
    """Open an explorer on a module, TVMScript text or file, or an existing Session.

    >>> ex = mlc_lab.explore(MMRelu)        # display it: last expression of a cell
    >>> ex.session.apply("split", "Y/j", factors=[None, 4])   # shows up in the open explorer

    The Checks panel lists every named check of the explorer's ``target`` ("cpu" or "cuda", from step 0
    on; the toolbar's menu changes it; without one, each step's: cuda once it binds threads), or those
    given: ``checks=["vectorize", "parallel"]``, ``tasks=[{"title": "Tile for the GPU", "checks":
    [...]}]``, or ``assignment="lab.toml"`` (the tasks of an assignment file, see ``mlc_lab.grading``).
    ``target`` is also where the toolbar's Measure runs. ``target=`` may instead be a target program,
    shown with the way to it (``widgets/path.py``; one that binds GPU threads makes the target cuda).
    """
    return Explorer(x if isinstance(x, SessionLike) else _new_session(x, func), **kwargs)


def _new_session(x: Any, func: str | None) -> FullSession:
    """A new Session, held to all a widget uses (mypy fails here when the Session lacks a member)."""
    from mlc_lab.core.session import Session  # core is allowed; it is the one that talks to TVM

    return Session(x, func)
