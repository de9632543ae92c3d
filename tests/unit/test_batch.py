"""The batch runner (`mlc_lab.tvm.measure.batch`): a round of candidates built here into a folder, run
by ``COMMAND FOLDER`` or as a Slurm job (a real one-node cluster from Debian's packages, started here:
`tests/unit/slurm_cluster.py`), its results read back. A command that fails, hangs or leaves nothing,
and a Slurm job that is cancelled, are each one failed round with a sentence, never a hang; the tuning
job goes on. The 64-trial runs are ``-m full`` (and ``benchmarks/remote.py``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

import mlc_lab
from mlc_lab.core.tuning import tune
from mlc_lab.errors import TuneError
from mlc_lab.model.measure import RunMethod
from mlc_lab.tvm.measure import batch, stage
from tests.fixtures.programs import matmul
from tests.unit.processes import group_gone
from tests.unit.slurm_cluster import SlurmCluster

RUNSIDE = f"{sys.executable} -m mlc_lab.tvm.measure.runside"


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("batch:slurm", batch.BatchSpec("slurm")),
        ("batch:slurm:gpu", batch.BatchSpec("slurm", partition="gpu")),
        ("batch:ssh gpu1 'run it'", batch.BatchSpec("command", command=("ssh", "gpu1", "run it"))),
    ],
)
def test_batch_specs_are_read(spec, want):
    assert batch.parse_batch(spec) == want


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("batch:", "'batch:' needs a command"),
        ("batch:slurm:", "a Slurm partition is one word"),
        ("batch:ssh 'gpu1", "cannot be split into words"),
        ("slurm", "a batch runner is 'batch:slurm[:PARTITION]' or 'batch:COMMAND'"),
    ],
)
def test_wrong_batch_specs_are_one_sentence(spec, said):
    with pytest.raises(ValueError) as err:
        batch.parse_batch(spec)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_batch_command_that_is_not_there_is_refused_before_the_job_starts(tmp_path):
    with pytest.raises(TuneError, match="the batch runner needs 'no-such-tool', which is not on the PATH"):
        tune(mlc_lab.load(matmul(64)), trials=4, work_dir=str(tmp_path), runner="batch:no-such-tool --flag")


@pytest.fixture(scope="module")
def round_folder(tmp_path_factory):
    """A staged round: a 64^3 matmul built here, its inputs, the manifest (outputs sent back)."""
    folder = tmp_path_factory.mktemp("round")
    text = mlc_lab.load(matmul(64)).script()
    staged = stage.stage_kernel(text, text, None, "cpu", str(folder), cid="mm")
    stage.write_manifest(str(folder), "cpu", RunMethod(repeats=3, min_repeat_ms=1, rounds=1), [staged["candidate"]])
    return folder


def _copy(folder: Path, to: Path) -> str:
    to.mkdir()
    for p in folder.iterdir():
        if p.suffix in (".so", ".npz") or p.name == "manifest.json":
            (to / p.name).write_bytes(p.read_bytes())
    return str(to)


def test_a_round_run_by_a_command_is_read_back_with_where_and_when(round_folder, tmp_path):
    folder = _copy(round_folder, tmp_path / "r")
    report = batch.run_round(batch.parse_batch(f"batch:{RUNSIDE}"), folder, limit_s=120, label="round 1")
    assert report.ok, report.error
    (one,) = report.results.candidates
    assert one.ok and one.latency_s > 0 and len(one.results_s) == 3
    assert report.results.runtime_only is True and report.results.host == os.uname().nodename
    assert report.where == f"python -m mlc_lab.tvm.measure.runside on {os.uname().nodename}".replace(
        "python", os.path.basename(sys.executable)
    )
    assert 0 <= report.waited_s < 60 and report.ran_s > 0


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "transport.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("echo 'no GPU on gpu7' >&2; exit 3\n", "round 4: the batch command `transport.sh` exited 3 (no GPU on gpu7)"),
        ("exit 0\n", "round 4: the batch command `transport.sh` left no results.json in "),
        (
            'echo \'{"version": 1}\' > "$1/results.json"\n',
            "round 4: the batch command `transport.sh`'s results.json cannot be read",
        ),
    ],
)
def test_a_command_that_fails_is_one_failed_round(tmp_path, round_folder, body, said):
    folder = _copy(round_folder, tmp_path / "r")
    report = batch.run_round(batch.parse_batch(f"batch:{_script(tmp_path, body)}"), folder, limit_s=60, label="round 4")
    assert not report.ok and report.error.startswith(said), report.error


def test_a_command_that_hangs_is_stopped_at_the_rounds_limit(tmp_path, round_folder):
    folder = _copy(round_folder, tmp_path / "r")
    pid_file = tmp_path / "pid"
    body = f"echo $$ > {pid_file}; sleep 300 & wait\n"
    t0 = time.monotonic()
    report = batch.run_round(batch.parse_batch(f"batch:{_script(tmp_path, body)}"), folder, limit_s=2, label="round 2")
    assert time.monotonic() - t0 < 20
    assert report.error == "round 2: the batch command `transport.sh` did not finish in 2 s and was stopped"
    assert group_gone(int(pid_file.read_text())), "the command's sleep outlived the round"


# ----------------------------------------------------------------------------------------- Slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        with cluster.configured():  # sbatch, scontrol, scancel here and in the tuning job
            yield cluster
    finally:
        cluster.close()


def _when(cond, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_tune_through_slurm_goes_on_past_a_cancelled_job(slurm, tmp_path):
    """16 trials in two rounds of 8, each a Slurm job. The partition is down when the first is submitted;
    that job is cancelled (scancel) while it waits, and the partition comes up: round 1 fails with one
    sentence, round 2 runs on the node, the job finishes."""
    slurm.partition_state(up=False)
    job = tune(
        mlc_lab.load(matmul(128)),
        trials=16,
        work_dir=str(tmp_path / "wd"),
        runner="batch:slurm",
        num_trials_per_iter=8,
        strategy="replay-trace",
        cost_model="random",
    )
    cancelled: list[str] = []

    def cancel_the_first() -> None:
        _when(lambda: slurm.jobs() or job.status != "running")
        if slurm.jobs():
            cancelled.append(slurm.jobs()[0][0])
            slurm.tool("scancel", cancelled[0])
        slurm.partition_state(up=True)

    helper = threading.Thread(target=cancel_the_first, daemon=True)
    helper.start()
    assert job.wait(timeout=300) == "done", job.error
    helper.join(10)
    recs = job.records(with_traces=False)
    assert len(recs) == 16 and cancelled
    first, second = recs[:8], recs[8:]
    sentence = f"round 1: the Slurm job {cancelled[0]} ended CANCELLED (reason PartitionDown)"
    assert all(not r.ok and r.error == sentence for r in first), {r.error for r in first}
    assert all(r.ok and r.where.startswith("Slurm job ") and r.where.endswith(" on localhost") for r in second)
    assert all(r.waited_s is not None and 0 <= r.waited_s < 60 for r in second)
    kinds = [e["event"] for e in job.events()]
    assert kinds == ["round", "round_queued", "round_failed", "round", "round_queued", "round_running", "round_done"]
    results = json.loads((tmp_path / "wd" / "rounds" / "0002" / "results.json").read_text())
    assert results["runtime_only"] is True and results["host"]
    script = (tmp_path / "wd" / "rounds" / "0002" / "job.sh").read_text()
    assert "export TVM_USE_RUNTIME_LIB=1" in script and "-m mlc_lab.tvm.measure.runside" in script
    assert not list((tmp_path / "wd" / "rounds" / "0002").glob("*.so"))  # the bulk goes once measured


@pytest.mark.full  # 11 s
def test_cancelling_a_tune_cancels_its_queued_slurm_job(slurm, tmp_path):
    slurm.partition_state(up=False)
    try:
        job = tune(
            mlc_lab.load(matmul(64)),
            trials=8,
            work_dir=str(tmp_path / "wd"),
            runner="batch:slurm",
            num_trials_per_iter=8,
            strategy="replay-trace",
            cost_model="random",
        )
        _when(lambda: slurm.jobs() or job.status != "running")
        assert [state for _, state in slurm.jobs()] == ["PENDING"]
        job.cancel()
        _when(lambda: not [j for j in slurm.jobs() if j[1] == "PENDING"], 30)
    finally:
        slurm.partition_state(up=True)


def test_measure_by_a_batch_command_checks_the_outputs_here(tmp_path):
    from mlc_lab.core.session import Session

    s = Session(mlc_lab.load(matmul(64)))
    m = s.measure(runner=f"batch:{RUNSIDE}", repeats=3)
    assert m.ok and m.correct is True and m.max_abs_error < 1e-3 and m.repeats == 3, m.error
    assert m.where.endswith(f" on {os.uname().nodename}") and "by `" in m.method
    bad = s.measure(runner=f"batch:{_script(tmp_path, 'exit 5')}", raise_errors=False)
    assert bad.error_kind == "elsewhere" and "the batch command `transport.sh` exited 5" in bad.error


@pytest.mark.full
def test_a_64_trial_tune_through_slurm_is_within_noise_of_the_local_runner(tmp_path):
    from benchmarks.remote import slurm_figures
    from tests.unit.test_rpc import _within_noise

    figs = slurm_figures(mlc_lab.load(matmul(128)), 64, tmp_path, rounds=5)
    assert figs["local"]["trials"] == figs["slurm"]["trials"] == 64 and figs["slurm"]["failed"] == 0, figs
    assert [r["measured"] for r in figs["slurm_rounds"]] == [16, 16, 16, 16]
    assert all(r["waited_s"] is not None and r["where"].endswith(" on localhost") for r in figs["slurm_rounds"])
    assert _within_noise(figs["retimed_here"], "local", "slurm"), figs["retimed_here"]


def test_the_tune_command_takes_a_runner_and_says_what_is_wrong_with_one(tmp_path, capsys):
    from mlc_lab.cli import main as cli_main

    prog = tmp_path / "mm.py"
    prog.write_text(matmul(64))
    common = ["tune", str(prog), "--trials", "4", "--work-dir", str(tmp_path / "wd")]
    assert cli_main([*common, "--runner", "batch:no-such-tool"]) != 0
    assert "the batch runner needs 'no-such-tool', which is not on the PATH" in capsys.readouterr().err
    assert cli_main([*common, "--runner", "batch:slurm", "--rpc", "h:1:k"]) == 2
    assert "give --runner or --rpc, not both" in capsys.readouterr().err
    assert cli_main([*common, "--runner", "gpu-box"]) != 0
    assert (
        "runner must be 'local', 'rpc://HOST:PORT/KEY', 'batch:slurm[:PARTITION]' or 'batch:COMMAND'"
        in capsys.readouterr().err
    )
