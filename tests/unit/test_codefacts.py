"""Facts from generated-code text (no TVM): instruction classes, line mapping, loop facts, verdicts."""

from __future__ import annotations

import pytest

from mlc_lab.core.lowering import codefacts as cf

# A hand-made listing in the shape LLVM prints for TVM: functions, `.loc 1 LINE COL` directives
# naming lines of the step's TVMScript, and a parallel body function without line information.
ASM = """\
\t.text
\t.type\tmm_relu_compute_,@function
mm_relu_compute_:
\t.loc\t1 0 0
\tpushq\t%rbx
\tmovq\t__TVMBackendParallelLaunch@GOTPCREL(%rip), %rax
\tcallq\t*(%rax)
.LBB0_2:
\t.loc\t1 14 17
\tvbroadcastss\t(%r12,%rdi,4), %ymm2
\tvmovups\t(%r15,%r11), %ymm3
\tvfmadd213ps\t%ymm1, %ymm2, %ymm3
\tvfmadd132ps\t32(%r15,%r11), %ymm1, %ymm2
\tvmovups\t%ymm3, (%rax,%r10,4)
\tvmovups\t%ymm2, 32(%rax,%r10,4)
\t.loc\t1 20 17
\tvmovss\t(%rax), %xmm0
\tvmaxss\t%xmm1, %xmm0, %xmm0
\tvmovss\t%xmm0, (%rcx)
\tvextractps\t$1, %xmm0, 4(%rcx)
\tjne\t.LBB0_2
\t.type\t.L__tvm_parallel_lambda,@function
.L__tvm_parallel_lambda:
\tvfmadd231ps\t%zmm1, %zmm2, %zmm3
\tvgatherdps\t(%rax,%zmm4,4), %zmm5 {%k1}
"""

# Lines as a Session's loop tree gives them: i (parallel) holds j_1 (vectorized); C's loop j apart.
TREE = {
    "func": "mm_relu",
    "functions": [
        {
            "name": "mm_relu",
            "kind": "func",
            "children": [
                {
                    "kind": "loop",
                    "name": "i",
                    "qualified": "Y/i",
                    "line": 12,
                    "end_line": 15,
                    "loop_kind": "parallel",
                    "extent": 128,
                    "children": [
                        {
                            "kind": "loop",
                            "name": "j_1",
                            "qualified": "j_1",
                            "line": 13,
                            "end_line": 15,
                            "loop_kind": "vectorized",
                            "extent": 16,
                            "children": [{"kind": "block", "name": "Y", "children": []}],
                        }
                    ],
                },
                {
                    "kind": "loop",
                    "name": "j",
                    "qualified": "C/j",
                    "line": 18,
                    "end_line": 20,
                    "loop_kind": "serial",
                    "extent": 128,
                    "children": [],
                },
            ],
        }
    ],
}


@pytest.mark.parametrize(
    "line, klass, lanes, reg",
    [
        ("vfmadd231ps\t%zmm1, %zmm2, %zmm3", "vector_fma", 16, "zmm"),
        ("vfmadd213ps\t%ymm1, %ymm2, %ymm3", "vector_fma", 8, "ymm"),
        ("vfmadd132pd\t(%rax), %ymm1, %ymm2", "vector_fma", 4, "ymm"),
        ("vfmadd213ss\t%xmm1, %xmm2, %xmm3", "scalar_fma", 1, "xmm"),
        ("vfnmadd231ps\t%xmm1, %xmm2, %xmm3", "vector_fma", 4, "xmm"),
        ("vmaxps\t%ymm0, %ymm1, %ymm1", "vector_arith", 8, "ymm"),
        ("vaddss\t%xmm0, %xmm1, %xmm1", "scalar_arith", 1, "xmm"),
        ("vmovups\t(%rax), %zmm3", "vector_load", 0, "zmm"),
        ("vmovaps\t%ymm3, 32(%rax,%r10,4)", "vector_store", 0, "ymm"),
        ("vmovaps\t%zmm0, %zmm10", "vector_move", 0, "zmm"),
        ("vmovss\t(%rax), %xmm0", "scalar_load", 0, "xmm"),
        ("vmovss\t%xmm0, (%rax)", "scalar_store", 0, "xmm"),
        ("vextractps\t$1, %xmm0, 4(%rcx)", "scalar_store", 0, "xmm"),
        ("vinsertps\t$16, (%rax), %xmm0, %xmm0", "scalar_load", 0, "xmm"),
        ("vbroadcastss\t(%r12), %zmm9", "broadcast", 0, "zmm"),
        ("vgatherdps\t(%rax,%zmm4,4), %zmm5 {%k1}", "gather", 0, "zmm"),
        ("callq\t*(%rcx)", "call", 0, ""),
        ("addq\t$512, %rcx", "other", 0, ""),
    ],
)
def test_instruction_classes(line, klass, lanes, reg):
    insn = cf.parse_asm("\t" + line + "\n")[0]
    assert (insn.klass, insn.lanes, insn.reg) == (klass, lanes, reg)


def test_instructions_carry_their_function_and_script_line():
    insns = cf.parse_asm(ASM)
    first = insns[0]
    assert (first.func, first.src_line, first.mnemonic) == ("mm_relu_compute_", 0, "pushq")
    fmas = [i for i in insns if i.klass == "vector_fma"]
    assert [(i.func, i.src_line) for i in fmas] == [
        ("mm_relu_compute_", 14),
        ("mm_relu_compute_", 14),
        (".L__tvm_parallel_lambda", 0),
    ]
    assert {i.src_line for i in insns if i.mnemonic == "vmaxss"} == {20}
    # the listing's own line numbers point back into the text
    lines = ASM.splitlines()
    assert all(lines[i.asm_line - 1].strip().startswith(i.mnemonic) for i in insns)


def test_loop_facts_count_the_instructions_of_the_loops_lines():
    facts = {f.loop: f for f in cf.loop_facts(cf.walk_loops(TREE), cf.parse_asm(ASM), llvm_labels={"for_body_i"})}
    assert list(facts) == ["Y/i", "j_1", "C/j"]
    j1 = facts["j_1"]
    # two ymm FMAs on line 14, plus the parallel body's zmm FMA (no line info: counted approximately)
    assert (j1.vector_fma, j1.vector_width, j1.register, j1.approximate) == (3, 16, "zmm", True)
    # one vmovups load and one folded into vfmadd132ps's memory operand
    assert (j1.vector_loads, j1.vector_stores, j1.broadcasts, j1.gathers) == (2, 2, 1, 1)
    assert j1.in_llvm_ir is False and j1.unrolled_copies is None  # vectorized, not unrolled
    c = facts["C/j"]
    assert (c.scalar_arith, c.scalar_loads, c.scalar_stores, c.vector_fma) == (1, 1, 2, 0)
    assert c.scalar_fallbacks == 1 and not c.is_vector
    assert c.in_llvm_ir is False and c.unrolled_copies == 128  # gone from the IR: unrolled
    assert facts["Y/i"].runtime_calls == {"TVMBackendParallelLaunch": 1}


def test_llvm_ir_instructions_map_to_script_lines_through_their_debug_locations():
    ir = "\n".join(
        [
            "define void @f() !dbg !5 {",
            "  %0 = load float, ptr %B, align 64, !dbg !62, !tbaa !63",
            "  %1 = fmul float %0, %0",
            "  store float %1, ptr %Y, align 4, !dbg !74",
            "  ret void, !dbg !15",
            "}",
            "!15 = !DILocation(line: 0, scope: !5)",
            "!62 = !DILocation(line: 14, column: 17, scope: !39)",
            "!74 = distinct !DILocation(line: 20, column: 17, scope: !39)",
        ]
    )
    assert cf.llvm_ir_script_lines(ir) == {2: 14, 4: 20}
    facts = {f.loop: f for f in cf.loop_facts(cf.walk_loops(TREE), [], None, cf.llvm_ir_script_lines(ir))}
    assert facts["j_1"].ir_lines == [2] and facts["C/j"].ir_lines == [4] and facts["Y/i"].ir_lines == [2]


def test_loop_in_llvm_matches_tvm_block_names_only_for_that_loop():
    labels = {"for_begin_j_0.preheader", "for_body_k", "for_end_i5"}
    assert cf.loop_in_llvm("j_0", labels) and cf.loop_in_llvm("k", labels) and cf.loop_in_llvm("i", labels)
    assert not cf.loop_in_llvm("j", labels) and not cf.loop_in_llvm("j_1", labels)


def _facts(**kw) -> cf.LoopFacts:
    base = dict(loop="j_1", name="j_1", line=13, end_line=15, kind="vectorized", extent=16, innermost=True)
    base.update(kw)
    return cf.LoopFacts(**base)


INTEL = ["avx512f", "avx2", "avx", "fma", "prefer-256-bit"]


def test_a_16_wide_request_split_into_ymm_halves_says_why():
    f = _facts(vector_fma=2, vector_width=8, register="ymm")
    text = cf.loop_verdict(f, {}, INTEL)
    assert text.startswith("j_1 vectorized: 8-wide FMAs on ymm registers")
    assert "two halves of 8" in text and "prefer-vector-width=256" in text
    no512 = cf.loop_verdict(f, {}, ["avx2", "avx", "fma"])
    assert "no 512-bit registers" in no512
    full = cf.loop_verdict(_facts(vector_fma=1, vector_width=16, register="zmm"), {}, INTEL)
    assert full == "j_1 vectorized: 16-wide FMAs on zmm registers"


def test_a_strided_access_explains_a_scalar_vectorized_loop():
    strides = {"j_1": [{"kind": "load", "buffer": "A", "stride": 0}, {"kind": "load", "buffer": "B", "stride": 128}]}
    scalar = cf.loop_verdict(_facts(scalar_fma=16), strides, INTEL)
    assert scalar == "vectorize requested on j_1, but the loop body is scalar: the access to B has stride 128"
    mixed = cf.loop_verdict(_facts(vector_arith=1, vector_width=16, register="zmm", scalar_loads=16), strides, INTEL)
    assert "one element at a time" in mixed and "stride 128" in mixed


def test_llvm_vectorizing_on_its_own_is_named():
    f = _facts(kind="serial", vector_fma=2, vector_width=8, register="ymm")
    assert "LLVM vectorized it on its own" in cf.loop_verdict(f, {}, INTEL)
    scalar = cf.loop_verdict(_facts(kind="serial", scalar_fma=1), {}, INTEL)
    assert scalar.startswith("j_1's body is scalar")


def test_an_init_loop_llvm_folded_away_is_not_a_failure():
    init = _facts(loop="j_1_init", name="j_1_init", extent=4, in_llvm_ir=False)  # no instruction of its own
    text = cf.loop_verdict(init, {}, INTEL)
    assert (
        text
        == "j_1_init left no code of its own: LLVM folded it into the code around it (nothing to vectorize, not a problem)"
    )
    assert "but" not in text
    stores = cf.loop_verdict(_facts(loop="j_1_init", name="j_1_init", asm_lines=[3, 4], vector_stores=1), {}, INTEL)
    assert stores == "j_1_init vectorized: 1 packed store(s), no arithmetic (it only writes values)"
    # with instructions but no packed ones, it still says so
    scalar = cf.loop_verdict(_facts(asm_lines=[5], scalar_loads=1), {}, INTEL)
    assert scalar == "vectorize requested on j_1, but no packed float operations were generated for it"


def test_verdicts_name_loops_as_the_explorer_does_when_names_repeat():
    y = _facts(kind="serial", loop="Y/j", name="j", scalar_fma=1)
    assert cf.loop_verdict(y, {}, INTEL).startswith("Y/j's body is scalar")
    c = _facts(kind="parallel", loop="C/j", name="j")
    assert cf.loop_verdict(c, {}, INTEL).startswith("C/j runs in parallel")
    v = _facts(loop="C/j", name="j", vector_arith=1, vector_width=8, register="ymm", extent=8)
    assert cf.loop_verdict(v, {}, INTEL).startswith("C/j vectorized: 8-wide operations")


def test_step_verdict_puts_annotated_loops_first():
    a = _facts(kind="serial", loop="C/j", name="j", line=30, verdict="j is scalar")
    b = _facts(line=13, verdict="j_1 vectorized: 16-wide FMAs on zmm registers")
    assert cf.step_verdict([a, b]) == "j_1 vectorized: 16-wide FMAs on zmm registers; j is scalar"
    assert "no loop-level facts" in cf.step_verdict([])


PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'main_kernel' for 'sm_90'
ptxas info    : Function properties for main_kernel
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem
"""
PTX = """\
.visible .entry main_kernel(
\tld.global.nc.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd8];
\tst.shared.v4.u32 \t[%r1], {%r2, %r3, %r4, %r5};
\tld.shared.f32 \t%f5, [%r6];
\tfma.rn.ftz.f32 \t%f6, %f5, %f1, %f6;
\tbar.sync \t0;
\tst.global.f32 \t[%rd9], %f6;
}
"""


def test_ptxas_and_ptx_give_registers_shared_memory_and_vector_loads():
    (k,) = cf.kernel_facts(PTX, PTXAS)
    assert (k.name, k.registers, k.shared_bytes, k.stack_bytes, k.spill_stores, k.spill_loads) == (
        "main_kernel",
        40,
        4096,
        8,
        4,
        4,
    )
    assert (k.vector_loads, k.scalar_stores, k.shared_loads, k.fma, k.barriers) == (1, 1, 1, 1, 1)
    assert "40 registers" in cf.cuda_verdict([k], [], None) and "spills" in cf.cuda_verdict([k], [], None)


def test_cuda_loops_are_found_by_their_variable_and_braces():
    src = "\n".join(
        [
            'extern "C" __global__ void k(float* A) {',
            "  for (int k_0 = 0; k_0 < 128; ++k_0) {",
            "    __syncthreads();",
            "    for (int ax0 = 0; ax0 < 2; ++ax0) {",
            "      A[ax0] = 0;",
            "    }",
            "    for (int k_1 = 0; k_1 < 8; ++k_1) A[k_1] += 1;",
            "  }",
            "}",
        ]
    )
    assert cf.cuda_loop_lines(src) == {"k_0": [2, 3, 4, 5, 6, 7, 8], "ax0": [4, 5, 6], "k_1": [7]}
