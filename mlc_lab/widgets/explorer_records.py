"""The explorer's records for saved notebooks: each step it showed, and each step's panel answers.

A saved explorer (no kernel behind it) steps through the steps it recorded and shows what its
panels were answered (``mlc_lab.model.requests``: the checks and the way of each step, what the
Memory, Compiler and CUDA panels showed). A record is a gzip and a comm of its own, so none is
made on a click's path: they are made ``RECORD_DELAY_S`` after the last change, at the end of the
cell (IPython's ``post_run_cell``) or in ``Explorer.wait()``, the step on screen last (a saved view
opens on it). At most ``MAX_RECORDED_STEPS`` steps are kept; ``record_cut`` says what was left out.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from typing import TYPE_CHECKING, Any

from mlc_lab._threads import stop_at_exit
from mlc_lab.core.protocol import SessionLike
from mlc_lab.model.requests import record_key
from mlc_lab.model.steps import StepView
from mlc_lab.model.steps import plain as _plain

if TYPE_CHECKING:  # a mixin of the explorer, which is the widget
    from mlc_lab.widgets._base import RpcWidget as _Widget
else:
    _Widget = object

log = logging.getLogger(__name__)


class StepRecords(_Widget):
    """Mixed into the Explorer (before ``RpcWidget``), which holds ``_session``, ``_view``, ``_lock``
    and the trait ``record_cut``: what the explorer records, and when."""

    MAX_RECORDED_STEPS = 200
    # Steps are recorded for saved views this long after the last change (or at the end of the cell,
    # or in wait()): each record is a gzip and a comm of its own, kept off the click's path.
    RECORD_DELAY_S = 2.0
    # Saved views answer the recorded requests (mlc_lab.model.requests: what the Memory, Compiler and
    # CUDA panels showed) from records, one per recorded step, within the reply budget
    # (RpcWidget._mlc_reply_budget; the oldest go first). The page steps through recorded steps itself.
    _mlc_steps_kept = MAX_RECORDED_STEPS

    _session: SessionLike
    _view: StepView
    _lock: Any
    record_cut: Any

    def _records_start(self) -> None:
        self._pending_records: dict[Any, StepView | None] = {}  # step id -> view (None: make it)
        self._pending_replies: dict[str, dict] = {}  # record key -> mlc_record's arguments (checks, path)
        self._record_timer: threading.Timer | None = None
        self._record_hook: Any = None

    def _records_close(self) -> None:
        timer, hook = getattr(self, "_record_timer", None), getattr(self, "_record_hook", None)
        if timer is not None:
            timer.cancel()
        if hook is not None:
            with contextlib.suppress(ValueError):
                hook[0].events.unregister("post_run_cell", hook[1])
            self._record_hook = None

    def _record_step(self, view: StepView) -> None:
        """Keep each step shown as a record, sent once: a saved explorer steps through them. Made
        later (``_flush_records``): a click's state update is not held up by a gzip and a comm."""
        if f"step:{view.id}" not in self.__dict__.get("_mlc_records", {}):
            self._pending_records[view.id] = view
            self._schedule_records()

    def _record_step_id(self, step_id: Any) -> None:
        if f"step:{step_id}" not in self.__dict__.get("_mlc_records", {}):
            self._pending_records.setdefault(step_id, None)
            self._schedule_records()

    def _record_answer(self, name: str, sid: Any, data: dict) -> None:
        """Record a step's answer (checks, path) under the request of that name, later."""
        key = record_key(name, {"step": _plain(sid)})
        self._pending_replies[key] = {"group": name, "keep": self.MAX_RECORDED_STEPS, "result": data}
        self._schedule_records()

    def _schedule_records(self) -> None:
        if self._record_hook is None:  # in IPython: the records of a cell's steps go out before it ends
            shell = _ipython()
            if shell is not None:
                self._record_hook = (shell, lambda *_a: self._flush_records())
                shell.events.register("post_run_cell", self._record_hook[1])
        if self._record_timer is not None:
            self._record_timer.cancel()
        self._record_timer = threading.Timer(self.RECORD_DELAY_S, self._flush_records)
        self._record_timer.daemon = True
        stop_at_exit(self._record_timer, self._record_timer.cancel)
        self._record_timer.start()

    def _flush_records(self) -> None:
        """Record the steps shown since the last flush (the one on screen last: a saved view opens on it)."""
        with self._lock:
            pending, self._pending_records = self._pending_records, {}
            replies, self._pending_replies = self._pending_replies, {}
            if (not pending and not replies) or self.comm is None:
                return
            current = self._view.id
            order = [sid for sid in pending if sid != current] + ([current] if current in pending else [])
            with self.hold_sync():
                for sid in order:
                    if f"step:{sid}" in self.__dict__.get("_mlc_records", {}):
                        continue
                    try:
                        view = pending[sid] or self._session.step_view(sid)
                        self.mlc_record(
                            f"step:{view.id}", group="step", keep=self.MAX_RECORDED_STEPS, data=view.json_bytes
                        )
                    except Exception:  # noqa: BLE001  (a record is a nicety for saved views)
                        log.exception("mlc_lab: recording step %r failed", sid)
                for key, kwargs in replies.items():
                    self.mlc_record(key, **kwargs)

    def _mlc_step_params(self, params: dict) -> dict:
        # The memory panel asks about "the current step" without naming it: its records name the step.
        return {**params, "step": _plain(self._view.id)}

    def mlc_record(self, key: str, **kwargs: Any) -> None:
        super().mlc_record(key, **kwargs)
        records = self.__dict__.get("_mlc_records", {})
        recorded = sum(1 for g, _r in records.values() if g == "step")
        steps = len(self._session.steps)
        dropped = {g: n for g, n in self.mlc_records_dropped.items() if g != "step"}
        cut = (
            {}
            if recorded >= steps and not dropped
            else {
                "max_steps": self.MAX_RECORDED_STEPS,
                "steps": steps,
                "steps_recorded": recorded,
                "replies_dropped": sum(dropped.values()),
            }
        )
        if cut != self.record_cut:
            self.record_cut = cut


def _ipython() -> Any:
    """The running IPython shell, or None (a script, a test without a kernel)."""
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None
