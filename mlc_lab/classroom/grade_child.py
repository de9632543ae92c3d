"""Submissions graded and timed, in a persistent child process of the class server.

``python -m mlc_lab.core.worker_main --child grade_class ASSIGNMENT [--runner rpc://HOST:PORT/KEY]
[--unsafe-same-user]`` (`main`) reads one job a line on stdin (``{"op": "grade", "path": FILE}``, or ``{"op": "retime", "traces",
"rounds"}``) and answers each with one line on stdout: ``GradeResult.to_json()`` with the class's
timing (or the timings, ``mlc_lab.classroom.timing.retime``). The autograder parses the trace (never
runs it); a submission that passes at least one task is then timed by mlc_lab's one method: its
kernel built here and run in the sandbox (``mlc_lab.core.kernel_sandbox``, under the assignment's
time and memory), or on a measurement machine of the class through TVM's RPC tracker when a runner
is given. Whatever happens here, the server only sees a verdict or a dead child: it never goes down
with a submission.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def time_submission(assignment, trace: str, runner: str | None, unsafe_same_user: bool = False) -> dict:
    """``{"latency_ms", "correct", "timing": {"where", "method"}}`` or ``{"timing_error": ...}``."""
    import mlc_lab
    from mlc_lab.core import kernel_sandbox
    from mlc_lab.core.checks import Target
    from mlc_lab.grading.grade import kernel_sandbox as confinement
    from mlc_lab.core.session import Session

    target = "cuda" if Target.of(assignment.target).gpu else "cpu"
    session = Session.from_trace(mlc_lab.load(str(assignment.program), assignment.func), trace, assignment.func)
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
    m = kernel_sandbox.measure(
        session.module,
        session.original,
        session.func_name,
        target,
        assignment.repeats,
        sandbox=confinement(assignment, unsafe_same_user),
    )
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


def grade_one(assignment, submission: str, runner: str | None, unsafe: bool = False) -> dict:
    """One hand-in graded and (when it passes a task) timed: ``GradeResult.to_json()`` and the timing."""
    from mlc_lab.classroom.timing import timing_turn
    from mlc_lab.grading.report import failed_verdict

    try:
        from mlc_lab.grading import grade

        result = grade(assignment, submission, unsafe_same_user=unsafe).to_json()
        if not result.get("error") and result.get("trace") and any(t["passed"] for t in result["tasks"]):
            if runner or result.get("latency_ms") is None:
                # a trace is timed as the grader read it (its printed form goes through the other reader)
                trace = Path(submission).read_text(encoding="utf-8") if result.get("kind") == "trace" else None
                with timing_turn(remote=bool(runner)):
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


def main(argv: list[str]) -> int:
    from mlc_lab.classroom.graders import empty_scratch
    from mlc_lab.classroom.timing import retime
    from mlc_lab.grading import load_assignment

    out = os.fdopen(os.dup(1), "wb")  # the answers; what anything prints goes to stderr
    os.dup2(2, 1)
    options = argv[1:]
    runner = options[options.index("--runner") + 1] if "--runner" in options[:-1] else None
    unsafe = "--unsafe-same-user" in options
    assignment = load_assignment(argv[0])
    for line in sys.stdin.buffer:
        job = json.loads(line)
        if job.get("op") == "retime":
            traces = [str(t) for t in job["traces"]]
            answer = {"timings": retime(assignment, traces, int(job.get("rounds", 3)), unsafe)}
        else:
            answer = grade_one(assignment, str(job["path"]), runner, unsafe)
        out.write(json.dumps(answer).encode("utf-8") + b"\n")
        out.flush()
        empty_scratch()
    return 0
