"""Judging hand-ins in the children that grading's callers start, one hand-in after another.

- `judge_batch`: the batch's judging child (``python -m mlc_lab.core.worker_main --child grade_batch``, no
  arguments; its parent is ``mlc_lab.grading.batch``): the assignment once (a pickle from the parent),
  then one JSON line per hand-in in, one `GradeResult` line out.
- `judge_for_class`: one hand-in judged as the class server's grading child does it (its job loop is
  ``mlc_lab.classroom.graders.grading_child``): graded by `grade`, and when it passes a task timed by
  mlc_lab's one method: its kernel built here and run in the sandbox (``mlc_lab.core.kernel_sandbox``,
  under the assignment's time and memory), or on a measurement machine of the class through TVM's RPC
  tracker when a runner is given (`time_submission`).

Whatever a hand-in does here, the parent only sees a verdict or a dead child.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from mlc_lab.grading.grade import grade, measure_in_sandbox, warm_up


@contextlib.contextmanager
def _no_turn(remote: bool = False) -> Iterator[bool]:
    yield True


def time_submission(assignment, trace: str, runner: str | None, unsafe_same_user: bool = False) -> dict:
    """``{"latency_ms", "correct", "timing": {"where", "method"}}`` or ``{"timing_error": ...}``."""
    from mlc_lab.core.checks import Target
    from mlc_lab.core.session import Session
    from mlc_lab.tvm.program import load

    target = "cuda" if Target.of(assignment.target).gpu else "cpu"
    session = Session.from_trace(load(str(assignment.program), assignment.func), trace, assignment.func)
    if runner:
        from mlc_lab.tvm.measure.build import module_to_text
        from mlc_lab.tvm.measure.rpc import measure_remote

        try:
            r = measure_remote(
                module_to_text(session.module),
                module_to_text(session.original),
                session.func_name,
                target,
                runner,
                repeats=assignment.repeats,
                sandboxed_only=not unsafe_same_user,  # a submission's kernel: only in a server's sandbox
            )
        except Exception as exc:  # noqa: BLE001  (the verdict says it; the server goes on)
            return {"timing_error": f"the program could not be timed on the class's machines: {exc}"}
        if not r["correct"]:
            return {
                "correct": False,
                "timing_error": "the program computes a wrong result on the class's machine "
                f"(max error {r['max_abs_error']:.3g})",
            }
        return {"latency_ms": r["latency_s"] * 1e3, "correct": True, "timing": {"where": runner, "method": r["method"]}}
    m = measure_in_sandbox(assignment, session, unsafe_same_user)
    if m.error:
        return {"timing_error": f"the program could not be timed: {m.error.splitlines()[0]}"}
    if not m.correct:
        return {
            "correct": False,
            "timing_error": "the program computes a wrong result (max error "
            f"{m.max_abs_error:.3g} against the original program on random inputs)",
        }
    # quiet: whether the machine was quiet while it was timed (another process on a core makes it slower)
    return {
        "latency_ms": m.latency_s * 1e3,
        "correct": True,
        "timing": {
            "where": "the class server (in its sandbox)",
            "method": m.method,
            "quiet": m.quiet,
            # the repeats' interquartile range and the machine's load: two figures closer than their
            # spread are a tie on the leaderboard (mlc_lab.classroom.store.rank)
            "spread_ms": None if m.iqr_s is None else m.iqr_s * 1e3,
            "load": m.load,
        },
    }


def judge_for_class(
    assignment,
    submission: str,
    runner: str | None,
    unsafe: bool = False,
    turn: Callable[..., AbstractContextManager[Any]] = _no_turn,
) -> dict:
    """One hand-in graded and (when it passes a task) timed for a class: ``GradeResult.to_json()`` and the
    timing (a `ClassGrade`), or the verdict that says why the grader failed. ``turn(remote=...)`` is the
    class's turn at the machine around a timing (``mlc_lab.classroom.timing.timing_turn``; none by default)."""
    from mlc_lab.grading.report import failed_verdict

    try:
        result = grade(assignment, submission, unsafe_same_user=unsafe).to_json()
        if not result.get("error") and result.get("trace") and any(t["passed"] for t in result["tasks"]):
            if runner or result.get("latency_ms") is None:
                # a trace is timed as the grader read it (its printed form goes through the other reader)
                trace = Path(submission).read_text(encoding="utf-8") if result.get("kind") == "trace" else None
                with turn(remote=bool(runner)):
                    result.update(time_submission(assignment, trace or result["trace"], runner, unsafe))
        if result.get("timing_error"):
            result["correct"] = result.get("correct", None)
    except Exception as exc:  # noqa: BLE001
        result = failed_verdict(
            {
                "type": "internal",
                "summary": f"the class server's grader failed on this submission ({type(exc).__name__}: {exc}); "
                "tell the course staff",
                "detail": traceback.format_exc()[-2000:],
            }
        )
    return result


def judge_batch(argv: list[str]) -> int:
    """The judging child (``python -m mlc_lab.core.worker_main --child grade_batch``, no arguments): the
    assignment once (a pickle from the parent), then one JSON line per hand-in in, one JSON line per
    result out, on a copy of stdout (the real fd 1 goes to stderr)."""
    if argv:
        print(f"the judging child takes no arguments, not {argv!r}", file=sys.stderr)
        return 2
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    size = int.from_bytes(stdin.read(8), "big")
    setup: dict[str, Any] = pickle.loads(stdin.read(size))  # noqa: S301  (from the parent, never a hand-in)
    assignment = setup["assignment"]
    warm_up(assignment)  # TVM imported and the program loaded once: a hand-in's seconds are its own
    for line in stdin:
        path = json.loads(line)["path"]
        r = grade(assignment, path, unsafe_same_user=setup["unsafe_same_user"])
        r.visibility = assignment.visibility
        out.write(json.dumps(r.to_json()).encode() + b"\n")
        out.flush()
    return 0
