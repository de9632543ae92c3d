"""The worker process of `mlc_lab.core.worker`: every out-of-process job of mlc_lab runs here.

    python -m mlc_lab.core.worker_main                      serve requests on stdin (persistent)
    python -m mlc_lab.core.worker_main --job NAME WORK_DIR  run one long request, detached (tuning)
    python -m mlc_lab.core.worker_main --child OP [ARG...]  be the child of the operation OP (CHILDREN),
                                                            which speaks a protocol of its own (grading)

Protocol of the persistent mode: one JSON object per line on stdin ({"id", "op", ...}); one per line
back on the *original* stdout ({"id", "ok", "result"} or {"id", "ok": false, "error": ErrorInfo}); arrays as in `mlc_lab.model.wire`. File descriptor 1 is pointed at stderr once started,
so that anything TVM or generated code prints cannot corrupt the protocol. The first line written
is {"ready": true, "pid", "env"}. The worker dies with the process that started it (a Jupyter kernel
killed or restarted mid-measurement): the system kills it when the thread that started it ends
(``PR_SET_PDEATHSIG``; `mlc_lab.core.worker` starts workers from a thread that lives as long as its
process), and a watchdog thread that sees its parent change kills its process group too.

To add a request type: its declaration in `mlc_lab.model.worker_ops.WORKER_OPS` (parameters, result,
time-out) and one line in REQUESTS ("op": "module:function"); the function takes the
request dict and returns its result type (sent as its ``to_json()``; numpy arrays allowed inside), or
raises `wire.RequestFailure`.
Handlers are imported on first use, so a request type costs nothing until it is asked for.
A child of its own protocol (a grading child: jobs on stdin, one answer a line, or one answer on fd 3 of
the sandbox) is one row of CHILDREN, ``"op": "module:function"``, the function taking the child's
arguments and returning its exit status; `mlc_lab.core.worker.child_argv` is its command line.
This entry point sits in core, above the one door to TVM: a handler may join the two layers (the
measurement's byte count comes from core's access analysis of what `mlc_lab.tvm.measure.build` times).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable

from mlc_lab.model.errors import ErrorInfo
from mlc_lab.model.wire import RequestFailure, decode, encode

REQUESTS: dict[str, str] = {
    "env": "mlc_lab.tvm.measure.build:environment_request",
    "measure": "mlc_lab.core.access.traffic:measure_request",
    "measure_elsewhere": "mlc_lab.tvm.measure.rpc:measure_elsewhere_request",
    "cuda": "mlc_lab.tvm.measure.build:cuda_request",
    "lower": "mlc_lab.tvm.lowering:lower_request",
    "run_function": "mlc_lab.tvm.exercises:run_function_request",
    "numeric_gpu": "mlc_lab.tvm.checks.opencl:numeric_gpu_request",
    "run_opencl": "mlc_lab.tvm.checks.opencl:run_function_request",
    "machine": "mlc_lab.tvm.machine:machine_request",
    "tune": "mlc_lab.tvm.tuning.job:tune_request",  # a --job: {"work_dir": ...}
}

# The children of an operation that speak a protocol of their own: ``--child OP ARG...``.
CHILDREN: dict[str, str] = {
    # one per judging thread of a batch: the assignment (a pickle from the parent), then a hand-in a line
    "grade_batch": "mlc_lab.grading.judge:judge_batch",
    # one per grading thread of a class server: ASSIGNMENT [--runner URL] [--unsafe-same-user], a job a line
    "grade_class": "mlc_lab.classroom.graders:grading_child",
    # run in the sandbox (the hand-in's code runs here): PROGRAM HANDIN OUT [FUNC [FUNCTION]], one answer on OUT
    "handin": "mlc_lab.tvm.grading:handin_child",
    # one session of a measuring server, in the sandbox: --fd 5 --facts JSON (or --check), TVM's runtime alone
    "rpc_session": "mlc_lab.tvm.measure.session:main",
}


def handler(op: str) -> Callable[[dict], Any]:
    where = REQUESTS.get(op)
    if where is None:
        raise RequestFailure("protocol", f"unknown request {op!r} (known: {', '.join(sorted(REQUESTS))})")
    return _imported(where)


def _imported(where: str) -> Callable[..., Any]:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def _plain(result: Any) -> Any:
    """A handler's result as it crosses: its type's one encoding (``to_json``), or the data itself."""
    return result.to_json() if hasattr(result, "to_json") else result


def _failure(rid: Any, exc: BaseException) -> dict:
    """A failed request's answer: ``{"id", "ok": False, "error": ErrorInfo}``."""
    if isinstance(exc, RequestFailure):
        info: ErrorInfo = {"summary": exc.message, "type": exc.kind, "detail": exc.detail}
    else:
        info = {
            "summary": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
            "type": "internal",
            "detail": str(exc) + "\n" + traceback.format_exc(),
        }
    return {"id": rid, "ok": False, "error": info}


# How often the watchdog looks whether the worker's parent is still there (seconds).
PARENT_POLL_S = 0.25
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """Die with ``parent``: ask the system for SIGKILL when the thread that started this process ends
    (Linux; nothing of Python needs to run then, whatever the request in flight holds), and watch from
    a daemon thread: once this process has another parent (its own died and it was handed to init or
    a subreaper), SIGKILL this process's group when it leads one (the launcher starts every worker in
    a session of its own: the worker and whatever it started), else exit."""
    from mlc_lab.core.processes import kill_tree  # imported now: the watch may not wait on an import

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        if os.getpgid(0) == os.getpid():
            kill_tree(os.getpid())  # its first act: SIGKILL to the whole group, this process included
        os._exit(1)

    thread = threading.Thread(target=watch, name="mlc-lab-die-with-parent", daemon=True)
    thread.start()
    return thread


def serve() -> int:
    parent = os.getppid()
    if parent == 1:  # the process that started it died before it got here
        return 1
    die_with_parent(parent)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        proto.write(json.dumps(encode(obj)) + "\n")
        proto.flush()

    send({"ready": True, "pid": os.getpid(), "env": _plain(handler("env")({}))})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = decode(json.loads(line))
        rid = req.get("id")
        op = req.get("op")
        if op == "exit":
            send({"id": rid, "ok": True, "result": None})
            return 0
        try:
            send({"id": rid, "ok": True, "result": _plain(handler(op)(req))})
        except Exception as exc:  # noqa: BLE001 - everything is reported, the worker lives on
            send(_failure(rid, exc))
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        return serve()
    if len(argv) == 3 and argv[0] == "--job":
        if argv[1] == "tune":
            # the job's measuring process imports TVM while this one does (see runner_process)
            from mlc_lab.tvm.tuning.runner_process import prestart

            prestart(argv[2])
        result = handler(argv[1])({"work_dir": argv[2]})
        return int(result) if isinstance(result, int) else 0
    if len(argv) >= 2 and argv[0] == "--child":
        if argv[1] not in CHILDREN:
            print(
                f"worker_main: no operation {argv[1]!r} has a child (known: {', '.join(sorted(CHILDREN))})",
                file=sys.stderr,
            )
            return 2
        return int(_imported(CHILDREN[argv[1]])(argv[2:]))
    print(
        "usage: python -m mlc_lab.core.worker_main [--job NAME WORK_DIR | --child "
        f"{{{','.join(sorted(CHILDREN))}}} [ARG...]]",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
