"""Tuning jobs: a subprocess in its own process group, records on disk, cancel / crash / reopen /
continue, the session-derived search space, the report, and the `mlc-lab tune` / `bench` commands.

Most runs use meta_schedule's replay-trace strategy with the random cost model (plain random
sampling: seconds per round instead of tens) since what is tested is the job around the search.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import time

import pytest

import mlc_lab
from mlc_lab.cli import main as cli_main
from mlc_lab.core.tuning import TuneJob, tune, write_report
from mlc_lab.errors import MlcLabError, NoGPUError, TuneError
from mlc_lab.model import tuning as model_tuning
from mlc_lab.model.conform import WireError
from mlc_lab.model.tuning import BEST_FILE, STATUS_FILE, TRIALS_FILE, BestSoFar, JobStatus, TrialLine, median
from mlc_lab.tvm.measure.build import gpu_present
from mlc_lab.tvm.tuning.job import parse_runner, rewrite_session_space
from tests.fixtures.programs import MM_RELU, matmul
from tests.unit.processes import group_gone

FAST = {"strategy": "replay-trace", "cost_model": "random"}


def wait_for_records(job: TuneJob, n: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(job.records(with_traces=False)) < n:
        assert job.status == "running", job.error
        assert time.monotonic() < deadline, "no records appeared"
        time.sleep(0.2)


# ----------------------------------------------------------------------------------------- pure parts


def test_session_space_turns_literal_splits_into_samples():
    s = mlc_lab.Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 32])
    s.apply("reorder", "Y/i", j0, "Y/k", j1)
    s.apply("split", "Y/i", factors=[4, 8, 4])
    insts = rewrite_session_space(s.trace_json)
    kinds = [i[0] for i in insts if not i[0].startswith("Get")]
    assert kinds == ["SamplePerfectTile", "Split", "Reorder", "SamplePerfectTile", "Split"]
    samples = [(n, i) for n, i in enumerate(insts) if i[0] == "SamplePerfectTile"]
    (n1, first), (n2, second) = samples
    assert first[2] == [2, 32]  # n=2 for [None, 32]; innermost up to 32
    assert second[2] == [3, 16]  # n=3 for the three factors
    for n, sample in samples:
        split = insts[n + 1]
        assert split[0] == "Split" and split[1] == [sample[1][0], *sample[3]]  # the split takes the samples
    assert all(i[2][1] == "main" for i in insts if i[0] == "GetSBlock")  # the workload's name in meta_schedule
    json.dumps(insts)  # plain JSON: replayed by TVM, never exec'd


def test_session_space_needs_a_literal_split():
    s = mlc_lab.Session(MM_RELU)
    s.apply("parallel", "Y/i")
    with pytest.raises(ValueError, match="no split"):
        rewrite_session_space(s.trace_json)
    with pytest.raises(ValueError):
        rewrite_session_space([["Split", "bogus"]])


def test_runner_specs():
    assert parse_runner("local") == {"kind": "local"}
    assert parse_runner("rpc://127.0.0.1:9190/cpu") == {"kind": "rpc", "host": "127.0.0.1", "port": 9190, "key": "cpu"}
    assert parse_runner("10.0.0.2:9000:gpu")["key"] == "gpu"
    for bad in ("rpc://host/key", "rpc://host:x/key", "nonsense"):
        with pytest.raises(ValueError):
            parse_runner(bad)


def test_bad_requests_are_refused_before_starting(tmp_path):
    s = mlc_lab.Session(matmul(32))
    with pytest.raises(TuneError):
        tune(s, trials=0, work_dir=str(tmp_path))
    with pytest.raises(TuneError, match="no split"):
        tune(s, trials=4, space="session", work_dir=str(tmp_path))
    with pytest.raises(TuneError, match="Session"):
        tune(mlc_lab.load(matmul(32)), trials=4, space="session", work_dir=str(tmp_path))
    with pytest.raises(TuneError):
        tune(s, trials=4, runner="rpc://nowhere", work_dir=str(tmp_path))
    with pytest.raises(TuneError):
        TuneJob.open(str(tmp_path / "missing"))
    if not gpu_present():
        with pytest.raises(NoGPUError, match="no CUDA GPU found"):
            tune(s, target="cuda", trials=4, work_dir=str(tmp_path))
    assert not os.path.exists(tmp_path / "mlc_lab_job.json")


def test_the_job_file_holds_what_tune_was_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # "~/shared" below is a folder of this test's
    s = mlc_lab.Session(matmul(32))
    s.apply("split", "C/j", factors=[None, 8])
    wd = tmp_path / "wd"
    with pytest.raises(TuneError, match="space='auto' is already the default space"):
        tune(s, trials=4, widen=True, work_dir=str(wd))
    with pytest.raises(TuneError, match="database must be a folder path"):
        tune(s, trials=4, database="http://host/db", work_dir=str(wd))
    assert not wd.exists()  # refused before anything was written
    job = tune(s, trials=3, space="session", widen=True, database="~/shared", work_dir=str(wd), seed=5, **FAST)
    try:
        spec = job.spec
    finally:
        job.cancel()
    assert spec["func_name"] == "main" and spec["trials"] == 3 and spec["seed"] == 5
    assert spec["space"]["kind"] == "session" and spec["space"]["widen"] is True
    assert [i[0] for i in spec["space"]["insts"] if i[0] in ("SamplePerfectTile", "Split")] == [
        "SamplePerfectTile",
        "Split",
    ]
    assert spec["shared_db"] == str(tmp_path / "shared") and spec["runner"] == "local" and spec["servers"] == 1
    assert (spec["strategy"], spec["cost_model"], spec["confirm"]) == ("replay-trace", "random", True)
    assert spec["flops"] == 2 * 32**3 and spec["bytes"] == 3 * 32 * 32 * 4  # each argument once, float32
    assert spec["target"]["kind"] == "llvm" and spec["num_tuning_cores"] >= 1
    assert 'T.sblock("C")' in job.session().module.script()  # the program is kept beside it, and reads back


# ----------------------------------------------------------------------------------------- jobs


@pytest.mark.slow
def test_tune_records_trials_in_order_and_continues(tmp_path):
    wd = str(tmp_path / "wd")
    s = mlc_lab.Session(matmul(64))
    t0 = time.monotonic()
    # the default search (evolutionary + xgb); the end-of-run re-timing is tested on its own
    job = tune(s, trials=8, work_dir=wd, num_trials_per_iter=8, seed=1, confirm=False)
    assert time.monotonic() - t0 < 2.0  # returns at once
    assert job.status == "running"
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert [r.trial for r in recs] == list(range(8))
    assert all(r.ok and r.latency_s > 0 and "sample_perfect_tile" in r.trace for r in recs)
    best = job.best
    assert best.latency_s == min(r.latency_s for r in recs)
    assert best.gflops == pytest.approx(2 * 64**3 / best.latency_s / 1e9)
    assert "T.prim_func" in best.script and "def apply_trace" in best.trace
    assert job.progress == (8, 8)
    assert_the_folder_decodes(wd, recs, best.latency_s)
    summary = job.summary()
    assert summary["trials"] == 8 and summary["best_latency_s"] == best.latency_s

    # a work directory written by plain tune_tir (no mlc_lab files) reads back the same
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (plain / name).write_text(open(os.path.join(wd, name)).read())
    plain_recs = TuneJob.open(str(plain)).records()
    assert [r.latency_s for r in plain_recs] == [r.latency_s for r in recs]
    assert [r.trace for r in plain_recs] == [r.trace for r in recs]  # rebuilt from the JSON traces

    # a continued run trains its cost model on the recorded trials before searching
    assert_cost_model_warms_up(wd)

    # a new run on the same directory counts the 8 trials already there
    job2 = tune(s, trials=12, work_dir=wd, num_trials_per_iter=4, **FAST)
    assert job2.wait(timeout=300) == "done", job2.error
    recs2 = job2.records()
    assert len(recs2) == 12
    assert [(r.latency_s, r.trace) for r in recs2[:8]] == [(r.latency_s, r.trace) for r in recs]
    # and a run asking for no more than what is there measures nothing
    job3 = tune(s, trials=10, work_dir=wd, **FAST)
    assert job3.wait(timeout=120) == "done" and len(job3.records()) == 12

    report = write_report(job2)
    html = open(report).read()
    assert "best so far" in html and "plotly" in html.lower() and "apply_trace" in html


def assert_the_folder_decodes(wd: str, recs: list, best_latency: float) -> None:
    """What the job wrote is what model.tuning declares: a TrialLine a line (its latency the one median of
    its repeats), a JobStatus, a BestSoFar (the records' best)."""
    lines = [TrialLine.from_json(json.loads(x)) for x in open(os.path.join(wd, TRIALS_FILE))]
    assert [x.latency_s for x in lines] == [r.latency_s for r in recs]
    assert all(x.latency_s == median(x.run_secs) for x in lines)
    status = JobStatus.from_json(json.load(open(os.path.join(wd, STATUS_FILE))))
    assert status.state == "done" and status.trials == 8 and status.error is None
    saved = BestSoFar.from_json(json.load(open(os.path.join(wd, BEST_FILE))))
    assert saved.latency_s == best_latency and saved.confirmed is None and "T.prim_func" in (saved.script or "")


def test_a_trials_latency_is_the_one_median():
    assert median([3.0]) == 3.0 and median([4.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5  # an even count: the mean of the two middle ones


def test_the_job_folder_is_named_in_model_tuning_only():
    """No module of mlc_lab spells a job file's name but model/tuning.py (docstrings and help aside)."""
    names = {getattr(model_tuning, n) for n in model_tuning.__all__ if n.isupper()}
    root = os.path.dirname(mlc_lab.__file__)
    found = []
    for folder, _dirs, files in os.walk(root):
        for f in files:
            path = os.path.join(folder, f)
            if not f.endswith(".py") or path == model_tuning.__file__:
                continue
            tree = ast.parse(open(path).read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names:
                    found.append(f"{os.path.relpath(path, root)}:{node.lineno} {node.value}")
    assert not found, found


def test_the_job_folders_lines_are_read_strictly():
    line = TrialLine(line=3, latency_s=2.5, run_secs=[1.0, 4.0, 2.0, 3.0], error=None, trace="t", where="h:1")
    assert TrialLine.from_json(json.loads(json.dumps(line.to_json()))) == line
    with pytest.raises(WireError, match="lat"):  # a renamed key is refused, not read as missing
        TrialLine.from_json({**{k: v for k, v in line.to_json().items() if k != "latency_s"}, "latency": 2.5})
    best = BestSoFar(latency_s=1e-3, line=0, trace="t", script=None)
    assert BestSoFar.from_json(best.to_json()) == best
    with pytest.raises(WireError):
        BestSoFar.from_json({**best.to_json(), "line": "0"})
    assert JobStatus.from_json({"state": "running", "pid": 12}).pid == 12
    with pytest.raises(WireError):
        JobStatus.from_json({"state": "paused"})


WARM_CHECK = """
import json, os, sys
import tvm
from tvm.s_tir import meta_schedule as ms
from mlc_lab.tvm.measure import build
from mlc_lab.tvm.tuning import job as tuning
from mlc_lab.tvm.tuning import model as tuning_model
wd = sys.argv[1]
spec = json.load(open(os.path.join(wd, "mlc_lab_job.json")))
mod = build.module_from_text(open(os.path.join(wd, "mlc_lab_module.json")).read())
target = tvm.target.Target(spec["target"])
tuning.import_tensor_intrinsics(target)
db = ms.database.JSONDatabase(work_dir=wd)
task_mod = ms.tune_context._normalize_mod(mod[spec["func_name"]])
workload = db.commit_workload(task_mod)
model = tuning_model.warm_cost_model(task_mod, target, db, workload, 2)
assert not isinstance(model, str), "the cost model was not trained"
ctx = ms.TuneContext(mod=task_mod, target=target, task_name="main", num_threads=2)
best = db.get_top_k(workload, 1)[0]
sch = tvm.s_tir.Schedule(task_mod)
best.trace.apply_to_schedule(sch, remove_postproc=False)
print(json.dumps({"score": float(model.predict(ctx, [ms.MeasureCandidate(sch, best.args_info)])[0])}))
"""


def assert_cost_model_warms_up(wd: str) -> None:
    """In a subprocess: loading only some tensor intrinsics must not leak into this test process."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", WARM_CHECK, wd], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cost model warmed up on 8 recorded trials" in out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["score"] > 0


@pytest.mark.slow
def test_the_end_of_a_run_retimes_its_best_by_measures_method(tmp_path):
    """confirm_best in the job: the fastest few re-timed by measure (built, checked, timed), the
    winner's figure, trace and program written to mlc_lab_best.json; the job's best reads it."""
    wd = tmp_path / "wd"
    job = tune(mlc_lab.Session(matmul(32)), trials=4, work_dir=str(wd), num_trials_per_iter=4, seed=2, **FAST)
    assert job.wait(timeout=300) == "done", job.error
    saved = json.load(open(wd / "mlc_lab_best.json"))
    confirmed = saved["confirmed"]
    assert 1 <= confirmed["candidates"] <= 3 and confirmed["correct"] is True
    assert confirmed["latency_s"] > 0 and saved["latency_s_confirmed"] == confirmed["latency_s"]
    assert confirmed["min_s"] <= confirmed["latency_s"] and confirmed["method"] and confirmed["target"]
    recs = job.records()
    tuner = [r for r in recs if r.run_secs == confirmed["run_secs"]]  # the winner is one of the trials
    assert tuner and confirmed["tuner_latency_s"] == pytest.approx(tuner[0].latency_s)
    if confirmed["candidates"] > 1:  # the winner timed once more: not the figure it was chosen by
        assert confirmed["selection_latency_s"] is not None
    else:
        assert confirmed["selection_latency_s"] is None
    assert "sample_perfect_tile" in saved["trace"] and "T.prim_func" in saved["script"]
    best = job.best
    assert best.confirmed and best.correct and best.latency_s == confirmed["latency_s"]
    assert best.trial == tuner[0].trial and best.trace == saved["trace"]
    phases = [json.loads(line).get("phase") for line in open(wd / "mlc_lab_live.jsonl")]
    assert phases.index("confirming") < phases.index("done")


@pytest.mark.slow
def test_cancel_kills_the_process_group_and_keeps_the_records(tmp_path):
    wd = str(tmp_path / "wd")
    job = tune(mlc_lab.Session(matmul(64)), trials=400, work_dir=wd, num_trials_per_iter=4, **FAST)
    pid = job.pid
    wait_for_records(job, 4)
    assert job.cancel() == "cancelled"
    assert group_gone(pid)  # the job and the runner's worker processes
    kept = len(job.records())
    assert kept >= 4
    reopened = TuneJob.open(wd)
    assert reopened.status == "cancelled" and reopened.pid is None
    assert len(reopened.records()) == kept and reopened.best is not None
    with open(os.path.join(wd, "database_tuning_record.json")) as fh:
        assert all(json.loads(line) for line in fh)  # the database is intact


@pytest.mark.slow
def test_a_killed_job_reopens_as_interrupted_and_resumes(tmp_path):
    wd = str(tmp_path / "wd")
    s = mlc_lab.Session(matmul(64))
    job = tune(s, trials=400, work_dir=wd, num_trials_per_iter=4, **FAST)
    pid = job.pid
    wait_for_records(job, 4)
    os.killpg(pid, signal.SIGKILL)  # as if it crashed, or the machine went away
    job.wait(timeout=10)
    reopened = TuneJob.open(wd)  # e.g. from a restarted kernel
    assert reopened.status == "interrupted"
    n = len(reopened.records())
    assert n >= 4
    job2 = tune(s, trials=n + 4, work_dir=wd, num_trials_per_iter=4, **FAST)
    assert job2.wait(timeout=300) == "done", job2.error
    assert len(job2.records()) == n + 4


@pytest.mark.slow
def test_session_space_explores_around_the_students_schedule(tmp_path):
    s = mlc_lab.Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", j0, "Y/k", j1)
    s.apply("decompose_reduction", "Y", "Y/k")
    job = tune(s, trials=6, space="session", work_dir=str(tmp_path), num_trials_per_iter=6, **FAST)
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert 0 < len(recs) <= 6  # 128 = 2^7 with innermost <= 16: few distinct candidates
    for r in recs:
        assert r.ok
        assert "sample_perfect_tile(" in r.trace and "n=2, max_innermost_factor=16" in r.trace
        assert "decompose_reduction" in r.trace and "reorder" in r.trace


@pytest.mark.slow
def test_a_space_function_runs_in_the_job(tmp_path):
    def stochastic_schedule_mm(sch):  # the course's chapter-5 space, modern names
        block_c = sch.get_sblock("C", "main")
        i, j, k = sch.get_loops(block=block_c)
        j_factors = sch.sample_perfect_tile(loop=j, n=2)
        j_0, j_1 = sch.split(loop=j, factors=j_factors)
        sch.reorder(i, j_0, k, j_1)
        sch.decompose_reduction(block_c, k)
        return sch

    job = tune(mlc_lab.load(matmul(64)), trials=4, space=stochastic_schedule_mm, work_dir=str(tmp_path), **FAST)
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert recs and all(r.ok and "decompose_reduction" in r.trace for r in recs)


@pytest.mark.slow
def test_a_job_that_fails_says_why(tmp_path):
    def broken(sch):
        sch.get_sblock("no_such_block", "main")
        return sch

    job = tune(mlc_lab.load(matmul(32)), trials=4, space=broken, work_dir=str(tmp_path), **FAST)
    assert job.wait(timeout=120) == "failed"
    assert "no_such_block" in job.error
    assert TuneJob.open(str(tmp_path)).status == "failed"


# ----------------------------------------------------------------------------------------- CLI


@pytest.mark.usefixtures("kernels_only_in_the_sandbox")  # a hand-in's kernel: in the sandbox only
def test_cli_bench_prints_json(tmp_path, capsys):
    prog = tmp_path / "mm_relu.py"
    prog.write_text(MM_RELU)
    trace = tmp_path / "trace.py"
    trace.write_text(
        'b0 = sch.get_sblock(name="Y", func_name="mm_relu")\n'
        "l1, l2, l3 = sch.get_loops(block=b0)\n"
        "l4, l5 = sch.split(loop=l2, factors=[None, 8])\n"
        "sch.reorder(l1, l4, l3, l5)\n"
        "sch.vectorize(loop=l5)\n"
    )
    assert cli_main(["bench", str(prog), "--trace", str(trace), "--repeats", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["latency_s"] > 0 and out["gflops"] > 0 and out["max_abs_error"] < 1e-3 and out["repeats"] == 3


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert cli_main(["bench", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    prog = tmp_path / "mm.py"
    prog.write_text(matmul(32))
    assert cli_main(["bench", str(prog), "--target", "tpu"]) == 2
    assert cli_main(["tune", str(prog), "--trials", "4", "--rpc", "nohost"]) == 2
    assert cli_main(["tune", str(prog), "--trials", "4", "--space", "weird"]) == 2
    err = capsys.readouterr().err
    assert "mlc-lab:" in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_tune_reports_and_continues(tmp_path, capsys, monkeypatch):
    prog = tmp_path / "mm.py"
    prog.write_text(matmul(64))
    trace = tmp_path / "trace.py"
    trace.write_text(
        'b0 = sch.get_sblock(name="C", func_name="main")\n'
        "l1, l2, l3 = sch.get_loops(block=b0)\n"
        "l4, l5 = sch.split(loop=l2, factors=[None, 8])\n"
        "sch.reorder(l1, l4, l3, l5)\n"
    )
    wd = tmp_path / "wd"
    args = ["tune", str(prog), "--trials", "4", "--per-iter", "4", "--work-dir", str(wd), "--space", f"session:{trace}"]
    assert cli_main(args) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "/4" in captured.err  # the progress bar
    assert 0 < out["trials"] <= 4 and out["best_latency_s"] > 0 and out["best_gflops"] > 0
    assert "sample_perfect_tile" in out["best_trace"]
    html = open(out["report"]).read()
    assert out["report"] == str(wd / "report.html") and "best so far" in html and "def main" in html
    assert len(html) > 1_000_000  # plotly.js is inside: the page works offline


@pytest.mark.slow
def test_cli_tune_ctrl_c_cancels_the_job_and_still_reports(tmp_path):
    import re
    import subprocess
    import sys

    prog = tmp_path / "mm.py"
    prog.write_text(matmul(64))
    wd = tmp_path / "wd"
    cmd = [sys.executable, "-m", "mlc_lab.cli", "tune", str(prog), "--trials", "400", "--per-iter", "4"]
    proc = subprocess.Popen([*cmd, "--work-dir", str(wd)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # the progress bar's first line: the job runs, the CLI follows it
        assert re.search(r"\] 0/400", first), first
        pid = json.load(open(wd / "mlc_lab_status.json"))["pid"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "cancelled" and result["work_dir"] == str(wd)
    assert os.path.exists(result["report"]) and "Traceback" not in err
    assert group_gone(pid)


def test_errors_are_mlc_lab_errors():
    assert issubclass(TuneError, MlcLabError) and issubclass(NoGPUError, MlcLabError)
