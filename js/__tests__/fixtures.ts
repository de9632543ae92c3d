// Shared test data: the loop tree of mm_relu as mlc_lab's Session reports it, and a fake model.
import { afterEach, vi } from "vitest";
import type { BlockNode, LoopNode, LoopTree, StepData, StepSummary } from "../lib/types";

export function loop(name: string, extent: number, children: Array<LoopNode | BlockNode> = [], extra: Partial<LoopNode> = {}): LoopNode {
  return { kind: "loop", name, qualified: name, extent, min: 0, loop_kind: "serial", thread: null, annotations: {}, line: 1, end_line: 1, children, ...extra };
}

export function block(name: string, kinds: string[], extra: Partial<BlockNode> = {}): BlockNode {
  return {
    kind: "block",
    name,
    iter_vars: kinds.map((k, i) => ({ name: `v${i}`, kind: k, extent: 128, binding: ["i", "j", "k"][i] })),
    reads: ["A[vi, vk]", "B[vk, vj]"],
    writes: [`${name}[vi, vj]`],
    has_init: kinds.includes("reduce"),
    predicate: null,
    alloc_buffers: [],
    annotations: {},
    line: 1,
    end_line: 1,
    children: [],
    ...extra,
  };
}

/** mm_relu: Y under i/j/k (lines 12-19), C under i/j (lines 20-25). */
export function mmRelu(): LoopTree {
  const y = block("Y", ["spatial", "spatial", "reduce"], { line: 13, end_line: 19 });
  const c = block("C", ["spatial", "spatial"], { reads: ["Y[vi, vj]"], writes: ["C[vi, vj]"], line: 21, end_line: 25 });
  return {
    func: "mm_relu",
    functions: [
      {
        kind: "func",
        name: "mm_relu",
        buffers: [{ name: "A", shape: [128, 128], dtype: "float32", scope: "global", origin: "param" }],
        children: [
          loop("i", 128, [loop("j", 128, [loop("k", 128, [y], { line: 12, end_line: 19 })], { qualified: "Y/j", line: 12, end_line: 19 })], { qualified: "Y/i", line: 12, end_line: 19 }),
          loop("i", 128, [loop("j", 128, [c], { qualified: "C/j", line: 20, end_line: 25 })], { qualified: "C/i", line: 20, end_line: 25 }),
        ],
      },
    ],
  };
}

/** How Python sends the loop tree: UTF-8 JSON in a binary buffer. */
export function treeBytes(tree: unknown): DataView {
  return new DataView(new TextEncoder().encode(JSON.stringify(tree)).buffer);
}

export const SCRIPT = Array.from({ length: 26 }, (_, i) => `line ${i + 1}`).join("\n");

/** The explorer's first step as Python sends it (a StepView), with `patch` over it. */
export function stepData(patch: Partial<StepData> = {}): StepData {
  return { id: 0, parent: null, kind: "root", primitive: null, label: "original program", script: SCRIPT, loop_tree: mmRelu(), trace: "", changed_lines: [], created: [], decisions: [], ...patch };
}

/** A history entry (StepSummary); extra fields such as `children` are ignored by the view. */
type HistoryEntry = StepSummary | { id: number | string; parent: number | string | null; label: string; primitive?: string | null; kind?: string; children?: unknown };

export interface FakeInitial {
  step?: Partial<StepData>;
  history?: HistoryEntry[];
  [trait: string]: unknown;
}

type Handler = (...args: any[]) => void;

/** The part of anywidget's model every view uses (get/set/on/off/save_changes/send), over `state`;
 * `emit` plays a custom message from Python, `handlerCount` says how many listeners are left. */
export function eventModel(state: Record<string, unknown>) {
  const handlers = new Map<string, Set<Handler>>();
  return {
    state,
    get: (k: string) => state[k],
    set: (k: string, v: unknown) => {
      state[k] = v;
      for (const h of handlers.get(`change:${k}`) ?? []) h();
    },
    on: (event: string, h: Handler) => {
      if (!handlers.has(event)) handlers.set(event, new Set());
      handlers.get(event)!.add(h);
    },
    off: (event?: string | null, h?: Handler | null) => {
      if (!event) handlers.clear();
      else if (!h) handlers.delete(event);
      else handlers.get(event)?.delete(h);
    },
    save_changes: vi.fn(),
    send: vi.fn(),
    widget_manager: { get_model: vi.fn() },
    /** Python -> front end: a custom message. */
    emit(msg: unknown, buffers: DataView[] = []) {
      for (const h of handlers.get("msg:custom") ?? []) h(msg, buffers);
    },
    handlerCount: () => [...handlers.values()].reduce((n, s) => n + s.size, 0),
  };
}

/** The explorer's model: an event model over the explorer's traits, with Python's side of the wire. */
export function fakeModel(initial: FakeInitial = {}) {
  const { step: stepPatch, history: historyInit, ...traits } = initial;
  let step = stepData(stepPatch);
  const model = eventModel({
    func: "mm_relu",
    step: treeBytes(step),
    history: { from: 0, steps: historyInit ?? [{ id: 0, parent: null, kind: "root", primitive: null, label: "original program" }] },
    selection: {},
    error: {},
    failures: [],
    height: "600px",
    ...traits,
  });
  const requests = (): Array<{ id: string; method: string; params: any }> =>
    model.send.mock.calls.map((c: any[]) => c[0]).filter((m: any) => m?.kind === "mlc-request");
  return Object.assign(model, {
    /** Python -> front end: a new current step (fields over the last one sent). */
    pushStep(patch: Partial<StepData>) {
      step = { ...step, ...patch };
      model.set("step", treeBytes(step));
    },
    /** Python -> front end: history entries from `from` on (from 0: the whole list). */
    pushHistory(steps: HistoryEntry[], from = 0) {
      model.set("history", { from, steps });
    },
    /** The requests the view sent, in order. */
    requests,
    /** Answer the latest request. */
    reply(result: unknown = {}, ok = true, buffers: DataView[] = []) {
      const req = requests().at(-1)!;
      model.emit(ok ? { kind: "mlc-response", id: req.id, ok, result } : { kind: "mlc-response", id: req.id, ok, error: result }, buffers);
    },
  });
}

/** A widget rendered into a fresh element of the document; `dispose` runs its cleanup (once) and removes it. */
export interface Rendered {
  el: HTMLElement;
  dispose(): void;
}

/** Renders `widget` for `model` as anywidget does (`extra`: more of the render's arguments, such as a host). */
export async function render(widget: { render: (...args: any[]) => unknown }, model: unknown, extra: Record<string, unknown> = {}): Promise<Rendered> {
  const el = document.createElement("div");
  document.body.append(el);
  let cleanup = (await widget.render({ model, el, signal: new AbortController().signal, ...extra })) as (() => void) | void;
  return {
    el,
    dispose() {
      if (typeof cleanup === "function") cleanup();
      cleanup = undefined;
      el.remove();
    },
  };
}

/** jsdom has no canvas: a 2-D context that makes ImageData and records what is put; animation frames
 * go to `requestFrame` (by default never run). Undone by `vi.restoreAllMocks()` and `vi.unstubAllGlobals()`. */
export function stubCanvas(requestFrame: (cb: FrameRequestCallback) => number = () => 0): void {
  vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockImplementation(function (this: HTMLCanvasElement) {
    return {
      createImageData: (w: number, h: number) => ({ width: w, height: h, data: new Uint8ClampedArray(w * h * 4) }),
      putImageData: vi.fn(),
    } as any;
  });
  vi.stubGlobal("requestAnimationFrame", requestFrame);
  vi.stubGlobal("cancelAnimationFrame", () => undefined);
}

/** A view of `widget` that each test mounts on a fake explorer model, disposed after each test. */
export function mounted(widget: { render: (...args: any[]) => unknown }) {
  let view: Rendered | null = null;
  afterEach(() => view?.dispose());
  return {
    async mount(initial: FakeInitial = {}) {
      const model = fakeModel(initial);
      view = await render(widget, model);
      return model;
    },
    get el(): HTMLElement {
      return view!.el;
    },
    $: (sel: string) => view!.el.querySelector<HTMLElement>(sel),
    $$: (sel: string) => Array.from(view!.el.querySelectorAll<HTMLElement>(sel)),
  };
}

/** The red, green and blue of pixel ``i`` of a painted frame. */
export const px = (u32: Uint32Array | null, i: number) => Array.from(new Uint8Array(u32!.buffer, i * 4, 3));

export const tick = () => new Promise((r) => setTimeout(r, 0));
