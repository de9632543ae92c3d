"""Assignments as data and an autograder built on the named checks (``mlc_lab.core.checks``).

``load_assignment(path)`` reads a TOML assignment; ``grade(assignment, submission)`` grades one hand-in
(a trace: parsed, never executed; a schedule file or notebook: run only in a child process with time
and memory limits, its schedule captured as a trace); ``GradeResult.to_gradescope()`` gives the
``results.json`` Gradescope reads.
"""

from mlc_lab.grading.assignment import Assignment, Task, load_assignment
from mlc_lab.grading.grade import GradeResult, TaskResult, grade

__all__ = ["Assignment", "GradeResult", "Task", "TaskResult", "grade", "load_assignment"]
