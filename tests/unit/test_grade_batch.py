"""The batch's judging children (mlc_lab.grading.batch): a child that dies or runs past its time is
that hand-in's row (crash, timeout) and a fresh child grades the next; results are keyed by path."""

from __future__ import annotations

import dataclasses
import pickle
import threading
import time
from pathlib import Path

import pytest

from mlc_lab.grading import grade_batch, load_assignment
from mlc_lab.grading import batch
from mlc_lab.grading.batch import JudgeLimits, _Judge, _result, result_keys
from mlc_lab.grading.report import GradeResult, failed_verdict
from mlc_lab.model.conform import problems
from mlc_lab.model.errors import ErrorInfo

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "grading"
REFERENCE = str(LAB / "submissions" / "reference.py")


def _judge(cpu_s: float = 600, wall_s: float = 600, memory_mb: int = 4096) -> tuple[_Judge, object]:
    assignment = load_assignment(LAB / "assignment.toml")
    payload = pickle.dumps({"assignment": assignment, "unsafe_same_user": False})
    return _Judge(payload, JudgeLimits(memory_mb, cpu_s, wall_s)), assignment


def test_a_judge_that_dies_is_a_crash_row_and_the_next_hand_in_gets_a_fresh_one(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n\n\ndef schedule(sch):\n    time.sleep(8)\n")
    judge, assignment = _judge(240, 480)
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


def test_a_judge_past_its_cpu_time_is_a_timeout_row_and_is_killed():
    judge, _assignment = _judge(cpu_s=0.2)  # less than it takes to import TVM and replay
    try:
        out = judge.grade(REFERENCE)
        assert out == {"type": "timeout", "summary": "the grader did not finish this hand-in within 0.2 s of CPU time"}
        assert judge.proc is None and judge.overloaded is None
    finally:
        judge.close()


def test_a_judge_stopped_at_the_wall_clock_on_an_overloaded_machine_says_so(monkeypatch):
    load = "the machine was overloaded (load average 18.0 on 2 CPUs)"
    monkeypatch.setattr(batch, "overloaded", lambda: load)
    judge, _assignment = _judge(wall_s=0.3)
    try:
        out = judge.grade(REFERENCE)
        assert out["type"] == "timeout" and out["summary"].startswith(
            "the grader did not finish this hand-in within 0.3 s ("
        )
        assert load in out["summary"] and judge.overloaded == load
    finally:
        judge.close()


class _Growing(_Judge):
    """A judging child that grows by 64 MB every 50 ms once it is given a hand-in: the shape of a trace of
    thousands of splits that grew a real one past 4.5 GB in a minute."""

    def _start(self):
        import subprocess
        import sys

        code = (
            "import sys, time\n"
            "sys.stdin.buffer.read(int.from_bytes(sys.stdin.buffer.read(8), 'big'))\n"
            "sys.stdin.buffer.readline()\n"
            "held = []\n"
            "while True:\n    held.append(bytearray(64 << 20))\n    time.sleep(0.05)\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        proc.stdin.write(len(self.payload).to_bytes(8, "big") + self.payload)
        proc.stdin.flush()
        return proc


def test_a_judging_tree_past_its_memory_limit_is_stopped_within_it_and_makes_its_row():
    import psutil

    assignment = load_assignment(LAB / "assignment.toml")
    judge = _Growing(pickle.dumps({"assignment": assignment}), JudgeLimits(400, 600, 600))
    try:
        started = time.monotonic()
        out = judge.grade(REFERENCE)
        assert time.monotonic() - started < 10
        assert out == {
            "type": "crash",
            "summary": "grading this hand-in took more than the grader's memory limit of 400 MB "
            "([limits] grader_memory_mb) and was stopped; the other hand-ins are graded",
        }
        assert judge.proc is None
        row = _result(assignment, "alice/splits.py", out)
        assert row.status == "crash" and row.score == 0
    finally:
        judge.close()
    assert not [p for p in psutil.Process().children(recursive=True) if "bytearray" in " ".join(p.cmdline())]


@pytest.mark.full
def test_a_trace_of_thousands_of_splits_is_stopped_at_the_graders_memory_limit(tmp_path):
    lines = ["b=sch.get_sblock('gemm')", "i,j,k=sch.get_loops(b)"]
    for n in range(6000):  # 225 kB: under the parser's limit; the replay grows the judging child
        lines.append(f"a{n},c{n}=sch.split({'i' if n == 0 else f'c{n - 1}'},[None,1])")
    trace = tmp_path / "splits.py"
    trace.write_text("\n".join(lines) + "\n")
    judge, assignment = _judge(memory_mb=700)
    try:
        out = judge.grade(str(trace))
        assert out["type"] == "crash" and "memory limit of 700 MB" in out["summary"]
    finally:
        judge.close()


def test_a_hand_in_stopped_by_the_machines_load_is_graded_again_and_its_row_says_so(monkeypatch):
    load = "the machine was overloaded (load average 9.0 on 2 CPUs)"
    tries: dict = {}

    class Starved(_Judge):
        def grade(self, path):
            tries[path] = tries.get(path, 0) + 1
            if tries[path] == 1:
                self.overloaded = load
                return {"type": "timeout", "summary": f"the grader did not finish this hand-in within 9 s ({load})"}
            return super().grade(path)

    monkeypatch.setattr(batch, "_Judge", Starved)
    assignment = load_assignment(LAB / "assignment.toml")
    results = grade_batch(assignment, [REFERENCE], jobs=1)
    assert tries == {REFERENCE: 2}
    assert results[0].status == "graded" and results[0].score == 20
    assert results[0].notes[0] == (
        "graded again: 1 earlier try was stopped at the wall-clock limit while overloaded (load average 9.0 "
        "on 2 CPUs), which says nothing of the hand-in"
    )


def test_a_hand_in_the_load_stopped_every_time_is_not_scored_as_its_own(monkeypatch):
    load = "the machine was overloaded (load average 9.0 on 2 CPUs)"

    class Starved(_Judge):
        def grade(self, path):
            self.overloaded = load
            return {"type": "timeout", "summary": "stopped"}

    monkeypatch.setattr(batch, "_Judge", Starved)
    assignment = load_assignment(LAB / "assignment.toml")
    lines: list = []
    results = grade_batch(assignment, [REFERENCE], jobs=1, progress=lines.append)
    r = results[0]
    assert r.status == "grader error" and r.score == 0
    assert r.error == (
        "the machine was too loaded to grade this hand-in: it was stopped at the wall-clock limit 3 times "
        f"({load}); it is not scored: grade it again"
    )
    assert len(lines) == 1 and "1 not graded (1 grader error)" in lines[0]


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
    assert lines[-1].startswith("graded 3/3: 0 scored 0, 1 not graded (1 refused), 0 left, about 0s to go")


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


def test_the_progress_line_counts_zero_scores_and_failures_apart_and_times_what_is_left(tmp_path):
    names = ["a.json", "b.json", "c.ipynb", "d.ipynb", "e.ipynb", "f.json", "g.json", "h.json"]
    for n in names:
        (tmp_path / n).write_text("{}")
    paths = [str(tmp_path / n) for n in names]
    est = batch._Estimate(paths)
    est.judges = 2
    zero = GradeResult("a", "trace", [], status="graded")
    refused = GradeResult("b", "trace", [], status="refused")
    for i, seconds, row in ((0, 1.0, zero), (1, 1.0, refused), (2, 10.0, zero)):
        est.begin(i)
        est.end(i, seconds)
        est.record(row)
    line = est.line([3, 4, 5, 6, 7])
    # two notebooks at 10 s and three traces at 1 s left, two judges: 11.5 s; not 3 x the mean of 4 s / 2
    assert line.startswith("graded 3/8: 2 scored 0, 1 not graded (1 refused), 5 left, about 12s to go")


def test_what_a_hand_in_is_is_told_from_its_name_and_its_definitions(tmp_path):
    (tmp_path / "t.py").write_text("def apply_trace(sch):\n    pass\n")
    (tmp_path / "s.py").write_text("import x\n\ndef manual_schedule():\n    pass\n")
    (tmp_path / "d").mkdir()
    kinds = [batch._kind_of_path(str(tmp_path / n)) for n in ("t.py", "s.py", "d", "n.ipynb", "r.json")]
    assert kinds == ["trace", "schedule", "folder", "notebook", "trace"]


def test_a_sandbox_stopped_at_the_wall_clock_on_an_overloaded_machine_asks_to_be_graded_again(monkeypatch):
    from types import SimpleNamespace

    from mlc_lab.core import processes
    from mlc_lab.grading import handin

    assignment = load_assignment(LAB / "assignment.toml")
    out = SimpleNamespace(status="timeout", result=b"", message="", returncode=None)
    monkeypatch.setattr(processes, "overloaded", lambda: "the machine was overloaded (load average 12.0 on 2 CPUs)")
    with pytest.raises(handin.Crashed) as got:
        handin._outcome(out, assignment, "lab.py")
    assert got.value.status == "timeout" and got.value.overloaded.startswith("the machine was overloaded")
    assert str(got.value) == "lab.py did not finish within 50 s of wall-clock time"  # 2 x 10 s of CPU + 30 s
    monkeypatch.setattr(processes, "overloaded", lambda: None)
    with pytest.raises(handin.Crashed) as calm:
        handin._outcome(out, assignment, "lab.py")
    assert calm.value.overloaded is None  # a quiet machine: the hand-in's own time-out (it waits on something)
