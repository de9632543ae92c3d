"""scripts/gpu_check: what can be held here, without a GPU.

prepare.py's verdicts and builds; run_on_gpu.py's refusals (no OUT, no folder, an unknown name, a bad
number, no GPU, a CUDA runtime that does not load), its counting of wrong elements and timing (on a
small CPU kernel: the same code runs the CUDA kernels on the device), its agreement rule and table.
What needs the GPU itself (NVRTC, the launch) is run by the device call the scripts prepare.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tvm
from hypothesis import given
from hypothesis import strategies as st

from tvm.script import ir as I
from tvm.script import tirx as T

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "gpu_check"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_on_gpu = _load("run_on_gpu")
prepare = _load("prepare")


def _entry(built=True, predicts_wrong=False, kinds=(), n=64) -> dict:
    return {
        "program": {"name": "matmul", "n": n, "shapes": [[n, n]] * 3, "flops": 2 * n**3},
        "failed_checks": [],
        "hazard_kinds": list(kinds),
        "predicts_wrong": predicts_wrong,
        "built": built,
        "so": "kernels/k.so" if built else None,
    }


def _folder(tmp_path: Path, entries: dict) -> Path:
    folder = tmp_path / "gpu_check"
    (folder / "kernels").mkdir(parents=True)
    (folder / "verdicts.json").write_text(json.dumps({"commit": "x", "submissions": entries}))
    for e in entries.values():
        if e["built"]:
            (folder / e["so"]).write_bytes(b"")
    with tarfile.open(folder / "runtime.tar.xz", "w:xz") as tar:
        lib = tmp_path / "libtvm_runtime_cuda.so"
        lib.write_bytes(b"")
        tar.add(lib, arcname="site/tvm/lib/libtvm_runtime_cuda.so")
    return folder


def _drive(argv: list[str], capsys) -> tuple[int, str]:
    try:
        rc = run_on_gpu.main(argv)
    except SystemExit as exc:  # argparse's refusals
        rc = exc.code
    return rc, capsys.readouterr().err


# --- prepare.py ----------------------------------------------------------------------------------
def test_prepare_builds_a_kernel_and_records_its_verdicts(tmp_path):
    e = prepare.prepare_submission("course_blocking", tmp_path)
    assert e["built"] and e["build_error"] is None and e["so"] == "kernels/course_blocking.so"
    assert e["failed_checks"] == ["shared_memory_tiling"] and e["hazard_kinds"] == []
    assert not e["predicts_wrong"] and e["as_expected_here"]
    assert e["program"] == {"name": "matmul", "n": 1024, "shapes": [[1024, 1024]] * 3, "flops": 2 * 1024**3}
    so = (tmp_path / "course_blocking.so").read_bytes()
    assert so[:4] == b"\x7fELF" and b"main_kernel" in so  # the CUDA source travels inside


def test_prepare_records_a_kernel_that_does_not_build(tmp_path):
    e = prepare.prepare_submission("no_write_cache", tmp_path)
    assert not e["built"] and e["so"] is None and "global" in e["build_error"]
    assert e["hazard_kinds"] == ["allocation"] and e["predicts_wrong"]
    assert not (tmp_path / "no_write_cache.so").exists()


def test_prepare_refuses_an_unknown_submission(capsys):
    with pytest.raises(SystemExit) as exc:
        prepare.parse_args(["--only", "nope"])
    assert exc.value.code == 2 and "'nope' is not a submission" in capsys.readouterr().err


# --- run_on_gpu.py: refusals ---------------------------------------------------------------------
def test_refuses_without_an_output_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    rc, err = _drive(["--dir", str(tmp_path)], capsys)
    assert rc == 2 and "no output folder: set OUT" in err


def test_refuses_a_folder_prepare_did_not_fill(tmp_path, capsys):
    rc, err = _drive(["--dir", str(tmp_path), "--out", str(tmp_path / "out")], capsys)
    assert rc == 2 and f"{tmp_path / 'verdicts.json'} does not exist" in err


def test_refuses_an_unknown_submission(tmp_path, capsys):
    folder = _folder(tmp_path, {"reference": _entry()})
    rc, err = _drive(["--dir", str(folder), "--out", str(tmp_path / "out"), "--only", "nope"], capsys)
    assert rc == 2 and "--only 'nope' is not a submission" in err


def test_refuses_a_missing_kernel(tmp_path, capsys):
    folder = _folder(tmp_path, {"reference": _entry()})
    (folder / "kernels" / "k.so").unlink()
    rc, err = _drive(["--dir", str(folder), "--out", str(tmp_path / "out")], capsys)
    assert rc == 2 and "k.so does not exist" in err


@pytest.mark.parametrize("value", ["-1", "0", "abc", "nan"])
def test_refuses_a_bad_number_of_seconds(tmp_path, capsys, value):
    rc, err = _drive(["--dir", str(tmp_path), "--out", str(tmp_path), "--timeout", value], capsys)
    assert rc == 2 and f"{value!r} is not a" in err


def _shell(folder: Path, path: str, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    script = SCRIPTS / "run_on_gpu.sh"
    run_env = dict(os.environ, PATH=path, OUT=str(tmp_path / "out"), GPU_CHECK_PYTHON=sys.executable, **env)
    # the shell script runs the run_on_gpu.py beside it, as on the device: copy both into the folder
    for name in ("run_on_gpu.sh", "run_on_gpu.py"):
        (folder / name).write_bytes((SCRIPTS / name).read_bytes())
    assert script.is_file()
    return subprocess.run(["bash", str(folder / "run_on_gpu.sh")], capture_output=True, text=True, env=run_env)


def test_no_gpu_exits_2_with_a_sentence(tmp_path):
    folder = _folder(tmp_path, {"reference": _entry()})
    done = _shell(folder, "/usr/bin:/bin", tmp_path)
    assert done.returncode == 2, done.stderr
    assert "no NVIDIA GPU here: nvidia-smi is not on the PATH" in done.stderr


def test_a_cuda_runtime_that_does_not_load_stops_the_run(tmp_path):
    """A GPU listed, but the kernel's process cannot load CUDA: the run stops at the first kernel
    (every other one would fail the same way) with the library and the loader's reason."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-test)"\n')
    smi.chmod(0o755)
    folder = _folder(tmp_path, {"reference": _entry(), "other": _entry()})
    done = _shell(folder, f"{bin_dir}:/usr/bin:/bin", tmp_path, GPU_CHECK_CUDART="/nonexistent/libcudart.so.13")
    assert done.returncode == 2, done.stderr
    assert "cannot load /nonexistent/libcudart.so.13" in done.stderr
    assert "GPU 0: NVIDIA H200" in done.stdout and not (tmp_path / "out" / "gpu_results.json").exists()


# --- run_on_gpu.py: one kernel (on the CPU here) ---------------------------------------------------
_ROWS = """
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j in T.grid(ROWS, 64):
            C[i, j] = INIT
            for k in range(64):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]
"""


def _cpu_kernel(tmp_path: Path, rows: int) -> Path:
    """A 64x64 matmul for the CPU; with fewer rows, the rest stay unwritten (NaN) and row 0 is one too high."""
    init = "T.float32(0)" if rows == 64 else "T.Select(i == 0, T.float32(1), T.float32(0))"
    text = _ROWS.replace("ROWS", str(rows)).replace("INIT", init)
    mod = tvm.script.from_source(text, extra_vars={"I": I, "T": T})
    so = tmp_path / f"rows{rows}.so"
    tvm.compile(mod, target="llvm").export_library(str(so))
    return so


def test_a_right_kernel_has_no_wrong_element_and_is_timed(tmp_path):
    program = _entry()["program"]
    r = run_on_gpu.run_kernel(tvm, tvm.cpu(0), _cpu_kernel(tmp_path, 64), program, timing=True)
    assert r["error"] is None and r["wrong"] == [0, 0]
    assert r["ms"] > 0 and r["tflops"] == pytest.approx(program["flops"] / (r["ms"] * 1e-3) / 1e12, rel=0.01, abs=1e-3)


def test_wrong_elements_are_counted_and_not_timed(tmp_path):
    r = run_on_gpu.run_kernel(tvm, tvm.cpu(0), _cpu_kernel(tmp_path, 40), _entry()["program"], timing=True)
    # rows 40..63 never written (NaN), and row 0 one too high: 24 * 64 + 64 elements
    assert r["error"] is None and r["wrong"] == [25 * 64, 25 * 64] and r["ms"] is None


def test_a_kernel_that_does_not_load_is_an_error(tmp_path):
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not a library")
    r = run_on_gpu.run_kernel(tvm, tvm.cpu(0), bad, _entry()["program"], timing=True)
    assert r["error"].startswith("load: ") and r["wrong"] is None


def test_the_reference_of_gemm_relu_add():
    n = 8
    program = {"name": "gemm_relu_add", "n": n, "shapes": [[n, n]] * 4, "flops": 2 * n**3}
    args, ref = run_on_gpu.inputs_and_reference(program)
    a, b, c, d = args
    assert np.isnan(d).all() and all(x.dtype == np.float32 for x in args)
    assert np.allclose(ref, np.maximum(a.astype(float) @ b.astype(float), 0) + c)
    again, _ = run_on_gpu.inputs_and_reference(program)
    assert all((x == y).all() for x, y in zip(args[:3], again[:3]))  # a fixed seed


@given(st.integers(0, 50), st.floats(-100, 100, allow_nan=False))
def test_wrong_elements_respect_the_tolerance(k, scale):
    ref = np.linspace(-scale, scale, 64).reshape(8, 8)
    out = ref.astype(np.float32).copy()
    tol = 1e-2 + 1e-3 * np.abs(ref)
    flat = out.reshape(-1)
    flat[:k] = ref.reshape(-1)[:k] + 2 * tol.reshape(-1)[:k]  # clearly outside
    flat[k : 2 * k] = ref.reshape(-1)[k : 2 * k] + 0.5 * tol.reshape(-1)[k : 2 * k]  # inside
    assert run_on_gpu.wrong_elements(out, ref) == min(k, 64)


# --- run_on_gpu.py: agreement and the table ------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "result", "agrees"),
    [
        (_entry(), {"wrong": [0, 0], "ms": 1.0}, True),
        (_entry(), {"wrong": [3, 0]}, False),  # no hazard here, wrong numbers there
        (_entry(), {"error": "run: illegal address"}, False),
        (_entry(predicts_wrong=True, kinds=["race"]), {"wrong": [7, 9]}, True),
        (_entry(predicts_wrong=True, kinds=["race"]), {"wrong": [0, 0]}, False),  # a race the GPU did not show
        (_entry(predicts_wrong=True, kinds=["out_of_bounds"]), {"error": "run: illegal address"}, True),
        (_entry(built=False, predicts_wrong=True, kinds=["allocation"]), {}, True),
        (_entry(built=False), {}, False),  # no hazard said so, yet it does not build
        (_entry(), {"not_run": "budget"}, None),
    ],
)
def test_agreement(entry, result, agrees):
    assert run_on_gpu.agreement(entry, result) is agrees


def test_table_names_each_submission_and_what_the_gpu_did():
    meta = {
        "submissions": {
            "reference": _entry(),
            "racing_write_back": _entry(predicts_wrong=True, kinds=["race", "spill"]),
            "no_write_cache": _entry(built=False, predicts_wrong=True, kinds=["allocation"]),
            "copy_8x32_threads": _entry(predicts_wrong=True, kinds=["out_of_bounds"]),
        }
    }
    results = {
        "reference": {"wrong": [0, 0], "ms": 0.5536, "tflops": 31.0},
        "racing_write_back": {"wrong": [0, 0]},
        "copy_8x32_threads": {"wrong": None, "error": "run: CUDA_ERROR_ILLEGAL_ADDRESS"},
    }
    lines = run_on_gpu.table(meta, results).splitlines()
    row = {line.split()[0]: line for line in lines[2:6]}
    assert row["reference"].split()[1:] == ["none", "none", "0/0", "of", "4,096", "0.5536", "31.0", "yes"]
    assert "race,spill" in row["racing_write_back"] and row["racing_write_back"].endswith("NO")
    assert "does not build" in row["no_write_cache"] and row["no_write_cache"].endswith("yes")
    assert "error" in row["copy_8x32_threads"] and lines[-1] == "copy_8x32_threads: run: CUDA_ERROR_ILLEGAL_ADDRESS"


# --- run_on_gpu.py: the whole run, each kernel's process stood in for -----------------------------
def _fake_gpu(monkeypatch, outcomes: dict) -> list:
    ran = []
    monkeypatch.setattr(run_on_gpu, "gpu_present", lambda: "GPU 0: NVIDIA H200 (UUID: GPU-test)")

    def child(args, name, site):
        assert (site / "tvm" / "lib" / "libtvm_runtime_cuda.so").is_file()  # the runtime was unpacked
        ran.append(name)
        return dict(outcomes[name])

    monkeypatch.setattr(run_on_gpu, "run_child", child)
    return ran


def test_a_run_writes_its_results_and_says_whether_the_verdicts_agree(tmp_path, monkeypatch, capsys):
    entries = {
        "right": _entry(),
        "racing": _entry(predicts_wrong=True, kinds=["race"]),
        "unbuildable": _entry(built=False, predicts_wrong=True, kinds=["allocation"]),
    }
    folder = _folder(tmp_path, entries)
    ran = _fake_gpu(monkeypatch, {"right": {"wrong": [0, 0], "ms": 2.0, "tflops": 1.0}, "racing": {"wrong": [5, 6]}})
    out = tmp_path / "out"
    assert run_on_gpu.main(["--dir", str(folder), "--out", str(out)]) == 0
    assert ran == ["right", "racing"]  # the kernel that did not build is not run
    results = json.loads((out / "gpu_results.json").read_text())
    assert results["summary"]["judged"] == 3 and results["summary"]["agree"] == 3
    assert results["submissions"]["racing"]["gpu"]["wrong"] == [5, 6]
    assert results["submissions"]["unbuildable"]["gpu"] is None
    table = (out / "gpu_table.txt").read_text()
    assert "3 of 3 verdicts agree with the GPU" in table and table in capsys.readouterr().out


def test_a_disagreement_exits_1_and_is_named(tmp_path, monkeypatch, capsys):
    folder = _folder(tmp_path, {"right": _entry(), "racing": _entry(predicts_wrong=True, kinds=["race"])})
    _fake_gpu(monkeypatch, {"right": {"wrong": [0, 0]}, "racing": {"wrong": [0, 0]}})
    assert run_on_gpu.main(["--dir", str(folder), "--out", str(tmp_path / "out"), "--only", "racing"]) == 1
    results = json.loads((tmp_path / "out" / "gpu_results.json").read_text())
    assert list(results["submissions"]) == ["racing"] and results["summary"]["disagree"] == ["racing"]
    assert "0 of 1 verdicts agree with the GPU (not: racing)" in capsys.readouterr().out


def test_no_kernel_starts_once_the_budget_is_spent(tmp_path, monkeypatch):
    folder = _folder(tmp_path, {"right": _entry(), "other": _entry()})
    ran = _fake_gpu(monkeypatch, {"right": {"wrong": [0, 0]}, "other": {"wrong": [0, 0]}})
    assert run_on_gpu.main(["--dir", str(folder), "--out", str(tmp_path / "out"), "--budget", "1e-9"]) == 0
    results = json.loads((tmp_path / "out" / "gpu_results.json").read_text())
    assert ran == [] and results["summary"]["judged"] == 0
    assert all("budget" in e["gpu"]["not_run"] for e in results["submissions"].values())


def test_a_timing_failure_is_noted_and_leaves_the_verdict_alone(tmp_path, monkeypatch):
    so = _cpu_kernel(tmp_path, 64)
    real_load = tvm.runtime.load_module

    class NoTiming:  # the kernel runs; its time_evaluator raises
        def __init__(self, mod):
            self.mod = mod

        def __getitem__(self, name):
            return self.mod[name]

        def time_evaluator(self, *args, **kwargs):
            raise RuntimeError("timer broke")

    monkeypatch.setattr(tvm.runtime, "load_module", lambda path: NoTiming(real_load(path)))
    r = run_on_gpu.run_kernel(tvm, tvm.cpu(0), so, _entry()["program"], timing=True)
    assert r["wrong"] == [0, 0] and r["error"] is None and "timer broke" in r["timing_error"] and r["ms"] is None
    assert run_on_gpu.agreement(_entry(), r) is True
    assert run_on_gpu.table({"submissions": {"k": _entry()}}, {"k": r}).splitlines()[-1] == (
        "k: timing: RuntimeError: timer broke"
    )


# --- elsewhere.py: the lab's kernels by the batch runner's measuring side, beside measure's record ------

elsewhere = _load("elsewhere")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the CUDA toolkit (nvcc) is not installed")
def test_elsewhere_goes_from_measure_here_to_the_measuring_side_and_back_short_of_a_launch(tmp_path, capsys):
    """prepare stashes what measure(runner=batch:...) builds (a fat binary, a manifest, a recipe instead of
    16 MiB of arrays); the recipe gives the arrays back; the device step runs the measuring side (here it
    finds no GPU: that is its answer); collect has measure read that answer back through its own code."""
    from mlc_lab.tvm.measure import artifact, build
    from tests.labs import gpu_matmul as lab

    out, name = tmp_path / "elsewhere", "course_blocking_with_shared"  # the 1024^3 matmul
    assert elsewhere.main(["prepare", "--out", str(out), "--only", name, "--no-round", "--no-runtime"]) == 0
    folder = out / "folders" / f"kernel-{name}"
    assert sorted(p.name for p in folder.iterdir()) == ["kernel.so", "manifest.json", "recipe.json"]
    assert [m["format"] for m in artifact.library_imports(str(folder / "kernel.so"))] == ["fatbin"]
    (cand,) = json.loads((folder / "manifest.json").read_text())["candidates"]
    assert (cand["outputs"], cand["expected"], cand["send_outputs"]) == (["C"], "expected.npz", False)
    elsewhere.rehydrate(folder)
    session = lab.session_of(name)
    want = build.random_inputs(build.param_specs(session.module, None), 0)
    with np.load(folder / "kernel.npz") as got:
        assert all(np.array_equal(got[n], w) for n, w in zip(("A", "B", "C"), want))  # measure's own draws
    with np.load(folder / "expected.npz") as exp:
        assert np.allclose(exp["C"], want[0].astype(np.float64) @ want[1].astype(np.float64), rtol=1e-6)
    for p in folder.glob("*.npz"):
        p.unlink()
    results = tmp_path / "device"
    assert elsewhere.main(["device", "--dir", str(out), "--out", str(results)]) == 0
    said = json.loads((results / "elsewhere_results.json").read_text())[f"kernel-{name}"]
    (there,) = said["results"]["candidates"]
    assert said["results"]["runtime_only"] is True and there["error"]["kind"] == "device"  # no GPU here
    assert elsewhere.main(["collect", str(results / "elsewhere_results.json"), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    row = [line for line in table.splitlines() if line.startswith(name)][-1]
    why = elsewhere.last_clause(there["error"]["message"])  # no GPU (or no driver) here
    assert f"device: {there['error']['message'][:40]}" in row  # the measuring side, there
    assert f"run: {why}" in row  # what measure() recorded of it, through its own code
    assert row.rstrip().endswith("0.1469")  # last round's H200 figure for it
