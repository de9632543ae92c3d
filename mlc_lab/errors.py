"""Exceptions a user of mlc_lab can catch. Plain Python: no TVM objects inside."""

from __future__ import annotations

from mlc_lab.model.errors import ERROR_KINDS


def error_kind(exc: BaseException) -> str:
    """The kind of an error in the one vocabulary (``mlc_lab.model.errors.ERROR_KINDS``): its own
    ``kind`` when it has one of them, "error" for another of mlc_lab's, "internal" for anything else."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str) and kind in ERROR_KINDS:
        return kind
    return "error" if isinstance(exc, MlcLabError) else "internal"


class MlcLabError(Exception):
    """Base class of every error mlc_lab raises on purpose.

    In IPython and Jupyter it reads sentence first, then the student's own lines (no mlc_lab frames).
    ``kind`` names it in the vocabulary of ``mlc_lab.model.errors.ERROR_KINDS``.
    """

    kind: str = "error"
    # a failed step's label, as the step would have read: written by the Session (mlc_lab.core.step_calls
    # .step_label, the one writer of labels) and read by its history and the explorer's banner
    label: str | None = None

    def _render_traceback_(self) -> list[str]:
        from mlc_lab._traceback import render

        return render(self)


class LoadError(MlcLabError):
    """A module, script or file could not be loaded as TensorIR.

    ``line`` is the 1-based line in the user's text where the problem is, when known.
    """

    kind = "load"

    def __init__(self, message: str, *, line: int | None = None, source: str | None = None):
        super().__init__(message)
        self.line = line
        self.source = source


class ScheduleStepError(MlcLabError):
    """A schedule primitive failed. The session is unchanged.

    ``summary`` is one plain sentence, ``detail`` TVM's own rendering and ``involved``
    the names of the loops and blocks the failure is about.
    """

    kind = "step"

    def __init__(self, summary: str, *, primitive: str, detail: str = "", involved: list[str] | None = None):
        self.summary = summary
        self.primitive = primitive
        self.detail = detail
        self.involved = list(involved or [])
        super().__init__(self._text())

    def _text(self) -> str:
        text = self.summary
        if self.involved:
            text += f"\n  involved: {', '.join(self.involved)}"
        if self.detail:
            text += "\n\n" + self.detail
        return text

    def add_to_summary(self, sentence: str) -> None:
        """Say more in the first line (how to get back, what to do next)."""
        self.summary = f"{self.summary}. {sentence}"
        self.args = (self._text(),)


class SplitPastLoopError(ScheduleStepError):
    """A split factor larger than its loop, refused to a person (TVM would add a predicate and say
    nothing); a way to a target the session found may still take it (``Session.path_to``)."""


class NameResolutionError(ScheduleStepError):
    """A loop or block name is unknown or ambiguous."""

    kind = "unknown_name"

    def __init__(self, summary: str, *, primitive: str, candidates: list[str] | None = None):
        self.candidates = list(candidates or [])
        super().__init__(summary, primitive=primitive, involved=self.candidates)


class TraceParseError(MlcLabError):
    """A trace (text or JSON) was refused by the safe parser, or failed to replay."""

    kind = "trace"

    def __init__(self, message: str, *, line: int | None = None):
        super().__init__(message if line is None else f"line {line}: {message}")
        self.line = line


class DecisionError(MlcLabError):
    """A sampled decision given to ``set_decision`` is not valid for its instruction."""

    kind = "decision"


class ConvertError(MlcLabError):
    """Legacy code could not be parsed at all (conversion marks everything else in place)."""

    kind = "convert"

    def __init__(self, message: str, *, line: int | None = None):
        super().__init__(message)
        self.line = line


class MeasureError(MlcLabError):
    """Building, checking or timing a program failed, or the worker process running it crashed or hung.

    ``kind`` says which: ``build``, ``run``, ``check``, ``crash``, ``timeout``, ``no_gpu``,
    ``gpu_check`` (unbound loops, GPU limits) or ``internal``; ``detail`` is TVM's own text.
    The Jupyter kernel is never affected: the next measurement starts a fresh worker if needed.
    """

    def __init__(self, message: str, *, kind: str = "internal", detail: str = ""):
        self.summary = message
        self.kind = kind
        self.detail = detail
        super().__init__(message if not detail else f"{message}\n\n{detail}")


class NoGPUError(MeasureError):
    """A CUDA measurement was asked for on a machine without a CUDA GPU."""


class TuneError(MlcLabError):
    """A tuning job could not be started, or its work directory cannot be read."""

    kind = "tune"


class UsageError(MlcLabError):
    """Bad command-line input (a missing file, a directory): the CLI prints it and exits 2."""

    kind = "usage"


class AccessAnalysisError(MlcLabError, ValueError):
    """The memory-access analysis cannot answer for this loop: an unsupported construct, a bad
    ``at`` value, a missing symbolic shape or a result above the memory budget. The first line
    names the construct in plain words.

    (Also a ``ValueError``, as it was before it joined the ``MlcLabError`` family.)

    ``shape_vars``: the symbolic shapes that need values (for a view to ask for them).
    """

    kind = "analysis"

    def __init__(self, message: str, *, shape_vars: list[str] | None = None):
        super().__init__(message)
        self.shape_vars = list(shape_vars or [])
