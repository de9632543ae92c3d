"""The explorer's Checks panel, Python side: which checks a view shows, and computing them off the click.

A click answers with the step's state first (the explorer's one state message); the named checks of
that step (``Session.check``: 1-200 ms at 2048^3) and the hazards of the steps just made follow as a
second message, computed by one worker thread per explorer (``ChecksWorker``). The worker takes the
newest current step only (steps passed over while it ran are not checked), then the hazards of every
step not yet seen, so the history can mark the step that created one. Plain data only: the reports
arrive here as ``CheckReport`` objects of the Session and leave as JSON.

Wire (traits of the Explorer): ``checks_setup`` says what the panel lists (``{"available", "title",
"target", "names", "tasks": [{"title", "checks", "points"}]}``); ``checks`` is the report of one step
(``{"step", "target", "checks": [CheckResult.to_json() + "title"], "hazards": [Hazard.to_json()],
"ms"}`` or ``{"step", "error"}``); ``hazards`` maps a step id (text) to ``{"new": [the hazards its
parent did not have], "count": how many it has, "resolved": [the parent's hazards it no longer has]}``,
for the steps that create or resolve one. js/checks/panel.ts reads them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from mlc_lab.core.follower import Follower
from mlc_lab.core.protocol import Checking, SessionLike
from mlc_lab.errors import MlcLabError

log = logging.getLogger(__name__)


def _catalog() -> dict:
    from mlc_lab.core.checks import CHECKS  # core: the named checks (no TVM at import)

    return CHECKS


def checks_setup(
    session: SessionLike,
    *,
    checks: list[str] | None = None,
    tasks: list[dict] | None = None,
    assignment: Any = None,
    target: str | None = None,
) -> dict:
    """What the Checks panel lists, validated: the named ``checks``, a ``tasks`` list of ``{"title",
    "checks"}`` dicts, or the tasks of an assignment TOML file (``mlc_lab.grading``). Nothing given:
    every check of the explorer's ``target`` ("cpu" or "cuda", from step 0 on), or without one, of each
    step's (GPU when the step binds threads, else CPU). Named checks and an assignment fix their own."""
    if not isinstance(session, Checking):
        return {"available": False}
    catalog = _catalog()
    explorer_target, title, target = target, None, None
    task_list: list[dict] = []
    if assignment is not None:
        a = loaded_assignment(assignment)
        title, target = a.title, a.target
        task_list = [{"title": t.title, "checks": list(t.checks), "points": t.points} for t in a.tasks]
    if tasks is not None:
        if not isinstance(tasks, (list, tuple)):
            raise MlcLabError("tasks must be a list of {'title': ..., 'checks': [...]} dicts")
        for i, task in enumerate(tasks, 1):
            names = task.get("checks") if isinstance(task, dict) else None
            if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
                raise MlcLabError(f"task {i} of tasks needs 'checks', a non-empty list of check names")
            task_list.append(
                {
                    "title": str(task.get("title") or ", ".join(names)),
                    "checks": list(names),
                    "points": task.get("points"),
                }
            )
    names = list(dict.fromkeys([*(checks or []), *(n for t in task_list for n in t["checks"])]))
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise MlcLabError(
            f"there is no check named {', '.join(map(repr, unknown))}; the checks are {', '.join(sorted(catalog))}"
        )
    kinds = {catalog[n].target for n in names}
    if len(kinds) > 1:
        raise MlcLabError(f"the checks {', '.join(names)} mix cpu and cuda checks; a view judges one target")
    if target is None and kinds:  # an assignment's target first, then the named checks' own
        target = kinds.pop()
    if target is None and not names:
        target = _target_kind(explorer_target)
    return {"available": True, "title": title, "target": target, "names": names or None, "tasks": task_list}


def _target_kind(target: str | None) -> str | None:
    """The checks' kind of an explorer's target: "cuda" for a GPU target, "cpu", or None (each step's)."""
    if not target:
        return None
    return "cuda" if str(target).startswith(("cuda", "sm_")) else "cpu"


def loaded_assignment(assignment: Any) -> Any:
    """An assignment file loaded, or an assignment already made (a class server's: it has ``tasks``)."""
    if hasattr(assignment, "tasks"):
        return assignment
    from mlc_lab.grading.assignment import load_assignment

    return load_assignment(assignment)


class ChecksWorker(Follower):
    """Computes the checks of the current step and the hazards of new steps in a background thread,
    newest first, and hands each result to ``publish`` (called from the worker thread, with the worker:
    a view that replaced it ignores what it still sends)."""

    THREAD_NAME = "mlc-lab-explorer-checks"
    WHAT = "the checks of step {!r}"

    def __init__(
        self,
        session: SessionLike,
        setup: dict,
        publish: Callable[[str, Any, Any, ChecksWorker], None],
        assignment: Any = None,
    ) -> None:
        super().__init__()
        self._session = session
        self._setup = setup
        self._assignment = None  # with an assignment, each report carries its tasks as the grader scores them
        if assignment is not None and setup.get("available"):
            self._assignment = loaded_assignment(assignment)
        self._publish = publish
        self._pending: list = []  # steps whose hazards the history still needs
        self._seen: dict = {}  # step id -> its hazards as JSON (computed once; steps never change)
        self._marked: set = set()  # steps whose hazards went to the history
        self._reports: dict = {}  # step id -> report JSON (a step never changes)

    @property
    def enabled(self) -> bool:
        return bool(self._setup.get("available"))

    def schedule(self, current: Any, added: list | tuple = ()) -> None:
        """Check ``current`` (replacing any step not started yet) and find the hazards of ``added``."""
        if not self.enabled:
            return
        with self._queueing():
            self._current = current
            self._pending += [a for a in added if a not in self._marked and a not in self._pending]

    # --- the worker thread: the current step first; then one step of the history at a time --------
    def _queued(self) -> bool:
        return self._current is not None or bool(self._pending)

    def _take(self) -> tuple[str, Callable[[], None]]:
        if self._current is not None:
            return super()._take()
        self._pending.sort()
        sid = self._pending.pop(0)
        self._marked.add(sid)
        return f"the hazards of step {sid!r}", lambda: self._publish("hazards", sid, self.hazards_of(sid), self)

    def _follow(self, sid: Any) -> None:
        self._publish("checks", sid, self.report(sid), self)

    def report(self, sid: Any) -> dict:
        """The report of step ``sid`` as the panel reads it (cached per step)."""
        if sid in self._reports:
            return self._reports[sid]
        catalog = _catalog()
        started = time.perf_counter()
        try:
            report = self._checking().check(self._setup.get("names"), target=self._setup.get("target"), step=sid)
        except MlcLabError as exc:
            return {"step": sid, "error": str(exc).split("\n", 1)[0]}
        except Exception as exc:  # noqa: BLE001  (say it in the panel; the step itself is fine)
            log.exception("mlc_lab: checking step %r failed", sid)
            return {
                "step": sid,
                "error": f"the checks of step {sid} could not be computed ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''})",
            }
        data = report.to_json()
        lines = []
        for line in data["checks"]:
            check = catalog.get(line["name"])
            lines.append({**line, "title": check.title if check else line["name"]})
        kinds = {catalog[c["name"]].target for c in data["checks"] if c["name"] in catalog}
        target = self._setup.get("target") or (kinds.pop() if len(kinds) == 1 else None)
        out = {
            "step": sid,
            "target": _kind(target),
            "checks": lines,
            "hazards": data["hazards"],
            "ms": round((time.perf_counter() - started) * 1e3, 1),
        }
        if self._assignment is not None:
            out["tasks"] = self._scored(sid, report)
        self._reports[sid] = out
        self._seen.setdefault(sid, list(data["hazards"]))
        return out

    def _scored(self, sid: Any, report: Any) -> list[dict]:
        """Each task of the assignment as ``mlc-lab grade`` scores this step: one function does both
        (a latency threshold is judged from the step's measurement, when it was measured)."""
        from mlc_lab.grading.scoring import score_tasks

        a = self._assignment
        assert a is not None  # only called with an assignment
        measured = self._session.measurements.get(sid)
        latency = getattr(measured, "latency_s", None) if measured is not None else None
        scored = score_tasks(
            a.tasks, report, hazards_fail=a.hazards_fail, latency_ms=None if latency is None else latency * 1e3
        )
        return [
            {
                "name": t.name,
                "title": t.title,
                "passed": t.passed,
                "points": t.points,
                "max_points": t.max_points,
                "messages": [str(m) for m in t.messages],
            }
            for t in scored
        ]

    def _checking(self) -> Checking:
        """The session, as one that has ``check`` (``checks_setup`` lists nothing for one without)."""
        if not isinstance(self._session, Checking):
            raise MlcLabError(f"a {type(self._session).__name__} has no named checks (it has no check())")
        return self._session

    def hazards_of(self, sid: Any) -> dict:
        """``{"new": [the hazards the step's parent does not have], "count": how many it has,
        "resolved": [the parent's hazards this step no longer has]}``: the page marks the step that
        made a hazard, and says at which later step it was resolved."""
        found = self._hazards(sid)
        parent = _parent(self._session, sid)
        before = self._hazards(parent) if parent is not None else []
        made = new_hazards(before, found)
        gone = new_hazards(found, before)
        return {"new": [found[i] for i in made], "count": len(found), "resolved": [before[i] for i in gone]}

    def _hazards(self, sid: Any) -> list:
        if sid not in self._seen:
            target = self._setup.get("target") or "cuda"
            if _kind(target) != "cuda" or not _binds_threads(self._session, sid):
                self._seen[sid] = []  # hazards are of GPU kernels: a step that binds no thread has none
            else:
                try:
                    hazards = self._checking().check([], target=target, step=sid).hazards
                    self._seen[sid] = [h.to_json() for h in hazards]
                except Exception:  # noqa: BLE001  (no mark rather than a broken history)
                    log.exception("mlc_lab: the hazards of step %r failed", sid)
                    self._seen[sid] = []
        return self._seen[sid]


def new_hazards(before: list, after: list) -> list[int]:
    """Which hazards of a step (indices into ``after``) its parent did not have. Messages name loops
    and extents that later steps rename, so a hazard is matched by its kind and where it is; a step
    creates one of a kind only when it has more of that kind than its parent (a renamed block keeps
    its hazard, a second loop bound with the wrong extent adds one)."""
    old_places = {(h["kind"], h.get("where")) for h in before}
    old_texts = {(h["kind"], h["message"]) for h in before}
    out: list[int] = []
    for kind in dict.fromkeys(h["kind"] for h in after):
        mine = [i for i, h in enumerate(after) if h["kind"] == kind]
        extra = len(mine) - sum(1 for h in before if h["kind"] == kind)
        if extra <= 0:
            continue
        fresh = [i for i in mine if (kind, after[i].get("where")) not in old_places]
        fresh += [i for i in mine if i not in fresh and (kind, after[i]["message"]) not in old_texts]
        out += sorted(fresh[:extra])
    return sorted(out)


def _kind(target: Any) -> str | None:
    if target is None:
        return None
    if isinstance(target, dict):
        return "cpu" if str(target.get("kind")) in ("llvm", "cpu") else "cuda"
    return "cpu" if str(target) in ("cpu", "llvm") else "cuda"


def _binds_threads(session: SessionLike, sid: Any) -> bool:
    """Whether a loop of the step is bound to a thread axis, read from its loop tree (plain data the
    explorer has already: no analysis of the program for a CPU schedule's history)."""
    try:
        tree = session.step_view(sid).loop_tree
    except Exception:  # noqa: BLE001  (ask the checks instead)
        return True
    stack = [c for fn in tree.get("functions", []) for c in fn.get("children", [])]
    while stack:
        node = stack.pop()
        if node.get("thread"):
            return True
        stack.extend(node.get("children", []))
    return False


def _parent(session: SessionLike, sid: Any) -> Any:
    for step in session.steps:
        if step.id == sid:
            return step.parent
    return None
