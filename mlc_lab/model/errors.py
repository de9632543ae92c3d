"""Errors as values: what a request answers with when it fails, and the one vocabulary of their kinds.

An error crosses to the page as an :class:`ErrorInfo` (``RequestError`` in ``mlc_lab.widgets._base``);
its ``type`` is one of :data:`ERROR_KINDS`, which also says, per kind, whether the error is transient
(about that moment, not the step: not recorded for saved notebooks) and whether it is a measurement's
failure (the explorer's banner shows it). ``mlc_lab.errors.error_kind`` names the kind of an exception.
The TypeScript side (``ErrorInfo``, ``ERROR_KINDS``, ``ErrorKind`` in ``js/lib/model.ts``) is generated from
here, so a kind is added in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

__all__ = ["ERROR_KINDS", "ErrorInfo", "ErrorKind", "KindInfo"]
# What js/lib/model.ts gets of this module, in order (python -m mlc_lab.core.model_ts).
WIRE = ("ErrorInfo",)


@dataclass(frozen=True)
class KindInfo:
    means: str
    transient: bool = False  # about that moment, not the step: a saved notebook does not keep it
    measurement: bool = False  # a measurement's failure: the explorer shows it in its banner


ERROR_KINDS: dict[str, KindInfo] = {
    # building, checking and timing a program (MeasureError.kind, the worker's failures)
    "build": KindInfo("the program does not build", measurement=True),
    "run": KindInfo("the program failed while running or being timed", measurement=True),
    "check": KindInfo("the program's output or parameters differ from the reference's", measurement=True),
    "crash": KindInfo("the worker process running the program crashed", transient=True, measurement=True),
    "timeout": KindInfo("the program ran past the time limit", transient=True, measurement=True),
    "no_gpu": KindInfo("no CUDA GPU on this machine", measurement=True),
    "does_not_build": KindInfo(
        "the GPU schedule does not build (TVM or the OpenCL compiler refuses it)", measurement=True
    ),
    "could_not_run": KindInfo(
        "the CPU run of a GPU schedule cannot run this program (its numbers are not judged)", measurement=True
    ),
    "gpu_check": KindInfo("the program cannot run on a GPU as it is (unbound loops, GPU limits)", measurement=True),
    "elsewhere": KindInfo(
        "the machines that measure elsewhere did not take it (an RPC tracker or server, a batch round)",
        transient=True,
        measurement=True,
    ),
    "internal": KindInfo("an unexpected failure inside mlc_lab", measurement=True),
    "busy": KindInfo("another measurement of this explorer is running", transient=True, measurement=True),
    "usage": KindInfo("a request or command was used the wrong way"),
    "protocol": KindInfo("the worker process answered something it should not"),
    "schedule": KindInfo("a sweep's schedule failed for one value"),
    # requests from a view
    "bad_request": KindInfo("the request's parameters are wrong", transient=True),
    "unknown": KindInfo("no such request", transient=True),
    "unknown_step": KindInfo("no such step", transient=True),
    "no_kernel": KindInfo("the page has no kernel to answer (a saved view)", transient=True),
    "unknown_loop": KindInfo("no such loop in the program"),
    "unknown_name": KindInfo("no loop or block by that name"),
    "too_large": KindInfo("more than the view draws"),
    "analysis": KindInfo("the access analysis cannot answer for this loop"),
    "cancelled": KindInfo("the analysis was cancelled (by the person, a newer request or a new step)", transient=True),
    "bad_target": KindInfo("a target the Compiler view cannot compile for"),
    # the session's own errors (mlc_lab.errors)
    "step": KindInfo("a schedule primitive failed; the session is unchanged"),
    "history": KindInfo("nothing to undo or redo"),
    "trace": KindInfo("a trace was refused or failed to replay"),
    "decision": KindInfo("a sampled decision is not valid for its instruction"),
    "load": KindInfo("a module, script or file could not be loaded"),
    "convert": KindInfo("legacy code could not be parsed"),
    "tune": KindInfo("a tuning job could not be started or read"),
    "error": KindInfo("another error mlc_lab raised on purpose"),
}

if TYPE_CHECKING:  # a Literal made from the table at run time is no type to a static checker
    ErrorKind = str
else:
    ErrorKind = Literal[tuple(ERROR_KINDS)]


class ErrorInfo(TypedDict):
    """A failed request's answer: one sentence, and what else the error knows."""

    summary: str
    type: NotRequired[ErrorKind]
    detail: NotRequired[str]
    involved: NotRequired[list[str]]  # loop and block names the error is about
    primitive: NotRequired[str]
    line: NotRequired[int | None]  # 1-based, in the text the request sent
    shape_vars: NotRequired[list[str]]  # symbolic shapes the request must give values to
    step: NotRequired[int | str]  # the step it is about (a compile of a step that is not the current one)
