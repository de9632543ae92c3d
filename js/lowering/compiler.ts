// The "Compiler" view of the explorer's centre: what tvm.compile does with the current step.
// Left, the passes it ran (changed ones bold, no-ops dimmed, a failure in red with its error) and
// the generated code; right, the diff a pass made (the CodeMirror merge view) or the code itself
// (assembly / LLVM IR on CPU, CUDA / PTX on GPU) with the selected loop's instructions highlighted;
// above, the one-line verdict and the facts of every loop. Python: Explorer.lower -> Session.lower
// (compiled in the worker process, cached per step).

import { python } from "@codemirror/lang-python";
import { StreamLanguage, type StringStream } from "@codemirror/language";
import { getChunks, unifiedMergeView } from "@codemirror/merge";
import { EditorState, type Extension, RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import { Decoration, type DecorationSet, EditorView, lineNumbers } from "@codemirror/view";
import { h, moreRoomButton } from "../lib/dom";
import { jpCodeTheme } from "../lib/cm_theme";
import { Panel } from "../lib/panel";
import { Rpc, RpcFailure } from "../lib/rpc";
import { ensureStyle } from "../lib/theme";
import type { StepId } from "../lib/types";
import css from "./compiler.css";
import { cudaLanguage } from "./cuda";

// The lowering's types are generated from mlc_lab/model/lowering.py (js/lib/model.ts).
import type { LoopFacts as LoopFactsInfo, Lowering, PassStep as PassInfo } from "../lib/model";

export type { LoopFactsInfo, PassInfo };
export type PassStatus = PassInfo["status"];

interface LowerProblem {
  step: StepId;
  summary: string;
  detail: string;
  type?: string;
}

/** What the target field offers (any other CUDA architecture, TVM target tag or JSON may be typed). */
export const COMMON_TARGETS = ["cpu", "cuda", "sm_75", "sm_80", "sm_86", "sm_90"];
const LARGE_STACK_BYTES = 1024; // as mlc_lab/core/lowering/__init__.py: a stack frame this large is the verdict's first sentence

/** "16 KB" / "512 B", as the Python verdict writes sizes. */
export function bytesText(n: number | null | undefined): string {
  if (!n) return "0 B";
  return n >= 1024 ? `${Number((n / 1024).toPrecision(3))} KB` : `${n} B`;
}

/** One line saying where a CUDA lowering's kernel figures come from. */
export function kernelSourceText(low: Lowering): string {
  const fromPtxas = low.kernels.some((k) => (k.facts_from ?? (k.registers == null ? "source" : "ptxas")) === "ptxas");
  const arch = low.arch ? ` for ${low.arch}` : "";
  if (fromPtxas) return `figures from ptxas -v${arch}`;
  return `no ptxas${low.ptx_error ? ` (${low.ptx_error.split("\n")[0]})` : ""}: registers, stack frame and spills unknown; shared memory and local arrays from the CUDA source${arch}`;
}

// ---- pure helpers (tested without a DOM) -----------------------------------------------------

/** The TVMScript a pass received: the script of its base pass (or the step's own script). */
export function scriptBefore(low: Lowering, p: PassInfo): string {
  let base = p.base;
  while (base >= 0 && low.passes[base]?.script == null) base = low.passes[base]?.base ?? -1;
  return base < 0 ? low.script : (low.passes[base].script as string);
}

export function scriptAfter(low: Lowering, p: PassInfo): string {
  return p.script ?? scriptBefore(low, p);
}

/** The facts of a loop by the explorer's selection name (qualified "Y/i" or plain "j_1"). */
export function loopFacts(low: Lowering | null, name: string | null): LoopFactsInfo | null {
  if (!low || !name) return null;
  const exact = low.loops.filter((f) => f.loop === name);
  if (exact.length === 1) return exact[0];
  const plain = low.loops.filter((f) => f.name === name);
  return plain.length === 1 ? plain[0] : null;
}

/** What the code view shows for a code kind, and which lines of it the selected loop owns. */
export function codeText(low: Lowering, which: CodeKind): string {
  if (which === "asm") return low.asm || "; no assembly (the step did not compile)";
  if (which === "llvm") return low.llvm_ir || "; no LLVM IR (the step did not compile)";
  if (which === "ptx") return low.ptx ?? `// no PTX: ${low.ptx_error ?? "nvcc is not installed"}`;
  return low.cuda_source || "// no CUDA source";
}

/** The CUDA source lines of a (serial) loop: by its variable, the part after "Y/" of a qualified name.
 * Of two loops with one variable (one per block), TVM's code calls the second `name_1`, the third
 * `name_2` (as mlc_lab/core/lowering/__init__.py's cuda_loop_facts reads them). */
export function cudaLoopLines(low: Lowering, name: string | null): number[] {
  if (!name) return [];
  const f = loopFacts(low, name);
  if (f) {
    const nth = low.loops.filter((g) => g.name === f.name).indexOf(f);
    const lines = low.cuda_loop_lines?.[nth > 0 ? `${f.name}_${nth}` : f.name];
    if (lines) return lines;
  }
  return low.cuda_loop_lines?.[name.split("/").pop() as string] ?? [];
}

export function widthText(f: LoopFactsInfo): string {
  return f.vector_width ? `${f.vector_width} × ${f.register}` : "scalar";
}

type CodeKind = "asm" | "llvm" | "source" | "ptx";
const CODE_KINDS: Record<"cpu" | "cuda", Array<[CodeKind, string]>> = {
  cpu: [["asm", "Assembly"], ["llvm", "LLVM IR"]],
  cuda: [["source", "CUDA C++"], ["ptx", "PTX"]],
};

// ---- CodeMirror bits ---------------------------------------------------------------------------

/** x86 AT&T and PTX in one small stream tokenizer: comments, directives, labels, registers, numbers. */
export const asmLanguage = StreamLanguage.define<Record<string, never>>({
  name: "asm",
  startState: () => ({}),
  token(stream: StringStream) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^(#|;|\/\/)/)) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.sol() && stream.match(/^[\w.$@]+:/)) return "labelName";
    if (stream.match(/^\.[\w.]+/)) return "meta";
    if (stream.match(/^%[\w.]+/)) return "variableName.standard";
    if (stream.match(/^\$?-?(?:0x[\da-f]+|\d+)/i)) return "number";
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^[A-Za-z_][\w.]*/)) return "keyword";
    stream.next();
    return "punctuation";
  },
});

const setHits = StateEffect.define<number[]>();
const hitLine = Decoration.line({ class: "mlc-asm-hit" });
const hitsField = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    for (const e of tr.effects) {
      if (!e.is(setHits)) continue;
      const builder = new RangeSetBuilder<Decoration>();
      const doc = tr.state.doc;
      for (const line of e.value) if (line >= 1 && line <= doc.lines) builder.add(doc.line(line).from, doc.line(line).from, hitLine);
      return builder.finish();
    }
    return deco.map(tr.changes);
  },
  provide: (f) => EditorView.decorations.from(f),
});

function readOnly(): Extension[] {
  return [EditorState.readOnly.of(true), EditorView.editable.of(false), ...jpCodeTheme()];
}

// ---- the panel ---------------------------------------------------------------------------------

type PanelModel = ConstructorParameters<typeof Rpc>[0] & {
  get?(name: string): any;
  set?(name: string, value: unknown): void;
  save_changes?(): void;
};

let datalistIds = 0;

export class CompilerPanel extends Panel<[step: StepId | null, target?: string]> {
  readonly el: HTMLElement;
  private rpc: Rpc;
  private targetField: HTMLInputElement;
  private targetError: HTMLElement;
  private goodTarget: string; // the last target that compiled (or was chosen): what a new step is lowered for
  private status: HTMLElement;
  private verdict: HTMLElement;
  private facts: HTMLElement;
  private passList: HTMLElement;
  private main: HTMLElement;
  private cache = new Map<string, Lowering | LowerProblem>(); // a step never changes
  private wanted: string | null = null;
  private low: Lowering | null = null;
  private shown: { kind: "code"; code: CodeKind } | { kind: "pass"; index: number } = { kind: "code", code: "asm" };
  private editor: EditorView | null = null;
  private editorText: string | null = null;
  private selected: string | null = null;

  private readonly onTraitTarget = () => {
    const t = String(this.model.get?.("compiler_target") ?? "").trim();
    if (t && t !== this.goodTarget) {
      this.targetField.value = t;
      void this.chooseTarget(t);
    }
  };

  /** `onSelectLoop` asks the explorer to select a loop (a click on a facts row). The target is the
   * model's `compiler_target` trait (kept per explorer; a saved notebook's records are keyed by it). */
  constructor(private model: PanelModel, private onSelectLoop: (name: string) => void = () => {}) {
    super();
    if (typeof document !== "undefined") ensureStyle("mlc-lab-compiler-style", css);
    this.rpc = new Rpc(model); // waits as REQUESTS says: the first lowering may start the worker
    this.onDispose(() => this.rpc.dispose());
    this.goodTarget = String(model.get?.("compiler_target") || "cpu").trim() || "cpu";
    const listId = `mlc-compiler-targets-${++datalistIds}`;
    this.targetField = h("input", {
      class: "mlc-compiler-target",
      type: "text",
      list: listId,
      spellcheck: "false",
      "aria-label": "compile for",
      title: "cpu (this machine), cuda, a CUDA architecture (sm_75, sm_80, …), a TVM target tag (nvidia/geforce-rtx-3080) or a target as JSON; Enter compiles",
    }) as HTMLInputElement;
    this.targetField.value = this.goodTarget;
    const datalist = h("datalist", { id: listId }, ...COMMON_TARGETS.map((t) => h("option", { value: t })));
    this.targetField.addEventListener("change", () => void this.chooseTarget(this.targetField.value));
    this.targetError = h("div", { class: "mlc-compiler-target-error", hidden: true, role: "alert" });
    (model as unknown as { on(event: string, cb: () => void): void }).on("change:compiler_target", this.onTraitTarget);
    this.onDispose(() => (this.model as unknown as { off(event: string, cb: () => void): void }).off("change:compiler_target", this.onTraitTarget));
    this.onDispose(() => this.editor?.destroy());
    this.status = h("span", { class: "mlc-muted mlc-compiler-status" });
    this.verdict = h("div", { class: "mlc-compiler-verdict" });
    this.facts = h("div", { class: "mlc-compiler-facts" });
    this.passList = h("div", { class: "mlc-compiler-passes", role: "listbox" });
    this.main = h("div", { class: "mlc-compiler-main" });
    this.el = h(
      "div",
      { class: "mlc-compiler", hidden: true },
      h("div", { class: "mlc-compiler-bar" }, h("b", {}, "Compiler"), h("span", { class: "mlc-muted" }, "for"), this.targetField, datalist, this.status, h("span", { class: "mlc-spacer" }), moreRoomButton()),
      this.targetError,
      this.verdict,
      this.facts,
      h("div", { class: "mlc-compiler-body" }, this.passList, this.main),
    );
  }

  private step: StepId | null = null;

  /** The target the panel compiles for: the last good one ("cpu", "cuda", "sm_75", a tag, JSON). */
  get target(): string {
    return this.goodTarget;
  }

  /** The field's text was committed (Enter, a pick from the list, leaving the field): compile the
   * current step for it. A target Python refuses shows its sentence under the field and the panel
   * keeps its last good view; a good one becomes the explorer's `compiler_target`. */
  async chooseTarget(text: string): Promise<void> {
    const target = text.trim();
    if (!target || target === this.goodTarget) {
      this.targetField.value = this.goodTarget;
      this.setTargetError(null);
      return;
    }
    if (this.step === null) {
      this.adoptTarget(target);
      return;
    }
    await this.show(this.step, target);
  }

  private adoptTarget(target: string): void {
    this.setTargetError(null);
    if (target === this.goodTarget) return;
    this.goodTarget = target;
    this.targetField.value = target;
    if (this.model.set && this.model.get?.("compiler_target") !== target) {
      this.model.set("compiler_target", target);
      this.model.save_changes?.();
    }
  }

  private setTargetError(text: string | null): void {
    this.targetError.hidden = !text;
    this.targetError.textContent = text ?? "";
    this.targetField.classList.toggle("mlc-compiler-target-bad", !!text);
  }

  /** Show the lowering of `step` for `target` (default: the current one; asked once per step and
   * target, then cached). */
  async show(step: StepId | null, target: string = this.goodTarget): Promise<void> {
    if (step === null) return;
    this.step = step;
    const key = `${step}:${target}`;
    this.wanted = key;
    const cached = this.cache.get(key);
    if (cached) {
      this.arrive(key, target, cached);
      return;
    }
    this.status.textContent = `compiling step ${step} for ${target}…`;
    this.el.classList.add("mlc-compiler-loading");
    let got: Lowering | LowerProblem;
    try {
      got = (await this.rpc.call("lower", { step, target })).result;
    } catch (err) {
      const e = err instanceof RpcFailure ? err.error : { summary: err instanceof Error ? err.message : String(err), detail: "", type: "error" };
      got = { step, summary: e.summary, detail: e.detail ?? "", type: e.type };
      if (e.type === "bad_target") this.cache.set(key, got); // the same text stays bad
      if (this.wanted === key) this.arrive(key, target, got);
      return; // other failures are not cached: a worker crash or timeout may go away
    }
    this.cache.set(key, got);
    if (this.wanted === key) this.arrive(key, target, got);
  }

  /** A reply for `target`: a refused new target leaves the last good view on screen. */
  private arrive(key: string, target: string, got: Lowering | LowerProblem): void {
    // a refused target, or one a saved view has no record of: said under the field, the view stays
    if ("summary" in got && (got.type === "bad_target" || got.type === "no_kernel") && target !== this.goodTarget) {
      this.el.classList.remove("mlc-compiler-loading");
      this.setTargetError(got.summary);
      this.wanted = `${this.step}:${this.goodTarget}`;
      if (this.low || this.cache.has(this.wanted)) {
        const last = this.cache.get(this.wanted);
        if (last) this.draw(this.wanted, last);
      } else this.status.textContent = "";
      return;
    }
    if (target !== this.goodTarget) {
      this.adoptTarget(target);
      this.shown = { kind: "code", code: "summary" in got ? "asm" : CODE_KINDS[got.kind][0][0] }; // a new target: its code first
    } else if ("summary" in got && got.type === "bad_target") this.setTargetError(got.summary);
    else this.setTargetError(null);
    this.draw(key, got);
  }

  /** The explorer's selection changed: highlight that loop's instructions and facts row. */
  override select(name: string | null): void {
    this.selected = name;
    this.drawFacts();
    const row = this.facts.querySelector<HTMLElement>(".mlc-compiler-loop.mlc-active");
    if (row && typeof row.scrollIntoView === "function") row.scrollIntoView({ block: "nearest" }); // the tree's pick, in view
    this.drawHits(true);
  }

  get lowering(): Lowering | null {
    return this.low;
  }

  private draw(key: string, got: Lowering | LowerProblem): void {
    this.el.classList.remove("mlc-compiler-loading");
    this.el.dataset.step = key.split(":")[0];
    if ("summary" in got) {
      this.low = null;
      this.status.textContent = `step ${got.step}`;
      this.verdict.className = "mlc-compiler-verdict mlc-compiler-problem";
      this.verdict.textContent = got.summary;
      this.facts.replaceChildren(got.detail ? h("pre", { class: "mlc-compiler-detail" }, got.detail) : "");
      this.passList.replaceChildren();
      this.setEditor("", []);
      return;
    }
    this.low = got;
    const changed = got.passes.filter((p) => p.status === "changed").length;
    const failed = got.passes.filter((p) => p.status === "failed").length;
    const forWhat = got.kind === "cuda" ? `CUDA ${got.arch ?? ""}`.trim() : "CPU";
    this.status.textContent = `step ${got.step}: ${forWhat}, ${got.passes.length} passes, ${changed} changed${failed ? `, ${failed} failed` : ""} · ${(got.seconds * 1000).toFixed(0)} ms`;
    this.verdict.className = `mlc-compiler-verdict${got.ok ? "" : " mlc-compiler-problem"}`;
    this.verdict.textContent = got.verdict || (got.problems[0] ?? "");
    this.verdict.title = this.verdict.textContent; // clamped to three lines: the whole text on hover
    if (this.shown.kind === "pass" && !got.passes[this.shown.index]) this.shown = { kind: "code", code: got.kind === "cuda" ? "source" : "asm" };
    if (this.shown.kind === "code" && !CODE_KINDS[got.kind].some(([k]) => k === (this.shown as { code: CodeKind }).code))
      this.shown = { kind: "code", code: CODE_KINDS[got.kind][0][0] };
    this.drawFacts();
    this.drawPasses();
    this.drawMain();
  }

  private drawFacts(): void {
    const low = this.low;
    if (!low) return;
    const sel = loopFacts(low, this.selected);
    this.facts.classList.toggle("mlc-compiler-facts-cuda", low.kind === "cuda"); // kernels stay, loops scroll
    if (low.kind === "cuda") {
      this.facts.replaceChildren(...cudaFacts(low, sel, this.onSelectLoop));
      return;
    }
    const rows = low.loops.map((f) =>
      h(
        "tr",
        {
          class: `mlc-compiler-loop${sel === f ? " mlc-active" : ""}`,
          dataset: { loop: f.loop },
          title: f.verdict || `${f.asm_lines.length} instructions on lines ${f.line}–${f.end_line}`,
          onclick: () => this.onSelectLoop(f.loop),
        },
        h("td", { class: "mlc-name" }, f.loop),
        h("td", {}, f.kind),
        h("td", {}, widthText(f)),
        h("td", {}, `${f.vector_fma} / ${f.scalar_fma}`),
        h("td", {}, `${f.vector_loads} / ${f.scalar_loads}`),
        h("td", {}, `${f.vector_stores} / ${f.scalar_stores}`),
        h("td", {}, f.unrolled_copies ? `× ${f.unrolled_copies}` : f.in_llvm_ir === false ? "gone" : ""),
        h("td", {}, Object.entries(f.runtime_calls).map(([k, v]) => `${k} ×${v}`).join(", ")),
        h("td", {}, String(f.asm_lines.length) + (f.approximate ? "~" : "")),
      ),
    );
    const head = ["loop", "kind", "vector", "FMA v / s", "loads v / s", "stores v / s", "unrolled", "runtime calls", "instr."];
    this.facts.replaceChildren(h("table", {}, h("tr", {}, ...head.map((t) => h("th", {}, t))), ...rows), sel?.verdict ? h("div", { class: "mlc-compiler-loop-verdict" }, sel.verdict) : "");
  }

  private drawPasses(): void {
    const low = this.low;
    if (!low) return;
    const item = (label: string, cls: string, active: boolean, onclick: () => void, title = "") =>
      h("div", { class: `mlc-compiler-pass ${cls}${active ? " mlc-active" : ""}`, role: "option", title, onclick }, label);
    const codeItems = CODE_KINDS[low.kind].map(([k, label]) =>
      item(`⚙ ${label}`, "mlc-compiler-code-item", this.shown.kind === "code" && this.shown.code === k, () => this.showCode(k)),
    );
    let phase = "";
    const rows: HTMLElement[] = [];
    for (const p of low.passes) {
      if (p.phase !== phase) {
        phase = p.phase;
        rows.push(h("div", { class: "mlc-compiler-phase" }, phase));
      }
      const label = `${"  ".repeat(p.depth)}${p.name}${p.note ? ` (${p.note})` : ""}`;
      const title = p.status === "failed" ? (p.error ?? "failed") : `${p.status} · ${(p.seconds * 1000).toFixed(1)} ms`;
      const el = item(label, `mlc-pass-${p.status}`, this.shown.kind === "pass" && this.shown.index === p.index, () => this.showPass(p.index), title);
      el.dataset.index = String(p.index);
      el.dataset.status = p.status;
      rows.push(el);
    }
    this.passList.replaceChildren(...codeItems, ...rows);
  }

  private showCode(code: CodeKind): void {
    this.shown = { kind: "code", code };
    this.drawPasses();
    this.drawMain();
  }

  private showPass(index: number): void {
    this.shown = { kind: "pass", index };
    this.drawPasses();
    this.drawMain();
  }

  private drawMain(): void {
    const low = this.low;
    if (!low) return;
    const shown = this.shown;
    if (shown.kind === "code") {
      this.setEditor(codeText(low, shown.code), [shown.code === "source" ? cudaLanguage : asmLanguage]);
      this.drawHits(true);
      return;
    }
    const p = low.passes[shown.index];
    this.editorText = null;
    this.editor?.destroy();
    this.editor = null;
    const head = h("div", { class: `mlc-compiler-pass-head mlc-pass-${p.status}` }, `${p.index}: ${p.name} — ${p.status}`);
    if (p.status === "failed") {
      this.main.replaceChildren(head, h("pre", { class: "mlc-compiler-detail" }, p.error ?? ""));
      return;
    }
    const host = h("div", { class: "mlc-compiler-code" });
    this.main.replaceChildren(head, host);
    const after = scriptAfter(low, p);
    const extensions: Extension[] = [lineNumbers(), python(), ...readOnly()];
    if (p.status === "changed") extensions.push(unifiedMergeView({ original: scriptBefore(low, p), mergeControls: false, highlightChanges: true, gutter: true, syntaxHighlightDeletions: true }));
    this.editor = new EditorView({ parent: host, state: EditorState.create({ doc: after, extensions }) });
    const first = getChunks(this.editor.state)?.chunks[0];
    if (first) this.editor.dispatch({ effects: EditorView.scrollIntoView(Math.min(first.fromB, this.editor.state.doc.length), { y: "start", yMargin: 60 }) });
  }

  private setEditor(text: string, lang: Extension[]): void {
    if (this.editor && this.editorText === text) return;
    this.editor?.destroy();
    const host = h("div", { class: "mlc-compiler-code" });
    this.main.replaceChildren(host);
    this.editorText = text;
    this.editor = new EditorView({ parent: host, state: EditorState.create({ doc: text, extensions: [lineNumbers(), ...lang, ...readOnly(), hitsField] }) });
  }

  /** Mark the selected loop's instructions: in the assembly (its .loc lines name the script's
   * lines), in the LLVM IR (through each instruction's !dbg location), in the CUDA source (the
   * body of the `for` over the loop's variable). */
  private drawHits(scroll: boolean): void {
    const low = this.low;
    const editor = this.editor;
    const code = this.shown.kind === "code" ? this.shown.code : null;
    if (!low || !editor || (code !== "asm" && code !== "llvm" && code !== "source")) {
      this.el.dataset.highlighted = "0";
      return;
    }
    const f = loopFacts(low, this.selected);
    const lines = (code === "source" ? cudaLoopLines(low, this.selected) : code === "asm" ? f?.asm_lines : f?.ir_lines) ?? [];
    editor.dispatch({ effects: setHits.of(lines) });
    this.el.dataset.highlighted = String(lines.length);
    if (scroll && lines.length) {
      const pos = editor.state.doc.line(Math.min(lines[0], editor.state.doc.lines)).from;
      editor.dispatch({ effects: EditorView.scrollIntoView(pos, { y: "start", yMargin: 40 }) });
    }
  }
}

/** The CUDA facts: per kernel (registers, stack frame, spills, shared memory, local arrays; from
 * ptxas when it ran, else from the source, said under the table), then per loop what it became
 * (a block or thread index, a loop in every thread, unrolled copies, one wide access), each row a
 * link to that loop in the explorer's tree. */
export function cudaFacts(low: Lowering, sel: LoopFactsInfo | null, onSelectLoop: (name: string) => void): Array<HTMLElement | string> {
  const kernelRows = low.kernels.map((k) => {
    const local = (low.kernel_arrays?.[k.name] ?? []).filter((a) => a.scope === "local");
    const localBytes = local.reduce((n, a) => n + (a.bytes ?? 0), 0);
    const fromPtxas = (k.facts_from ?? (k.registers == null ? "source" : "ptxas")) === "ptxas";
    const stack = k.stack_bytes ?? 0;
    const big = stack >= LARGE_STACK_BYTES || k.spill_stores > 0;
    return h(
      "tr",
      { class: `mlc-compiler-kernel${big ? " mlc-compiler-kernel-stack" : ""}`, dataset: { kernel: k.name, from: fromPtxas ? "ptxas" : "source" } },
      h("td", { class: "mlc-name" }, k.name),
      h("td", { dataset: { fact: "registers" } }, fromPtxas ? String(k.registers) : "?"),
      h("td", { dataset: { fact: "stack" } }, fromPtxas ? bytesText(stack) : "?"),
      h("td", { dataset: { fact: "spills" } }, fromPtxas ? `${bytesText(k.spill_stores)} / ${bytesText(k.spill_loads)}` : "?"),
      h("td", { dataset: { fact: "shared" } }, bytesText(k.shared_bytes)),
      h("td", { dataset: { fact: "local" } }, local.length ? `${bytesText(localBytes)} (${local.map((a) => a.name).join(", ")})` : "none"),
      h("td", {}, fromPtxas ? `${k.vector_loads} / ${k.scalar_loads}` : "?"),
      h("td", {}, fromPtxas ? String(k.fma) : "?"),
      h("td", { dataset: { fact: "from" } }, fromPtxas ? "ptxas" : "CUDA source"),
    );
  });
  const kernelHead = ["kernel", "registers", "stack frame", "spills st / ld", "shared", "local arrays", "loads v / s", "FMA", "from"];
  const loopRows = low.loops.map((f) =>
    h(
      "tr",
      { class: `mlc-compiler-loop mlc-compiler-cuda-loop${sel === f ? " mlc-active" : ""}`, dataset: { loop: f.loop }, title: `${f.loop}: ${f.verdict}`, onclick: () => onSelectLoop(f.loop) },
      h("td", { class: "mlc-name" }, f.loop),
      h("td", {}, f.kind),
      h("td", {}, f.extent == null ? "?" : String(f.extent)),
      h("td", { class: "mlc-compiler-became" }, f.verdict),
    ),
  );
  return [
    kernelRows.length
      ? h("table", { class: "mlc-compiler-kernels" }, h("tr", {}, ...kernelHead.map((t) => h("th", {}, t))), ...kernelRows)
      : h("div", { class: "mlc-muted" }, low.ptx_error ? `no kernels: ${low.ptx_error}` : "no kernels"),
    h("div", { class: "mlc-muted mlc-compiler-kernel-source" }, kernelSourceText(low)),
    loopRows.length ? h("div", { class: "mlc-compiler-cuda-loops-box" }, h("table", { class: "mlc-compiler-cuda-loops" }, h("tr", {}, ...["loop", "kind", "extent", "became"].map((t) => h("th", {}, t))), ...loopRows)) : "",
  ];
}
