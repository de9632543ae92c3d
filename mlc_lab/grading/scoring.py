"""A task's points from a step's check report: the one place where a verdict becomes a grade.

``score_tasks(tasks, report, ...)`` is what ``mlc-lab grade`` gives each task, and what the explorer's
Checks panel can show for any step: the same checks, hazards, numeric verdict and thresholds give the
same points. No TVM here: the report is plain data (``mlc_lab.model.checks.CheckReport``), and so is a task's result
(``mlc_lab.model.grading.TaskResult``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mlc_lab.model.checks import CheckReport, numeric_failure
from mlc_lab.model.grading import TaskResult


_PLACEMENTS = {
    "thread": "under the innermost thread loop, after the reduction",
    "block": "under the thread-block loop, after the reduction, its loops bound to the threads",
}


def teachers_word(task: Any, by_name: dict) -> list[str]:
    """What a task's handout asks beyond its checks, each unmet requirement in a sentence: register-level
    copies of the shared tiles (``read_copies``, from register_tiling's evidence) and the write-back's
    placement (``write_back``, from write_cache's). A requirement whose check failed or did not judge
    adds nothing: that check's sentence says why."""
    out = []
    rt = by_name.get("register_tiling")
    if getattr(task, "read_copies", False) and rt is not None and rt.judged and rt.ok:
        straight = [b for b, via in (rt.evidence.get("read_copies") or {}).items() if not via]
        if straight or not rt.evidence.get("read_copies"):
            what = ", ".join(straight) or "its shared tiles"
            out.append(
                f"the lab asks for register-level copies of the shared tiles, and {rt.where} reads {what} "
                f"straight from shared memory: cache_read each into a 'local' buffer and compute_at it under "
                f"the inner reduction loop, so each thread loads a value once and uses it for its whole tile"
            )
    wc = by_name.get("write_cache")
    wanted = getattr(task, "write_back", None)
    if wanted and wc is not None and wc.judged and wc.ok:
        got = wc.evidence.get("placement")
        if got and got != wanted:
            out.append(
                f"the lab writes the accumulator back {_PLACEMENTS[wanted]}; block {wc.where} writes it back "
                f"{_PLACEMENTS[got]} (under {wc.evidence.get('under')}): right, but not the lab's placement"
            )
    return out


def failed_task(task: Any, message: str) -> TaskResult:
    """A task that could not be graded at all (the hand-in was refused or crashed): 0 points, why."""
    return TaskResult(task.name, task.title, 0.0, task.points, False, [message], task.number, task.visibility)


def score_tasks(
    tasks: Iterable[Any],
    report: CheckReport,
    *,
    hazards_fail: Iterable[str] = ("correctness",),
    wrong: str | None = None,
    latency_ms: float | None = None,
    timing_problem: str | None = None,
) -> list[TaskResult]:
    """Each task's result from the step's ``report``.

    A task passes when every check it names passed, no hazard whose class or kind is in
    ``hazards_fail`` was found (a performance hazard fails nothing unless named), the result is right
    (``wrong`` is the numeric check's sentence when it is not) and, for a task with ``max_latency_ms``,
    the program is that fast. A check that could not judge the program fails its task, said as such,
    never as a wrong answer. The explorer's Checks panel gives the same points with
    ``score_tasks(assignment.tasks, report, hazards_fail=assignment.hazards_fail)`` (a failed numeric
    check in ``report.numeric`` counts as ``wrong``).
    """
    if wrong is None and report.numeric is not None:  # the Checks panel's numeric check, in the report itself
        wrong = numeric_failure(report.numeric)
    fail_on = set(hazards_fail)
    by_name = {c.name: c for c in report.checks}
    failing_hazards = [h for h in report.hazards if h.kind in fail_on or h.severity in fail_on]
    results = []
    for task in tasks:
        checks = [by_name[n] for n in task.checks if n in by_name]
        missing = [n for n in task.checks if n not in by_name]
        messages = [f"{n}: this check did not run on this step" for n in missing]
        for c in checks:
            if not c.judged:
                messages.append(f"{c.name} could not be judged on this program, so the task is not passed: {c.message}")
            elif not c.ok:
                messages.append(c.message)
        messages += teachers_word(task, by_name)
        limit = getattr(task, "max_latency_ms", None)
        if limit is not None:
            if timing_problem:
                messages.append(timing_problem)
            elif latency_ms is None:
                messages.append("the program was not timed, so its latency threshold cannot be judged")
            elif latency_ms > limit:
                messages.append(f"the program takes {latency_ms:.4g} ms; this task asks for at most {limit:g} ms")
        messages += [f"{h.kind.replace('_', ' ')}: {h.message}" for h in failing_hazards]
        if wrong:
            messages.append(wrong)
        passed = not messages
        if passed:
            messages = [c.message for c in checks]
            if limit is not None:
                messages.append(f"the program takes {latency_ms:.4g} ms (at most {limit:g} ms asked)")
        results.append(
            TaskResult(
                task.name,
                task.title,
                task.points if passed else 0.0,
                task.points,
                passed,
                messages,
                getattr(task, "number", ""),
                getattr(task, "visibility", "visible"),
            )
        )
    return results
