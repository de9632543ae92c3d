"""The grader inside a course's own pytest autograder.

In the course's ``conftest.py``: ``pytest_plugins = ["mlc_lab.grading.pytest_plugin"]``; run
``pytest --assignment lab3.toml --submission student/lab3.ipynb`` (or set ``MLC_LAB_ASSIGNMENT`` and
``MLC_LAB_SUBMISSION``). Then::

    from mlc_lab.grading.pytest_plugin import assert_task

    def test_shared_memory(graded):
        assert_task(graded, "shared_memory")     # fails with the student's messages

``mlc_lab_grade(assignment, submission)`` grades any other pair (cached for the session).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlc_lab.grading.assignment import load_assignment
from mlc_lab.grading.grade import GradeResult, grade


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlc_lab", "mlc_lab grading")
    group.addoption("--assignment", help="the assignment's TOML file (default: $MLC_LAB_ASSIGNMENT)")
    group.addoption("--submission", help="the submission to grade (default: $MLC_LAB_SUBMISSION)")


@pytest.fixture(scope="session")
def mlc_lab_grade():
    cache: dict = {}

    def run(assignment: str | os.PathLike, submission: str | os.PathLike) -> GradeResult:
        key = (str(Path(assignment).resolve()), str(Path(submission).resolve()))
        if key not in cache:
            cache[key] = grade(load_assignment(assignment), submission)
        return cache[key]

    return run


@pytest.fixture(scope="session")
def graded(request: pytest.FixtureRequest, mlc_lab_grade) -> GradeResult:
    assignment = request.config.getoption("--assignment") or os.environ.get("MLC_LAB_ASSIGNMENT")
    submission = request.config.getoption("--submission") or os.environ.get("MLC_LAB_SUBMISSION")
    if not assignment or not submission:
        pytest.fail("give --assignment and --submission (or MLC_LAB_ASSIGNMENT and MLC_LAB_SUBMISSION)", pytrace=False)
    return mlc_lab_grade(assignment, submission)


def assert_task(result: GradeResult, name: str) -> None:
    """Fail (with the task's messages, in a student's words) unless the task passed."""
    task = next((t for t in result.tasks if t.name == name), None)
    if task is None:
        raise AssertionError(
            f"the assignment has no task {name!r}; its tasks are {', '.join(t.name for t in result.tasks)}"
        )
    if not task.passed:
        raise AssertionError(f"{task.title}: " + " ".join(task.messages))
