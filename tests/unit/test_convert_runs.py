"""Every legacy call the course makes converts AND runs on TVM 0.27; valid 0.27 code converts to itself.

Each snippet is a small program in the course's spelling (a 16x16 mm_relu). The converted
snippets run in one child interpreter, each from its own file (TVMScript reads its source from
the file) and in its own namespace; the test of each snippet reads its own verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlc_lab.text.compat import MARKER, convert, looks_legacy
from mlc_lab.text.compat_notebook import convert_notebook

ROOT = Path(__file__).resolve().parents[2]

LEGACY_HEADER = """
import numpy as np
import tvm
from tvm.script import tir as T


@tvm.script.ir_module
class MyModule:
    @T.prim_func
    def main(A: T.Buffer[(16, 16), "float32"], B: T.Buffer[(16, 16), "float32"],
             C: T.Buffer[(16, 16), "float32"]):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        Y = T.alloc_buffer((16, 16), dtype="float32")
        for i, j, k in T.grid(16, 16, 16):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(16, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


a_np = np.random.rand(16, 16).astype("float32")
b_np = np.random.rand(16, 16).astype("float32")
c_ref = np.maximum(a_np @ b_np, 0)
"""

GPU_SCHEDULE = """
sch = tvm.tir.Schedule(MyModule)
for name in ("Y", "C"):
    block = sch.get_block(name, func_name="main")
    loops = sch.get_loops(block)
    sch.bind(loops[0], "blockIdx.x")
    sch.bind(loops[1], "threadIdx.x")
"""

# The calls of the course (see /work/shared/course/catalog.md), one program each.
CALLS = {
    "schedule, get_block, split, reorder, decompose_reduction, trace": """
sch = tvm.tir.Schedule(MyModule)
block_Y = sch.get_block("Y", func_name="main")
i, j, k = sch.get_loops(block_Y)
j0, j1 = sch.split(j, factors=[None, 4])
sch.reorder(j0, k, j1)
sch.decompose_reduction(block_Y, k)
assert "Y_init" in sch.mod.script() and "get_sblock" in str(sch.trace)
""",
    "build, nd.array, nd.empty, call, time_evaluator": """
rt_lib = tvm.build(MyModule, target="llvm")
a_nd = tvm.nd.array(a_np)
b_nd = tvm.nd.array(b_np)
c_nd = tvm.nd.empty((16, 16), dtype="float32")
rt_lib["main"](a_nd, b_nd, c_nd)
np.testing.assert_allclose(c_nd.numpy(), c_ref, rtol=1e-5)
f_timer = rt_lib.time_evaluator("main", tvm.cpu())
assert f_timer(a_nd, b_nd, c_nd).mean > 0
""",
    "device from a target kind, entry_name": """
target = "llvm"
dev = tvm.device(target, 0)
lib = tvm.build(MyModule, target=target)
a_nd, b_nd = tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev)
c_nd = tvm.nd.empty((16, 16), "float32", dev)
assert lib.time_evaluator(lib.entry_name, dev, number=1)(a_nd, b_nd, c_nd).mean > 0
np.testing.assert_allclose(c_nd.numpy(), c_ref, rtol=1e-5)
""",
    "cuda source through imported_modules": GPU_SCHEDULE
    + """
rt_mod = tvm.build(sch.mod, target="cuda")
source = rt_mod.imported_modules[0].get_source()
assert "__global__" in source
""",
    "cuda source of a module a helper built": GPU_SCHEDULE
    + """
def build_for(mod, target):
    lib = tvm.build(mod, target=target)
    return lib


f = build_for(sch.mod, "cuda")
dev_module = f.imported_modules[0]
assert "__global__" in dev_module.get_source()
""",
    "a built module handed to other code keeps tvm.build": GPU_SCHEDULE
    + """
def kernel_source(lib):
    return lib.imported_modules[0].get_source()


rt_mod = tvm.build(sch.mod, target="cuda")
assert "__global__" in kernel_source(rt_mod)
assert "__global__" in rt_mod.imported_modules[0].get_source()
""",
    "from tvm import tir": """
from tvm import tir

sch = tir.Schedule(MyModule)
assert isinstance(tir.IntImm("int32", 3), tir.IntImm)
sch.get_block("C")
""",
    "BlockRV imported from tvm.tir.schedule": """
from tvm.tir.schedule import BlockRV, LoopRV


def first_loop(sch: tvm.tir.Schedule, block: BlockRV) -> LoopRV:
    return sch.get_loops(block)[0]


sch = tvm.tir.Schedule(MyModule)
block = sch.get_block("Y")
assert isinstance(block, BlockRV) and isinstance(block, tvm.tir.schedule.BlockRV)
assert isinstance(first_loop(sch, block), LoopRV)
""",
    "structural_equal, structural_hash": """
assert tvm.ir.structural_equal(MyModule, MyModule)
assert tvm.ir.structural_hash(MyModule) == tvm.ir.structural_hash(MyModule)
""",
    "register_func": """
@tvm.register_func("env.mlc_lab_add_one", override=True)
def add_one(x):
    return x + 1


assert tvm.get_global_func("env.mlc_lab_add_one")(41) == 42
""",
    "te.create_prim_func": """
from tvm import te

A = te.placeholder((16, 16), "float32", name="A")
B = te.placeholder((16, 16), "float32", name="B")
k = te.reduce_axis((0, 16), name="k")
Y = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
C = te.compute((16, 16), lambda i, j: te.max(Y[i, j], 0), name="C")
te_func = te.create_prim_func([A, B, C]).with_attr({"global_symbol": "mm_relu"})
lib = tvm.build(tvm.IRModule({"mm_relu": te_func}), target="llvm")
c_nd = tvm.nd.empty((16, 16), "float32")
lib["mm_relu"](tvm.nd.array(a_np), tvm.nd.array(b_np), c_nd)
np.testing.assert_allclose(c_nd.numpy(), c_ref, rtol=1e-5)
""",
}

# Code written for 0.27 (tvm.build still runs there, deprecated): convert must give it back as it is.
MODERN = {
    "evaluate.py with tvm.build and imports[0]": """
import numpy as np
import tvm
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i in T.thread_binding(64, thread="threadIdx.x"):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)


def build(func, target):
    return tvm.build(func, target=target)


@T.prim_func(s_tir=True)
def add_one_cpu(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)


f = build(add_one, "cuda")
assert "__global__" in f.imports[0].inspect_source()
lib = tvm.build(add_one_cpu, target="llvm")
a = tvm.runtime.tensor(np.zeros(64, "float32"))
b = tvm.runtime.empty((64,), "float32")
lib.time_evaluator(lib.entry_name, tvm.cpu(), number=1)(a, b)
np.testing.assert_allclose(b.numpy(), 1)
""",
    "tvm.compile and ex.mod": """
import numpy as np
import tvm
from tvm import s_tir
from tvm.s_tir.schedule import SBlockRV
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)


sch = s_tir.Schedule(add_one)
assert isinstance(sch.get_sblock("B"), SBlockRV)
ex = tvm.compile(sch.mod, target="llvm")
a, b = tvm.runtime.tensor(np.zeros(64, "float32")), tvm.runtime.empty((64,), "float32")
ex["main"](a, b)
assert ex.mod.time_evaluator("main", tvm.cpu(), number=1)(a, b).mean > 0
""",
}

HARNESS = textwrap.dedent("""
    import json, runpy, sys, traceback
    results = {}
    for path in sys.argv[1:]:
        try:
            runpy.run_path(path, run_name="__main__")
            results[path] = "ok"
        except BaseException:
            results[path] = traceback.format_exc()[-2500:]
    print("RESULTS " + json.dumps(results))
""")


def _converted_calls() -> dict[str, str]:
    return {name: convert(LEGACY_HEADER + body) for name, body in CALLS.items()}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, str]:
    """Run every converted call and every modern snippet (unconverted) in one child interpreter."""
    work = tmp_path_factory.mktemp("converted")
    files = {}
    programs = {
        **{f"call:{k}": v for k, v in _converted_calls().items()},
        **{f"modern:{k}": v for k, v in MODERN.items()},
    }
    for i, (name, text) in enumerate(programs.items()):
        path = work / f"snippet_{i}.py"
        path.write_text(text)
        files[str(path)] = name
    (work / "harness.py").write_text(HARNESS)
    proc = subprocess.run(
        [sys.executable, "harness.py", *files],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "TVM_NUM_THREADS": "1"},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    assert line, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {files[path]: verdict for path, verdict in json.loads(line[len("RESULTS ") :]).items()}


@pytest.mark.parametrize("name", list(CALLS))
def test_each_legacy_call_converts_and_runs(name, verdicts):
    legacy = LEGACY_HEADER + CALLS[name]
    converted = convert(legacy)
    assert looks_legacy(legacy) and MARKER not in converted
    assert convert(converted) == converted  # what convert writes is valid 0.27 code: it stays
    assert verdicts[f"call:{name}"] == "ok", verdicts[f"call:{name}"]


@pytest.mark.parametrize("name", list(MODERN))
def test_modern_code_converts_to_itself_and_runs(name, verdicts):
    assert convert(MODERN[name]) == MODERN[name]
    assert not looks_legacy(MODERN[name])
    assert verdicts[f"modern:{name}"] == "ok", verdicts[f"modern:{name}"]


def test_a_built_module_moves_to_compile_only_with_all_its_uses():
    converted = _converted_calls()
    helper = converted["cuda source of a module a helper built"]
    assert "lib = tvm.compile(mod, target=target)" in helper
    assert "dev_module = f.mod.imports[0]" in helper and "dev_module.inspect_source()" in helper
    handed_on = converted["a built module handed to other code keeps tvm.build"]
    # rt_mod goes into kernel_source(): it stays a runtime.Module, and only the names 0.27 lost change
    assert 'rt_mod = tvm.build(sch.mod, target="cuda")' in handed_on
    assert "rt_mod.imports[0].inspect_source()" in handed_on and "lib.imports[0].inspect_source()" in handed_on
    assert ".mod.imports" not in handed_on
    plain = converted["build, nd.array, nd.empty, call, time_evaluator"]
    assert 'rt_lib = tvm.compile(MyModule, target="llvm")' in plain
    assert 'rt_lib.mod.time_evaluator("main", tvm.cpu())' in plain and 'rt_lib["main"](' in plain


def test_block_rv_becomes_sblock_rv():
    converted = _converted_calls()["BlockRV imported from tvm.tir.schedule"]
    assert "from tvm.s_tir.schedule import SBlockRV, LoopRV" in converted
    assert "def first_loop(sch: tvm.s_tir.Schedule, block: SBlockRV) -> LoopRV:" in converted
    assert "isinstance(block, SBlockRV) and isinstance(block, tvm.s_tir.schedule.SBlockRV)" in converted
    assert "BlockRV" not in converted.replace("SBlockRV", "")
    half = "from tvm.s_tir.schedule import BlockRV\nx = tvm.s_tir.schedule.BlockRV\n"
    assert convert(half) == "from tvm.s_tir.schedule import SBlockRV\nx = tvm.s_tir.schedule.SBlockRV\n"
    assert convert("from tvm.tir.schedule import BlockRV as B\n") == "from tvm.s_tir.schedule import SBlockRV as B\n"


# --- notebooks ---------------------------------------------------------------------------------------


def _notebook(*cells: tuple[str, str]) -> str:
    return (
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": kind,
                        "metadata": {},
                        "source": text.splitlines(keepends=True),
                        **({"outputs": [], "execution_count": None} if kind == "code" else {}),
                    }
                    for kind, text in cells
                ],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )
        + "\n"
    )


LEGACY_NOTEBOOK = _notebook(
    ("markdown", "# Lab 1\nTensorIR with `T.block`."),
    ("code", LEGACY_HEADER.strip() + "\n"),
    ("code", "%%bash\necho not python: left as it is\n"),
    ("code", GPU_SCHEDULE.strip() + '\nrt_mod = tvm.build(sch.mod, target="cuda")\n'),
    ("code", "%time src = rt_mod.imported_modules[0].get_source()\nassert '__global__' in src\n"),
    ("code", 'print("nothing to change here")'),
)


def test_a_notebook_converts_cell_by_cell_following_modules_across_cells():
    text, report = convert_notebook(LEGACY_NOTEBOOK)
    nb = json.loads(text)
    cells = ["".join(c["source"]) for c in nb["cells"]]
    assert cells[0] == "# Lab 1\nTensorIR with `T.block`."  # markdown untouched
    assert "from tvm.script import tirx as T" in cells[1] and 'T.sblock("Y")' in cells[1]
    assert cells[2] == "%%bash\necho not python: left as it is\n"
    assert 'rt_mod = tvm.compile(sch.mod, target="cuda")' in cells[3]
    assert cells[4].startswith("%time src = rt_mod.mod.imports[0].inspect_source()")  # built in the cell above
    assert cells[5] == 'print("nothing to change here")'
    assert report.code_cells == 5 and report.changed == [2, 4, 5]
    assert report.skipped == [(3, "line 2: not valid Python (invalid syntax)")]
    assert convert_notebook(text) == (text, convert_notebook(text)[1])  # converted: nothing more to do
    assert convert_notebook(text)[1].changed == []


def test_a_valid_notebook_comes_back_byte_for_byte():
    modern = _notebook(("code", MODERN["evaluate.py with tvm.build and imports[0]"]), ("code", "x = (1,\n"))
    text, report = convert_notebook(modern)
    assert text == modern
    assert report.changed == [] and report.skipped[0][0] == 2 and "not valid Python" in report.skipped[0][1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_cli_converts_a_notebook_and_says_what_it_did(tmp_path):
    lab = tmp_path / "lab.ipynb"
    lab.write_text(LEGACY_NOTEBOOK)
    r = _cli("convert", str(lab))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(convert_notebook(LEGACY_NOTEBOOK)[0])
    assert "converted 3 of 5 code cell(s) (cells 2, 4, 5); cell 3 left as it is: line 2: not valid" in r.stderr
    out = tmp_path / "lab_027.ipynb"
    r = _cli("convert", str(lab), "-o", str(out))
    assert r.returncode == 0 and r.stdout == "" and json.loads(out.read_text())["nbformat"] == 4
    r = _cli("convert", str(out))
    assert r.returncode == 0 and r.stdout == out.read_text() and "nothing to convert" in r.stderr
    # the converted notebook's Python cells run, in order, as Jupyter would run them
    code = "\n".join(
        "".join(c["source"]).replace("%time ", "")
        for c in json.loads(out.read_text())["cells"]
        if c["cell_type"] == "code" and not "".join(c["source"]).startswith("%%")
    )
    script = tmp_path / "cells.py"
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    modern = tmp_path / "evaluate.py"
    modern.write_text(MODERN["evaluate.py with tvm.build and imports[0]"])
    r = _cli("convert", str(modern))
    assert r.returncode == 0 and r.stdout == modern.read_text() and "nothing to convert" in r.stderr
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    r = _cli("convert", str(bad))
    assert r.returncode == 2 and "bad.ipynb: not a notebook" in r.stderr and "Traceback" not in r.stderr
