"""Submissions round-trip: what mlc_lab writes replays unchanged on TVM's own Schedule(prim_func),
and what a student hands in (a file, a pasted apply_trace, a tuning record) reads back, never run.

TVM is the oracle: each form is replayed by TVM itself (the printed forms run as TVM's users run
them, the JSON through Trace.apply_json_to_schedule) and compared with mlc_lab's module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tvm
from hypothesis import given
from hypothesis import strategies as st
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace

import mlc_lab
from mlc_lab import ScheduleStepError, Session, TraceParseError
from mlc_lab.tvm.program import structural_equal
from tests.fixtures.programs import GEMM_RELU_ADD_MNK, MM_RELU
from tests.unit.test_fuzz_session import _settings, draw_call

ROOT = Path(__file__).resolve().parents[2]

LAB = "import tvm\nfrom tvm.script import tirx as T\n\nM = N = K = 64\n\n" + GEMM_RELU_ADD_MNK


@pytest.fixture()
def lab(tmp_path) -> Path:
    path = tmp_path / "gemm_relu_add.py"
    path.write_text(LAB)
    return path


def scheduled(program) -> Session:
    s = Session(program)
    i, j, k = "Y/i", "Y/j", "Y/k"
    j0, j1 = s.apply("split", j, factors=[None, 8])
    s.apply("reorder", i, j0, k, j1)
    s.apply("parallel", i)
    s.apply("reverse_compute_at", "D", j0)
    s.apply("decompose_reduction", "Y", k)
    return s


def tvm_runs_printed(text: str, func) -> s_tir.Schedule:
    """What a grader does with a printed trace: run its apply_trace on Schedule(prim_func)."""
    namespace: dict = {"s_tir": s_tir, "tvm": tvm}
    exec(compile(text, "<hand-in>", "exec"), namespace)  # noqa: S102  (the oracle runs it, as TVM's users do)
    fn = namespace.get("apply_trace") or namespace["schedule"]
    sch = s_tir.Schedule(func)
    fn(sch)
    return sch


def tvm_applies_json(data, func) -> s_tir.Schedule:
    sch = s_tir.Schedule(func)
    Trace.apply_json_to_schedule(json.loads(json.dumps(data)), sch)
    return sch


def every_form_replays_on_tvm(s: Session, func) -> None:
    assert 'func_name="main"' in s.trace or "get_sblock" not in s.trace
    for name, text in (("trace", s.trace), ("trace_python", s.trace_python), ("submission", s.submission())):
        assert structural_equal(tvm_runs_printed(text, func).mod, s.module), name
    assert structural_equal(tvm_applies_json(s.trace_json, func).mod, s.module), "trace_json"


def test_a_lab_files_trace_replays_unchanged_on_tvms_schedule_of_the_prim_func(lab):
    s = scheduled(lab)
    assert s.func_name == "main"
    func = mlc_lab.load(lab)["main"]  # the PrimFunc object a grader holds
    every_form_replays_on_tvm(s, func)


def test_a_prim_func_object_is_named_main_as_tvm_names_it():
    func = mlc_lab.load(MM_RELU)["mm_relu"]
    s = scheduled_mm(Session(func))
    assert 'func_name="main"' in s.trace
    every_form_replays_on_tvm(s, func)


def scheduled_mm(s: Session) -> Session:
    j0, j1 = s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", j0, "Y/k", j1)
    s.apply("reverse_compute_at", "C", j0)
    return s


def test_submission_is_exactly_the_course_function(lab):
    s = scheduled(lab)
    text = s.submission()
    lines = text.splitlines()
    assert lines[:4] == ["from tvm import s_tir", "", "", "def apply_trace(sch: s_tir.Schedule) -> None:"]
    assert all(ln.startswith("    ") for ln in lines[4:]) and lines[4].startswith("    b0 = sch.get_sblock(")
    assert "return" not in text
    assert Session(lab).submission() == (  # the original program: nothing to apply
        "from tvm import s_tir\n\n\ndef apply_trace(sch: s_tir.Schedule) -> None:\n    pass\n"
    )
    assert structural_equal(Session.from_trace(lab, s.submission(step=2)).module, s.module_at(2))


def test_from_trace_reads_a_path_a_pasted_function_and_tuning_records(lab, tmp_path):
    s = scheduled(lab)
    hand_in = tmp_path / "trace_submission.py"
    hand_in.write_text(s.submission())
    for given_as in (str(hand_in), hand_in, s.submission(), "\n" + s.submission().split("\n\n\n", 1)[1]):
        assert structural_equal(Session.from_trace(lab, given_as).module, s.module), repr(given_as)[:60]
    # A meta_schedule database record of that schedule, written by meta_schedule itself.
    func = mlc_lab.load(lab)["main"]
    sch = tvm_runs_printed(s.submission(), func)
    (tmp_path / "db").mkdir()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "db"), module_equality="structural")
    workload = db.commit_workload(tvm.IRModule({"main": func}))
    db.commit_tuning_record(
        ms.database.TuningRecord(
            sch.trace,
            workload,
            [tvm.runtime.const(1.5e-5, "float32")],
            tvm.target.Target("llvm"),
            ms.arg_info.ArgInfo.from_prim_func(func),
        )
    )
    line = (tmp_path / "db" / "database_tuning_record.json").read_text().strip()
    assert len(line.splitlines()) == 1
    record_json = json.dumps(json.loads(line)[1])
    record_file = tmp_path / "best.json"
    record_file.write_text(line + "\n")
    for given_as in (line, record_json, json.loads(line), str(record_file)):
        replayed = Session.from_trace(lab, given_as)
        assert structural_equal(replayed.module, s.module), repr(given_as)[:60]


def test_an_older_trace_naming_the_function_still_replays(lab):
    s = scheduled(lab)
    old = s.trace.replace('func_name="main"', 'func_name="gemm_relu_add"')  # what mlc_lab wrote before
    assert structural_equal(Session.from_trace(lab, old).module, s.module)


def test_a_hostile_hand_in_file_is_refused_with_its_name_and_line_and_never_run(lab, tmp_path):
    marker = tmp_path / "ran"
    hostile = tmp_path / "evil_submission.py"
    hostile.write_text(
        "from tvm import s_tir\n\n\ndef apply_trace(sch: s_tir.Schedule) -> None:\n"
        '    b0 = sch.get_sblock(name="Y", func_name="main")\n'
        f"    open({str(marker)!r}, 'w').write('x')\n"
    )
    with pytest.raises(TraceParseError) as info:
        Session.from_trace(lab, str(hostile))
    assert str(info.value).startswith(f"{hostile}: line 6: ") and "only methods of `sch`" in str(info.value)
    assert info.value.line == 6
    assert not marker.exists()
    with pytest.raises(TraceParseError, match="missing_submission.py: no such file"):
        Session.from_trace(lab, str(tmp_path / "missing_submission.py"))
    failing = tmp_path / "bad_step.py"
    failing.write_text(
        s_text := Session(lab)
        .submission()
        .replace("    pass\n", '    b0 = sch.get_sblock(name="nope", func_name="main")\n')
    )
    with pytest.raises(TraceParseError) as info:
        Session.from_trace(lab, failing)
    assert str(info.value).startswith(f"{failing}: line 5: ") and s_text


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_cli_trace_as_apply_trace_gives_the_hand_in(lab, tmp_path):
    s = scheduled(lab)
    printed = tmp_path / "printed.py"
    printed.write_text(s.trace.replace('func_name="main"', 'func_name="gemm_relu_add"'))
    r = _cli("trace", str(lab), "--trace", str(printed), "--as", "apply_trace")
    assert r.returncode == 0, r.stderr
    assert r.stdout == s.submission()
    r = _cli("trace", str(lab), "--trace", str(printed), "--as", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == json.loads(json.dumps(s.trace_json))
    r = _cli("trace", str(lab), "--trace", str(printed), "--as", "text")
    assert r.returncode == 0 and r.stdout.strip() == s.trace.strip()
    r = _cli("trace", str(lab))
    assert r.returncode == 0 and r.stdout.endswith("    pass\n")
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos.system('true')\n")
    r = _cli("trace", str(lab), "--trace", str(bad))
    assert (
        r.returncode == 2
        and "Traceback" not in r.stderr
        and "bad.py, line 1: only schedule calls are allowed in a trace, not an import" in r.stderr
    )


# --- property: random schedules of a lone PrimFunc replay on TVM in every form -----------------------

_FUNC = None


def _lone_func():
    global _FUNC
    if _FUNC is None:
        _FUNC = mlc_lab.load(MM_RELU)["mm_relu"]
    return _FUNC


def random_schedules_replay_on_tvms_schedule(data, seed):
    func = _lone_func()
    s = Session(func, seed=seed)
    sampled: list = []
    for _ in range(data.draw(st.integers(1, 6))):
        prim, args, kwargs = draw_call(data, s, sampled)
        try:
            out = s.apply(prim, *args, **kwargs)
        except ScheduleStepError:
            continue
        if prim == "sample_perfect_tile":
            sampled.extend(out)
    every_form_replays_on_tvm(s, func)
    assert structural_equal(Session.from_trace(func, s.submission()).module, s.module)


test_random_schedules_replay_on_tvms_schedule = _settings(12)(
    given(data=st.data(), seed=st.integers(1, 1000))(random_schedules_replay_on_tvms_schedule)
)
