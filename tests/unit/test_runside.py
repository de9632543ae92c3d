"""The measuring side (`mlc_lab.tvm.measure.runside`): a folder in, results out, with TVM's runtime alone.

The folder is made by the trusted side (`mlc_lab.tvm.measure.stage`) in this process; the measuring side
runs in a fresh process, as it does in the sandbox, on a remote GPU machine or in a batch job."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.model.measure import (
    RunArg,
    RunCandidate,
    RunFormatError,
    RunManifest,
    RunMethod,
    RunResults,
    pack_files,
    unpack_files,
)
from mlc_lab.tvm import program
from mlc_lab.tvm.course_programs import MM_RELU
from mlc_lab.tvm.measure import build, stage

ROOT = Path(__file__).resolve().parents[2]
QUICK = RunMethod(repeats=3, min_repeat_ms=1.0, threads=2, rounds=1)

# Runs the measuring side's main() and then says what this process holds of TVM.
PROBE = """
import json, sys
from mlc_lab.tvm.measure import runside
code = runside.main(sys.argv[1:])
import tvm
print(json.dumps({
    "code": code,
    "libraries": sorted(tvm.base._LOADED_LIBS),
    "compiler_functions": [n for n in ("target.build.llvm", "s_tir.schedule.ConcreteSchedule")
                           if tvm.get_global_func(n, allow_missing=True) is not None],
    "threads": __import__("os").environ.get("TVM_NUM_THREADS"),
}))
"""


def _runside(folder: Path, *extra: str, pass_fds: tuple = (), probe: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TVM_")}
    env["PYTHONPATH"] = str(ROOT)
    head = [sys.executable, "-c", PROBE] if probe else [sys.executable, "-m", "mlc_lab.tvm.measure.runside"]
    return subprocess.run(
        [*head, str(folder), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        pass_fds=pass_fds,
        check=False,
    )


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """mm_relu built and exported here, with its inputs and expected outputs."""
    folder = tmp_path_factory.mktemp("runside")
    text = build.module_to_text(program.load(MM_RELU))
    out = stage.stage_kernel(text, text, None, "cpu", str(folder))
    np.savez(folder / "expected.npz", **dict(zip(out["names"], out["expected"])))
    return folder, out


def _read(folder: Path) -> RunResults:
    return RunResults.from_json(json.loads((folder / "results.json").read_text()))


def test_a_folder_runs_in_a_runtime_only_process_and_says_it_all(staged, tmp_path):
    folder, out = staged
    cand = dataclasses.replace(out["candidate"], expected="expected.npz")
    stage.write_manifest(str(folder), "cpu", QUICK, [cand])
    r = _runside(folder, probe=True)
    assert r.returncode == 0, r.stderr[-3000:]
    held = json.loads(r.stdout.strip().splitlines()[-1])
    assert held["code"] == 0 and held["threads"] == "2"
    assert held["libraries"] == ["tvm_runtime"] and held["compiler_functions"] == []
    results = _read(folder)
    assert results.runtime_only is True and results.device == "cpu"
    assert "2 thread(s)" in results.method and "median of 3" in results.method
    (one,) = results.candidates
    assert one.ok and one.error is None and one.correct is True and one.wrong == 0 and one.max_abs_error == 0.0
    assert one.threads == 2 and one.repeats == 3 and len(one.results_s) == 3 and one.rounds == 1
    assert one.latency_s == sorted(one.results_s)[1] and one.min_s <= one.latency_s <= one.max_s
    assert one.others_cores is not None and one.parallel_speed is None  # no probe in the manifest
    for name, want in zip(out["names"], out["expected"]):
        got = np.load(folder / one.outputs[name], allow_pickle=False)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_the_fd_mode_sends_the_same_files_as_one_stream_and_writes_nothing(staged, tmp_path):
    folder, out = staged
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("kernel.so", "kernel.npz"):
        (copy / name).write_bytes((folder / name).read_bytes())
    probe = stage.stage_speed_probe(str(copy), 2)
    stage.write_manifest(str(copy), "cpu", dataclasses.replace(QUICK, speed_probe=probe), [out["candidate"]])
    with open(tmp_path / "stream", "wb") as fh:  # a file, not a pipe: nothing need read it meanwhile
        r = _runside(copy, "--fd", str(fh.fileno()), pass_fds=(fh.fileno(),))
    files = unpack_files((tmp_path / "stream").read_bytes())
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in copy.iterdir()) == ["kernel.npz", "kernel.so", "manifest.json", "speed_probe.so"]
    results = RunResults.from_json(json.loads(files["results.json"]))
    (one,) = results.candidates
    assert one.ok and one.correct is None  # no expected outputs given: the caller compares
    assert one.parallel_speed is not None and 0 < one.parallel_speed < 3
    got = [np.load(io.BytesIO(files[one.outputs[n]]), allow_pickle=False) for n in out["names"]]
    assert stage.errors(got, out["expected"])[2] is True


def test_each_candidate_fails_alone_and_says_how(staged, tmp_path):
    folder, out = staged
    work = tmp_path / "many"
    work.mkdir()
    for name in ("kernel.so", "kernel.npz"):
        (work / name).write_bytes((folder / name).read_bytes())
    (work / "junk.so").write_bytes(b"\x7fELF not really")
    wrong = dict(zip(out["names"], out["expected"]))
    wrong["C"] = wrong["C"] + 1.0
    np.savez(work / "wrong.npz", **wrong)
    good = out["candidate"]
    cands = [
        dataclasses.replace(good, id="junk", artifact="junk.so"),
        dataclasses.replace(good, id="nameless", function="no_such_function"),
        dataclasses.replace(good, id="missing_arg", args=[RunArg("A", "absent.npy"), *good.args[1:]]),
        dataclasses.replace(good, id="wrong", expected="wrong.npz", send_outputs=False, time=False),
        dataclasses.replace(good, id="good", send_outputs=False),
    ]
    stage.write_manifest(str(work), "cpu", QUICK, cands)
    r = _runside(work)
    assert r.returncode == 0, r.stderr[-3000:]
    by_id = {c.id: c for c in _read(work).candidates}
    assert [c for c in by_id] == ["junk", "nameless", "missing_arg", "wrong", "good"]
    assert by_id["junk"].error.kind == "load" and "junk.so does not load" in by_id["junk"].error.message
    assert by_id["nameless"].error.kind == "load"
    assert by_id["missing_arg"].error.kind == "load" and "absent.npy" in by_id["missing_arg"].error.message
    w = by_id["wrong"]
    assert w.error.kind == "wrong" and w.wrong == 128 * 128 and w.max_abs_error == pytest.approx(1.0)
    assert w.latency_s is None and w.outputs == {}
    assert by_id["good"].ok and by_id["good"].latency_s > 0


def test_a_bad_manifest_is_refused_with_the_place(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"version": 1, "device": "cpu", "method": {}, "cands": []}))
    r = _runside(tmp_path)
    assert r.returncode == 2 and "no key 'cands' in a RunManifest" in r.stderr
    assert not (tmp_path / "results.json").exists()
    assert _runside(tmp_path, "--fd").returncode == 2


GOOD = {
    "version": 1,
    "device": "cpu",
    "method": {"repeats": 3},
    "candidates": [{"id": "k", "artifact": "k.so", "function": "main", "args": [{"name": "A", "file": "a.npy"}]}],
}


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d.update(version=2), "version 2 is not 1"),
        (lambda d: d.update(device="tpu"), "'tpu' is none of cpu, cuda, opencl"),
        (lambda d: d["method"].update(repeats="3"), "manifest.method.repeats: '3' is not an integer"),
        (lambda d: d["method"].update(cache="lukewarm"), "'lukewarm' is not 'warm' or 'cold'"),
        (lambda d: d["method"].update(speed_probe={"artifact": "p.so"}), "'threads' is missing"),
        (lambda d: d["candidates"][0].update(artifact="../../etc/passwd"), "is not a plain file name"),
        (lambda d: d["candidates"][0]["args"][0].update(file="/etc/shadow"), "args[0].file"),
        (lambda d: d["candidates"][0].update(outputs=["Z"]), "'Z' is none of its arguments (A)"),
        (lambda d: d["candidates"][0].pop("function"), "candidates[0]: 'function' is missing"),
        (lambda d: d["candidates"].append(dict(d["candidates"][0])), "two candidates share an id"),
        (lambda d: d.update(candidates={}), "manifest.candidates: not a list"),
    ],
)
def test_the_manifest_is_read_strictly(edit, said):
    data = json.loads(json.dumps(GOOD))
    assert RunManifest.from_json(data).candidates[0].args == [RunArg("A", "a.npy")]
    edit(data)
    with pytest.raises(RunFormatError) as err:
        RunManifest.from_json(data)
    assert said in str(err.value)


def test_the_manifest_and_results_round_trip_through_json():
    m = RunManifest.from_json(GOOD)
    assert RunManifest.from_json(json.loads(json.dumps(m.to_json()))) == m
    c = RunCandidate("k", "k.so", "main", [RunArg("A", "a.npy")], outputs=["A"], expected="e.npz")
    assert RunManifest.from_json({**GOOD, "candidates": [dataclasses.asdict(c)]}).candidates == [c]
    bad = {"version": 1, "device": "cpu", "method": "m", "candidates": [{"id": "k", "ok": False}]}
    assert RunResults.from_json(bad).candidates[0].ok is False
    bad["candidates"][0]["error"] = {"kind": "exploded", "message": "x"}
    with pytest.raises(RunFormatError, match="'exploded' is none of load"):
        RunResults.from_json(bad)
    bad["candidates"][0] = {"id": "k", "ok": True, "outputs": {"A": "../A.npy"}}
    with pytest.raises(RunFormatError, match="not a plain file name"):
        RunResults.from_json(bad)


names = st.text(alphabet="abcxyz_.0123456789", min_size=1, max_size=12).filter(lambda n: n not in (".", ".."))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.binary(max_size=64), max_size=6), st.data())
def test_a_packed_stream_reads_back_and_a_damaged_one_is_refused(files, data):
    stream = pack_files(files)
    assert unpack_files(stream) == files
    cut = data.draw(st.integers(0, len(stream) - 1))
    with pytest.raises(RunFormatError):
        unpack_files(stream[:cut] + (b"" if files else b"x"))
    with pytest.raises(RunFormatError):
        unpack_files(stream + b"x")
    with pytest.raises(RunFormatError):
        unpack_files(b"junk" + stream)
