"""The hand-in forms a lab uses (mlc_lab.grading.handin, mlc_lab.tvm.grading): a .py holding the
program and manual_schedule(), schedule(sch) returning a schedule, the assignment's own function
name, a notebook that defines the program, traces; a form that is none of these is refused with the
forms accepted; a schedule that changes nothing is said to; an assignment of parts grades a folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlc_lab.grading import grade, load_assignment
from mlc_lab.grading.assignment import AssignmentError

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "grading"
ASSIGNMENT = LAB / "assignment.toml"
PROGRAM = (LAB / "gemm_relu_add.py").read_text()
# The reference schedule's statements (a printed trace), to build each form from.
BODY = (LAB / "submissions" / "reference.py").read_text().split("-> None:\n", 1)[1]

MANUAL = (
    PROGRAM
    + "\n\nfrom tvm import s_tir\n\n\ndef manual_schedule():\n"
    + "    sch = s_tir.Schedule(gemm_relu_add)\n"
    + BODY
    + "    return sch\n"
)


@pytest.fixture(scope="module")
def assignment():
    return load_assignment(ASSIGNMENT)


def _hand_in(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_py_with_the_program_and_manual_schedule_is_graded(tmp_path, assignment):
    r = grade(assignment, _hand_in(tmp_path, "lab3.py", MANUAL))
    assert (r.kind, r.status, r.error, r.score) == ("schedule", "graded", None, 20)
    assert not r.notes


def test_schedule_returning_manual_schedule_grades_the_returned_schedule(tmp_path, assignment):
    text = MANUAL + "\n\ndef schedule(sch):\n    return manual_schedule()\n"
    r = grade(assignment, _hand_in(tmp_path, "lab3.py", text))
    assert (r.status, r.score) == ("graded", 20), r.error


def test_a_schedule_that_changes_nothing_is_said_to(tmp_path, assignment):
    text = "import math\n\n\ndef schedule(sch):\n    sch.get_sblock('gemm')\n    return sch\n"
    r = grade(assignment, _hand_in(tmp_path, "lab3.py", text))
    assert r.status == "graded" and r.score == 0
    assert r.notes == ["lab3.py: the schedule changes nothing: it is graded as the unscheduled program"]
    assert all(t.messages[0] == r.notes[0] for t in r.tasks)
    trace = grade(assignment, _hand_in(tmp_path, "nothing.py", "def apply_trace(sch):\n    pass\n"))
    assert trace.kind == "trace" and "changes nothing" in trace.notes[0]


def test_the_assignments_own_function_name(tmp_path):
    text = ASSIGNMENT.read_text().replace("[limits]", '[hand_in]\nfunction = "my_lab3"\n\n[limits]')
    (tmp_path / "gemm_relu_add.py").write_text(PROGRAM)
    (tmp_path / "a.toml").write_text(text)
    named = load_assignment(tmp_path / "a.toml")
    ok = grade(named, _hand_in(tmp_path, "lab3.py", MANUAL.replace("def manual_schedule", "def my_lab3")))
    assert ok.score == 20, ok.error
    wrong = grade(named, _hand_in(tmp_path, "other.py", "import math\n\n\ndef my_lab4():\n    pass\n"))
    assert wrong.status == "refused" and "a .py file holding the program and my_lab3()" in wrong.error


def test_a_notebook_that_defines_the_program_and_schedules_it(tmp_path, assignment):
    cells = [
        ("markdown", "# Lab 3"),
        ("code", PROGRAM),  # T.func_attr({...}) and decorators: the notebook's own program
        ("code", MANUAL[len(PROGRAM) :]),
        ("code", "%%time\nsch = manual_schedule()\nprint(sch.mod)"),
        ("code", "!nvidia-smi\nsch = manual_schedule()"),
    ]
    nb = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True)}
            | ({"outputs": [], "execution_count": None} if kind == "code" else {})
            for kind, src in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    r = grade(assignment, _hand_in(tmp_path, "lab3.ipynb", json.dumps(nb)))
    assert (r.kind, r.status, r.score) == ("notebook", "graded", 20), r.error


@pytest.mark.parametrize(
    "name, text",
    [
        ("notes.py", "print('my schedule is in my head')\n"),
        ("notes.txt", "split the loops and bind them\n"),
        ("helper.py", "import math\n\n\ndef helper(sch):\n    pass\n"),
    ],
)
def test_a_form_that_is_none_of_these_is_refused_with_the_forms_accepted(tmp_path, assignment, name, text):
    r = grade(assignment, _hand_in(tmp_path, name, text))
    assert r.status == "refused" and r.score == 0
    assert re.match(rf"{name}: the trace is refused: line \d+: ", r.error)
    assert "a hand-in is one of: a .py file holding the program and schedule(sch) or manual_schedule()" in r.error
    assert "TVM's JSON trace (.json)" in r.error


def test_a_function_that_returns_no_schedule_says_so(tmp_path, assignment):
    r = grade(assignment, _hand_in(tmp_path, "lab3.py", "import math\n\n\ndef manual_schedule():\n    return 42\n"))
    assert r.status == "refused"
    assert "manual_schedule() must return the schedule (a tvm.s_tir.Schedule), not int" in r.error


PARTS = """title = "Lab 3 in two parts"
program = "gemm_relu_add.py"
target = "cuda"
visibility = "after_due_date"

[[parts]]
name = "tiling"
hand_in = { file = "part1.py" }

[[parts.tasks]]
name = "thread_blocks"
checks = ["thread_block_tiling"]
points = 5

[[parts]]
name = "memory"
hand_in = { file = "part2.json", function = "schedule" }

[[parts.tasks]]
name = "shared_memory"
checks = ["shared_memory_tiling"]
points = 5
visibility = "hidden"
"""


def test_an_assignment_of_parts_grades_each_part_from_its_own_file_in_a_folder(tmp_path):
    (tmp_path / "gemm_relu_add.py").write_text(PROGRAM)
    (tmp_path / "parts.toml").write_text(PARTS)
    a = load_assignment(tmp_path / "parts.toml")
    assert [(p.name, p.hand_in.file) for p in a.parts] == [("tiling", "part1.py"), ("memory", "part2.json")]
    assert [(t.number, t.visibility) for t in a.tasks] == [("1.1", "after_due_date"), ("2.1", "hidden")]
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "part1.py").write_text((LAB / "submissions" / "reference.py").read_text())
    r = grade(a, folder)  # a folder scores its parts: the missing one costs its own tasks only
    assert r.kind == "folder" and r.status == "graded" and r.error is None
    assert [(t.number, t.points) for t in r.tasks] == [("1.1", 5.0), ("2.1", 0.0)]
    assert r.notes == ["part memory: the folder has no part2.json"]
    assert r.tasks[1].messages == ["the folder has no part2.json"]
    assert "FAIL 2.1 (0/5)" in r.to_text() and "| the folder has no part2.json" in r.to_text()
    empty = tmp_path / "bob"
    empty.mkdir()
    nothing = grade(a, empty)  # no part at all: the row is refused, with both sentences
    assert nothing.status == "refused" and nothing.score == 0
    assert nothing.error == "the folder has no part1.py; the folder has no part2.json"
    (folder / "part2.json").write_text((LAB / "submissions" / "variant_ji.json").read_text())
    both = grade(a, folder)
    assert both.status == "graded" and both.score == 10
    gs = both.to_gradescope()
    assert gs["visibility"] == "after_due_date" and [t["visibility"] for t in gs["tests"]] == [
        "after_due_date",
        "hidden",
    ]
    alone = grade(a, folder / "part2.json")
    assert [t.name for t in alone.tasks] == ["shared_memory"] and alone.score == 5


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda t: t.replace("hazards_fail = true", "hazard_fail = true"),
            "unknown key 'hazard_fail' in the assignment",
        ),
        (
            lambda t: t.replace("time_s = 10", "time = 10"),
            r"unknown key 'time' in \[limits\]; the keys it knows are grader_memory_mb, grader_time_s, memory_mb, time_s",
        ),
        (
            lambda t: t.replace("points = 5\n", "points = 5\npoint = 5\n", 1),
            r"task 1: unknown key 'point' in \[tasks\]",
        ),
        (
            lambda t: t.replace("hazards_fail = true", 'hazards_fail = ["races"]'),
            "hazards_fail names 'races', which is no hazard class or kind",
        ),
        (
            lambda t: t.replace("hazards_fail = true", 'visibility = "students"'),
            "visibility must be one of visible, hidden",
        ),
        # issue 34: the teacher's word on a task, the numeric sizes and budget, Gradescope's format
        (
            lambda t: t.replace(
                'checks = ["thread_block_tiling"]', 'checks = ["thread_block_tiling"]\nread_copies = true'
            ),
            r"task 1 \(thread_blocks\): read_copies is judged with register_tiling: add it to the task's checks",
        ),
        (
            lambda t: t.replace(
                'checks = ["register_tiling", "write_cache"]', 'checks = ["write_cache"]\nwrite_back = "warp"'
            ),
            r"write_back is 'thread' \(under the innermost thread loop\) or 'block' .*, not 'warp'",
        ),
        (lambda t: t + "\n[numeric]\nsizes = [128, 0]\n", r"\[numeric\] sizes is a list of sizes to run at"),
        (lambda t: t + "\n[numeric]\nsize = 64\nsizes = [128]\n", r"\[numeric\] has size or sizes, not both"),
        (lambda t: t + "\n[numeric]\nmemory_mb = -5\n", r"\[numeric\] memory_mb must be a number > 0, not -5"),
        (
            lambda t: t.replace("time_s = 10", "time_s = 10\ngrader_memory_mb = 0"),
            r"\[limits\] grader_memory_mb must be",
        ),
        (lambda t: 'output_format = "html"\n' + t, "output_format must be one of text, md, not 'html'"),
        (lambda t: 'reference = "nowhere.py"\n' + t, "reference 'nowhere.py' is not next to the assignment"),
    ],
)
def test_unknown_keys_and_values_are_refused_with_the_known_ones(tmp_path, edit, message):
    (tmp_path / "gemm_relu_add.py").write_text(PROGRAM)
    (tmp_path / "a.toml").write_text(edit(ASSIGNMENT.read_text()))
    with pytest.raises(AssignmentError, match=message):
        load_assignment(tmp_path / "a.toml")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("true", {"correctness"}),
        ("false", set()),
        ('["spill"]', {"spill"}),
        ('["correctness", "performance"]', {"correctness", "performance"}),
    ],
)
def test_hazards_fail_takes_true_false_or_classes_and_kinds(tmp_path, value, expected):
    (tmp_path / "gemm_relu_add.py").write_text(PROGRAM)
    (tmp_path / "a.toml").write_text(ASSIGNMENT.read_text().replace("hazards_fail = true", f"hazards_fail = {value}"))
    assert load_assignment(tmp_path / "a.toml").hazards_fail == expected


def test_a_symbolic_link_is_refused_and_its_target_never_read(tmp_path, assignment):
    secret = tmp_path / "secret.py"
    secret.write_text("b0 = sch.get_sblock(name='the teacher s answer key')\n")
    link = tmp_path / "lab3.py"
    link.symlink_to(secret)
    r = grade(assignment, link)
    assert r.status == "refused" and r.error == "lab3.py is a symbolic link; a hand-in is a plain file"
    folder = tmp_path / "student"
    folder.mkdir()
    (folder / "lab3.py").symlink_to("/etc/passwd")
    r = grade(assignment, folder)
    assert r.error == "lab3.py is a symbolic link; a hand-in is a plain file" and "root:x:0" not in r.to_text()


def test_a_100_MB_hand_in_is_refused_unread(tmp_path, assignment):
    big = tmp_path / "lab3.py"
    with open(big, "wb") as fh:
        fh.truncate(100 << 20)
    r = grade(assignment, big)
    assert r.status == "refused" and r.error == "lab3.py: the file is over the limit of 4194304 bytes for a hand-in"


def test_the_numeric_sizes_and_budget_as_the_assignment_gives_them(tmp_path):
    (tmp_path / "gemm_relu_add.py").write_text(PROGRAM)
    base = ASSIGNMENT.read_text()
    for table, sizes in (
        ("", None),  # the default plan
        ("size = 64", 64),
        ("sizes = [128, 196, 256]", [128, 196, 256]),
        ('sizes = {"2048" = 128}', {2048: 128}),
    ):
        (tmp_path / "a.toml").write_text(f"{base}\n[numeric]\n{table}\n")
        spec = load_assignment(tmp_path / "a.toml").numeric
        assert spec is not None and spec["sizes"] == sizes and spec["memory_mb"] == 768 and spec["timeout_s"] == 120
