"""The explorer's way to a target program, Python side: which target, and the way from each step, off the click.

``explore(program, target=...)`` takes a device (``"cpu"``, ``"cuda"``: where Measure runs and whose
checks are listed, as before) or a target program (an IRModule, a PrimFunc, TVMScript text, a ``.py``
file, a trace of the program, another Session): the explorer then shows the way to it. A target
program that binds GPU threads makes the checks CUDA's from step 0; the toolbar still picks either.
``explore(program, assignment="lab.toml")`` takes the assignment's ``reference`` when it names one.

The way from a step (``Session.path_to``: the engine reads it off the target, TVM confirms it) takes
from a few hundred milliseconds to seconds, and after a wrong step it searches the history for the
step to go back to. So it is found the way the Checks panel's reports are (``widgets/checks.py``): a
click answers with the step's state first, and one worker thread per explorer (``PathWorker``) finds
the way of the newest current step only, then publishes it as a second message. An answer that comes
when the session has moved on is kept (a step never changes: back at it, it is shown at once) but
not sent. Where the way first goes back to step N, the way from step N is that same way: it is kept
for step N too, so "go back" shows its way without a search.

Wire (traits of the Explorer): ``path_setup`` (:class:`mlc_lab.model.path.PathSetup`) names the
target; ``path`` (:class:`~mlc_lab.model.path.StepPath`) is the way from the current step, with its
hint. The request ``path`` answers it for any step, and a saved notebook keeps each step's under that
request's key. js/path/ draws them: "N steps to the target", Hint (the primitive's form, filled in),
Show the way, and the step to go back to.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlc_lab.core.follower import Follower
from mlc_lab.core.protocol import SessionLike, Wayfinding
from mlc_lab.errors import MlcLabError
from mlc_lab.model.steps import plain as _plain

log = logging.getLogger(__name__)

PROGRAM_FORMS = "an IRModule, a PrimFunc, TVMScript text or a path to a .py file"


@dataclass(frozen=True)
class WayTarget:
    """The program the explorer shows the way to: what ``Session.path_to`` takes, and its name."""

    program: Any
    name: str
    source: str  # "program" or "assignment"
    gpu: bool

    def setup(self) -> dict:
        return {"available": True, "name": self.name, "source": self.source, "gpu": self.gpu}


def split_target(
    session: SessionLike, target: Any, assignment: Any, devices: tuple[str, ...]
) -> tuple[str, WayTarget | None]:
    """``explore``'s ``target=`` (and ``assignment=``) as the checks' device ("" for each step's) and
    the way's target program (None: no way shown). Bad input: one sentence naming both forms."""
    if target is None or (isinstance(target, str) and target in ("", *devices)):
        return target or "", _reference(session, assignment)
    if not isinstance(session, Wayfinding):
        raise MlcLabError("this session cannot find a way to a target program (it is not a mlc_lab Session)")
    way = _program_target(session, target, _name_of(target), "program")
    return ("cuda" if way.gpu else ""), way


def _program_target(session: SessionLike, program: Any, name: str, source: str) -> WayTarget:
    from mlc_lab.core.path import target_binds_threads  # core: loads the target once, as path_to does

    try:
        gpu = target_binds_threads(session, program)
    except MlcLabError as exc:
        first = (str(exc).split("\n", 1)[0] or type(exc).__name__).strip()
        shown = repr(program) if isinstance(program, str) and len(program) < 60 else f"this {type(program).__name__}"
        raise MlcLabError(
            f"target must be a device ({' or '.join(map(repr, ('cpu', 'cuda')))}) or a target program "
            f"({PROGRAM_FORMS}); {shown} is neither ({first})"
        ) from None
    return WayTarget(program, name, source, gpu)


def _reference(session: SessionLike, assignment: Any) -> WayTarget | None:
    """The way's target of an assignment that names a reference program (None without one, and
    None for a reference the way cannot aim at: a scheduling function or a folder, which only the
    grader's sandbox runs; the explorer still opens with the assignment's checks)."""
    if assignment is None or not isinstance(session, Wayfinding):
        return None
    from mlc_lab.widgets.checks import loaded_assignment

    loaded = loaded_assignment(assignment)
    reference = getattr(loaded, "reference", None)
    if reference is None:
        return None
    title = getattr(loaded, "title", "") or Path(str(reference)).name
    try:
        return _program_target(session, reference, f"the reference of {title}", "assignment")
    except MlcLabError:
        return None


def _name_of(target: Any) -> str:
    """What the page calls the target: its class or function name, its file's name, or "the target"."""
    if isinstance(target, Path) or (isinstance(target, str) and "\n" not in target and target.endswith(".py")):
        return Path(str(target)).name
    if isinstance(target, str):
        found = re.search(r"^\s*(?:class|def)\s+(\w+)", target, re.M)
        return found.group(1) if found else "the target"
    named = _name_in_notebook(target)
    if named is not None:
        return named  # explore(MyBmmRelu, target=TargetModule): "TargetModule"
    if isinstance(target, SessionLike):
        return f"step {target.current.id} of another session"
    return "the target"


def _name_in_notebook(obj: Any) -> str | None:
    """The name ``obj`` has in the notebook's namespace (IPython's), if any."""
    module = sys.modules.get("IPython")  # never imported here: only if a kernel runs us
    shell = module.get_ipython() if module is not None else None
    names = getattr(shell, "user_ns", None) or {}
    return next((k for k, v in list(names.items()) if v is obj and not k.startswith("_")), None)


class PathWorker(Follower):
    """Finds the way from the current step in a background thread, newest step only, and hands each
    answer to ``publish(sid, data, worker)`` (from the worker thread; a view that replaced the
    worker ignores what it still sends)."""

    THREAD_NAME = "mlc-lab-explorer-path"
    WHAT = "the way from step {!r}"

    def __init__(self, session: SessionLike, way: WayTarget | None, publish: Callable[[Any, dict, PathWorker], None]):
        super().__init__()
        self._session = session
        self._way = way
        self._publish = publish
        self._answers: dict = {}  # step id -> (PathAnswer or None, StepPath JSON); a step never changes

    @property
    def enabled(self) -> bool:
        return self._way is not None

    @property
    def target(self) -> Any:
        return None if self._way is None else self._way.program

    def _follow(self, sid: Any) -> None:
        self._publish(sid, self.report(sid), self)

    def answer(self, sid: Any) -> Any:
        """The ``PathAnswer`` from step ``sid`` (found once per step; None when it could not be found)."""
        self.report(sid)
        return self._answers[sid][0]

    def report(self, sid: Any) -> dict:
        """The way from step ``sid`` as the page reads it (a StepPath; cached per step)."""
        if self._way is None:
            raise MlcLabError("this explorer has no target program: open it with explore(program, target=...)")
        held = self._answers.get(sid)
        if held is not None:
            return held[1]
        started = time.perf_counter()
        try:
            answer = self._wayfinding().path_to(self._way.program, step=sid)
        except MlcLabError as exc:
            return self._keep(sid, None, {"step": _plain(sid), "error": _first_line(exc)})
        except Exception as exc:  # noqa: BLE001  (say it in the panel; the step itself is fine)
            log.exception("mlc_lab: the way from step %r failed", sid)
            text = f"the way from step {sid} could not be found ({type(exc).__name__}: {_first_line(exc)})"
            return self._keep(sid, None, {"step": _plain(sid), "error": text})
        ms = round((time.perf_counter() - started) * 1e3, 1)
        data = self._json(sid, answer, ms)
        back = answer.undo_to
        if back is not None and back not in self._answers:  # the way from the step to go back to: this one
            there = dataclasses.replace(answer, start=back, undo_to=None)
            self._keep(back, there, self._json(back, there, ms))
        return self._keep(sid, answer, data)

    def _wayfinding(self) -> Wayfinding:
        """The session, as one that finds ways (``split_target`` gives no target to one that cannot)."""
        if not isinstance(self._session, Wayfinding):
            raise MlcLabError(f"a {type(self._session).__name__} cannot find a way (it has no path_to())")
        return self._session

    def _json(self, sid: Any, answer: Any, ms: float) -> dict:
        from mlc_lab.core.path import hint_of

        hint = hint_of(answer, self._session)
        return {"step": _plain(sid), "answer": _plain(answer.to_json()), "hint": _plain(hint.to_json()), "ms": ms}

    def _keep(self, sid: Any, answer: Any, data: dict) -> dict:
        with self._cond:
            self._answers.setdefault(sid, (answer, data))
            return self._answers[sid][1]


class PathPanel:
    """The explorer's side of the way: its worker, what it publishes, and the Python API (``path_to``,
    ``hint``). Mixed into the Explorer, which holds the traits ``path_setup`` and ``path``."""

    _session: SessionLike
    _lock: Any
    _path: PathWorker

    def _path_start(self, way: WayTarget | None) -> None:
        self._path_sent: dict = {}  # step id -> the answer the page was sent (it keeps them)
        self._path = PathWorker(self._session, way, self._publish_path)
        self._path.schedule(self._session.current.id)

    def path_report(self, step: Any = None) -> dict:
        """The request ``path``: the way from a step (default: the current one), as the panel shows it."""
        sid = self._session.current.id if step is None else self._step_id(step)  # type: ignore[attr-defined]
        return self._path.report(sid)

    def path_to(self, step: Any = None) -> Any:
        """The way from a step (default: the current one) to this explorer's target program, as the
        panel shows it: a ``mlc_lab.model.path.PathAnswer`` (``Session.path_to``, found once per step)."""
        sid = self._session.current.id if step is None else self._step_id(step)  # type: ignore[attr-defined]
        answer = self._path.answer(sid)
        if answer is None:
            raise MlcLabError(self._path.report(sid).get("error", f"no way from step {sid}"))
        return answer

    def hint(self, step: Any = None) -> Any:
        """The next step to this explorer's target program and its sentence (``Session.hint``)."""
        from mlc_lab.core.path import hint_of

        return hint_of(self.path_to(step), self._session)

    def _publish_path(self, sid: Any, data: dict, worker: Any = None) -> None:
        """From the path worker: the way from a step. Sent only while that step is the current one."""
        with self._lock, self.hold_sync():  # type: ignore[attr-defined]
            if worker is not self._path or self.comm is None:  # type: ignore[attr-defined]  # replaced, or closed
                return
            if sid != self._session.current.id:  # stale: the session moved on (its own answer follows)
                return
            self._send_answer("path", sid, data, self._path_sent)  # type: ignore[attr-defined]


def _first_line(exc: BaseException) -> str:
    return (str(exc).split("\n", 1)[0] or type(exc).__name__).strip()
