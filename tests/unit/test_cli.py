"""The mlc-lab command, run as a real subprocess: output, JSON shape, and exit status 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.programs import MM_RELU, MM_RELU_LEGACY

ROOT = Path(__file__).resolve().parents[2]


def mlc_lab(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )


@pytest.fixture()
def files(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(MM_RELU)
    legacy = tmp_path / "legacy.py"
    legacy.write_text(MM_RELU_LEGACY)
    trace = tmp_path / "trace.py"
    trace.write_text(
        "def apply_trace(sch):\n"
        '  b0 = sch.get_sblock(name="Y", func_name="mm_relu")\n'
        "  l1, l2, l3 = sch.get_loops(block=b0)\n"
        "  l4, l5 = sch.split(loop=l2, factors=[None, 4])\n"
        "  sch.reorder(l1, l4, l3, l5)\n"
    )
    return tmp_path


def test_show_prints_modern_script_of_legacy_code(files):
    r = mlc_lab("show", str(files / "legacy.py"))
    assert r.returncode == 0, r.stderr
    assert "@T.prim_func(s_tir=True)" in r.stdout and 'T.sblock("Y")' in r.stdout
    r = mlc_lab("show", str(files / "prog.py"), "--func", "mm_relu")
    assert r.returncode == 0 and r.stdout.lstrip().startswith("# from tvm.script import tirx as T")


def test_replay_prints_script_and_json(files):
    r = mlc_lab("replay", str(files / "prog.py"), "--trace", str(files / "trace.py"))
    assert r.returncode == 0, r.stderr
    assert "for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):" in r.stdout
    r = mlc_lab("replay", str(files / "prog.py"), "--trace", str(files / "trace.py"), "--json")
    out = json.loads(r.stdout)
    assert set(out) >= {"script", "trace", "trace_json", "loop_tree"}
    assert out["loop_tree"]["func"] == "mm_relu"
    (files / "trace.json").write_text(json.dumps(out["trace_json"]))
    r2 = mlc_lab("replay", str(files / "prog.py"), "--trace", str(files / "trace.json"))
    assert r2.returncode == 0 and r2.stdout.strip() == out["script"].strip()


def test_convert_prints_converted_code(files):
    r = mlc_lab("convert", str(files / "legacy.py"))
    assert r.returncode == 0, r.stderr
    assert "from tvm.script import tirx as T" in r.stdout and "T.sblock(" in r.stdout
    assert "T.block(" not in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["show", "{d}/missing.py"], "missing.py: no such file"),
        (["show", "{d}/broken.py"], "broken.py"),
        (["replay", "{d}/prog.py", "--trace", "{d}/evil.py"], "evil.py, line 1"),
        (["replay", "{d}/prog.py", "--trace", "{d}/bad_step.py"], "bad_step.py, line 3"),
        (["convert", "{d}/notpython.py"], "notpython.py"),
        (["show", "{d}/prog.py", "--func", "nope"], "no TensorIR function named 'nope'"),
    ],
)
def test_bad_input_exits_2_with_file_and_line_never_a_traceback(files, args, needle):
    (files / "broken.py").write_text(MM_RELU.replace("T.axis.reduce(128, k)", "T.axis.reduce(128, kk)"))
    (files / "evil.py").write_text("__import__('os').system('echo pwned')\n")
    (files / "bad_step.py").write_text(
        'b0 = sch.get_sblock(name="Y", func_name="mm_relu")\nl1, l2, l3 = sch.get_loops(block=b0)\n'
        "sch.vectorize(loop=l3)\n"
    )
    (files / "notpython.py").write_text("def (:\n")
    r = mlc_lab(*[a.format(d=files) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and "pwned" not in r.stdout
