"""Every request a widget answers, in one table: its parameters and result, and its policy.

A view asks with ``{"kind": "mlc-request", "id", "method", "params"}`` (``mlc_lab.widgets._base``);
:data:`REQUESTS` says, per ``method``:

- ``params``: a TypedDict of its parameters (NotRequired: the handler has a default), ``result``: what it
  answers (a type of the contract: a TypedDict or a dataclass's encoding); ``buffers``: the reply also
  carries binary buffers (text as UTF-8, footprints as arrays).
- ``background``: answered from a thread (it builds or runs code for seconds), so the kernel's message
  loop stays free.
- ``keep``: its last replies are recorded for saved notebooks, this many (0: not recorded); a widget that
  holds steps (the explorer) keeps one per recorded step instead. Its error replies are recorded too,
  unless their kind is transient (:data:`mlc_lab.model.errors.ERROR_KINDS`).
- ``step_implied``: it asks about "the current step" without naming it; a widget with steps records the
  reply under its parameters plus ``step``, and a saved view looks it up the same way.
- ``timeout_s``: how long the page waits for the answer before it says the kernel did not answer
  (js/lib/rpc.ts reads it from the generated table; a request that builds, runs or starts the worker
  waits longer than one the kernel answers from memory).
- ``errors``: the error kinds it answers with on purpose (besides ``bad_request`` and ``unknown``, which
  any request may get, and ``internal`` for a bug); an error of another kind is logged as a warning,
  and fails the test suite (its strict wire, ``MLC_LAB_STRICT_WIRE``, also checks every result
  against ``result`` with :func:`mlc_lab.model.conform.problems`).

Beside the requests, one note travels from the page with no answer: :data:`FOLLOW`
(:class:`FollowMessage`), the explorer's "the page now shows this step" (mlc_lab/widgets/explorer.py).

Each widget names its handler per request (``RpcWidget.handlers``); tests/widgets/test_requests.py fails
when a request has no handler or a handler answers a request that is not here. ``js/lib/model.ts`` gets
the same table, the parameter and result types per request (``RequestParams``, ``RequestResults``) and
:func:`record_key` (``python -m mlc_lab.core.model_ts``); ``Rpc.call`` in js/lib/rpc.ts is typed by it.

Adding a request:

1. Declare it in :data:`REQUESTS`: a ``TypedDict`` of its parameters (here, or ``NoParams``), its result
   type (a type of mlc_lab.model; ``NoResult`` for ``{}``), and its policy.
2. Write the handler on the widget and name it in that widget's ``handlers``.
3. Run ``python -m mlc_lab.core.model_ts`` (js/lib/model.ts), then call it from the page with
   ``rpc.call("name", params)``; ``tsc --noEmit`` checks the parameters and the result's use.
4. A saved view answers it from its records when ``keep`` > 0 (nothing else to write); the explorer's
   offline handler (js/explorer/offline.ts) adds the step to a step-implied request's key by itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict

from mlc_lab.model.access.payload import FootprintResult, GpuStats
from mlc_lab.model.checks import StepChecks
from mlc_lab.model.errors import ERROR_KINDS, ErrorInfo, ErrorKind
from mlc_lab.model.lowering import Lowering
from mlc_lab.model.measure import Measurement
from mlc_lab.model.path import StepPath
from mlc_lab.model.steps import HistoryResult

__all__ = [
    "FOLLOW",
    "REQUEST",
    "REQUESTS",
    "RESPONSE",
    "FollowMessage",
    "Request",
    "RequestMessage",
    "ResponseMessage",
    "record_key",
    "step_implied",
]
# The two messages of the wire (anywidget custom messages), written to js/lib/model.ts with the table.
WIRE = ("RequestMessage", "ResponseMessage", "FollowMessage")
REQUEST = "mlc-request"
RESPONSE: Final = "mlc-response"
FOLLOW: Final = "mlc-follow"


class RequestMessage(TypedDict):
    """A view's request: ``method`` is a key of :data:`REQUESTS`, ``id`` correlates the response."""

    kind: Literal["mlc-request"]
    id: str
    method: str
    params: dict[str, Any]


class ResponseMessage(TypedDict):
    """The answer to a request (its buffers travel beside it): ``result`` when ``ok``, else ``error``."""

    kind: Literal["mlc-response"]
    id: str
    ok: bool
    elapsed_ms: float  # time spent in the kernel, told apart from transport and drawing on the page
    result: NotRequired[Any]
    error: NotRequired[ErrorInfo]


class FollowMessage(TypedDict):
    """The explorer page's note that it now shows ``step``; the kernel's Session follows (no answer).

    The page moved by itself, from the steps it holds; the kernel need not say anything back."""

    kind: Literal["mlc-follow"]
    step: int | str


# --- parameters -------------------------------------------------------------------------------------
class NoParams(TypedDict):
    """No parameters."""


class ApplyParams(TypedDict):
    """A schedule primitive with its arguments (then_split: a sampled tile is split at once)."""

    primitive: str
    args: NotRequired[list[Any] | None]
    kwargs: NotRequired[dict[str, Any] | None]
    then_split: NotRequired[bool]


class StepParams(TypedDict):
    """One step of the history, by id."""

    step: int | str


class MaybeStepParams(TypedDict):
    """A step of the history (default: the current one)."""

    step: NotRequired[int | str | None]


class SetDecisionParams(TypedDict):
    """A sampled decision's new value (by its index in the trace)."""

    index: int
    value: Any


class ReplayParams(TypedDict):
    """A trace's text, replayed as a new branch."""

    trace: str


class ExportTraceParams(TypedDict):
    """Which form of the trace: "text" or "json"."""

    format: NotRequired[str]


class FootprintParams(TypedDict):
    """The loop whose footprint is drawn, where the enclosing loops stand, and the shapes' values."""

    loop: str
    at: NotRequired[dict[str, Any] | None]
    sweep_threads: NotRequired[bool]
    shape_vars: NotRequired[dict[str, Any] | None]


class GpuStatsParams(TypedDict):
    """A loop's GPU access statistics, for one warp and block (default: the first)."""

    loop: str
    at: NotRequired[dict[str, Any] | None]
    warp: NotRequired[int | None]
    block: NotRequired[int | None]
    shape_vars: NotRequired[dict[str, Any] | None]


class MeasureParams(TypedDict):
    """Where a step is measured: "cpu" or "cuda"."""

    target: NotRequired[str]
    step: NotRequired[int | str | None]


class CudaSourceParams(TypedDict):
    """A step's CUDA source (and its PTX)."""

    step: NotRequired[int | str | None]
    ptx: NotRequired[bool]


class LowerParams(TypedDict):
    """A step compiled for a target ("cpu", "cuda", an sm_ name)."""

    step: NotRequired[int | str | None]
    target: NotRequired[str]


class ClassSubmitParams(TypedDict):
    """A student's name and the class task the current step is submitted for."""

    name: NotRequired[str]
    task: NotRequired[str | None]
    client_id: NotRequired[str]  # the page's id of this intent: a double click sends the same one


class OpenTrialParams(TypedDict):
    """A tuning trial (default: the best)."""

    trial: NotRequired[int | None]


# --- results ----------------------------------------------------------------------------------------
class TextResult(TypedDict):
    """A text reply: its UTF-8 bytes are the reply's first buffer."""

    bytes: int
    step: NotRequired[int | str]
    format: NotRequired[str]


class StepResult(TypedDict):
    """A request that changed the session: the step it is at now (apply: the names it made)."""

    step: int | str
    names: NotRequired[Any]


class NoResult(TypedDict):
    """Nothing to answer but that it was done."""


class MeasureResult(TypedDict):
    """A step's new measurement (``target`` as the page names it: "cpu", "cuda")."""

    step: int | str
    measurement: Measurement


class SubmitResult(TypedDict):
    """The step handed in; its verdict arrives in the ``class_submission`` trait."""

    step: int | str


class JobStatus(TypedDict):
    """The tuning job's status after the request ("running", "cancelling", "done", ...)."""

    status: str


class NoticeResult(TypedDict):
    """What the dashboard says about the request (an explorer opened on a trial)."""

    notice: str


class RefreshResult(TypedDict):
    """Why the refresh failed ("" when it worked)."""

    error: str


class CudaKernel(TypedDict):
    """One CUDA kernel of a step, with its launch facts."""

    name: str
    threads_per_block: NotRequired[int]
    blocks: NotRequired[int]
    shared_bytes: NotRequired[int]
    local_bytes: NotRequired[int]
    thread_extents: NotRequired[dict[str, int]]


class CudaSource(TypedDict):
    """A step's CUDA source, its kernels, and its PTX (or why there is none)."""

    step: int | str
    source: str
    kernels: list[CudaKernel]
    ptx: str | None
    ptx_error: str | None


@dataclass(frozen=True)
class Request:
    """One request: its types and its policy (see the module's docstring)."""

    params: type
    result: Any
    buffers: bool = False
    background: bool = False
    keep: int = 0
    step_implied: bool = False
    errors: tuple[ErrorKind, ...] = ()
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        unknown = [k for k in self.errors if k not in ERROR_KINDS]
        if unknown:
            raise ValueError(f"error kinds not in ERROR_KINDS: {unknown}")
        if not self.timeout_s > 0:
            raise ValueError(f"a request's timeout_s must be positive seconds, not {self.timeout_s!r}")
        if self.step_implied and not self.keep:
            raise ValueError("a step-implied request is one whose replies are recorded under the step")


_STEP_ERRORS: tuple[ErrorKind, ...] = ("unknown_step",)
_ANALYSIS: tuple[ErrorKind, ...] = ("unknown_loop", "unknown_name", "too_large", "analysis", "usage", "cancelled")
# A request that builds or runs code, or starts the worker (up to a minute the first time), or an access
# analysis (it shows its own progress): the page waits this long; a class submission waits for the server.
_SLOW_S = 300.0
_SUBMIT_S = 600.0

REQUESTS: dict[str, Request] = {
    # the explorer (mlc_lab/widgets/explorer.py)
    "apply": Request(ApplyParams, StepResult, errors=("step", "usage", "unknown_loop", "unknown_name")),
    "history": Request(NoParams, HistoryResult),
    "set_decision": Request(SetDecisionParams, StepResult, errors=("decision", "trace")),
    "replay": Request(ReplayParams, StepResult, errors=("trace", "load")),
    "goto": Request(StepParams, StepResult, errors=_STEP_ERRORS),
    "script_at": Request(StepParams, TextResult, buffers=True, errors=_STEP_ERRORS),
    "export_trace": Request(ExportTraceParams, TextResult, buffers=True, errors=("usage",)),
    "measure": Request(
        MeasureParams,
        MeasureResult,
        background=True,
        errors=(
            "busy",
            "usage",
            "no_gpu",
            "unknown_step",
            "build",
            "run",
            "check",
            "crash",
            "timeout",
            "gpu_check",
            "cancelled",
        ),
        timeout_s=_SLOW_S,
    ),
    # the Cancel of a measurement: its worker process is stopped, the measure request answers "cancelled"
    "measure_cancel": Request(NoParams, NoResult, timeout_s=_SLOW_S),
    "cuda_source": Request(
        CudaSourceParams,
        CudaSource,
        background=True,
        keep=2,
        errors=("no_gpu", "gpu_check", "build", "unknown_step", "usage"),
        timeout_s=_SLOW_S,
    ),
    "lower": Request(
        LowerParams,
        Lowering,
        background=True,
        keep=2,
        errors=("bad_target", "build", "unknown_step", "usage"),
        timeout_s=_SLOW_S,
    ),
    "clear_error": Request(NoParams, NoResult),
    "class_submit": Request(ClassSubmitParams, SubmitResult, errors=("usage", "busy", "error"), timeout_s=_SUBMIT_S),
    # the Checks panel's report of a step; the explorer also sends the current step's in its ``checks``
    # trait, and records it under this request's key for saved notebooks
    "checks": Request(MaybeStepParams, StepChecks, background=True, keep=2, errors=_STEP_ERRORS),
    # the way from a step to the explorer's target program (mlc_lab/widgets/path.py); the current step's
    # also comes in the ``path`` trait, and is recorded under this request's key for saved notebooks
    "path": Request(MaybeStepParams, StepPath, background=True, keep=2, errors=_STEP_ERRORS),
    # the explorer's memory panel and the memory view (mlc_lab/widgets/access/view.py)
    "access_footprint": Request(
        FootprintParams,
        FootprintResult,
        background=True,
        buffers=True,
        keep=2,
        step_implied=True,
        errors=_ANALYSIS,
        timeout_s=_SLOW_S,
    ),
    "access_gpu_stats": Request(
        GpuStatsParams, GpuStats, background=True, keep=2, step_implied=True, errors=_ANALYSIS, timeout_s=_SLOW_S
    ),
    # the memory panel's Cancel: the analysis in flight stops at its next part (answers "cancelled")
    "access_cancel": Request(NoParams, NoResult, timeout_s=_SLOW_S),
    "export_html": Request(NoParams, TextResult, buffers=True),
    # the tuning dashboard (mlc_lab/widgets/tuning.py)
    "cancel": Request(NoParams, JobStatus),
    "open_in_explorer": Request(OpenTrialParams, NoticeResult, errors=("tune", "usage")),
    "refresh": Request(NoParams, JobStatus),
    # the class widgets (mlc_lab/widgets/classroom.py): fetch from the class server now
    "class_refresh": Request(NoParams, RefreshResult),
}


def step_implied() -> list[str]:
    """The requests that belong to the current step without naming it."""
    return [name for name, r in REQUESTS.items() if r.step_implied]


def record_key(method: str, params: Any) -> str:
    """The key of a recorded reply: the method, a space, its parameters as canonical JSON (sorted keys,
    compact, UTF-8). js/lib/model.ts's ``recordKey`` (generated) writes the same; both test suites read
    tests/fixtures/record_keys.json."""
    return (
        f"{method} {json.dumps(params or {}, sort_keys=True, separators=(',', ':'), ensure_ascii=False, default=str)}"
    )
