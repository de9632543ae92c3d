"""What a view needs from a session: the contract between mlc_lab.core.Session and the widgets.

The explorer (and the export of a session) use nothing else. ``tests/widgets/test_session_contract.py``
runs the same checks against the real Session and against the fake the widget tests use, so the
fake cannot drift from what it stands in for.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

from mlc_lab.model.steps import Change, FailedAttempt, StepView


@runtime_checkable
class SessionLike(Protocol):
    func_name: str
    measurements: dict  # step id -> Measurement

    @property
    def steps(self) -> list[Any]:
        """Every step (``id``, ``parent``, ``children``, ``kind``, ``primitive``, ``label``), by id."""

    @property
    def current(self) -> Any:
        """The current step (as in ``steps``)."""

    @property
    def failed(self) -> list[FailedAttempt]:
        """Attempts that raised (oldest first, each with the ``parent`` step it was tried from)."""

    @property
    def script(self) -> str: ...

    @property
    def trace(self) -> str: ...

    @property
    def trace_json(self) -> list: ...

    @property
    def trace_python(self) -> str: ...

    @property
    def decisions(self) -> list[dict]: ...

    def step_view(self, step: int | None = None) -> StepView:
        """Everything a view shows of a step (default: the current one)."""

    def script_at(self, step: int) -> str: ...

    def apply(self, primitive: str, *args: Any, **kwargs: Any) -> Any:
        """New names (or sampled values); raises ScheduleStepError and changes nothing on failure."""

    def undo(self) -> Any: ...

    def redo(self) -> Any: ...

    def goto(self, step: int) -> Any: ...

    def set_decision(self, index: int, value: Any) -> Any: ...

    def replay(self, trace: Any) -> Any: ...

    def measure(self, target: Any = "cpu", step: int | None = None, **kwargs: Any) -> Any: ...

    def cuda_source(self, step: int | None = None, **kwargs: Any) -> Any: ...

    def on_change(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback(change)`` after every change; returns a function that unsubscribes."""
