"""Assignments as data and an autograder built on the named checks (``mlc_lab.core.checks``).

``load_assignment(path)`` reads a TOML assignment (its keys: ``mlc_lab.grading.assignment``);
``grade(assignment, hand_in)`` grades one hand-in in this process (a trace: parsed, never executed; a
schedule file or notebook: run only in the sandbox, its schedule captured as a trace);
``grade_batch`` grades many, each in a child process, so that none can cost the batch;
``score_tasks`` turns a step's check report into task points (what the Checks panel shows);
``GradeResult.to_gradescope()`` gives the ``results.json`` Gradescope reads.
"""

from mlc_lab.grading.assignment import Assignment, Part, Task, load_assignment
from mlc_lab.grading.batch import grade_batch
from mlc_lab.grading.grade import GradeResult, grade
from mlc_lab.grading.scoring import TaskResult, score_tasks

__all__ = [
    "Assignment",
    "GradeResult",
    "Part",
    "Task",
    "TaskResult",
    "grade",
    "grade_batch",
    "load_assignment",
    "score_tasks",
]
