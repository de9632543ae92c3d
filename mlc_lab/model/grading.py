"""What the graders answer, as plain data with one encoding each: the run of a student's function on given
inputs, and (below) the numeric check's comparison and the grader's results.

Each of these crosses a process (a worker's answer, a sandboxed child's, a judging child's line) and is read
back by ``mlc_lab.core.worker.decode_result`` as the type its ``WORKER_OPS`` row names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlc_lab.model.conform import WireData
from mlc_lab.model.errors import ErrorInfo, ErrorKind

__all__ = ["RunResult"]

# How a failed run's kind reads as the stage a grader names its check by: a GPU schedule that TVM or the
# OpenCL compiler refuses did not build; one the CPU run cannot run was not checked.
_STAGES = {"does_not_build": "build", "could_not_run": "check"}


@dataclass
class RunResult(WireData):
    """A function built and called once on given inputs (the worker's ``run_function`` on the CPU, its
    ``run_opencl`` for a function bound to GPU threads, run as OpenCL on the CPU): every argument after
    the call (numpy arrays, one per parameter), the OpenCL engine and what it reported; or, ``ok``
    False, the `ErrorInfo` of why not (its ``type`` a kind: build, run, crash, timeout, does_not_build,
    could_not_run, ...)."""

    ok: bool
    outputs: list[Any] = field(default_factory=list)  # numpy arrays (mlc_lab.model.wire carries them)
    engine: str = ""  # OpenCL: pocl or Oclgrind
    diagnostics: list[str] = field(default_factory=list)  # OpenCL: writes outside a buffer, the simulator's reports
    error: ErrorInfo | None = None

    @classmethod
    def failed(cls, kind: ErrorKind, summary: str, detail: str = "") -> RunResult:
        return cls(ok=False, error={"summary": summary, "type": kind, "detail": detail})

    @property
    def stage(self) -> str:
        """Where a failed run stopped, as a grader's check is named: build, run, check, crash, timeout."""
        kind = str(self.error.get("type", "run")) if self.error is not None else "run"
        return _STAGES.get(kind, kind)

    @property
    def message(self) -> str:
        """The failure's sentence ("" when it ran)."""
        return self.error["summary"] if self.error is not None and not self.ok else ""
