"""Session.lower: the passes tvm.compile runs (checked against TVM itself), the code, the facts.

Acceptance of issue 10: on the chapter-2 mm_relu with j_1 of 16, the facts say whether j_1's body
is scalar or vector before and after vectorize(j_1), with the register width and the reason when a
16-wide loop is done in 8-wide halves; the CLI's --json gives the same counts.
"""

from __future__ import annotations

import json
import shutil

import pytest
import tvm

from mlc_lab import Session
from mlc_lab.core.lowering import codefacts as cf
from mlc_lab.errors import MlcLabError
from mlc_lab.tvm.measure.build import resolve_target
from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU
from tests.unit.test_cli import mlc_lab

WRAPPERS = {"sequential", "_pipeline"}


def tvm_pass_names(session: Session, target: str) -> list[str]:
    """The passes tvm.compile runs, as TVM reports them to a bare instrument (the oracle)."""
    names: list[str] = []

    @tvm.instrument.pass_instrument
    class Names:
        def run_before_pass(self, mod, info):
            if info.name not in WRAPPERS:
                names.append(str(info.name))

    with tvm.transform.PassContext(instruments=[Names()]):
        tvm.compile(session.module, target=resolve_target(target))
    return names


def tvm_printed_changes(session: Session, target: str) -> list[bool]:
    """Per pass tvm.compile runs, in the order they start: does TVM's printer show a different
    module after it? (The oracle for changed / no-op; the text is taken before the pass runs, as
    some passes change the module in place.)"""
    changed: list[bool] = []
    stack: list[tuple[int, str]] = []

    @tvm.instrument.pass_instrument
    class Printed:
        def run_before_pass(self, mod, info):
            if info.name not in WRAPPERS:
                stack.append((len(changed), mod.script()))
                changed.append(False)

        def run_after_pass(self, mod, info):
            if info.name not in WRAPPERS:
                index, text = stack.pop()
                changed[index] = mod.script() != text

    with tvm.transform.PassContext(instruments=[Printed()]):
        tvm.compile(session.module, target=resolve_target(target))
    return changed


def chapter2_j1(factor: int = 16) -> tuple[Session, str]:
    s = Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, factor])
    s.apply("reorder", "Y/i", j0, "k", j1)
    return s, j1


@pytest.fixture(scope="module")
def steps():
    s, j1 = chapter2_j1()
    before = s.lower()
    s.apply("vectorize", j1)
    after = s.lower()
    return s, before, after


def test_cpu_pass_list_is_the_one_tvm_runs(steps):
    s, before, after = steps
    assert [p.name for p in after.passes] == tvm_pass_names(s, "cpu")
    # the finalization passes TVM's own pipeline object lists, in the host phase, in order
    _, finalize_host, _ = tvm.tirx.get_default_tir_pipeline(resolve_target("cpu"))
    expected_host = [p.info.name for p in finalize_host().passes]
    assert [p.name for p in after.passes if p.phase == "host"] == expected_host
    assert {p.status for p in after.passes} <= {"changed", "no-op"}


def test_each_changed_pass_has_its_script_and_vectorize_loop_is_what_changed_the_loop(steps):
    _, before, after = steps
    for low in (before, after):
        for p in low.passes:
            assert (p.script is not None) == (p.status == "changed"), p.name
    (vec_before,) = before.passes_named("VectorizeLoop")
    (vec_after,) = after.passes_named("tirx.VectorizeLoop")
    assert vec_before.status == "no-op"  # nothing marked vectorized yet
    assert vec_after.status == "changed"
    assert "T.vectorized(16)" in after.script_before(vec_after)
    assert "T.Ramp" in after.script_after(vec_after) and "T.vectorized" not in after.script_after(vec_after)
    with pytest.raises(MlcLabError, match="no pass named"):
        after.passes_named("NoSuchPass")


def test_a_pass_is_changed_when_tvm_prints_a_different_module_after_it(steps):
    s, _, after = steps
    printed = tvm_printed_changes(s, "cpu")
    assert len(printed) == len(after.passes)
    for p, text_changed in zip(after.passes, printed):
        if text_changed:
            assert p.status == "changed", p.name
        if p.status == "changed" and p.depth == 0:  # a change the printer does not show is said so
            same = after.script_after(p) == after.script_before(p)
            assert same == ("the printed TVMScript is the same" in p.note), p.name
    # AnnotateEntryFunc changes the module in place (same object): still reported as changed
    (entry,) = after.passes_named("AnnotateEntryFunc")
    assert entry.status == "changed" and "tirx.is_entry_func" in after.script_after(entry)


def test_j1_scalar_or_vector_before_and_after_vectorize(steps):
    _, before, after = steps
    b, a = before.loop("j_1"), after.loop("j_1")
    assert b.kind == "serial" and a.kind == "vectorized"
    # after vectorize: packed FMAs on ymm or zmm, and the width adds up to the 16 lanes asked for
    assert a.is_vector and a.vector_fma > 0 and a.register in ("ymm", "zmm")
    assert a.vector_width == {"ymm": 8, "zmm": 16}[a.register]
    assert a.scalar_fma == 0
    assert a.verdict.startswith("j_1 vectorized:")
    if a.register == "ymm":  # 16 lanes in 8-wide halves: the verdict must say why
        assert "two halves of 8" in a.verdict
    # before: either scalar, or LLVM vectorized it on its own (and the verdict says which)
    if b.is_vector:
        assert "LLVM vectorized it on its own" in b.verdict
        if b.register == "ymm" and "prefer-256-bit" in before.cpu_features:
            assert "prefer-vector-width=256" in b.verdict
    else:
        assert b.scalar_fma > 0 and "scalar" in b.verdict
    assert a.verdict in after.verdict
    # the loop's instructions are found again in the assembly text
    asm = after.asm_of("j_1")
    assert "vfmadd" in asm and f"%{a.register}" in asm
    # and in the LLVM IR, through the instructions' debug locations: 16-lane float operations
    ir = after.llvm_ir.splitlines()
    assert a.ir_lines and any("<16 x float>" in ir[n - 1] for n in a.ir_lines)


def test_the_excerpt_shows_the_first_packed_fma_of_j1_on_this_cpu(steps):
    _, _, after = steps
    excerpt = after.asm_around_first("j_1", before=2, after=2)
    assert excerpt is not None  # the verdict above says j_1 has packed FMAs
    lines = excerpt.splitlines()
    marked = [line for line in lines if line.startswith("=> ")]
    assert len(marked) == 1 and len(lines) <= 5
    (insn,) = cf.parse_asm("\t" + marked[0][3:] + "\n")
    assert insn.klass == "vector_fma" and insn.lanes > 1


# Zen 4's shape of j_1 (LLVM's znver4 schedule loads eight vectors before the first FMA)
ZEN4_ASM = "\n".join(
    ["\t.loc\t1 7 0"]
    + [f"\tvmovaps\t{32 * n}(%rax), %zmm{n}" for n in range(8)]
    + ["\tvfmadd213ps\t(%rcx), %zmm9, %zmm0", "\tvmovaps\t%zmm0, (%rdx)", "\t.loc\t1 9 0", "\tretq"]
)


def _one_loop_lowering(asm: str):
    from mlc_lab.core.lowering import Lowering

    facts = cf.loop_facts(
        [{"name": "j_1", "line": 7, "end_line": 8, "loop_kind": "vectorized", "innermost": True}], cf.parse_asm(asm)
    )
    return Lowering(target="llvm", kind="cpu", func_name="main", script="", passes=[], ok=True, asm=asm, loops=facts)


def test_the_excerpt_finds_the_fma_wherever_llvm_scheduled_it():
    low = _one_loop_lowering(ZEN4_ASM)
    assert "vfmadd" not in "\n".join(low.asm_of("j_1").splitlines()[:8])  # a fixed head of the listing misses it
    excerpt = low.asm_around_first("j_1", before=3, after=1).splitlines()
    assert excerpt[3] == "=> vfmadd213ps\t(%rcx), %zmm9, %zmm0" and len(excerpt) == 5
    assert excerpt[0].strip().startswith("vmovaps") and excerpt[4].strip().startswith("vmovaps")
    no_fma = _one_loop_lowering(ZEN4_ASM.replace("vfmadd213ps", "vaddps"))
    assert no_fma.asm_around_first("j_1") is None
    assert no_fma.asm_around_first("j_1", "vector_arith").startswith("   vmovaps")


def test_cli_json_gives_the_same_counts(steps, tmp_path):
    s, _, after = steps
    prog = tmp_path / "prog.py"
    prog.write_text(MM_RELU)
    trace = tmp_path / "trace.py"
    trace.write_text(s.trace)
    r = mlc_lab("lower", str(prog), "--trace", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    j1 = next(f for f in out["loops"] if f["loop"] == "j_1")
    mine = after.loop("j_1")
    for key in ("vector_fma", "scalar_fma", "vector_loads", "vector_stores", "vector_width", "register", "kind"):
        assert j1[key] == getattr(mine, key), key
    assert [p["name"] for p in out["passes"]] == [p.name for p in after.passes]
    assert out["verdict"] == after.verdict
    r = mlc_lab("lower", str(prog), "--trace", str(trace), "--pass", "VectorizeLoop")
    assert r.returncode == 0 and "+" in r.stdout and "T.Ramp" in r.stdout
    r = mlc_lab("lower", str(prog), "--trace", str(trace), "--asm")
    assert r.returncode == 0 and "vfmadd" in r.stdout
    r = mlc_lab("lower", str(prog), "--llvm", "--target", "cuda")
    assert r.returncode == 2 and "--llvm" in r.stderr and "Traceback" not in r.stderr


def test_a_strided_vectorized_loop_is_explained():
    s = Session(MM_RELU)
    s.apply("reorder", "C/j", "C/i")
    s.apply("vectorize", "C/i")
    f = s.lower().loop("C/i")
    assert f.kind == "vectorized" and "stride 128" in f.verdict


def test_lowering_is_cached_per_step_and_target(steps):
    s, _, after = steps
    assert s.lower() is after
    with pytest.raises(MlcLabError, match="compiles for the CPU or for CUDA, not for 'opencl'"):
        s.lower(target="opencl")
    with pytest.raises(
        MlcLabError, match="'sm_' is not a target lower.. knows: give 'cpu', 'cuda', a CUDA architecture"
    ):
        s.lower(target="sm_")


def test_a_failing_compile_names_where_it_failed():
    low = Session(GPU_TWO_BLOCKS).lower(target="cpu")  # thread-bound loops do not build for a CPU
    assert not low.ok and low.error
    assert low.failed and low.failed[-1].error
    assert low.verdict.startswith("the step does not compile") and "target='cuda'" in low.verdict


def test_cuda_pass_list_kernels_and_ptx():
    s = Session(GPU_TWO_BLOCKS)
    low = s.lower(target="cuda")
    assert low.ok and low.kind == "cuda"
    assert [p.name for p in low.passes] == tvm_pass_names(s, "cuda")
    _, _, finalize_device = tvm.tirx.get_default_tir_pipeline(resolve_target("cuda"))
    assert [p.name for p in low.passes if p.phase == "device"] == [p.info.name for p in finalize_device().passes]
    (split,) = low.passes_named("SplitHostDevice")
    assert split.status == "changed"  # the kernels leave the host function here
    assert "__global__" in low.cuda_source
    assert low.cuda_loop_lines == {}  # every loop of this program is bound to a GPU thread axis
    if shutil.which("nvcc") and shutil.which("ptxas"):
        assert low.ptx and ".entry main_kernel" in low.ptx
        names = sorted(k.name for k in low.kernels)
        assert names == ["main_kernel", "main_kernel_1"]
        assert all(k.registers and k.registers > 0 for k in low.kernels)
        assert "registers" in low.verdict
