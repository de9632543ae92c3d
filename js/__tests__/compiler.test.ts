// @vitest-environment jsdom
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import { type LoweringInfo, type PassInfo, asmLanguage, codeText, loopFacts, scriptAfter, scriptBefore, widthText } from "../explorer/compiler";
import { fakeModel, tick } from "./fixtures";

const pass = (index: number, name: string, status: PassInfo["status"], base: number, script: string | null = null, extra: Partial<PassInfo> = {}): PassInfo => ({
  index, name, phase: "pipeline", status, depth: 0, base, note: "", script, error: null, seconds: 0.001, ...extra,
});

const facts = (loop: string, name: string, kind: string, asm_lines: number[], extra = {}) => ({
  loop, name, line: 12, end_line: 19, kind, extent: 16, innermost: true, asm_lines, vector_width: 16, register: "zmm",
  vector_fma: 2, scalar_fma: 0, vector_arith: 0, scalar_arith: 0, vector_loads: 1, vector_stores: 1, scalar_loads: 0, scalar_stores: 0,
  broadcasts: 1, gathers: 0, in_llvm_ir: false, unrolled_copies: null, runtime_calls: {}, approximate: false, verdict: "", ...extra,
});

const ASM = ["mm_relu_compute_:", "\tpushq\t%rbx", "\tvbroadcastss\t(%r12), %zmm2", "\tvfmadd213ps\t%zmm1, %zmm2, %zmm3", "\tvmovups\t%zmm3, (%rax)", "\tvmaxps\t%ymm0, %ymm1, %ymm1", "\tretq"].join("\n");

function lowering(extra: Partial<LoweringInfo> = {}): LoweringInfo {
  return {
    step: 1, target: "llvm", kind: "cpu", script: "S0", ok: true, error: null,
    passes: [
      pass(0, "tirx.BindTarget", "changed", -1, "S1", { phase: "bind" }),
      pass(1, "s_tir.CanonicalizeLoop", "no-op", 0),
      pass(2, "tirx.VectorizeLoop", "changed", 0, "S2 with T.Ramp"),
      pass(3, "tirx.StmtSimplify", "no-op", 2),
      pass(4, "tirx.LowerTVMBuiltin", "failed", 2, null, { phase: "host", error: "InternalError: boom" }),
    ],
    llvm_ir: "define void @f() {\nentry:\n  ret void\n}", asm: ASM, cuda_source: "", ptx: null, ptx_error: null, ptxas_report: "",
    // the names of the fixture's loop tree (mmRelu): k stands for a vectorized loop here
    loops: [facts("Y/i", "i", "serial", [2, 3, 4, 5]), facts("k", "k", "vectorized", [3, 4, 5], { verdict: "k vectorized: 16-wide FMAs on zmm registers" }), facts("C/i", "i", "serial", [6]), facts("C/j", "j", "serial", [6], { vector_width: 8, register: "ymm", ir_lines: [3] })],
    kernels: [], verdict: "k vectorized: 16-wide FMAs on zmm registers", problems: [], seconds: 0.2,
    ...extra,
  } as LoweringInfo;
}

describe("compiler helpers", () => {
  it("finds the script a pass received through no-op passes", () => {
    const low = lowering();
    expect(scriptBefore(low, low.passes[0])).toBe("S0");
    expect(scriptBefore(low, low.passes[2])).toBe("S1");
    expect(scriptAfter(low, low.passes[2])).toBe("S2 with T.Ramp");
    expect(scriptAfter(low, low.passes[3])).toBe("S2 with T.Ramp"); // a no-op shows what it received
    // a base that itself has no script (a no-op) is followed further back
    const chained = lowering({ passes: [pass(0, "a", "changed", -1, "A"), pass(1, "b", "no-op", 0), pass(2, "c", "no-op", 1)] });
    expect(scriptBefore(chained, chained.passes[2])).toBe("A");
  });

  it("looks loops up by qualified or plain name, never guessing between two", () => {
    const low = lowering();
    expect(loopFacts(low, "k")?.asm_lines).toEqual([3, 4, 5]);
    expect(loopFacts(low, "Y/i")?.name).toBe("i");
    expect(loopFacts(low, "j")?.loop).toBe("C/j");
    expect(loopFacts(low, "i")).toBeNull(); // Y/i or C/i? not this one's to pick
    expect(loopFacts(null, "k")).toBeNull();
    expect(widthText(loopFacts(low, "C/j")!)).toBe("8 × ymm");
    expect(codeText(low, "ptx")).toContain("no PTX");
    expect(asmLanguage.name).toBe("asm");
  });
});

describe("the Compiler view in the explorer", () => {
  let el: HTMLElement;
  let cleanup: (() => void) | void;
  afterEach(() => {
    if (typeof cleanup === "function") cleanup();
    el.remove();
  });
  async function mount(initial: Record<string, unknown>) {
    const model = fakeModel(initial as any);
    el = document.createElement("div");
    document.body.append(el);
    cleanup = (await widget.render({ model: model as any, el, signal: new AbortController().signal } as any)) as any;
    return model;
  }
  const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
  const $$ = (sel: string) => Array.from(el.querySelectorAll<HTMLElement>(sel));
  const steps = [
    { id: 0, parent: null, children: [1], primitive: "", label: "original program" },
    { id: 1, parent: 0, children: [], primitive: "vectorize", label: "vectorize(j_1)" },
  ];

  it("asks for the step's lowering, lists passes, facts and verdict, and highlights the selected loop", async () => {
    const model = await mount({ history: steps, step: { id: 1, parent: 0 }, selection: { kind: "loop", name: "k" } });
    const sel = $(".mlc-diff-mode") as HTMLSelectElement;
    sel.value = "compiler";
    sel.dispatchEvent(new Event("change"));
    expect($(".mlc-code")!.hidden).toBe(true);
    expect($(".mlc-compiler")!.hidden).toBe(false);
    const req = model.requests().at(-1)!;
    expect(req.method).toBe("lower");
    expect(req.params).toEqual({ step: 1, target: "cpu" });
    model.reply(lowering());
    await tick();
    expect($(".mlc-compiler-verdict")?.textContent).toBe("k vectorized: 16-wide FMAs on zmm registers");
    const passes = $$(".mlc-compiler-pass[data-index]");
    expect(passes.map((p) => p.dataset.status)).toEqual(["changed", "no-op", "changed", "no-op", "failed"]);
    expect(passes[4].title).toContain("InternalError: boom");
    expect($('.mlc-compiler-loop[data-loop="k"]')!.classList.contains("mlc-active")).toBe(true);
    expect($(".mlc-compiler-loop-verdict")?.textContent).toContain("16-wide");
    // the assembly, with k's three instructions marked
    expect($(".mlc-compiler .cm-content")?.textContent).toContain("vfmadd213ps");
    expect($(".mlc-compiler")!.dataset.highlighted).toBe("3");
    expect($$(".mlc-compiler .mlc-asm-hit").map((l) => l.textContent)).toEqual(["\tvbroadcastss\t(%r12), %zmm2", "\tvfmadd213ps\t%zmm1, %zmm2, %zmm3", "\tvmovups\t%zmm3, (%rax)"]);
    // another loop selected in the explorer: its instructions instead
    model.set("selection", { kind: "loop", name: "C/j" });
    await tick();
    expect($(".mlc-compiler")!.dataset.highlighted).toBe("1");
    expect($$(".mlc-compiler .mlc-asm-hit").map((l) => l.textContent)).toEqual(["\tvmaxps\t%ymm0, %ymm1, %ymm1"]);
    // the LLVM IR marks the same loop through the instructions' debug locations
    $$(".mlc-compiler-code-item")[1].click();
    expect($(".mlc-compiler")!.dataset.highlighted).toBe("1");
    expect($$(".mlc-compiler .mlc-asm-hit").map((l) => l.textContent)).toEqual(["  ret void"]);
    $$(".mlc-compiler-code-item")[0].click();
    // a click on a facts row selects that loop in the explorer
    $('.mlc-compiler-loop[data-loop="Y/i"]')!.click();
    expect(model.state.selection).toEqual({ kind: "loop", name: "Y/i" });
    // a changed pass shows the diff of the script it received and the one it produced
    passes[2].click();
    await tick();
    expect($(".mlc-compiler-pass-head")?.textContent).toContain("tirx.VectorizeLoop");
    expect($(".mlc-compiler .cm-content")?.textContent).toContain("S2 with T.Ramp");
    expect($(".mlc-compiler .cm-deletedChunk, .mlc-compiler .cm-changedLine")).not.toBeNull();
    // a failed pass shows its error
    ($$(".mlc-compiler-pass[data-index]")[4]).click();
    expect($(".mlc-compiler-detail")?.textContent).toBe("InternalError: boom");
    // back to step 0 and again to 1: step 1 comes from the cache
    model.pushStep({ id: 0, parent: null });
    await tick();
    expect(model.requests().at(-1)!.params).toEqual({ step: 0, target: "cpu" });
    model.reply({ summary: "the worker crashed", detail: "SIGSEGV", type: "crash" }, false);
    await tick();
    expect($(".mlc-compiler-verdict")?.textContent).toBe("the worker crashed");
    const n = model.requests().length;
    model.pushStep({ id: 1, parent: 0 });
    await tick();
    expect(model.requests().length).toBe(n);
    expect($(".mlc-compiler-verdict")?.textContent).toContain("16-wide");
    sel.value = "off";
    sel.dispatchEvent(new Event("change"));
    expect($(".mlc-code")!.hidden).toBe(false);
    expect($(".mlc-compiler")!.hidden).toBe(true);
  }, 30_000);

  it("for CUDA shows kernels with registers and the CUDA source, the selected loop marked", async () => {
    const model = await mount({ history: steps, step: { id: 1, parent: 0 }, selection: { kind: "loop", name: "k" } });
    const sel = $(".mlc-diff-mode") as HTMLSelectElement;
    sel.value = "compiler";
    sel.dispatchEvent(new Event("change"));
    model.reply(lowering());
    await tick();
    const target = $(".mlc-compiler-target") as HTMLSelectElement;
    target.value = "cuda";
    target.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)!.params).toEqual({ step: 1, target: "cuda" });
    model.reply(lowering({ kind: "cuda", asm: "", llvm_ir: "", loops: [], cuda_source: 'extern "C" __global__ void main_kernel() {\n  for (int k = 0; k < 8; ++k) {\n    A[k] = 0;\n  }\n}', cuda_loop_lines: { k: [2, 3, 4] }, ptx: ".visible .entry main_kernel()", kernels: [{ name: "main_kernel", registers: 12, shared_bytes: 0, stack_bytes: 0, spill_stores: 0, spill_loads: 0, vector_loads: 0, vector_stores: 0, scalar_loads: 2, scalar_stores: 0, shared_loads: 0, fma: 0, barriers: 0, facts_from: "ptxas" }], verdict: "main_kernel: 12 registers" }));
    await tick();
    expect($(".mlc-compiler-kernel")?.textContent).toContain("12");
    expect($(".mlc-compiler .cm-content")?.textContent).toContain("__global__");
    expect($$(".mlc-compiler-code-item").map((e) => e.textContent)).toEqual(["⚙ CUDA C++", "⚙ PTX"]);
    expect($(".mlc-compiler")!.dataset.highlighted).toBe("3");
    expect($$(".mlc-compiler .mlc-asm-hit")[0].textContent).toContain("for (int k = 0");
  }, 30_000);
});
