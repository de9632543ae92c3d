// The "CUDA" view of the code panel: the kernels a GPU schedule compiles to (no GPU needed), their
// launch facts (grid, threads per block, shared memory) and the PTX when nvcc is there; for a
// program with unbound loops, the message naming them. Python: Explorer.cuda_source.

import { StreamLanguage, type StringStream } from "@codemirror/language";
import { EditorState } from "@codemirror/state";
import { EditorView, lineNumbers } from "@codemirror/view";
import { h } from "../lib/dom";
import { jpCodeTheme } from "../lib/cm_theme";
import { Panel } from "../lib/panel";
import { Rpc, RpcFailure } from "../lib/rpc";
import type { CudaKernel, CudaSource } from "../lib/model";
import type { StepId } from "../lib/types";

/** The `cuda_source` request's result and its kernels (mlc_lab/model/requests.py, generated). */
export type KernelInfo = CudaKernel;
export type CudaResult = CudaSource;

export interface CudaProblem {
  step: StepId;
  summary: string;
  detail: string;
  kind: string;
}

const KEYWORDS = new Set(
  "if else for while do return break continue switch case default goto sizeof extern static const volatile inline struct union typedef __restrict__ __global__ __device__ __host__ __shared__ __constant__ __launch_bounds__ __syncthreads __forceinline__".split(" "),
);
const TYPES = new Set("void int unsigned signed char short long float double bool half half2 float2 float4 int2 int4 uint size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t dim3".split(" "));
const BUILTINS = new Set(["threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"]);

/** A small C/CUDA tokenizer for CodeMirror's stream parser (comments, strings, numbers, words). */
export const cudaLanguage = StreamLanguage.define<{ inComment: boolean }>({
  name: "cuda",
  startState: () => ({ inComment: false }),
  token(stream: StringStream, state) {
    if (state.inComment) {
      if (stream.skipTo("*/")) {
        stream.next();
        stream.next();
        state.inComment = false;
      } else stream.skipToEnd();
      return "comment";
    }
    if (stream.eatSpace()) return null;
    if (stream.match("//")) {
      stream.skipToEnd();
      return "comment";
    }
    if (stream.match("/*")) {
      state.inComment = true;
      return "comment";
    }
    if (stream.match(/^#\s*\w+/)) {
      stream.skipToEnd();
      return "meta";
    }
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return "string";
    if (stream.match(/^(?:0x[\da-f.]+(?:p[+-]?\d+)?|\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)[fFuUlL]*/i)) return "number";
    const word = stream.match(/^[A-Za-z_]\w*/) as RegExpMatchArray | null;
    if (word) {
      const w = word[0];
      if (KEYWORDS.has(w)) return "keyword";
      if (TYPES.has(w)) return "typeName";
      if (BUILTINS.has(w)) return "variableName.standard";
      return stream.peek() === "(" ? "variableName.function" : "variableName";
    }
    if (stream.match(/^[+\-*/%=<>!&|^~?:]+/)) return "operator";
    stream.next();
    return "punctuation";
  },
});

function codeView(parent: HTMLElement): EditorView {
  return new EditorView({
    parent,
    state: EditorState.create({ doc: "", extensions: [lineNumbers(), EditorState.readOnly.of(true), EditorView.editable.of(false), cudaLanguage, ...jpCodeTheme()] }),
  });
}

/** "8 × 1 blocks" style text of a kernel's launch shape from its thread extents. */
export function launchShape(k: KernelInfo): { grid: string; block: string } {
  const ext = k.thread_extents ?? {};
  const dims = (prefix: string) => ["x", "y", "z"].map((d) => ext[`${prefix}.${d}`] ?? 1);
  const trim = (v: number[]) => {
    while (v.length > 1 && v[v.length - 1] === 1) v.pop();
    return v.join(" × ");
  };
  return { grid: trim(dims("blockIdx")), block: trim(dims("threadIdx")) };
}

export function formatBytes(n: number | undefined): string {
  if (!n) return "0 B";
  return n >= 1024 ? `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} KiB` : `${n} B`;
}

export class CudaPanel extends Panel {
  readonly el: HTMLElement;
  private rpc: Rpc;
  private facts: HTMLElement;
  private message: HTMLElement;
  private status: HTMLElement;
  private which: HTMLSelectElement;
  private editorHost: HTMLElement;
  private editor: EditorView;
  private cache = new Map<string, CudaResult | CudaProblem>(); // a step never changes
  private shown: string | null = null;
  private wanted: string | null = null;

  constructor(model: ConstructorParameters<typeof Rpc>[0]) {
    super();
    this.rpc = new Rpc(model); // waits as REQUESTS says: the first compile starts the worker
    this.onDispose(() => this.rpc.dispose());
    this.which = h("select", { class: "mlc-cuda-which", title: "kernel source or PTX" }) as HTMLSelectElement;
    this.which.append(h("option", { value: "source" }, "CUDA C++"), h("option", { value: "ptx" }, "PTX"));
    this.which.addEventListener("change", () => this.drawCode());
    this.status = h("span", { class: "mlc-muted mlc-cuda-status" });
    this.facts = h("div", { class: "mlc-cuda-facts" });
    this.message = h("div", { class: "mlc-cuda-message", hidden: true });
    this.editorHost = h("div", { class: "mlc-cuda-code" });
    this.el = h("div", { class: "mlc-cuda", hidden: true }, h("div", { class: "mlc-cuda-bar" }, h("b", {}, "CUDA"), this.which, this.status), this.facts, this.message, this.editorHost);
    this.editor = codeView(this.editorHost);
    this.onDispose(() => this.editor.destroy());
  }

  get text(): string {
    return this.editor.state.doc.toString();
  }

  /** Show the CUDA program of `step` (compiled once per step, in the kernel's worker). */
  async show(step: StepId | null): Promise<void> {
    if (step === null) return;
    const key = String(step);
    this.wanted = key;
    const cached = this.cache.get(key);
    if (cached) {
      this.draw(key, cached);
      return;
    }
    this.status.textContent = `compiling step ${key} for CUDA…`;
    this.el.classList.add("mlc-cuda-loading");
    let got: CudaResult | CudaProblem;
    try {
      const reply = await this.rpc.call("cuda_source", { step, ptx: true });
      got = reply.result;
    } catch (err) {
      const e = err instanceof RpcFailure ? err.error : { summary: err instanceof Error ? err.message : String(err), detail: "", type: "error" };
      got = { step, summary: e.summary, detail: e.detail ?? "", kind: e.type ?? "error" };
      if (!(err instanceof RpcFailure) || e.type === "timeout" || e.type === "crash") {
        if (this.wanted === key) this.draw(key, got);
        return; // not cached: a transient failure may go away
      }
    }
    this.cache.set(key, got);
    if (this.wanted === key) this.draw(key, got);
  }

  private result: CudaResult | null = null;

  private draw(key: string, got: CudaResult | CudaProblem): void {
    this.el.classList.remove("mlc-cuda-loading");
    this.shown = key;
    this.el.dataset.step = key;
    if ("summary" in got) {
      this.result = null;
      this.status.textContent = `step ${key}`;
      this.facts.replaceChildren();
      this.message.hidden = false;
      this.message.replaceChildren(
        h("div", { class: "mlc-cuda-problem" }, got.summary),
        got.detail ? h("pre", { class: "mlc-cuda-problem-detail" }, got.detail) : "",
        got.kind === "gpu_check" ? h("div", { class: "mlc-muted" }, "Bind loops with bind (key b) to blockIdx.* / threadIdx.*, then look again.") : "",
      );
      this.editorHost.hidden = true;
      this.which.disabled = true;
      return;
    }
    this.result = got;
    this.message.hidden = true;
    this.editorHost.hidden = false;
    this.which.disabled = false;
    const n = got.kernels.length;
    this.status.textContent = `step ${key}: ${n} kernel${n === 1 ? "" : "s"}`;
    const rows = got.kernels.map((k) => {
      const { grid, block } = launchShape(k);
      return h(
        "tr",
        { class: "mlc-cuda-kernel", dataset: { kernel: k.name } },
        h("td", { class: "mlc-name" }, k.name),
        h("td", {}, grid),
        h("td", {}, `${block}${k.threads_per_block ? ` (${k.threads_per_block})` : ""}`),
        h("td", {}, formatBytes(k.shared_bytes)),
        h("td", {}, formatBytes(k.local_bytes)),
      );
    });
    this.facts.replaceChildren(
      h("table", {}, h("tr", {}, ...["kernel", "grid (blocks)", "threads per block", "shared", "local"].map((t) => h("th", {}, t))), ...rows),
    );
    this.drawCode();
  }

  private drawCode(): void {
    const r = this.result;
    if (!r) return;
    const ptx = this.which.value === "ptx";
    const text = ptx ? (r.ptx ?? `// no PTX: ${r.ptx_error ?? "nvcc is not installed"}`) : r.source;
    this.editor.dispatch({ changes: { from: 0, to: this.editor.state.doc.length, insert: text }, scrollIntoView: false });
  }

  get shownStep(): string | null {
    return this.shown;
  }
}
