"""The step tree of a Session as plain data: steps with their parents and children, the current step,
where redo goes from each step, and the attempts that failed under a step.

The Python twin of the explorer page's tree (js/explorer/state.ts, ``History``; js/explorer/history.ts,
``redoTarget``): both are driven through one recorded walk (js/__tests__/fixtures/history_walk.json)
by tests/unit/test_history.py and js/__tests__/history_rule.test.ts. Nothing here knows TVM: a step's
program lives in the Session, keyed by the step's id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlc_lab.errors import MlcLabError
from mlc_lab.model.steps import FailedAttempt, StepSummary


@dataclass
class Step:
    """A node of the history tree. Step 0 is the program as loaded."""

    id: int
    parent: int | None
    kind: str  # "root" | "apply" | "decision" | "replay" | "run"
    primitive: str | None
    label: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    result: Any = None
    children: list[int] = field(default_factory=list)
    created: tuple[str, ...] = ()  # names of the loops and blocks the step made

    def summary(self) -> StepSummary:
        """What the history pane shows of this step."""
        return StepSummary(self.id, self.parent, self.kind, self.primitive, self.label)

    def to_json(self) -> dict:
        return {
            **self.summary().to_json(),
            "args": self.args,
            "kwargs": self.kwargs,
            "result": self.result,
            "children": list(self.children),
        }


class History:
    """The tree of steps. Ids are positions in the order the steps were made (never reused); a step's
    children are in that order too. Moving to a step makes it the child its parent visited last."""

    MAX_FAILED = 50  # failed attempts kept (the oldest go first)

    def __init__(self, root_label: str = "original program", *, max_failed: int | None = None):
        self._steps: list[Step] = [Step(0, None, "root", None, root_label)]
        self._current = 0
        self._last_child: dict[int, int] = {}  # parent id -> the child that was current last
        self._failed: list[FailedAttempt] = []  # oldest first
        self.max_failed = self.MAX_FAILED if max_failed is None else max_failed

    # --- reading ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._steps)

    def __getitem__(self, step: int) -> Step:
        return self._steps[self.check(step)]

    @property
    def steps(self) -> list[Step]:
        return list(self._steps)

    @property
    def current(self) -> Step:
        return self._steps[self._current]

    @property
    def current_id(self) -> int:
        return self._current

    def check(self, step: Any) -> int:
        """``step`` if it is the id of a step; else MlcLabError naming the ids there are."""
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(self._steps):
            raise MlcLabError(f"there is no step {step!r}; steps are 0..{len(self._steps) - 1}")
        return step

    def path(self, step: int | None = None) -> list[int]:
        """Step ids from the root to ``step`` (default: the current one)."""
        out = []
        node: int | None = self._current if step is None else self.check(step)
        while node is not None:
            out.append(node)
            node = self._steps[node].parent
        return out[::-1]

    @property
    def visited_children(self) -> dict[int, int]:
        """Where redo goes from each step: parent id -> the child that was current last."""
        return dict(self._last_child)

    def redo_target(self, step: int | None = None) -> int | None:
        """Where redo goes from ``step`` (default: the current one): the child that was current last,
        else the newest child; None when it has no children (as redoTarget in js/explorer/history.ts)."""
        sid = self._current if step is None else self.check(step)
        children = self._steps[sid].children
        if not children:
            return None
        last = self._last_child.get(sid)
        return last if last in children else children[-1]

    def child_labelled(self, label: str) -> Step | None:
        """The apply step under the current one that reads ``label`` (the same step made again)."""
        for cid in self.current.children:
            child = self._steps[cid]
            if child.kind == "apply" and child.label == label:
                return child
        return None

    # --- moving -------------------------------------------------------------------------------
    def undo(self) -> Step:
        parent = self.current.parent
        if parent is None:
            raise MlcLabError("nothing to undo: this is the original program")
        return self.goto(parent)

    def redo(self) -> Step:
        target = self.redo_target()
        if target is None:
            raise MlcLabError("nothing to redo")
        return self.goto(target)

    def goto(self, step: int) -> Step:
        """Make ``step`` current; redo from its parent comes back to it. (So the current step is always
        its parent's child visited last, and undo needs no rule of its own.)"""
        self._current = self.check(step)
        self._visit(step)
        return self.current

    def _visit(self, step: int) -> None:
        parent = self._steps[step].parent
        if parent is not None:
            self._last_child[parent] = step

    # --- growing ------------------------------------------------------------------------------
    def add(
        self,
        kind: str,
        primitive: str | None,
        label: str,
        *,
        args: list | None = None,
        kwargs: dict | None = None,
        result: Any = None,
        created: tuple[str, ...] = (),
        parent: int | None = None,
    ) -> Step:
        """A new step under ``parent`` (default: the current step), made current."""
        parent_id = self._current if parent is None else self.check(parent)
        step = Step(
            id=len(self._steps),
            parent=parent_id,
            kind=kind,
            primitive=primitive,
            label=label,
            args=args or [],
            kwargs=kwargs or {},
            result=result,
            created=tuple(created),
        )
        self._steps.append(step)
        self._steps[parent_id].children.append(step.id)
        self._current = step.id
        self._visit(step.id)
        return step

    # --- failed attempts ----------------------------------------------------------------------
    @property
    def failed(self) -> list[FailedAttempt]:
        """The attempts that failed (the last ``max_failed``), oldest first."""
        return list(self._failed)

    def fail(self, exc: BaseException, primitive: str, label: str | None = None) -> FailedAttempt:
        """Keep an attempt that raised ``exc``, under the current step; the tree does not change. Its
        label is the error's own (``MlcLabError.label``, written by the Session) unless one is given."""
        label = label or getattr(exc, "label", None) or primitive
        last = self._failed[-1].id if self._failed else 0
        attempt = FailedAttempt.of(exc, id=last + 1, parent=self._current, primitive=primitive, label=label)
        self._failed.append(attempt)
        del self._failed[: -self.max_failed]
        return attempt
