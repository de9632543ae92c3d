"""How the tuning job builds its candidates (`mlc_lab.tvm.tuning.build`): the cheaper link gives the
same machine code, and it runs; a candidate built before is not compiled again."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tvm
from tvm_ffi import structural_equal

import mlc_lab
from mlc_lab.tvm.measure import build
from mlc_lab.tvm.tuning import job as tuning
from mlc_lab.tvm.tuning.build import BuiltCandidates, InProcessBuilder, export_shared, fast_build
from tests.fixtures.programs import matmul


def _candidate(n: int = 64, factor: int = 16):
    s = mlc_lab.Session(matmul(n))
    _, j1 = s.apply("split", "C/j", factors=[None, factor])
    s.apply("vectorize", j1)
    s.apply("parallel", "C/i")
    _, one = build.single_function_module(s.module, s.func_name)
    return one, tvm.target.Target(tuning.tuning_target("cpu"))


def _disassembly(path: str) -> dict[str, list[str]]:
    """Each function's instructions, with what only the layout of the library decides (addresses,
    rip-relative offsets, the nearest symbol objdump names in a comment) left out."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True, check=True
    ).stdout
    funcs: dict[str, list[str]] = {}
    name = None
    for line in out.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            name = head.group(1)
            funcs[name] = []
        elif name and ":\t" in line:
            ins = line.split(":\t", 1)[1]
            ins = re.sub(r"\s*#.*$", "", ins)
            ins = re.sub(r"[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>", r"<\1>", ins)
            ins = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "REL(%rip)", ins)
            funcs[name].append(ins.strip())
    return funcs


@pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump is not installed")
def test_candidates_linked_by_ld_carry_the_machine_code_of_tvms_own_link(tmp_path):
    one, target = _candidate()
    rt = fast_build(one, target)
    ours = export_shared(rt)
    theirs = str(tmp_path / "default_link.so")
    rt.export_library(theirs)  # TVM's default: the g++ driver
    mine, reference = _disassembly(ours), _disassembly(theirs)
    kernels = [f for f in mine if "@plt" not in f and not f.startswith("_")] + ["__tvm_ffi_main"]
    assert any("compute" in f for f in kernels), sorted(mine)
    for f in mine:
        if "@plt" in f:
            continue
        assert mine[f] == reference[f], f
    assert any(re.match(r"v(fmadd|mul|add)\w*ps", ins) for f in kernels for ins in mine.get(f, []))

    loaded = tvm.runtime.load_module(ours)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    args = [tvm.runtime.tensor(a), tvm.runtime.tensor(b), tvm.runtime.tensor(np.zeros((64, 64), "float32"))]
    loaded[loaded.entry_name](*args)
    np.testing.assert_allclose(args[2].numpy(), a @ b, rtol=1e-4, atol=1e-4)
    shutil.rmtree(os.path.dirname(ours))


def test_a_candidate_built_before_is_linked_not_compiled_again():
    from tvm.s_tir import meta_schedule as ms

    one, target = _candidate()
    twin, _ = _candidate()  # another module object, structurally the same program
    other, _ = _candidate(factor=8)
    built = BuiltCandidates()
    compiled = []

    def compile_(mod):
        compiled.append(mod)
        return export_shared(fast_build(mod, target))

    first = built.get_or_build(one, target, lambda: compile_(one))
    again = built.get_or_build(twin, target, lambda: compile_(twin))
    third = built.get_or_build(other, target, lambda: compile_(other))
    assert len(compiled) == 2 and built.hits == 1
    assert os.path.dirname(first) != os.path.dirname(again)  # each trial owns its artifact directory
    assert open(first, "rb").read() == open(again, "rb").read() != open(third, "rb").read()
    # meta_schedule removes each trial's directory after measuring it: the twin's stays usable
    shutil.rmtree(os.path.dirname(first))
    loaded = tvm.runtime.load_module(again)
    a, b = (np.random.default_rng(1).standard_normal((64, 64)).astype("float32") for _ in range(2))
    args = [tvm.runtime.tensor(a), tvm.runtime.tensor(b), tvm.runtime.tensor(np.zeros((64, 64), "float32"))]
    loaded[loaded.entry_name](*args)
    np.testing.assert_allclose(args[2].numpy(), a @ b, rtol=1e-4, atol=1e-4)

    # twins in one batch, built on two threads: one compile, two libraries
    builder = InProcessBuilder(max_workers=2, built=built)
    fresh, _ = _candidate(factor=4)
    fresh_twin, _ = _candidate(factor=4)
    results = builder.build([ms.builder.BuilderInput(fresh, target), ms.builder.BuilderInput(fresh_twin, target)])
    assert [r.error_msg for r in results] == [None, None] and built.hits == 2
    assert len({os.path.dirname(r.artifact_path) for r in results}) == 2
    built.close()
    assert not os.path.exists(built.dir)
    for path in [again, third, *(r.artifact_path for r in results)]:  # what RemoveBuildArtifact would do
        shutil.rmtree(os.path.dirname(path))


def test_the_measuring_process_started_before_tvm_is_the_one_the_runner_uses(tmp_path, monkeypatch):
    from mlc_lab.tvm.tuning import runner_process

    for name in runner_process.runner_env(str(tmp_path)):
        monkeypatch.setenv(name, "unset")  # restored afterwards
    (tmp_path / runner_process.JOB_FILE).write_text(json.dumps({"runner": "rpc://host:9190/key"}))
    assert not runner_process.prestart(str(tmp_path))  # an RPC job measures elsewhere
    (tmp_path / runner_process.JOB_FILE).write_text(json.dumps({"runner": "local"}))
    assert runner_process.prestart(str(tmp_path))
    pid = runner_process._prestarted[0].pid
    assert os.environ["MLC_LAB_BEST_FILE"] == str(tmp_path / runner_process.BEST_FILE)
    runner = tuning.make_runner({"kind": "local"})
    try:
        assert runner_process._prestarted is None
        assert runner.pool.submit(os.getpid).result() == pid  # the adopted process runs the pool's work
    finally:
        runner.pool.shutdown()
    # with none pre-started, the pool starts its own as before
    runner = tuning.make_runner({"kind": "local"})
    try:
        assert runner.pool.submit(os.getpid).result() not in (pid, os.getpid())
    finally:
        runner.pool.shutdown()


FEATURES_CHECK = """
import json
import numpy as np
import tvm
from tvm_ffi import structural_equal
from tvm.s_tir import meta_schedule as ms
import mlc_lab
from mlc_lab.tvm.tuning import job as tuning
from mlc_lab.tvm.tuning import model as tuning_model
from tests.fixtures.programs import matmul

target = tvm.target.Target(tuning.tuning_target("cpu"))
tuning.import_tensor_intrinsics(target)  # TuneContext would parse every backend's intrinsics otherwise
task_mod = ms.tune_context._normalize_mod(mlc_lab.load(matmul(64))["main"])
context = ms.TuneContext(mod=task_mod, target=target, task_name="main", num_threads=1)


def candidate(factor):
    sch = tvm.s_tir.Schedule(task_mod)
    j = sch.get_loops(sch.get_sblock("C"))[1]
    sch.split(j, factors=[None, factor])
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(task_mod["main"]))


class Counting:
    def __init__(self, inner):
        self.inner, self.extracted = inner, 0

    def extract_from(self, ctx, cands):
        self.extracted += len(cands)
        return self.inner.extract_from(ctx, cands)


direct = ms.feature_extractor.PerStoreFeature()
counting = Counting(ms.feature_extractor.PerStoreFeature())
cached = tuning_model.CachedFeatures(counting)
a, b, c = candidate(16), candidate(8), candidate(4)
batch = [a, b, candidate(16), a, c]  # a twin (another schedule, the same program) and a repeat
got = cached.extract_from(context, batch)
first = {"extracted": counting.extracted, "hits": cached.hits}
expected = direct.extract_from(context, batch)
same = [bool(np.array_equal(x.numpy(), y.numpy())) for x, y in zip(got, expected)]
differ = not np.array_equal(got[0].numpy(), got[1].numpy())
again = cached.extract_from(context, [c, candidate(2), b])
print(json.dumps({"first": first, "same": same, "differ": differ, "extracted": counting.extracted,
                  "hits": cached.hits, "again_same": bool(np.array_equal(again[0].numpy(), expected[4].numpy()))}))
"""


def test_the_cost_model_extracts_each_distinct_candidates_features_once():
    # in a subprocess: loading only some tensor intrinsics must not leak into this test process
    out = subprocess.run(
        [sys.executable, "-c", FEATURES_CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["first"] == {"extracted": 3, "hits": 2}  # a, b, c once; the twin and the repeat from the cache
    assert r["same"] == [True] * 5  # the very features a direct extraction gives
    assert r["differ"]  # different programs, different features
    assert r["extracted"] == 4 and r["hits"] == 4 and r["again_same"]


# ---- the fast inspect.stack, which tests/conftest.py installs in the tests' own process ----------


def _decorated_programs() -> list:
    """Programs that TVMScript's decorators parse from Python source: a module class and a lone
    function, each reading variables of the enclosing function (found through the stack), and the
    access-analysis fixtures built the same way."""
    from tvm.script import ir as I
    from tvm.script import tirx as T

    from tests.fixtures import programs_access as P

    n, scale = 8, 2.0

    @I.ir_module
    class Module:
        @T.prim_func(s_tir=True)
        def main(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
            for i in range(n):
                with T.sblock("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi] * T.float32(scale)

    @T.prim_func(s_tir=True)
    def lone(A: T.Buffer((n, n), "float32")):
        for i, j in T.grid(n, n):
            with T.sblock("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = A[vi, vj] + T.float32(scale)

    return [Module, lone, P.mm_relu(16), P.mm_relu(8, 12, 4), P.matmul(16), P.vector_add(16)]


def test_the_fast_stack_of_the_tests_process_parses_as_tvms_own(monkeypatch):
    import importlib
    import inspect

    entries = [importlib.import_module(n) for n in ("tvm.tirx.script.parser.entry", "tvm.script.parser.ir.entry")]
    assert all(m.inspect is not inspect for m in entries), "tests/conftest.py did not install the fast stack"
    fast = _decorated_programs()
    for m in entries:
        monkeypatch.setattr(m, "inspect", inspect)  # TVM's own inspect.stack, as a kernel has it
    stock = _decorated_programs()
    assert len(fast) == len(stock) == 6
    for a, b in zip(fast, stock, strict=True):
        assert structural_equal(a, b), (a.script(), b.script())
