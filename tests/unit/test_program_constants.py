"""Lab files as students write them: sizes as module constants above the TVMScript function.

The constants are read from the syntax tree, never by running the file; anything that cannot be read
so is refused with the line that binds it and the way out (pass the function object).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mlc_lab
from mlc_lab import Session
from mlc_lab.errors import LoadError
from mlc_lab.tvm.program import prim_func_names, structural_equal
from tests.fixtures.programs import GEMM_RELU_ADD_MNK

ROOT = Path(__file__).resolve().parents[2]

HEADER = "import tvm\nfrom tvm.script import tirx as T\n"

BODY = GEMM_RELU_ADD_MNK


def lab(constants: str, body: str = BODY) -> str:
    return HEADER + constants + "\n" + body


def literal(m: int, n: int, k: int) -> str:
    """The same program with its sizes written in place: what the constants must give."""
    return HEADER + BODY.replace("(M, K)", f"({m}, {k})").replace("(K, N)", f"({k}, {n})").replace(
        "(M, N)", f"({m}, {n})"
    ).replace("T.grid(M, N, K)", f"T.grid({m}, {n}, {k})").replace("T.grid(M, N)", f"T.grid({m}, {n})")


def shapes(mod) -> list[tuple[int, ...]]:
    """The parameters' shapes as the printed signature gives them."""
    import re

    script = mod[prim_func_names(mod)[0]].script()
    return [
        tuple(int(x) for x in dims.split(",") if x.strip())
        for dims in re.findall(r"\w+: T\.Buffer\(\(([\d, ]+)\)", script)
    ]


@pytest.mark.parametrize(
    "constants, mnk",
    [
        ("M = N = K = 64", (64, 64, 64)),  # chained assignment, as the lab
        ("M, N, K = 32, 48, 16", (32, 48, 16)),  # tuple unpacking
        ("(M, N), K = (32, 48), 16", (32, 48, 16)),  # nested unpacking
        ("BASE = 16\nM = BASE * 4\nN = 2 ** 5\nK = (M + N) // 3 - 8 % 5", (64, 32, 29)),  # arithmetic
        ("M: int = 64\nN = 32\nN *= 2\nK = -(-16)", (64, 64, 16)),  # annotated, augmented, unary minus
        ("M = N = K = 8\nM = N = K = 64", (64, 64, 64)),  # the last assignment above the function wins
        ("SIZE = (64, 32, 16)\nM, N, K = SIZE", (64, 32, 16)),  # unpacking a named tuple of constants
        ("import numpy as np\nx = np.zeros(3)\nM = N = K = 32", (32, 32, 32)),  # unreadable but unused: fine
    ],
)
def test_module_constants_are_read_without_running_the_file(tmp_path, constants, mnk):
    path = tmp_path / "gemm_relu_add.py"
    path.write_text(lab(constants) + "\nraise SystemExit('the file was run')\n")
    mod = mlc_lab.load(str(path))
    m, n, k = mnk
    assert shapes(mod) == [(m, k), (k, n), (m, n), (m, n)]
    assert structural_equal(mod, mlc_lab.load(literal(m, n, k)))
    s = Session(path)
    assert 'T.sblock("Y")' in s.script and f"T.grid({m}, {n}, {k})" in s.script


def test_string_and_tuple_constants_in_a_signature():
    text = (
        HEADER
        + 'SHAPE = (16, 16)\nDT = "float32"\n'
        + """
@T.prim_func(s_tir=True)
def add_one(A: T.Buffer(SHAPE, DT), B: T.Buffer(SHAPE, DT)):
    for i, j in T.grid(16, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""
    )
    mod = mlc_lab.load(text)
    assert shapes(mod) == [(16, 16), (16, 16)]
    assert 'A: T.Buffer((16, 16), "float32")' in mod["main"].script()


@pytest.mark.parametrize(
    "constants, bad_line, why",
    [
        ("import sys\nM = N = K = int(sys.argv[1])", 4, "`int(sys.argv[1])` is not a literal"),
        ("from shapes import M, N, K", 3, "it is imported"),
        ("M = N = 64\nif True:\n    K = 64", 5, "inside a `if` statement"),
        ("import os\nM = N = 64\nK = M + len(os.sep)", 5, "`len(os.sep)` is not a literal"),
        ("import os\nBASE = os.cpu_count()\nM = N = K = BASE * 4", 5, "uses `BASE`, which is not a constant (line 4)"),
        ("M = N = 64\nK = 'a' * 3", 4, "arithmetic is read on numbers only"),
        ("M = N = 64\nK = 2 ** 10 ** 9", 4, "is not a size"),
        ("M = N = 64\ndef K():\n    return 64", 4, "it is a function"),
    ],
)
def test_a_constant_that_cannot_be_read_is_refused_with_its_line_and_the_way_out(tmp_path, constants, bad_line, why):
    path = tmp_path / "lab.py"
    path.write_text(lab(constants))
    with pytest.raises(LoadError) as info:
        mlc_lab.load(str(path))
    err = info.value
    message = str(err)
    assert message.startswith(f"{path}, line {bad_line}: ") and "cannot be read without running the file" in message
    assert why in message and "used by gemm_relu_add on line" in message
    assert err.line == bad_line
    assert "mlc_lab.load(gemm_relu_add)" in message  # the way out: pass the function object


def test_a_name_defined_nowhere_says_how_to_get_past_it():
    with pytest.raises(LoadError) as info:
        mlc_lab.load(lab("M = N = 64"))  # K is missing
    message = str(info.value)
    assert "name 'K' is not defined" in message
    assert "define `K` above the function as a constant" in message and "pass the function object" in message


def test_a_constant_assigned_after_the_function_is_not_used():
    # Python reads the signature when the def runs: a constant below it does not exist yet.
    with pytest.raises(LoadError, match="name 'K' is not defined"):
        mlc_lab.load(lab("M = N = 64") + "\nK = 64\n")


def test_the_function_object_itself_still_loads():
    mod = mlc_lab.load(lab("M = N = K = 32"))
    assert structural_equal(mlc_lab.load(mod["main"]), mod)


def _cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


@pytest.fixture()
def lab_file(tmp_path):
    path = tmp_path / "gemm_relu_add.py"
    path.write_text(lab("M = N = K = 32"))
    trace = tmp_path / "trace.py"
    trace.write_text(
        "def apply_trace(sch):\n"
        '  b0 = sch.get_sblock(name="Y", func_name="main")\n'
        "  l1, l2, l3 = sch.get_loops(block=b0)\n"
        "  l4, l5 = sch.split(loop=l2, factors=[None, 8])\n"
    )
    return path, trace


def test_cli_show_lower_replay_and_bench_load_a_lab_with_constants(lab_file):
    path, trace = lab_file
    r = _cli("show", str(path))
    assert r.returncode == 0, r.stderr
    assert 'A: T.Buffer((32, 32), "float32")' in r.stdout
    r = _cli("replay", str(path), "--trace", str(trace))
    assert r.returncode == 0, r.stderr
    assert "for i, j_0, j_1, k in T.grid(32, 4, 8, 32):" in r.stdout
    r = _cli("lower", str(path), "--trace", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["passes"]
    r = _cli("bench", str(path), "--trace", str(trace), "--repeats", "2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["correct"] is True and out["func"] == "main"


def test_cli_tune_loads_a_lab_with_constants(lab_file, tmp_path):
    path, _ = lab_file
    r = _cli("tune", str(path), "--trials", "2", "--per-iter", "2", "--work-dir", str(tmp_path / "work"), "--seed", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["trials"] >= 1 and out["best_latency_s"] is not None


def test_cli_refusal_names_the_file_and_line(tmp_path):
    path = tmp_path / "lab.py"
    path.write_text(lab("import sys\nM = N = K = int(sys.argv[1])"))
    for command in ("show", "replay", "bench", "lower"):
        extra = ["--trace", str(path)] if command == "replay" else []
        r = _cli(command, str(path), *extra)
        assert r.returncode == 2, (command, r.stderr)
        assert "Traceback" not in r.stderr
        assert (
            re.search(r"lab\.py[:,] line 4: `M` cannot be read", r.stderr)
            and "`M = N = K = int(sys.argv[1])`" in r.stderr
        )
        assert "mlc_lab.load(gemm_relu_add)" in r.stderr
