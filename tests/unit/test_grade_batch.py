"""The batch's judging children (mlc_lab.grading.batch): a child that dies or runs past its time is
that hand-in's row (crash, timeout) and a fresh child grades the next; results are keyed by path."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from pathlib import Path

import pytest

from mlc_lab.grading import grade_batch, load_assignment
from mlc_lab.grading.batch import _Judge, _result, result_keys
from mlc_lab.grading.report import GradeResult, failed_verdict
from mlc_lab.model.conform import problems
from mlc_lab.model.errors import ErrorInfo

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "grading"
REFERENCE = str(LAB / "submissions" / "reference.py")


def _judge(timeout_s: float) -> tuple[_Judge, object]:
    assignment = load_assignment(LAB / "assignment.toml")
    payload = pickle.dumps({"assignment": assignment, "unsafe_same_user": False})
    return _Judge(payload, timeout_s), assignment


def test_a_judge_that_dies_is_a_crash_row_and_the_next_hand_in_gets_a_fresh_one(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\n\ndef schedule(sch):\n    time.sleep(8)\n")
    judge, assignment = _judge(240)
    try:
        first = judge.grade(REFERENCE)  # starts the child (TVM imported), grades
        assert first.score == 20
        pid = judge.proc.pid
        threading.Timer(2.0, judge.proc.kill).start()  # while it waits on the sandboxed hand-in
        died = judge.grade(str(slow))
        assert problems(died, ErrorInfo) == [] and died["type"] == "crash"
        assert "signal SIGKILL" in died["summary"] and "the other hand-ins are graded" in died["summary"]
        row = _result(assignment, "x/lab.py", died)
        assert row.status == "crash" and row.score == 0 and row.error == died["summary"]
        assert all(t.messages == [died["summary"]] for t in row.tasks)
        again = judge.grade(REFERENCE)
        assert again.score == 20 and judge.proc.pid != pid
    finally:
        judge.close()


def test_a_judge_past_its_time_is_a_timeout_row_and_is_killed():
    judge, _assignment = _judge(0.2)  # less than it takes to import TVM and replay
    try:
        out = judge.grade(REFERENCE)
        assert out == {"type": "timeout", "summary": "the grader did not finish this hand-in within 0.2 s"}
        assert judge.proc is None
    finally:
        judge.close()


def test_results_are_keyed_by_path_relative_to_the_common_folder(tmp_path):
    a, b = tmp_path / "alice" / "lab.py", tmp_path / "bob" / "lab.py"
    assert result_keys([str(a), str(b)]) == ["alice/lab.py", "bob/lab.py"]
    assert result_keys([str(a)]) == ["lab.py"]
    assert result_keys([str(tmp_path / "alice"), str(tmp_path / "bob")]) == ["alice", "bob"]


def test_the_batch_streams_results_and_progress_in_the_callers_order(tmp_path):
    assignment = load_assignment(LAB / "assignment.toml")
    seen, lines = [], []
    paths = [REFERENCE, str(LAB / "submissions" / "no_shared.py"), str(tmp_path / "missing.py")]
    results = grade_batch(assignment, paths, on_result=lambda i, r: seen.append(i), progress=lines.append)
    assert sorted(seen) == [0, 1, 2] and [r.score for r in results] == [20, 15, 0]
    assert results[2].status == "refused" and results[2].error == "missing.py: no such file"
    assert lines[-1].startswith("graded 3/3: 1 failed, 0 left")


def test_the_children_grade_against_a_private_copy_of_the_program(tmp_path):
    program = tmp_path / "gemm_relu_add.py"
    program.write_text((LAB / "gemm_relu_add.py").read_text())
    assignment = dataclasses.replace(load_assignment(LAB / "assignment.toml"), program=program)

    def edit(i, r):  # what a hand-in with the host's files could do between two hand-ins
        program.write_text(program.read_text().replace('T.sblock("gemm")', 'T.sblock("matmul")'))

    results = grade_batch(assignment, [REFERENCE, REFERENCE], jobs=1, on_result=edit)
    assert 'T.sblock("matmul")' in program.read_text()  # the edit happened ...
    assert [r.score for r in results] == [20, 20]  # ... and the second hand-in still found block gemm


def test_a_machine_that_cannot_sandbox_stops_the_grade_before_grading(monkeypatch, capsys):
    from mlc_lab import cli
    from mlc_lab.core import sandbox

    refusal = "this machine refuses user namespaces (kernel.unprivileged_userns_clone = 0)"
    monkeypatch.setattr(sandbox, "probe", lambda: refusal)
    code = cli.main(["grade", str(LAB / "assignment.toml"), REFERENCE])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"mlc-lab: {refusal}; nothing was graded (--unsafe-same-user grades without the sandbox)\n"
    code = cli.main(["grade", str(LAB / "assignment.toml"), REFERENCE, "--unsafe-same-user"])
    out, err = capsys.readouterr()
    assert code == 0 and "(trace, graded): 20/20" in out.splitlines()[0]


def test_the_help_says_what_unsafe_same_user_gives_up(capsys):
    from mlc_lab import cli

    with pytest.raises(SystemExit):
        cli.main(["grade", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "student code then runs as you and sees your files and the network" in help_text
    assert "only the limits and the kill of its whole process tree stay" in help_text


@pytest.mark.parametrize(
    ("kind", "status"),
    [("crash", "crash"), ("timeout", "timeout"), ("protocol", "grader error"), ("internal", "grader error")],
)
def test_a_childs_failure_is_a_row_of_its_kind_with_its_sentence_once(kind, status):
    assignment = load_assignment(LAB / "assignment.toml")
    info: ErrorInfo = {"type": kind, "summary": "why, in one sentence"}
    row = _result(assignment, "bob/lab.py", info)
    assert (row.status, row.error, row.score, row.submission) == (status, "why, in one sentence", 0, "bob/lab.py")
    assert row.max_score == 20 and row.visibility == assignment.visibility
    assert GradeResult.from_json(row.to_json()).to_json() == row.to_json()  # the JSON of mlc-lab grade, as before
    verdict = failed_verdict(info)  # the class server's, from the same table
    assert verdict == {"error": "why, in one sentence", "status": status, "error_info": info}
