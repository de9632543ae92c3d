"""Every operation a child process of mlc_lab runs, in one table, the way ``REQUESTS`` declares the page's.

:data:`WORKER_OPS` says, per operation:

- ``params``: a TypedDict of what the caller sends (NotRequired: the handler has a default);
- ``result``: what it answers: a type of mlc_lab.model (none is a bare ``dict``; None: the child answers
  no caller, as an RPC session serves its client over its socket), which the handler
  writes (its ``to_json``) and the caller decodes it into, strictly and in one place
  (``mlc_lab.core.worker.decode_result``: `Worker.call`, the batch judge, the class server, the hand-in's
  sandbox); on the strict wire (``MLC_LAB_STRICT_WIRE``) what departs is also a wire violation;
- ``timeout_s``: how long the caller waits by default before the child is killed;
- ``mode``: how ``mlc_lab.core.worker`` runs it: ``persistent`` (a request to the one worker process),
  ``detached`` (a child that outlives its caller, found again by pid), ``sandboxed`` (a command in the
  sandbox, under ``limits``);
- ``entry``: the module the child runs (``python -m ENTRY``); ``mlc_lab.core.worker_main`` answers every
  operation of its ``REQUESTS`` and is the child of every operation of its ``CHILDREN`` (``--child OP``:
  a protocol of the child's own; tests/unit/test_children.py holds the tables equal);
- ``limits``: for a sandboxed operation, the sandbox's ``Limits`` as plain data (the grader changes the
  time and memory to the assignment's own).

A failure of any of them reaches the caller as ``mlc_lab.errors.MeasureError`` (or a grading row), and
the page as :class:`mlc_lab.model.errors.ErrorInfo`, its kind one of ``ERROR_KINDS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from mlc_lab.model.conform import WireData
from mlc_lab.model.grading import ClassGrade, ClassRetimes, GradeResult, HandinResult, NumericComparison, RunResult
from mlc_lab.model.lowering import CudaBuild, LowerResult
from mlc_lab.model.machine import Machine
from mlc_lab.model.measure import Measurement, RunResults

__all__ = ["KERNEL_LIMITS", "SESSION_LIMITS", "WORKER", "WORKER_OPS", "LimitsSpec", "WorkerEnv", "WorkerOp"]

WORKER = "mlc_lab.core.worker_main"
Mode = Literal["persistent", "detached", "sandboxed"]


class NoParams(TypedDict):
    pass


class MeasureParams(TypedDict):
    module: str  # the scheduled program's text
    reference: str | None
    func_name: str | None
    target: str
    repeats: int
    cache: str
    min_repeat_ms: float
    seed: int


class MeasureElsewhereParams(MeasureParams):
    runner: str  # rpc://HOST:PORT/KEY, batch:slurm[:PARTITION] or batch:COMMAND
    sandboxed_only: NotRequired[bool]  # rpc://: only on servers whose sessions are sandboxed (a hand-in's)
    timeout_s: float  # the far side's own limit (a batch round's queue included)


class CudaParams(TypedDict):
    module: str
    func_name: str | None
    target: NotRequired[str]
    ptx: NotRequired[bool]


class LowerParams(TypedDict):
    script: str
    func_name: str | None
    target: NotRequired[str]
    ptx: NotRequired[bool]


class RunParams(TypedDict):
    module: str
    func_name: str | None
    inputs: list[Any]  # numpy arrays, as mlc_lab.model.wire carries them


class NumericGpuParams(TypedDict):
    module: str
    reference: str
    func_name: str | None
    seed: int
    rtol: float
    atol: float
    budget: NotRequired[dict]  # {"memory_mb", "seconds"}: what the kernel's CPU run may use (opencl_fit)


class JobParams(TypedDict):
    work_dir: str  # the job's folder: its request, status and log


class HandinParams(TypedDict):
    program: str  # the assignment's program, staged read-only as /input/program.py
    handin: str  # the student's file, staged read-only as /input/handin.py (or .ipynb)
    func: str
    function: str


class RunKernelParams(TypedDict):
    folder: str  # a run's folder (manifest.json and the files it names), staged read-only as /input


class SessionParams(TypedDict):
    fd: int  # a measuring server's connection to its client, handed on as fd 5
    facts: dict  # what the server says confines the session (its limits, its mode), for the client to ask


class GradeParams(TypedDict):
    path: str  # a hand-in's file, one per line to the judging child


class ClassGradeParams(TypedDict):
    """One job of a class server's grading child (one JSON line on its stdin; the answer: one line)."""

    op: Literal["grade", "retime"]
    path: NotRequired[str]  # grade: the hand-in's file, named as the student called it
    traces: NotRequired[list[str]]  # retime: the traces timed again, interleaved
    rounds: NotRequired[int]


class LimitsSpec(TypedDict):
    """``mlc_lab.core.sandbox.Limits`` as data (the same fields)."""

    wall_s: float
    cpu_s: float
    memory_mb: int
    processes: int
    output_bytes: int
    file_mb: int


@dataclass(frozen=True)
class WorkerEnv(WireData):
    """What the worker says of itself as it starts (``env``, its first line): TVM's version, its thread
    count, the CPU target, whether a CUDA GPU is present, where nvcc is."""

    tvm: str
    threads: str | None  # TVM_NUM_THREADS as the worker has it
    cpu_target: str
    gpu: bool
    nvcc: str | None


@dataclass(frozen=True)
class WorkerOp:
    params: type
    result: Any
    timeout_s: float
    mode: Mode = "persistent"
    entry: str = WORKER
    limits: LimitsSpec | None = None


HANDIN_LIMITS: LimitsSpec = {
    "wall_s": 60.0,  # the assignment's time_s, when it gives one
    "cpu_s": 60.0,
    "memory_mb": 4096,  # the assignment's memory_mb
    "processes": 64,
    "output_bytes": 1 << 20,  # the largest result the grader reads back (handin.MAX_RESULT_BYTES)
    "file_mb": 64,
}

KERNEL_LIMITS: LimitsSpec = {
    "wall_s": 60.0,  # the assignment's time_s
    "cpu_s": 60.0,  # the run's wall time x its threads (every thread of the tree counts)
    "memory_mb": 4096,  # the assignment's memory_mb
    "processes": 64,  # TVM's pool threads count as tasks
    "output_bytes": 1 << 20,  # at least; what comes back holds every argument, so the caller raises it
    "file_mb": 64,  # /tmp: the library's private copy, Oclgrind's log
}

SESSION_LIMITS: LimitsSpec = {
    "wall_s": 600.0,  # at most; the client's own session time-out when shorter
    "cpu_s": 600.0,  # the session's wall time x (its threads + 1)
    "memory_mb": 4096,  # the server's --memory-mb
    "processes": 64,  # and two per thread of TVM's pool
    "output_bytes": 1 << 16,  # its log, kept for the server's own
    "file_mb": 256,  # /tmp: the uploaded libraries
}

WORKER_OPS: dict[str, WorkerOp] = {
    # the persistent worker: mlc_lab.core.worker.worker().call(op, ...)
    "env": WorkerOp(NoParams, WorkerEnv, 120.0),  # asked once, as the worker starts
    "measure": WorkerOp(MeasureParams, Measurement, 30.0),
    # built here, timed on a tracker's server or by a batch round (a queue's wait included)
    "measure_elsewhere": WorkerOp(MeasureElsewhereParams, Measurement, 660.0),
    "cuda": WorkerOp(CudaParams, CudaBuild, 30.0),
    # the passes and texts that core.lowering.build_lowering reads into a Lowering; nvcc + ptxas for a CUDA
    # step take seconds, a first start more
    "lower": WorkerOp(LowerParams, LowerResult, 120.0),
    "run_function": WorkerOp(RunParams, RunResult, 60.0),
    "numeric_gpu": WorkerOp(NumericGpuParams, NumericComparison, 60.0),
    "run_opencl": WorkerOp(RunParams, RunResult, 60.0),
    "machine": WorkerOp(NoParams, Machine, 300.0),  # the peaks, measured a few times over
    # detached: python -m mlc_lab.core.worker_main --job tune WORK_DIR
    "tune": WorkerOp(JobParams, int, 0.0, mode="detached"),  # no time-out: stopped by its owner
    # grading children
    # worker_main --child handin, in the sandbox: the hand-in's code runs there
    "handin": WorkerOp(HandinParams, HandinResult, 60.0, mode="sandboxed", limits=HANDIN_LIMITS),
    # a kernel compiled from a hand-in: built by the caller, run by the measuring side in the sandbox
    # (mlc_lab.core.kernel_sandbox); its answer is the results (and arrays) it writes on fd 3
    "run_kernel": WorkerOp(
        RunKernelParams,
        RunResults,
        60.0,
        mode="sandboxed",
        entry="mlc_lab.tvm.measure.runside",
        limits=KERNEL_LIMITS,
    ),
    # one session of a measuring machine's RPC server (mlc_lab.core.server_sandbox; worker_main --child
    # rpc_session, mlc_lab.tvm.measure.session.main): TVM's RPC session
    # on the connection it is handed, in the sandbox; it answers its client, not its caller (None)
    "rpc_session": WorkerOp(SessionParams, None, 600.0, mode="sandboxed", limits=SESSION_LIMITS),
    # a hand-in's judging: the assignment's time and numeric time-out, plus this
    "grade_batch": WorkerOp(GradeParams, GradeResult, 180.0),  # worker_main --child grade_batch
    # at least this, or twice the assignment's time and a minute
    # worker_main --child grade_class ASSIGNMENT ...
    "grade_class": WorkerOp(ClassGradeParams, ClassGrade | ClassRetimes, 120.0),
}
