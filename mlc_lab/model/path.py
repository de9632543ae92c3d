"""The way to a target program, as plain data (``Session.path_to``, ``Session.hint``, ``mlc-lab path``).

A ``PathStep`` is one schedule primitive exactly as a person applies it: TVM's name, TVM's own
argument names, loops and blocks named as in the printed script of the step it applies to (``"j"``,
``"Y/j"``), and the one sentence that ties it to the target. A view fills a primitive's form from it
and nothing else: ``PathStep.call()`` gives the arguments ``Session.apply`` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

WIRE = ["PathStep", "PathAnswer", "Hint", "PathSetup", "StepPath"]

# TVM's primitives whose loops are a ``*args`` parameter: they are passed positionally.
VARIADIC = {"reorder": "ordered_loops", "fuse": "loops", "merge": "loops"}

PathStatus = Literal["reached", "names", "unreached"]


@dataclass(frozen=True)
class PathStep:
    """One primitive of the way: ``primitive`` (TVM's name), ``arguments`` (TVM's parameter names to
    values; loops and blocks by their names in the script of the step it applies to), ``reason`` (one
    sentence: what of the target it makes) and ``label`` (the step as the history shows it)."""

    primitive: str
    arguments: dict[str, Any]
    reason: str
    label: str

    def call(self) -> tuple[list[Any], dict[str, Any]]:
        """``(args, kwargs)`` for ``Session.apply(primitive, *args, **kwargs)``."""
        kwargs = dict(self.arguments)
        loops = VARIADIC.get(self.primitive)
        args = list(kwargs.pop(loops, [])) if loops else []
        return args, kwargs

    def to_json(self) -> dict[str, Any]:
        return {"primitive": self.primitive, "arguments": self.arguments, "reason": self.reason, "label": self.label}


@dataclass(frozen=True)
class PathAnswer:
    """The way from a step to a target, or why there is none.

    ``status``: "reached" (TVM's ``structural_equal`` holds at the end), "names" (equal but for the
    names of some blocks: ``renamed`` says which) or "unreached" (``why`` says why, in one sentence).
    ``start`` is the step the way starts from; when it first goes back, ``undo_to`` is the step to go
    back to and ``steps`` start there. ``trace`` is the whole schedule at the end, from the original
    program, as an ``apply_trace`` function TVM replays on its own (empty when not reached)."""

    status: PathStatus
    steps: tuple[PathStep, ...]
    trace: str
    why: str
    seconds: float
    start: int
    undo_to: int | None = None
    renamed: dict[str, str] = field(default_factory=dict)

    @property
    def reached(self) -> bool:
        return self.status == "reached"

    def to_json(self) -> dict[str, Any]:
        """Every field, as plain JSON (its encoding on the wire)."""
        return {
            "status": self.status,
            "steps": [s.to_json() for s in self.steps],
            "trace": self.trace,
            "why": self.why,
            "seconds": self.seconds,
            "start": self.start,
            "undo_to": self.undo_to,
            "renamed": dict(self.renamed),
        }

    def cli_json(self) -> dict[str, Any]:
        """The answer as ``mlc-lab path --as json`` prints it: exactly these keys."""
        return {
            "reached": self.reached,
            "steps": [s.to_json() for s in self.steps],
            "trace": self.trace,
            "why": self.why,
            "seconds": round(self.seconds, 4),
        }

    def __str__(self) -> str:
        if self.status == "unreached":
            return f"not reached: {self.why}"
        head = f"{len(self.steps)} step(s) to the target" if self.reached else self.why
        if self.undo_to is not None:
            head += f", after going back to step {self.undo_to}"
        lines = [head] + [f"  {n + 1}. {s.label}: {s.reason}" for n, s in enumerate(self.steps)]
        return "\n".join(lines)


@dataclass(frozen=True)
class Hint:
    """The next step to the target and the one sentence a student reads: ``step`` (None when the
    program is at the target, or when it cannot get there: ``sentence`` then says why), ``remaining``
    (steps left, this one included), ``undo_to`` (go back to this step first)."""

    step: PathStep | None
    sentence: str
    remaining: int
    status: PathStatus
    undo_to: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": None if self.step is None else self.step.to_json(),
            "sentence": self.sentence,
            "remaining": self.remaining,
            "status": self.status,
            "undo_to": self.undo_to,
        }

    def __str__(self) -> str:
        return self.sentence


# --- the explorer's way panel (mlc_lab/widgets/path.py, js/path/) -----------------------------------


class PathSetup(TypedDict, total=False):
    """The explorer's way target (``{}``: none): what it is called and where it came from."""

    available: bool
    name: str  # "TargetModule", "target.py", "the reference of Lab 1"
    source: Literal["program", "assignment"]
    gpu: bool  # the target binds GPU threads (the checks are CUDA's from step 0)


class StepPath(TypedDict):
    """The way from one step to the explorer's target (or why it could not be found: ``error``)."""

    step: int | str
    answer: NotRequired[PathAnswer]
    hint: NotRequired[Hint]
    ms: NotRequired[float]
    error: NotRequired[str]
