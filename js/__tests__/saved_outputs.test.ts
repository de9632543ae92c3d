// @vitest-environment jsdom
// The saved-output renderer of the JupyterLab extension (js/labextension/src/saved_outputs.ts)
// with a fake ipywidgets: outputs rendered before the kernel connects (a reload) get the
// placeholder renderer, and are rendered again with the bound one when ipywidgets registers it.
import { Widget } from "@lumino/widgets";
import { describe, expect, it, vi } from "vitest";
import { patchNotebook } from "../labextension/src/saved_outputs";

// Lumino's drag-and-drop module reads DragEvent when it loads; jsdom has none.
vi.hoisted(() => {
  const g = globalThis as Record<string, unknown>;
  g.DragEvent ??= class DragEvent extends (globalThis.MouseEvent ?? Event) {};
});

const VIEW = "application/vnd.jupyter.widget-view+json";

/** ipywidgets' WidgetRenderer in small: waits for a manager, then shows the model's value. */
class FakeWidgetRenderer extends Widget {
  _manager: { promise: Promise<FakeManager>; resolve: (m: FakeManager) => void };
  constructor(manager?: FakeManager) {
    super();
    let resolve!: (m: FakeManager) => void;
    const promise = new Promise<FakeManager>((r) => (resolve = r));
    this._manager = { promise, resolve };
    if (manager) resolve(manager);
  }
  async renderModel(model: { data: Record<string, any> }): Promise<void> {
    this.node.textContent = "Loading widget...";
    const manager = await this._manager.promise;
    const m = await manager.get_model(model.data[VIEW].model_id);
    this.node.textContent = `live ${m.value}`;
  }
}

class FakeManager {
  restoredStatus = true;
  restored = { connect() {}, disconnect() {} };
  constructor(private models: Record<string, { value: string; comm_live: boolean }>) {}
  async get_model(id: string) {
    const m = this.models[id];
    if (!m) throw new Error("model not found");
    return m;
  }
  get_state_sync() {
    return { state: {} };
  }
  register_model() {}
}

class FakeRenderMime {
  factories = new Map<string, any>();
  addFactory(factory: any) {
    for (const t of factory.mimeTypes) this.factories.set(t, factory);
  }
  getFactory(t: string) {
    return this.factories.get(t);
  }
}

const factory = (manager?: FakeManager) => ({ safe: false, mimeTypes: [VIEW], createRenderer: () => new FakeWidgetRenderer(manager) });
const output = (id: string) => ({ data: { [VIEW]: { model_id: id }, "text/plain": "IntSlider(value=7)" }, trusted: true, metadata: {} });
const tick = () => new Promise((r) => setTimeout(r, 0));

function notebook(saved: Record<string, unknown> | null) {
  const rm = new FakeRenderMime();
  rm.addFactory(factory()); // ipywidgets' placeholder, cloned into every notebook's registry
  const metadata = saved ? { "application/vnd.jupyter.widget-state+json": { state: saved } } : undefined;
  const panel = { content: { rendermime: rm }, context: { model: { getMetadata: () => metadata } } };
  patchNotebook(panel as never);
  return rm;
}

describe("outputs of a reopened notebook with a running kernel", () => {
  it("render with ipywidgets' bound renderer once it is registered (no 'Loading widget...' for good)", async () => {
    const rm = notebook(null);
    const renderer = rm.getFactory(VIEW).createRenderer({ mimeType: VIEW });
    void renderer.renderModel(output("slider"));
    await tick();
    expect(renderer.node.textContent).toBe("Loading widget...");
    // the kernel is ready: ipywidgets replaces the placeholder with a renderer bound to its manager
    rm.addFactory(factory(new FakeManager({ slider: { value: "7", comm_live: true } })));
    await tick();
    expect(renderer.node.textContent).toBe("live 7");
    expect(rm.getFactory(VIEW)).not.toBe(undefined);
  });

  it("show the kernel's live model instead of its saved copy", async () => {
    const saved = { ex: { model_name: "AnyModel", model_module: "anywidget", state: { _mlc_entry: "explorer", _mlc_front_end: "anywidget:none" } } };
    const rm = notebook(saved);
    const renderer = rm.getFactory(VIEW).createRenderer({ mimeType: VIEW });
    void renderer.renderModel(output("ex"));
    await tick();
    expect(renderer.node.textContent).toContain("could not show this saved widget"); // no front end saved here
    rm.addFactory(factory(new FakeManager({ ex: { value: "explorer", comm_live: true } })));
    await tick();
    await tick();
    expect(renderer.node.textContent).toBe("live explorer");
  });

  it("keep the saved copy when the kernel does not hold the model", async () => {
    const saved = { ex: { model_name: "AnyModel", model_module: "anywidget", state: { _mlc_entry: "explorer", _mlc_front_end: "anywidget:none" } } };
    const rm = notebook(saved);
    const renderer = rm.getFactory(VIEW).createRenderer({ mimeType: VIEW });
    void renderer.renderModel(output("ex"));
    await tick();
    rm.addFactory(factory(new FakeManager({})));
    await tick();
    await tick();
    expect(renderer.node.textContent).toContain("could not show this saved widget");
  });
});
