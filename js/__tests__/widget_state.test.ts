// @vitest-environment jsdom
// JupyterLab's own "save widget state" (ipywidgets' get_state_sync) made complete for mlc_lab
// (js/labextension/src/widget_state.ts), and saved records whose bytes were lost read as missing.
import { describe, expect, it } from "vitest";
import { completeWidgetState, type ManagerLike } from "../labextension/src/widget_state";
import { explorerOffline } from "../explorer/offline";
import { recordData, recordKey, recordedModel, setHeldSteps, setOfflineHandler } from "../lib/offline";
import { Rpc, RpcFailure } from "../lib/rpc";
import { SavedWidgets, stateWithBuffers, type SavedState } from "../lib/saved";

type Handler = () => void;

class FakeModel {
  private handlers = new Map<string, Handler[]>();
  constructor(
    readonly model_id: string,
    readonly attributes: Record<string, unknown>,
  ) {}
  get(name: string) {
    return this.attributes[name];
  }
  set(name: string, value: unknown) {
    this.attributes[name] = value;
    for (const h of this.handlers.get(`change:${name}`) ?? []) h();
  }
  on(event: string, h: Handler) {
    this.handlers.set(event, [...(this.handlers.get(event) ?? []), h]);
  }
}

/** What ipywidgets' manager does on save: attributes through JSON (bytes become `{}`) unless a
 * serializer (anywidget's, for the widget's own traits) keeps them as buffers. */
class FakeManager implements ManagerLike {
  models = new Map<string, FakeModel>();
  register_model(id: string, model: Promise<FakeModel>): void {
    void model.then((m) => this.models.set(id, m));
  }
  get_state_sync() {
    const state: Record<string, any> = {};
    for (const [id, m] of this.models) {
      const anywidget = m.get("_mlc_entry") !== undefined;
      const copy: Record<string, unknown> = {};
      const buffers: any[] = [];
      for (const [k, v] of Object.entries(m.attributes)) {
        if (anywidget && v instanceof DataView) buffers.push({ path: [k], encoding: "base64", data: btoa(String.fromCharCode(...new Uint8Array(v.buffer))) });
        else copy[k] = JSON.parse(JSON.stringify(v));
      }
      state[id] = { model_name: anywidget ? "AnyModel" : "WidgetModel", model_module: "x", state: copy, ...(buffers.length ? { buffers } : {}) };
    }
    return { version_major: 2, version_minor: 0, state };
  }
}

const bytes = (text: string) => new DataView(new TextEncoder().encode(text).buffer);
const summary = (id: number, parent: number | null) => ({ id, parent, kind: "apply", primitive: "split", label: `s${id}` });

describe("JupyterLab's widget-state save, completed", () => {
  it("keeps the explorer's whole history and the bytes of model-only records", async () => {
    const manager = new FakeManager();
    completeWidgetState(manager);
    const explorer = new FakeModel("e", { _mlc_entry: "explorer", step: bytes("{}"), history: { from: 0, steps: [summary(0, null), summary(1, 0)] } });
    const record = new FakeModel("r", { key: "step:1", encoding: "gzip", data: bytes("step one"), buffers: [bytes("a"), bytes("bc")], result: "" });
    manager.register_model("e", Promise.resolve(explorer));
    manager.register_model("r", Promise.resolve(record));
    await Promise.resolve();
    await Promise.resolve();
    explorer.set("history", { from: 2, steps: [summary(2, 1)] });
    explorer.set("history", { from: 3, steps: [summary(3, 1)] });

    const saved = manager.get_state_sync().state as SavedState;
    expect(saved.e.state.history).toEqual({ from: 0, steps: [summary(0, null), summary(1, 0), summary(2, 1), summary(3, 1)] });
    expect(saved.e.buffers?.map((b) => b.path)).toEqual([["step"]]); // anywidget's own buffer, once
    const restored = stateWithBuffers(saved.r);
    const text = (v: unknown) => new TextDecoder().decode(v as DataView);
    expect(text(restored.data)).toBe("step one");
    expect((restored.buffers as unknown[]).map(text)).toEqual(["a", "bc"]);
  });

  it("leaves a history with a gap it did not see as Python sent it", async () => {
    const manager = new FakeManager();
    completeWidgetState(manager);
    const explorer = new FakeModel("e", { _mlc_entry: "explorer", history: { from: 0, steps: [summary(0, null)] } });
    manager.register_model("e", Promise.resolve(explorer));
    await Promise.resolve();
    await Promise.resolve();
    explorer.set("history", { from: 5, steps: [summary(5, 4)] });
    expect(manager.get_state_sync().state.e.state.history).toEqual({ from: 5, steps: [summary(5, 4)] });
  });
});

describe("a save right after a burst of clicks", () => {
  it("records the steps the page holds that are newer than the kernel's newest record, and a saved view reads them", async () => {
    const manager = new FakeManager();
    completeWidgetState(manager);
    const step = (id: number) => bytes(JSON.stringify({ id, parent: id - 1, label: `s${id}`, script: `# step ${id}` }));
    const explorer = new FakeModel("e", { _mlc_entry: "explorer", step: step(3), history: { from: 0, steps: [0, 1, 2, 3].map((i) => summary(i, i - 1)) }, _mlc_recorded: { "step:0": "IPY_MODEL_r0", "step:1": "IPY_MODEL_r1" } });
    const r0 = new FakeModel("r0", { key: "step:0", encoding: "", data: step(0), buffers: [], result: "null", ok: true });
    const r1 = new FakeModel("r1", { key: "step:1", encoding: "", data: step(1), buffers: [], result: "null", ok: true });
    for (const m of [explorer, r0, r1]) manager.register_model(m.model_id, Promise.resolve(m));
    await Promise.resolve();
    await Promise.resolve();
    // the page held 0..3 (the kernel recorded 0 and 1; 2 and 3 came in the last two seconds)
    setHeldSteps(explorer.get("step"), new Map([0, 1, 2, 3].map((i) => [String(i), step(i)])));

    const saved = manager.get_state_sync().state as SavedState;
    const recorded = saved.e.state._mlc_recorded as Record<string, string>;
    expect(Object.keys(recorded).sort()).toEqual(["step:0", "step:1", "step:2", "step:3"]);
    expect(recorded["step:0"]).toBe("IPY_MODEL_r0"); // the kernel's own records stay as they were
    expect(Object.keys(saved).length).toBe(5);

    const widgets = new SavedWidgets(saved);
    const model = await widgets.get_model("e");
    for (const id of [2, 3]) {
      const rec = await recordedModel(model, `step:${id}`);
      const data = rec ? await recordData(rec) : undefined;
      expect(data && JSON.parse(new TextDecoder().decode(data)).script).toBe(`# step ${id}`);
    }
  });

  it("adds nothing when the kernel recorded everything the page holds, or recorded nothing yet", async () => {
    const manager = new FakeManager();
    completeWidgetState(manager);
    const explorer = new FakeModel("e", { _mlc_entry: "explorer", history: { from: 0, steps: [summary(0, null)] }, _mlc_recorded: { "step:0": "IPY_MODEL_r0" } });
    const r0 = new FakeModel("r0", { key: "step:0", encoding: "", data: bytes("{}"), buffers: [], result: "null", ok: true });
    for (const m of [explorer, r0]) manager.register_model(m.model_id, Promise.resolve(m));
    await Promise.resolve();
    await Promise.resolve();
    explorer.set("step", bytes("{}"));
    setHeldSteps(explorer.get("step"), new Map([["0", bytes("{}")]]));
    expect(Object.keys(manager.get_state_sync().state)).toEqual(["e", "r0"]);
    explorer.set("_mlc_recorded", {});
    setHeldSteps(explorer.get("step"), new Map([["0", bytes("{}")], ["1", bytes("{}")]]));
    expect(Object.keys(manager.get_state_sync().state)).toEqual(["e", "r0"]); // no record to copy the form of
  });
});

describe("a record whose bytes a save lost", () => {
  it("reads as not recorded (a plain refusal), not as a decompression error", async () => {
    const lost = { model_name: "WidgetModel", model_module: "x", state: { key: "k", encoding: "gzip", data: {}, buffers: [{}, {}], result: "" } };
    const saved: SavedState = {
      e: {
        model_name: "AnyModel",
        model_module: "anywidget",
        state: { _mlc_entry: "explorer", history: { from: 1, steps: [] }, _mlc_recorded: { "step:0": "IPY_MODEL_s0", [recordKey("access_footprint", { loop: "j", step: 0 })]: "IPY_MODEL_f" } },
      },
      s0: lost,
      f: lost,
    };
    const widgets = new SavedWidgets(saved);
    const model = await widgets.get_model("e");
    setOfflineHandler(model, explorerOffline(model));
    const rpc = new Rpc(model as never);
    const hist = await rpc.request<{ steps: unknown[] }>("history");
    expect(hist.result.steps).toEqual([]);
    model.set("step", bytes(JSON.stringify({ id: 0, parent: null })));
    const err = await rpc.request("access_footprint", { loop: "j" }).catch((e) => e);
    expect(err).toBeInstanceOf(RpcFailure);
    expect(String(err.message ?? err.summary ?? err)).not.toMatch(/fetch/i);
  });
});
