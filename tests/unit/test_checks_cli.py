"""mlc-lab check: every applicable check and hazard, --json in the agreed shape, exit 0/1/2."""

from __future__ import annotations

import json

import pytest

from mlc_lab.cli import main
from mlc_lab.core.checks import CHECKS
from tests.labs import gpu_matmul as lab
from mlc_lab.tvm.course_programs import MM_RELU


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    (d / "gemm.py").write_text(lab.GEMM_RELU_ADD)
    (d / "mm_relu.py").write_text(MM_RELU)
    for name in ("reference", "copy_8x32_threads", "write_back_in_reduction"):
        (d / f"{name}.trace").write_text(lab.session_of(name).trace)
    (d / "broken.trace").write_text("sch.split(loop=l9, factors=[None, 4])\n")
    return d


def _run(capsys, *argv):
    rc = main(["check", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_reference_holds(capsys, files):
    rc, out, _ = _run(capsys, files / "gemm.py", "--trace", files / "reference.trace")
    assert rc == 0
    for name in (n for n, c in CHECKS.items() if c.target == "cuda"):
        assert f"ok    {name}" in out
    assert "all checks hold" in out


def test_a_check_that_cannot_judge_the_reference_is_a_warning(capsys, files):
    # the course's plain matmul has no epilogue: epilogue_fusion cannot judge it, and a teacher is told
    (files / "matmul.py").write_text(lab.MATMUL_1024)
    (files / "course.trace").write_text(lab.session_of("course_blocking_with_shared").trace)
    rc, out, err = _run(capsys, files / "matmul.py", "--trace", files / "course.trace")
    assert rc == 0  # could not judge is no failure
    assert "--    epilogue_fusion" in out and "all checks hold" in out
    assert err.startswith("warning: 1 check could not judge this program; a task on it can never pass")
    assert "epilogue_fusion: epilogue fusion does not apply to this program" in err
    rc, _out, err = _run(capsys, files / "gemm.py", "--trace", files / "reference.trace")
    assert rc == 0 and err == ""


def test_json_shape_and_failure_exit(capsys, files):
    rc, out, _ = _run(capsys, files / "gemm.py", "--trace", files / "write_back_in_reduction.trace", "--json")
    assert rc == 1
    data = json.loads(out)
    assert set(data) == {"checks", "hazards", "numeric"} and data["numeric"] is None
    assert all(set(c) == {"name", "ok", "verdict", "message", "where", "evidence"} for c in data["checks"])
    failed = [c for c in data["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["write_cache"] and failed[0]["evidence"]["writes_per_element"] == 128


def test_hazards_fail_with_arch_target(capsys, files):
    rc, out, _ = _run(
        capsys, files / "gemm.py", "--trace", files / "copy_8x32_threads.trace", "--target", "sm_75", "--json"
    )
    assert rc == 1
    kinds = {h["kind"] for h in json.loads(out)["hazards"]}
    assert kinds == {"thread_extent", "out_of_bounds"}


def test_cpu_program_gets_cpu_checks(capsys, files):
    rc, out, _ = _run(capsys, files / "mm_relu.py", "--only", "loop_order,parallel")
    assert rc == 1  # the plain program runs nothing in parallel
    assert "loop_order" in out and "FAIL  parallel" in out and "vectorize" not in out


@pytest.mark.parametrize(
    "argv,words",
    [
        (["{d}/gemm.py", "--target", "gpu"], "--target"),
        (["{d}/missing.py"], "no such file"),
        (["{d}/gemm.py", "--trace", "{d}/broken.trace"], "broken.trace"),
        (["{d}/gemm.py", "--only", "tiling"], "no check named 'tiling'"),
        (["{d}/mm_relu.py", "--numeric"], "--numeric"),
    ],
)
def test_bad_input_exits_2(capsys, files, argv, words):
    rc, out, err = _run(capsys, *[a.format(d=files) for a in argv])
    assert rc == 2 and words in err and "Traceback" not in err


@pytest.mark.usefixtures("kernels_only_in_the_sandbox")  # a hand-in's kernel: in the sandbox only
def test_numeric_runs_the_kernel(capsys, files):
    rc, out, _ = _run(capsys, files / "gemm.py", "--trace", files / "reference.trace", "--numeric", "--json")
    data = json.loads(out)
    assert rc == 0 and data["numeric"]["ok"] is True
    assert set(data["numeric"]) == {"ok", "verdict", "message", "max_error", "shape", "sizes", "engine"}
    assert data["numeric"]["verdict"] == "match" and data["numeric"]["sizes"] == {"2048": 128}
    assert data["numeric"]["shape"]["D"] == [128, 128]
