"""Issue 34: another course's GPU lab as an mlc_lab assignment (tests/labs/register_sgemm: a register-tiled
SGEMM whose handout names where the accumulator is written back and asks for register-level copies of
the shared tiles), seven hand-ins in the seven forms the grader takes, held to expected.toml.

The default run grades each hand-in once from its JSON trace (parsed, no sandbox, no numeric check) and
runs the numeric check of the aliasing layout at two sizes; ``-m full`` grades all 49 files with
``mlc-lab grade`` as the lab's teacher would, the numeric check at its default sizes included."""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlc_lab.grading import grade, load_assignment

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "register_sgemm"
TOML = LAB / "lab4.toml"
EXPECTED = tomllib.loads((LAB / "expected.toml").read_text())
FORMS = {
    "schedule.py": "schedule",
    "apply_trace.py": "trace",
    "trace.txt": "trace",
    "trace.json": "trace",
    "manual.py": "schedule",
    "lab4.ipynb": "notebook",
    "folder": "folder",
}


def _holds(row: dict, name: str) -> None:
    """A graded row (``GradeResult.to_json()``) against the lab's expected verdict of ``name``."""
    want = EXPECTED[name]
    failed = {t["name"] for t in row["tasks"] if not t["passed"]}
    assert (row["status"], row["score"], row["max_score"]) == ("graded", want["score"], 80), (name, row)
    assert failed == set(want.get("failed", [])), (name, row["tasks"])
    kinds = {h["kind"] for h in row["hazards"] if h["class"] == "correctness"}
    assert kinds == set(want.get("hazards", [])), (name, row["hazards"])
    said = (
        " ".join(m for t in row["tasks"] for m in t["messages"]) + " " + " ".join(h["message"] for h in row["hazards"])
    )
    assert want.get("says", "") in said, (name, said)


def test_every_hand_in_is_there_in_the_seven_forms():
    assert sorted(p.name for p in (LAB / "hand_ins").iterdir()) == sorted(EXPECTED)
    for name in EXPECTED:
        assert sorted(p.name for p in (LAB / "hand_ins" / name).iterdir()) == sorted(FORMS), name
    assert load_assignment(TOML).reference == LAB / "hand_ins" / "reference" / "schedule.py"


@functools.cache
def _graded(name: str):
    """The hand-in's JSON trace graded by the checks and hazards alone (the numeric check is the full
    run's, and the aliasing test's below)."""
    assignment = dataclasses.replace(load_assignment(TOML), numeric=None)
    return grade(assignment, LAB / "hand_ins" / name / "trace.json")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_hand_in_gets_its_expected_tasks_from_the_checks(name):
    _holds(_graded(name).to_json(), name)


def test_a_right_placement_and_a_racy_one_are_told_apart():
    right, racy = _graded("reference"), _graded("racy_write_back")
    (ok,) = [t for t in right.tasks if t.name == "write_back"]
    (bad,) = [t for t in racy.tasks if t.name == "write_back"]
    assert ok.messages == [
        "C_update accumulates in the local buffer C_local and block C_local writes each element back to C "
        "once, after loop k_0, under j_0, each thread the tile it computed (its loops bound to the threads as "
        "C_update's are)"
    ]
    assert bad.messages[0].startswith("block C_local writes C_local back to C under j_0, above the thread loops, and")
    assert "reverse_compute_at it under the thread loop" not in bad.messages[0]  # j_1 is inside k_0 here


def test_the_teachers_placement_fails_a_right_hand_in_that_writes_back_elsewhere(tmp_path):
    # the same reference, graded by an assignment whose handout asks for the write-back under the thread loop
    text = TOML.read_text().replace('write_back = "block"', 'write_back = "thread"')
    (tmp_path / "lab.toml").write_text(text.replace('program = "sgemm.py"', f'program = "{LAB / "sgemm.py"}"'))
    (tmp_path / "hand_ins" / "reference").mkdir(parents=True)
    (tmp_path / "hand_ins" / "reference" / "schedule.py").write_text("")
    assignment = dataclasses.replace(load_assignment(tmp_path / "lab.toml"), numeric=None)
    row = grade(assignment, LAB / "hand_ins" / "reference" / "trace.json")
    (wb,) = [t for t in row.tasks if t.name == "write_back"]
    assert not wb.passed and row.score == 60
    assert wb.messages == [
        "the lab writes the accumulator back under the innermost thread loop, after the reduction; block C_local "
        "writes it back under the thread-block loop, after the reduction, its loops bound to the threads "
        "(under j_0): right, but not the lab's placement"
    ]


def _cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def test_check_ref_accepts_the_lab_and_refuses_an_assignment_its_reference_cannot_pass(tmp_path):
    def lab(edit=lambda t: t) -> Path:
        text = TOML.read_text().replace("[numeric]", "# [numeric]")  # the checks only: seconds
        text = text.replace('program = "sgemm.py"', f'program = "{LAB / "sgemm.py"}"')
        text = text.replace('"hand_ins/reference/schedule.py"', f'"{LAB / "hand_ins" / "reference" / "trace.json"}"')
        path = tmp_path / f"lab{len(list(tmp_path.iterdir()))}.toml"
        path.write_text(edit(text))
        return path

    ok = _cli("grade", str(lab()), "--check-ref", "--unsafe-same-user")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "the reference (trace.json) earns 80/80: the assignment can give full marks\n"
    thread = lab(lambda t: t.replace('write_back = "block"', 'write_back = "thread"'))
    refused = _cli("grade", str(thread), "--check-ref", "--unsafe-same-user")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "the assignment's reference (trace.json) earns 60/80, not full marks" in refused.stderr
    assert (
        "task 1.4 (write_back): the lab writes the accumulator back under the innermost thread loop" in refused.stderr
    )


def test_the_aliasing_layout_matches_at_128_and_is_wrong_at_the_labs_shape_class():
    from mlc_lab.core.checks.numeric_gpu import numeric_check
    from mlc_lab.core.checks.numeric_sizes import numeric_check_sizes
    from mlc_lab.core.session import Session

    s = Session.from_trace(str(LAB / "sgemm.py"), (LAB / "hand_ins" / "aliasing_layout" / "trace.json").read_text())
    r = numeric_check_sizes(s, [128, 256], timeout_s=600, check=numeric_check)  # the explorer's, in the worker
    assert r.verdict == "mismatch" and r.sizes == {2048: 256}, r.message
    assert r.message.endswith("(it matched at 2048 -> 128)") and "of 65536 elements of C are wrong" in r.message


@pytest.mark.full
def test_the_lab_graded_as_its_teacher_would_every_form_of_every_hand_in(tmp_path):
    paths = [LAB / "hand_ins" / name / form for name in sorted(EXPECTED) for form in FORMS]
    r = _cli("grade", str(TOML), *map(str, paths), "--format", "json", timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout)["results"]
    assert len(rows) == 49
    for key, row in rows.items():
        name, form = key.split("/")[0], key.split("/")[1]
        assert row["kind"] == FORMS[form], (key, row["kind"])
        _holds(row, name)
        numeric = row["numeric"]
        assert numeric["verdict"] == EXPECTED[name].get("numeric", numeric["verdict"]), (key, numeric)
        if EXPECTED[name]["score"] == 80:
            assert numeric["verdict"] == "match" and "the same at 2048 -> 256" in numeric["message"], (key, numeric)
