"""`mlc-lab path` (exit 0 reached, as a real subprocess; 1 not with the why on stderr, 2 bad input with
the file and line, ``--as json`` with exactly its five keys: through the CLI's own main, in this
process, which spares a TVM import per test), and a scheduled program as a hand-in:
graded through the schedule that reaches it, refused with the why when none does."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from types import SimpleNamespace
from pathlib import Path

import pytest

from mlc_lab import Session
from mlc_lab.grading import grade, load_assignment
from mlc_lab.tvm.course_programs import BMM_RELU, BMM_RELU_TARGET

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "grading"


def mlc_lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def mlc_lab_here(*args: str) -> SimpleNamespace:
    """The CLI's main in this process: its exit status and what it printed, as a subprocess's."""
    from mlc_lab.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "prog.py").write_text(BMM_RELU)
    (tmp_path / "target.py").write_text(BMM_RELU_TARGET)
    (tmp_path / "other.py").write_text(BMM_RELU_TARGET.replace("T.max(", "T.min("))
    (tmp_path / "broken.py").write_text(BMM_RELU_TARGET.replace("T.grid(128, 16)", "T.grid(128, 16"))
    (tmp_path / "start.py").write_text(
        'b0 = sch.get_sblock(name="Y", func_name="bmm_relu")\nl1, l2, l3, l4 = sch.get_loops(block=b0)\n'
        "l5, l6 = sch.split(loop=l3, factors=[16, 8])\n"
    )
    return tmp_path


def test_reached_prints_an_apply_trace_tvm_replays_and_exits_0(files):
    r = mlc_lab("path", str(files / "prog.py"), str(files / "target.py"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("from tvm import s_tir") and "def apply_trace(sch: s_tir.Schedule) -> None:" in r.stdout
    replayed = Session.from_trace(BMM_RELU, r.stdout)
    assert replayed.path_to(BMM_RELU_TARGET).steps == ()


def test_as_json_has_exactly_its_five_keys_and_starts_from_the_trace_given(files):
    r = mlc_lab_here(
        "path", str(files / "prog.py"), str(files / "target.py"), "--trace", str(files / "start.py"), "--as", "json"
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"reached", "steps", "trace", "why", "seconds"}
    assert data["reached"] is True and data["why"] == ""
    assert data["steps"][0]["label"] == "split(k, factors=[32, 4])"  # j is split already, by the trace given
    assert {"primitive", "arguments", "reason", "label"} == set(data["steps"][0])


def test_not_reached_exits_1_with_the_why_on_stderr(files):
    r = mlc_lab_here("path", str(files / "prog.py"), str(files / "other.py"), "--as", "json")
    assert r.returncode == 1
    assert r.stderr.startswith("mlc-lab path: the target computes something else: block C computes")
    data = json.loads(r.stdout)
    assert (data["reached"], data["steps"], data["trace"]) == (False, [], "")
    assert r.stderr == f"mlc-lab path: {data['why']}\n"


def test_bad_input_exits_2_naming_the_file_and_line(files):
    r = mlc_lab_here("path", str(files / "prog.py"), str(files / "broken.py"))
    assert r.returncode == 2
    assert f"{files / 'broken.py'}, line" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def assignment():
    return load_assignment(LAB / "assignment.toml")


def _scheduled_program() -> str:
    session = Session.from_trace(str(LAB / "gemm_relu_add.py"), (LAB / "submissions" / "reference.py").read_text())
    return session.script


def test_a_scheduled_program_hand_in_is_graded_through_its_path(tmp_path, assignment):
    hand_in = tmp_path / "lab3.py"
    hand_in.write_text(_scheduled_program())
    r = grade(assignment, hand_in)
    assert (r.kind, r.status, r.error, r.score) == ("program", "graded", None, 20)
    assert "def apply_trace" in r.trace


def test_a_scheduled_program_no_schedule_reaches_is_refused_with_the_why(tmp_path, assignment):
    hand_in = tmp_path / "lab3.py"
    hand_in.write_text(_scheduled_program().replace("T.max(", "T.min("))
    r = grade(assignment, hand_in)
    assert (r.kind, r.status, r.score) == ("program", "refused", 0)
    assert "no schedule of the assignment's program makes this program: the target computes something else" in r.error
    assert "T.min(" in r.error


def test_the_forms_sentence_lists_the_scheduled_program():
    from mlc_lab.grading.handin import forms

    assert "a .py file holding the scheduled program (TVMScript)" in forms()
