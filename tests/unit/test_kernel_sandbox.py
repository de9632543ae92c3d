"""`mlc_lab.core.kernel_sandbox`: what comes back from a kernel's run is read as hostile, and where the
machine cannot sandbox, nothing of a hand-in's kernel runs (the grader's rule, for every door).
The attacks themselves, run for real, are tests/exploits/test_kernels.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from mlc_lab.core import kernel_sandbox as ks
from mlc_lab.core.sandbox import Outcome
from mlc_lab.model.measure import CandidateResult, Measurement, RunMethod, RunResults, pack_files

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = "this machine cannot sandbox a hand-in: unshare: the machine refuses a new user namespace"


def _outcome(result: bytes, status: str = "ok", message: str = "") -> Outcome:
    return Outcome(status, 0, b"", b"stderr tail", result, 0.5, message)  # type: ignore[arg-type]


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _results(**known) -> RunResults:
    one = CandidateResult(id="kernel", ok=True, **known)
    return RunResults(version=1, device="cpu", method="m", candidates=[one])


def test_a_stream_that_is_not_the_measuring_sides_is_no_result():
    for junk in (b"", b"hello", pack_files({"other.json": b"{}"}), pack_files({"results.json": b"[1, 2"})):
        with pytest.raises(ks.KernelRunFailed, match="the kernel's run gave no result the grader can read"):
            ks._read(_outcome(junk))
    good = pack_files({"results.json": json.dumps(_results().to_json()).encode()})
    assert ks._read(_outcome(good))[0].candidates[0].ok


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        ("timeout", "ran for more than the wall-clock limit of 4 s and was stopped", "timeout"),
        ("memory", "used more than the memory limit of 256 MB for all its processes and was stopped", "crash"),
        ("signal", "was killed by SIGSEGV", "crash"),
    ],
)
def test_a_run_that_was_stopped_says_so_in_its_sentence(status, message, kind):
    with pytest.raises(ks.KernelRunFailed) as err:
        ks._read(_outcome(b"", status, message))
    assert str(err.value) == f"the kernel {message}" and err.value.kind == kind and err.value.detail == "stderr tail"


STAGED = {
    "candidate": type("C", (), {"id": "kernel"})(),
    "names": ["A", "C"],
    "inputs": [np.ones((4, 4), "float32"), np.zeros((4, 4), "float32")],
    "expected": [np.ones((4, 4), "float32"), np.full((4, 4), 4.0, "float32")],
    "flops": 128.0,
    "build_s": 0.1,
    "func_name": "main",
    "module_text": "",
}
TIMES = {"latency_s": 2e-6, "min_s": 1e-6, "max_s": 3e-6, "results_s": [1e-6, 2e-6, 3e-6], "repeats": 3}


def _measured(results: RunResults, files: dict) -> Measurement:
    staged = {**STAGED, "inputs": [a.copy() for a in STAGED["inputs"]]}
    return ks._measurement(staged, results, files, RunMethod(repeats=3), Measurement(target="llvm", func_name="main"))


def test_the_outputs_are_compared_here_and_the_figures_checked():
    files = {"a.npy": _npy(STAGED["expected"][0]), "c.npy": _npy(STAGED["expected"][1])}
    outputs = {"A": "a.npy", "C": "c.npy"}
    m = _measured(_results(outputs=outputs, **TIMES), files)
    assert m.error is None and m.correct is True and m.latency_s == 2e-6 and m.gflops == pytest.approx(0.064)
    assert m.method.endswith("; run in the sandbox")
    wrong = {**files, "c.npy": _npy(np.full((4, 4), 5.0, "float32"))}
    m = _measured(_results(outputs=outputs, correct=True, **TIMES), wrong)  # its own verdict is not read
    assert m.correct is False and m.max_abs_error == 1.0
    for forged, said in (
        ({**TIMES, "results_s": [1e-6, float("nan"), 3e-6]}, "timing figures that are not the measuring side's"),
        ({**TIMES, "repeats": 1, "results_s": [2e-6]}, "timing figures that are not the measuring side's"),
        ({**TIMES, "latency_s": 1e-9}, "timing figures that are not the measuring side's"),
    ):
        m = _measured(_results(outputs=outputs, **forged), files)
        assert m.error == f"the kernel's run sent back {said}" and m.latency_s is None
    bent = {**files, "c.npy": _npy(np.zeros((2, 8), "float32"))}
    assert _measured(_results(outputs=outputs, **TIMES), bent).error == (
        "the kernel's run sent back C as float32[2, 8], not float32[4, 4]"
    )
    pickled = {**files, "c.npy": b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"}
    assert "not an array for C" in _measured(_results(outputs=outputs, **TIMES), pickled).error
    assert (
        _measured(_results(outputs={"A": "a.npy"}, **TIMES), files).error == "the kernel's run sent no value back for C"
    )


def test_a_failed_candidate_is_the_measurements_error_in_its_words():
    from mlc_lab.model.measure import RunError

    failed = CandidateResult(id="kernel", ok=False, error=RunError("run", "main failed while running: an assertion"))
    m = _measured(RunResults(1, "cpu", "m", [failed]), {})
    assert m.error == "the kernel main failed while running: an assertion" and m.error_kind == "run"
    other = RunResults(1, "cpu", "m", [CandidateResult(id="kernel", ok=True), CandidateResult(id="x", ok=True)])
    with pytest.raises(ks.KernelRunFailed, match="results for other kernels"):
        _measured(other, {})


def test_every_door_stops_before_running_a_trace_where_the_machine_cannot_sandbox(monkeypatch, capsys, tmp_path):
    from mlc_lab import cli
    from mlc_lab.core import sandbox
    from mlc_lab.tvm.course_programs import MM_RELU

    monkeypatch.setattr(sandbox, "probe", lambda: REFUSAL)
    (tmp_path / "mm.py").write_text(MM_RELU)
    (tmp_path / "t.py").write_text('b0 = sch.get_sblock(name="Y", func_name="mm_relu")\n')
    for argv in (
        ["bench", "mm.py", "--trace", "t.py"],
        ["check", "mm.py", "--trace", "t.py", "--numeric", "--target", "cuda"],
    ):
        code = cli.main([a if not a.endswith(".py") else str(tmp_path / a) for a in argv])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err == (
            f"mlc-lab: {REFUSAL}; nothing was run: the kernel of a trace file runs only in the sandbox "
            "(--unsafe-same-user runs it without)\n"
        )
    code = cli.main(
        ["class", "serve", str(ROOT / "tests/labs/classroom/assignment.toml"), "--dir", str(tmp_path / "c")]
    )
    err = capsys.readouterr().err
    assert code == 2 and f"{REFUSAL}; the class server was not started (--unsafe-same-user" in err


def test_a_timed_trace_is_a_grader_error_row_where_the_machine_cannot_sandbox(monkeypatch, tmp_path):
    from mlc_lab.core import sandbox
    from mlc_lab.grading import grade, load_assignment

    monkeypatch.setattr(sandbox, "probe", lambda: REFUSAL)
    lab = ROOT / "tests" / "labs" / "classroom"
    (tmp_path / "mm_relu.py").write_text((lab / "mm_relu.py").read_text())
    text = (lab / "assignment.toml").read_text() + '\n[[tasks]]\nname = "fast"\nmax_latency_ms = 100\n'
    (tmp_path / "lab.toml").write_text(text)
    hand_in = tmp_path / "lab.py"
    hand_in.write_text('b0 = sch.get_sblock(name="Y", func_name="main")\n')
    r = grade(load_assignment(tmp_path / "lab.toml"), hand_in)
    assert r.status == "grader error" and r.score == 0
    assert r.error == f"{REFUSAL}; a hand-in's code, and every kernel compiled from it, runs only in the sandbox"


def test_a_cuda_kernel_from_a_hand_in_is_not_run_here_and_says_why():
    from mlc_lab.core.session import Session
    from mlc_lab.tvm import program

    lab = ROOT / "tests" / "labs" / "grading"
    gemm = program.load((lab / "gemm_relu_add.py").read_text())
    bound = Session.from_trace(gemm, (lab / "submissions" / "reference.py").read_text(), None)
    m = ks.measure(bound.module, bound.original, bound.func_name, "cuda", sandbox=ks.KernelSandbox())
    assert (m.error, m.error_kind, m.latency_s) == (ks.NO_GPU, "no_gpu", None)
    # a schedule no GPU could run says that first, as measure does
    unbound = Session(gemm)
    m = ks.measure(unbound.module, unbound.original, unbound.func_name, "cuda", sandbox=ks.KernelSandbox())
    assert m.error_kind == "gpu_check" and m.error.startswith("the program has unbound loops")
