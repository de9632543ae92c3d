"""One submission graded and timed, in a child process of the class server.

``python -m mlc_lab.classroom.grade_child ASSIGNMENT SUBMISSION OUT [--runner rpc://HOST:PORT/KEY]
[--unsafe-same-user]`` writes ``GradeResult.to_json()`` with the class's timing to OUT. The autograder
parses the trace (never runs it); a submission that passes at least one task is then timed by
mlc_lab's one method: its kernel built here and run in the sandbox (``mlc_lab.core.kernel_sandbox``,
under the assignment's time and memory), or on a measurement machine of the class through TVM's RPC
tracker when a runner is given. Whatever happens here, the server only sees a verdict or
a dead child: it never goes down with a submission.
"""

from __future__ import annotations

import json
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


def main(argv: list[str]) -> int:
    from mlc_lab.grading.report import failed_verdict

    assignment_path, submission, out = argv[:3]
    options = argv[3:]
    runner = options[options.index("--runner") + 1] if "--runner" in options[:-1] else None
    unsafe = "--unsafe-same-user" in options
    try:
        from mlc_lab.grading import grade, load_assignment

        assignment = load_assignment(assignment_path)
        result = grade(assignment, submission, unsafe_same_user=unsafe).to_json()
        if not result.get("error") and result.get("trace") and any(t["passed"] for t in result["tasks"]):
            if runner or result.get("latency_ms") is None:
                # a trace is timed as the grader read it (its printed form goes through the other reader)
                trace = Path(submission).read_text(encoding="utf-8") if result.get("kind") == "trace" else None
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
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
