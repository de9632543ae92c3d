"""What a view needs from a session: the contract between mlc_lab.core.Session and the widgets.

``SessionLike`` is what every view uses (the explorer, the export of a session); the widgets are
typed against it, so mypy fails at a widget's call when a member is renamed here, and fails where a
widget hands a ``Session`` over (``explore``, ``access_view``) when the Session no longer has one.
A few views need more than a stand-in may have; each extra is its own protocol, narrowed with
``isinstance`` where it is used (the widgets never probe a session by name): ``Checking`` (the
Checks panel), ``Lowering`` (the Compiler panel), ``Analysing`` (the memory panel; with
``SessionLike``, ``AnalysingSession``: the memory view), ``Submitting`` (the Submit bar),
``Retraceable`` (the tuning dashboard) and ``Wayfinding`` (the way to a target program).
``FullSession`` is all of them: what the real Session is held to. The extras a view checks per request declare methods only: on Python 3.11 an
``isinstance`` with a protocol reads every property it declares.

``tests/widgets/test_session_contract.py`` runs the same checks against the real Session and
against the fake the widget tests use, so the fake cannot drift from what it stands in for;
``tests/unit/test_static_checks.py`` renames members on a scratch copy and watches mypy fail at
the widgets that call them.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Self, runtime_checkable

from mlc_lab.core.history import Step
from mlc_lab.model.steps import Change, Decision, FailedAttempt, StepView


class CudaBuildLike(Protocol):
    """What ``cuda_source`` answers (``mlc_lab.core.measure.CudaBuild``)."""

    source: str
    kernels: list[dict]
    ptx: str | None
    ptx_error: str | None


@runtime_checkable
class SessionLike(Protocol):
    func_name: str
    measurements: dict[int, Any]  # step id -> Measurement

    @property
    def steps(self) -> list[Step]:
        """Every step (``id``, ``parent``, ``children``, ``kind``, ``primitive``, ``label``), by id."""

    @property
    def current(self) -> Step:
        """The current step (as in ``steps``)."""

    @property
    def visited_children(self) -> dict[int, int]:
        """Where redo goes from each step: parent id -> the child that was current last."""

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
    def decisions(self) -> list[Decision]: ...

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

    def cuda_source(self, step: int | None = None, **kwargs: Any) -> CudaBuildLike: ...

    def on_change(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``callback(change)`` after every change; returns a function that unsubscribes."""


@runtime_checkable
class Checking(Protocol):
    """A session whose steps can be judged by the named checks (the Checks panel lists them)."""

    def check(self, names: list[str] | None = None, *, target: Any = None, step: int | None = None) -> Any:
        """A ``CheckReport`` of the step (default: current): the named checks and the hazards."""


@runtime_checkable
class Lowering(Protocol):
    """A session that lowers a step for a target (the Compiler panel)."""

    def lower(self, step: int | None = None, target: Any = "cpu", **kwargs: Any) -> Any: ...


@runtime_checkable
class Analysing(Protocol):
    """The memory analyses (the memory view, and the explorer's memory panel)."""

    def footprint(
        self,
        loop: str,
        at: dict[str, int] | None = None,
        step: int | None = None,
        *,
        shape_vars: dict[str, int] | None = None,
        sweep_threads: bool = False,
        budget: Any = None,
    ) -> Any: ...

    def gpu_stats(
        self,
        loop: str,
        at: dict[str, int] | None = None,
        warp: int | None = None,
        block: dict | None = None,
        step: int | None = None,
        *,
        shape_vars: dict[str, int] | None = None,
    ) -> Any: ...


@runtime_checkable
class AnalysingSession(SessionLike, Analysing, Protocol):
    """A session with the memory analyses: what the memory view shows."""


@runtime_checkable
class Submitting(Protocol):
    """A session that writes a step as the function a class server grades (the Submit bar)."""

    def submission(self, step: int | None = None) -> str: ...


class Retraceable(SessionLike, Protocol):
    """A session the tuning dashboard replays trials into: it knows its original program and makes
    a fresh session of it from a trace (a throwaway one, for a trial's script)."""

    @property
    def original(self) -> Any: ...

    def path(self, step: int | None = None) -> list[int]: ...

    @classmethod
    def from_trace(cls, module: Any, trace: Any, func: str | None = None) -> Self: ...


@runtime_checkable
class Wayfinding(Protocol):
    """A session that finds the way from a step to a target program (the explorer's path panel)."""

    def path_to(self, target: Any, *, step: int | None = None) -> Any: ...


class FullSession(AnalysingSession, Checking, Lowering, Submitting, Retraceable, Wayfinding, Protocol):
    """All that any widget uses of a session: what ``mlc_lab.Session`` is (``explore`` holds a new
    Session to it, so mypy fails there when the Session loses a member a widget calls)."""
