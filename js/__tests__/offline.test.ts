// @vitest-environment jsdom
// Views without a kernel: requests answered from the widget's records (saved models), the
// explorer stepping through its recorded steps, and a plain refusal for what needs Python.
import { describe, expect, it } from "vitest";
import { explorerOffline } from "../explorer/offline";
import { KERNEL_LOST, NEEDS_KERNEL, canonicalJson, kernelLost, kernelNotice, markKernel, recordKey, setOfflineHandler } from "../lib/offline";
import { Rpc, RpcFailure, bufferText } from "../lib/rpc";
import { SavedWidgets, type SavedState } from "../lib/saved";
import recordKeys from "../../tests/fixtures/record_keys.json";

const b64 = (text: string) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
const step = (id: number, parent: number | null, script: string) =>
  JSON.stringify({ id, parent, kind: "apply", primitive: id ? "split" : null, label: `step ${id}`, script, loop_tree: {}, trace: "", changed_lines: [], created: [], decisions: [], measurement: null });

function savedExplorer(): SavedState {
  const rec = (key: string, data?: string, result = "null", buffers: string[] = []) => ({
    model_name: "WidgetModel",
    model_module: "@jupyter-widgets/base",
    state: { key, result, buffers: buffers.map(() => null) },
    buffers: [...(data ? [{ path: ["data"], encoding: "base64" as const, data: b64(data) }] : []), ...buffers.map((b, i) => ({ path: ["buffers", i], encoding: "base64" as const, data: b64(b) }))],
  });
  return {
    e: {
      model_name: "AnyModel",
      model_module: "anywidget",
      state: {
        _mlc_entry: "explorer",
        history: { from: 2, steps: [{ id: 2, parent: 1, kind: "apply", primitive: "split", label: "step 2" }] },
        _mlc_recorded: { "step:0": "IPY_MODEL_r0", "step:1": "IPY_MODEL_r1", "step:2": "IPY_MODEL_r2", [recordKey("access_footprint", { loop: "j", at: { i: 1 } })]: "IPY_MODEL_f" },
      },
      buffers: [{ path: ["step"], encoding: "base64", data: b64(step(2, 1, "two")) }],
    },
    r0: rec("step:0", step(0, null, "zero")),
    r1: rec("step:1", step(1, 0, "one")),
    r2: rec("step:2", step(2, 1, "two")),
    f: rec("access_footprint", undefined, '{"ok":1}', ["bytes!"]),
  };
}

const cur = (m: { get(n: string): any }) => JSON.parse(bufferText(m.get("step"))).id;

describe("offline answers", () => {
  it("writes record keys as Python's json.dumps(sort_keys=True) does", () => {
    expect(canonicalJson({ loop: "j", at: { k: 2, i: 1.5 }, none: undefined, s: "é" })).toBe('{"at":{"i":1.5,"k":2},"loop":"j","s":"é"}');
  });

  it("keys records as mlc_lab.model.requests.record_key does (tests/fixtures/record_keys.json, read by pytest too)", () => {
    expect(recordKeys.cases.length).toBeGreaterThan(3);
    for (const c of recordKeys.cases) expect(recordKey(c.method, c.params)).toBe(c.key);
  });

  it("answers recorded replies and refuses the rest; moving between steps is no request", async () => {
    const widgets = new SavedWidgets(savedExplorer());
    const model = await widgets.get_model("e");
    setOfflineHandler(model, explorerOffline(model));
    const rpc = new Rpc(model as never);
    const fp = await rpc.request("access_footprint", { at: { i: 1 }, loop: "j" });
    expect(fp.result).toEqual({ ok: 1 });
    expect(bufferText(fp.buffers[0])).toBe("bytes!");
    const hist = await rpc.request<{ from: number; steps: Array<{ id: number }> }>("history");
    expect(hist.result.from).toBe(0);
    expect(hist.result.steps.map((s) => s.id)).toEqual([0, 1, 2]);
    // the view answers these from the steps it holds (js/explorer/view.ts, moveTo): no second copy here
    for (const [method, params] of [["goto", { step: 0 }], ["script_at", { step: 2 }]] as const)
      await expect(rpc.request(method, params)).rejects.toThrow(/needs a running kernel/);
    expect(cur(model)).toBe(2);
    await expect(rpc.request("apply", { primitive: "split" })).rejects.toBeInstanceOf(RpcFailure);
    await expect(rpc.request("access_footprint", { loop: "k" })).rejects.toThrow(/needs a running kernel/);
  });

  it("answers the panels from compressed per-step records, recorded errors as errors, and says when a step was cut", async () => {
    const gz = async (text: string) => {
      const bytes0 = new TextEncoder().encode(text);
      const source = new ReadableStream({ start: (c) => (c.enqueue(bytes0), c.close()) });
      const stream = source.pipeThrough(new CompressionStream("gzip"));
      const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
      let bin = "";
      for (const b of bytes) bin += String.fromCharCode(b);
      return btoa(bin);
    };
    const footprintAt1 = recordKey("access_footprint", { loop: "j_1", at: {}, sweep_threads: true, step: 1 });
    const lowerAt1 = recordKey("lower", { step: 1, target: "cpu" });
    const cudaAt1 = recordKey("cuda_source", { step: 1, ptx: true });
    const saved = savedExplorer();
    const e = saved.e.state as Record<string, any>;
    e.record_cut = { max_steps: 3, steps: 5, steps_recorded: 3, replies_dropped: 0 };
    e._mlc_recorded = { ...e._mlc_recorded, [footprintAt1]: "IPY_MODEL_fp", [lowerAt1]: "IPY_MODEL_lo", [cudaAt1]: "IPY_MODEL_cu" };
    e.step = null;
    saved.e.buffers = [{ path: ["step"], encoding: "base64", data: b64(step(1, 0, "one")) }];
    const rec = (key: string, state: Record<string, unknown>, buffers: Array<{ path: Array<string | number>; data: string }>) => ({
      model_name: "WidgetModel",
      model_module: "@jupyter-widgets/base",
      state: { key, ...state },
      buffers: buffers.map((b) => ({ ...b, encoding: "base64" as const })),
    });
    saved.fp = rec(footprintAt1, { result: '{"at1":true}', encoding: "gzip", buffers: [null] }, [{ path: ["buffers", 0], data: await gz("cells") }]);
    saved.lo = rec(lowerAt1, { result: "", encoding: "gzip", buffers: [] }, [{ path: ["data"], data: await gz('{"asm":"vfmadd"}') }]);
    saved.cu = rec(cudaAt1, { result: '{"summary":"no GPU kernel: loops unbound","type":"gpu_check"}', ok: false, buffers: [] }, []);
    const widgets = new SavedWidgets(saved);
    const model = await widgets.get_model("e");
    setOfflineHandler(model, explorerOffline(model));
    const rpc = new Rpc(model as never);
    const fp = await rpc.request("access_footprint", { loop: "j_1", at: {}, sweep_threads: true });
    expect(fp.result).toEqual({ at1: true });
    expect(bufferText(fp.buffers[0])).toBe("cells");
    expect((await rpc.request("lower", { step: 1, target: "cpu" })).result).toEqual({ asm: "vfmadd" });
    await expect(rpc.request("cuda_source", { step: 1, ptx: true })).rejects.toThrow(/no GPU kernel/);
    await expect(rpc.request("lower", { step: 1, target: "cuda" })).rejects.toThrow(/needs a running kernel/);
    model.set("step", new DataView(new TextEncoder().encode(step(0, null, "zero")).buffer));
    // the footprint was recorded at step 1, not at step 0
    await expect(rpc.request("access_footprint", { loop: "j_1", at: {}, sweep_threads: true })).rejects.toThrow(/needs a running kernel/);
  });

  it("a saved explorer steps through its recorded steps with the live view's code: undo, redo, go to, diff", async () => {
    const { default: widget } = await import("../explorer");
    const saved = savedExplorer();
    (saved.e.state as Record<string, any>).record_cut = { max_steps: 3, steps: 5, steps_recorded: 3, replies_dropped: 0 };
    (saved.e.state as Record<string, any>).history = { from: 0, steps: [0, 1, 2, 3, 4].map((id) => ({ id, parent: id ? id - 1 : null, kind: "apply", primitive: null, label: `step ${id}` })) };
    const model = await new SavedWidgets(saved).get_model("e");
    markKernel(model, () => false);
    setOfflineHandler(model, explorerOffline(model));
    const el = document.createElement("div");
    document.body.append(el);
    const cleanup = await widget.render({ model: model as never, el, signal: new AbortController().signal } as never);
    const settle = async () => {
      for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
    };
    const code = () => el.querySelector(".mlc-code-main .cm-content")?.textContent ?? "";
    const click = async (sel: string) => {
      el.querySelector<HTMLElement>(sel)!.click();
      await settle();
    };
    expect(code()).toContain("two");
    await click(".mlc-undo");
    expect([cur(model), code()]).toEqual([1, "one"]);
    await click(".mlc-undo");
    expect([cur(model), code()]).toEqual([0, "zero"]);
    await click(".mlc-redo");
    expect(cur(model)).toBe(1);
    await click(".mlc-hrow[data-step='2']");
    expect([cur(model), code()]).toEqual([2, "two"]);
    const mode = el.querySelector(".mlc-diff-mode") as HTMLSelectElement;
    mode.value = "unified";
    mode.dispatchEvent(new Event("change"));
    await settle();
    expect(el.querySelector(".mlc-code-diff")?.textContent).toContain("one"); // the parent's script, from its record
    mode.value = "off";
    mode.dispatchEvent(new Event("change"));
    await click(".mlc-hrow[data-step='4']"); // left out of the record
    expect(el.querySelector(".mlc-banner")?.textContent).toContain("Step 4 is not in this saved record: it keeps the last 3 steps of 5");
    expect(cur(model)).toBe(2);
    expect(el.querySelector(".mlc-offline-banner[data-refused]")).toBeNull();
    if (typeof cleanup === "function") cleanup();
    el.remove();
  });

  it("leaves live models alone", async () => {
    const sent: unknown[] = [];
    const model = { get: () => undefined, send: (m: unknown) => sent.push(m), on: () => {}, off: () => {} };
    markKernel(model, () => true);
    const rpc = new Rpc(model as never, 0);
    void rpc.request("goto", { step: 0 });
    expect(sent).toHaveLength(1);
  });
});

describe("a view whose kernel went away after it was drawn (a restart)", () => {
  it("answers the first refused request with a notice that says the kernel was restarted, not 'a saved view'", async () => {
    let alive = true;
    const sent: unknown[] = [];
    const model = { get: () => undefined, send: (m: unknown) => sent.push(m), on: () => {}, off: () => {} };
    markKernel(model, () => alive);
    const el = document.createElement("div");
    const cleanup = kernelNotice(model, el, () => alive);
    expect(el.querySelector(".mlc-offline-banner")).toBeNull(); // drawn with a kernel: no notice
    alive = false; // the kernel restarts
    const rpc = new Rpc(model as never, 0);
    const failure = await rpc.request("goto", { step: 0 }).catch((e: unknown) => e);
    expect(sent).toHaveLength(0);
    expect(failure).toBeInstanceOf(RpcFailure);
    expect((failure as RpcFailure).error.summary).toBe(NEEDS_KERNEL);
    expect(NEEDS_KERNEL).toContain("a kernel restarted or shut down since its cell ran");
    const banner = el.querySelector<HTMLElement>(".mlc-offline-banner")!; // the first key press is answered
    expect(banner.textContent).toBe('"goto" needs a running kernel: the kernel behind this view was restarted or shut down. Re-run the notebook cell that made it to apply, measure or tune.');
    cleanup();
    expect(el.querySelector(".mlc-offline-banner")).toBeNull();
  });

  it("says at once that the kernel went, and fails the requests in flight with how to go on", async () => {
    let alive = true;
    const model = { get: () => undefined, send: () => {}, on: () => {}, off: () => {} };
    markKernel(model, () => alive);
    const el = document.createElement("div");
    kernelNotice(model, el, () => alive);
    const rpc = new Rpc(model as never, 0); // no time-out: before, a measurement in flight waited for good
    const inFlight = rpc.request("measure", { step: 1 }).catch((e: unknown) => e);
    expect(rpc.inFlight).toBe(1);
    alive = false;
    kernelLost(model); // what the loader does when ipywidgets marks the comm dead (a restart)
    const failure = (await inFlight) as RpcFailure;
    expect(failure).toBeInstanceOf(RpcFailure);
    expect(failure.error).toEqual({ summary: KERNEL_LOST, type: "no_kernel" });
    expect(rpc.inFlight).toBe(0);
    const banner = el.querySelector<HTMLElement>(".mlc-offline-banner")!; // before any click
    expect(banner.textContent).toBe(KERNEL_LOST);
    expect(KERNEL_LOST).toContain("restarted or shut down");
    expect(KERNEL_LOST).toContain("Re-run the notebook cell that made it");
  });

  it("an explorer measuring when its kernel goes no longer says measuring…", async () => {
    const { default: widget } = await import("../explorer");
    const { fakeModel, render, tick } = await import("./fixtures");
    let live = true;
    const model = fakeModel({ measuring: { step: 0, target: "cpu" } });
    markKernel(model, () => live);
    const view = await render(widget, model);
    await tick();
    expect(view.el.querySelector(".mlc-hmeasuring")).not.toBeNull();
    expect((view.el.querySelector(".mlc-measure") as HTMLButtonElement).disabled).toBe(true);
    live = false;
    kernelLost(model);
    await tick();
    expect(view.el.querySelector(".mlc-hmeasuring")).toBeNull();
    expect((view.el.querySelector(".mlc-measure") as HTMLButtonElement).disabled).toBe(false);
    view.dispose();
  });

  it("a view drawn without a kernel says it is a saved view at once", () => {
    const model = {};
    const el = document.createElement("div");
    kernelNotice(model, el, () => false);
    expect(el.querySelector(".mlc-offline-banner")!.textContent).toContain("Saved view, no kernel");
  });
});

describe("a saved explorer whose record was cut", () => {
  it("says so above its history, and only without a kernel", async () => {
    const { default: widget } = await import("../explorer");
    const { fakeModel } = await import("./fixtures");
    const cut = { max_steps: 200, steps: 250, steps_recorded: 200, replies_dropped: 3 };
    const render = async (live: boolean) => {
      const model = fakeModel({ record_cut: cut } as never);
      markKernel(model, () => live);
      const el = document.createElement("div");
      document.body.append(el);
      const cleanup = await widget.render({ model: model as never, el, signal: new AbortController().signal } as never);
      await new Promise((r) => setTimeout(r, 0));
      const note = el.querySelector(".mlc-record-cut")?.textContent ?? null;
      if (typeof cleanup === "function") (cleanup as () => void)();
      el.remove();
      return note;
    };
    const offline = await render(false);
    expect(offline).toContain("keeps 200 of the session's 250 steps (records are capped at 200 steps)");
    expect(offline).toContain("3 older panel answers were dropped");
    expect(await render(true)).toBeNull();
  });
});
