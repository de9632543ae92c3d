// @vitest-environment jsdom
import { afterEach, describe, expect, it } from "vitest";
import widget from "../explorer";
import type { Lowering } from "../lib/model";
import { type PassInfo, asmLanguage, codeText, loopFacts, scriptAfter, scriptBefore, widthText } from "../lowering/compiler";
import { mounted, render, tick } from "./fixtures";
import type { StepData } from "../lib/types";
import { explorerOffline } from "../explorer/offline";
import { markKernel, recordKey, setOfflineHandler } from "../lib/offline";
import { SavedWidgets, type SavedState } from "../lib/saved";
// A real lowering of the course's 1024^3 GPU matmul with a 64x64 accumulator per thread for sm_75, as
// Explorer.lower sends it (written by tests/widgets/test_explorer_compiler.py from Session.lower).
import bigTile from "../../tests/fixtures/lowering_cuda_big_tile.json";
import bigTileStep from "../../tests/fixtures/step_cuda_big_tile.json";
import { cudaFacts } from "../lowering/compiler";

const pass = (index: number, name: string, status: PassInfo["status"], base: number, script: string | null = null, extra: Partial<PassInfo> = {}): PassInfo => ({
  index, name, phase: "pipeline", status, depth: 0, base, note: "", script, error: null, seconds: 0.001, ...extra,
});

const facts = (loop: string, name: string, kind: string, asm_lines: number[], extra = {}) => ({
  loop, name, line: 12, end_line: 19, kind, extent: 16, innermost: true, asm_lines, vector_width: 16, register: "zmm",
  vector_fma: 2, scalar_fma: 0, vector_arith: 0, scalar_arith: 0, vector_loads: 1, vector_stores: 1, scalar_loads: 0, scalar_stores: 0,
  broadcasts: 1, gathers: 0, in_llvm_ir: false, unrolled_copies: null, runtime_calls: {}, approximate: false, verdict: "", ...extra,
});

const ASM = ["mm_relu_compute_:", "\tpushq\t%rbx", "\tvbroadcastss\t(%r12), %zmm2", "\tvfmadd213ps\t%zmm1, %zmm2, %zmm3", "\tvmovups\t%zmm3, (%rax)", "\tvmaxps\t%ymm0, %ymm1, %ymm1", "\tretq"].join("\n");

function lowering(extra: Partial<Lowering> = {}): Lowering {
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
  } as Lowering;
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
  const ui = mounted(widget);
  const { mount, $, $$ } = ui;
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

  it("for a CUDA arch: the stack-frame verdict, the kernel table and what each loop became, linked to the tree; a bad target keeps the view", async () => {
    const big = bigTile as unknown as Lowering;
    const S = big.step as number;
    const view = bigTileStep as unknown as StepData;
    expect(view.id).toBe(S);
    const hist = [steps[0], { id: S, parent: 0, children: [], primitive: view.primitive, label: view.label }];
    // the explorer's compiler_target trait says sm_75: the first request is for it
    const model = await mount({ history: hist, step: view, selection: {}, compiler_target: "sm_75" });
    const sel = $(".mlc-diff-mode") as HTMLSelectElement;
    sel.value = "compiler";
    sel.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)!.params).toEqual({ step: S, target: "sm_75" });
    const field = $(".mlc-compiler-target") as HTMLInputElement;
    expect(field.value).toBe("sm_75");
    expect(Array.from(ui.el.querySelectorAll("datalist option")).map((o) => (o as HTMLOptionElement).value)).toEqual(["cpu", "cuda", "sm_75", "sm_80", "sm_86", "sm_90"]);
    model.reply(big);
    await tick();
    // the verdict names the 64x64 accumulator and its 16 KB stack frame, first
    expect($(".mlc-compiler-verdict")!.textContent).toMatch(/^main_kernel: each thread keeps a 64x64 float32 accumulator \(C_local, 16 KB\): a 16 KB stack frame per thread \(ptxas\)/);
    expect($(".mlc-compiler-status")!.textContent).toMatch(/^step \d+: CUDA sm_75, \d+ passes/);
    const kernel = $('.mlc-compiler-kernel[data-kernel="main_kernel"]')!;
    const cell = (fact: string) => kernel.querySelector<HTMLElement>(`td[data-fact="${fact}"]`)!.textContent;
    expect(kernel.dataset.from).toBe("ptxas");
    expect(cell("registers")).toBe(String(big.kernels[0].registers));
    expect(cell("stack")).toBe("16 KB");
    expect(cell("shared")).toBe("8 KB");
    expect(cell("local")).toBe("16 KB (C_local)");
    expect(cell("spills")).toBe("0 B / 0 B");
    expect(kernel.classList.contains("mlc-compiler-kernel-stack")).toBe(true);
    expect($(".mlc-compiler-kernel-source")!.textContent).toBe("figures from ptxas -v for sm_75");
    // per loop what it became, as Python said it
    const rows = $$(".mlc-compiler-cuda-loop");
    expect(rows.map((r) => r.dataset.loop)).toEqual(big.loops.map((f) => f.loop));
    const became = (loop: string) => $(`.mlc-compiler-cuda-loop[data-loop="${loop}"] .mlc-compiler-became`)!.textContent;
    expect(became("i_0")).toBe("blockIdx.y: 8 thread blocks, each runs one iteration");
    expect(became("i_1_j_1_fused")).toBe("threadIdx.x: 4 threads of a block, each runs one iteration");
    expect(became("A_shared/ax0_ax1_fused_2")).toBe("one 4-wide access (float4) per statement, no loop");
    expect(became("k_0")).toMatch(/^a loop of 128 iterations in every thread \(CUDA lines \d+-\d+\)$/);
    // a click on a loop row selects it in the tree; the tree's selection marks the row and its CUDA lines
    $('.mlc-compiler-cuda-loop[data-loop="k_0"]')!.click();
    expect(model.state.selection).toEqual({ kind: "loop", name: "k_0" });
    await tick();
    expect($('.mlc-compiler-cuda-loop[data-loop="k_0"]')!.classList.contains("mlc-active")).toBe(true);
    expect($$(".mlc-compiler-cuda-loop.mlc-active").length).toBe(1);
    expect(Number($(".mlc-compiler")!.dataset.highlighted)).toBe(big.cuda_loop_lines.k_0.length);
    // two copy loops of one variable: B's is the second in the code (TVM names it ax0_ax1_fused_0_1)
    model.set("selection", { kind: "loop", name: "B_shared/ax0_ax1_fused_0" });
    await tick();
    expect($$(".mlc-compiler .mlc-asm-hit").map((l) => l.textContent)[0]).toContain("for (int ax0_ax1_fused_0_1 = 0;");
    model.set("selection", { kind: "loop", name: "A_shared/ax0_ax1_fused_0" });
    await tick();
    expect($$(".mlc-compiler .mlc-asm-hit").map((l) => l.textContent)[0]).toContain("for (int ax0_ax1_fused_0 = 0;");
    model.set("selection", { kind: "loop", name: "k_0" });
    await tick();
    // a bad target: its sentence under the field, the last good view stays, the trait unchanged
    field.value = "sm75";
    field.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)!.params).toEqual({ step: S, target: "sm75" });
    const said = "'sm75' is not a target the Compiler view knows: give 'cpu', 'cuda', a CUDA architecture such as 'sm_75', a target dict or a TVM target tag";
    model.reply({ summary: said, detail: "", type: "bad_target" }, false);
    await tick();
    expect($(".mlc-compiler-target-error")!.hidden).toBe(false);
    expect($(".mlc-compiler-target-error")!.textContent).toBe(said);
    expect(field.classList.contains("mlc-compiler-target-bad")).toBe(true);
    expect($(".mlc-compiler-verdict")!.textContent).toContain("a 16 KB stack frame per thread");
    expect($('.mlc-compiler-kernel[data-kernel="main_kernel"]')).not.toBeNull();
    expect($(".mlc-compiler-status")!.textContent).toMatch(/: CUDA sm_75, /);
    expect(model.state.compiler_target).toBe("sm_75");
    // the next step is still lowered for the good target
    const n = model.requests().length;
    model.pushStep({ id: 0, parent: null });
    await tick();
    expect(model.requests().length).toBe(n + 1);
    expect(model.requests().at(-1)!.params).toEqual({ step: 0, target: "sm_75" });
    model.pushStep(view);
    await tick();
    // another arch: compiled, kept in the trait (saved with the notebook), the error gone
    field.value = " sm_80 ";
    field.dispatchEvent(new Event("change"));
    expect(model.requests().at(-1)!.params).toEqual({ step: S, target: "sm_80" });
    model.reply({ ...big, arch: "sm_80" });
    await tick();
    expect(model.state.compiler_target).toBe("sm_80");
    expect(model.save_changes).toHaveBeenCalled();
    expect($(".mlc-compiler-target-error")!.hidden).toBe(true);
    expect($(".mlc-compiler-kernel-source")!.textContent).toBe("figures from ptxas -v for sm_80");
    // the trait set from Python (ex.compiler_target = "cpu") moves the panel too
    model.set("compiler_target", "sm_75");
    await tick();
    expect(field.value).toBe("sm_75");
    expect($(".mlc-compiler-kernel-source")!.textContent).toBe("figures from ptxas -v for sm_75"); // from the cache
  }, 30_000);
});

describe("CUDA facts without ptxas", () => {
  it("says the figures come from the source: registers, stack and spills unknown, shared and local arrays known", () => {
    const big = bigTile as unknown as Lowering;
    const low = { ...big, ptx: null, ptx_error: "nvcc is not installed", ptxas_report: "", kernels: big.kernels.map((k) => ({ ...k, registers: null, stack_bytes: 0, facts_from: "source" as const })) };
    const host = document.createElement("div");
    host.append(...cudaFacts(low, null, () => {}));
    const kernel = host.querySelector<HTMLElement>(".mlc-compiler-kernel")!;
    expect(kernel.dataset.from).toBe("source");
    const cell = (fact: string) => kernel.querySelector<HTMLElement>(`td[data-fact="${fact}"]`)!.textContent;
    expect([cell("registers"), cell("stack"), cell("spills"), cell("shared"), cell("local"), cell("from")]).toEqual(["?", "?", "?", "8 KB", "16 KB (C_local)", "CUDA source"]);
    expect(host.querySelector(".mlc-compiler-kernel-source")!.textContent).toBe(
      "no ptxas (nvcc is not installed): registers, stack frame and spills unknown; shared memory and local arrays from the CUDA source for sm_75");
  });
});

describe("a saved explorer's Compiler view", () => {
  let el: HTMLElement;
  let dispose = () => {};
  afterEach(() => {
    dispose();
  });
  const $ = (sel: string) => el.querySelector<HTMLElement>(sel);
  it("opens on its saved target and answers from the reply recorded under it; an unrecorded target keeps the view", async () => {
    const { default: widget } = await import("../explorer");
    const big = bigTile as unknown as Lowering;
    const S = big.step as number;
    const b64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
    const stepText = JSON.stringify(bigTileStep);
    const rec = (key: string, state: Record<string, unknown>, data?: string) => ({
      model_name: "WidgetModel",
      model_module: "@jupyter-widgets/base",
      state: { key, buffers: [], ...state },
      buffers: data ? [{ path: ["data"], encoding: "base64" as const, data: b64(data) }] : [],
    });
    // what Explorer records: the reply under recordKey("lower", params as the panel sent them)
    const lowerKey = recordKey("lower", { step: S, target: "sm_75" });
    const saved: SavedState = {
      e: {
        model_name: "AnyModel",
        model_module: "anywidget",
        state: {
          _mlc_entry: "explorer",
          compiler_target: "sm_75",
          history: { from: 0, steps: [{ id: S, parent: null, kind: "apply", primitive: "decompose_reduction", label: "decompose_reduction" }] },
          _mlc_recorded: { [`step:${S}`]: "IPY_MODEL_s", [lowerKey]: "IPY_MODEL_lo" },
        },
        buffers: [{ path: ["step"], encoding: "base64", data: b64(stepText) }],
      },
      s: rec(`step:${S}`, { result: "null" }, stepText),
      lo: rec(lowerKey, { result: JSON.stringify(big) }),
    };
    const model = await new SavedWidgets(saved).get_model("e");
    markKernel(model, () => false);
    setOfflineHandler(model, explorerOffline(model));
    ({ el, dispose } = await render(widget, model));
    const settle = async () => {
      for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
    };
    const sel = $(".mlc-diff-mode") as HTMLSelectElement;
    sel.value = "compiler";
    sel.dispatchEvent(new Event("change"));
    await settle();
    expect(($(".mlc-compiler-target") as HTMLInputElement).value).toBe("sm_75");
    expect($(".mlc-compiler-verdict")!.textContent).toContain("a 16 KB stack frame per thread (ptxas)");
    expect($(".mlc-compiler-kernel")!.querySelector('td[data-fact="stack"]')!.textContent).toBe("16 KB");
    const field = $(".mlc-compiler-target") as HTMLInputElement;
    field.value = "sm_90";
    field.dispatchEvent(new Event("change"));
    await settle();
    expect($(".mlc-compiler-target-error")!.textContent).toMatch(/needs a running kernel/);
    expect($(".mlc-compiler-verdict")!.textContent).toContain("a 16 KB stack frame per thread (ptxas)");
    expect(model.get("compiler_target")).toBe("sm_75");
  }, 30_000);
});
