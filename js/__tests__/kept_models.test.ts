// @vitest-environment jsdom
// The saved widget models a notebook was opened with stay in its next save until a kernel replaces
// them (js/labextension/src/kept_models.ts), and restoring them at open marks nothing changed.
import { describe, expect, it } from "vitest";
import { keepOpenedModels, keepSavedModels, notebookOutputs, type NotebookManagerLike } from "../labextension/src/kept_models";
import type { SavedModelState, SavedState } from "../lib/saved";

const VIEW = "application/vnd.jupyter.widget-view+json";
const STATE = "application/vnd.jupyter.widget-state+json";

const entry = (state: Record<string, unknown>, buffers?: SavedModelState["buffers"]): SavedModelState => ({
  model_name: "X",
  model_module: "x",
  state,
  ...(buffers ? { buffers } : {}),
});
const shows = (id: string) => [{ output_type: "display_data", data: { "text/plain": "w", [VIEW]: { version_major: 2, version_minor: 0, model_id: id } } }];

/** What an explorer and a plain slider save: the models they name, and one nobody shows. */
function savedNotebook(): SavedState {
  return {
    ex: entry({ _mlc_entry: "explorer", _mlc_front_end: "anywidget:fe", _mlc_recorded: { "step:0": "IPY_MODEL_r0" }, code: "x".repeat(500) }),
    fe: entry({ code: "H4sI" }),
    r0: entry({ key: "step:0", data: null }, [{ path: ["data"], encoding: "base64", data: "AAEC" }]),
    sl: entry({ value: 13, layout: "IPY_MODEL_lay", style: "IPY_MODEL_sty" }),
    lay: entry({}),
    sty: entry({ handle_color: null }),
    old: entry({ value: 1 }), // a cell re-run since: no output shows it
  };
}

describe("keepSavedModels", () => {
  it("keeps what the outputs show, through the models that name others, and drops what none shows", () => {
    const live: Record<string, SavedModelState> = {};
    const added = keepSavedModels(live, savedNotebook(), [shows("ex"), [], shows("sl")]);
    expect(added.sort()).toEqual(["ex", "fe", "lay", "r0", "sl", "sty"]);
    expect(live.r0.buffers).toEqual([{ path: ["data"], encoding: "base64", data: "AAEC" }]); // as saved
    expect(live.sl.state.value).toBe(13);
  });

  it("lets a model the kernel holds win, and keeps the rest", () => {
    const live = { sl: entry({ value: 2, layout: "IPY_MODEL_lay2", style: "IPY_MODEL_sty2" }) };
    keepSavedModels(live, savedNotebook(), [shows("ex"), shows("sl")]);
    expect(live.sl.state.value).toBe(2);
    expect(Object.keys(live).sort()).toEqual(["ex", "fe", "r0", "sl"]); // the old slider's layout went with it
  });

  it("keeps nothing when no output shows a saved model, or nothing was saved", () => {
    const live = {};
    expect(keepSavedModels(live, savedNotebook(), [[{ output_type: "stream", text: "ex sl" }]])).toEqual([]);
    expect(keepSavedModels(live, null, [shows("ex")])).toEqual([]);
    expect(live).toEqual({});
  });

  it("keeps exactly the saved models reachable from the outputs (random graphs)", () => {
    let seed = 27;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const id = (i: number) => `m${i}`;
    for (let run = 0; run < 300; run++) {
      // saved models naming each other at random, some shown by outputs, some held by the kernel
      const n = 1 + rand(12);
      const picks = (k: number) => Array.from({ length: rand(k + 1) }, () => id(rand(n + 2))); // ids past n: not saved
      const saved: SavedState = Object.fromEntries(Array.from({ length: n }, (_, i) => [id(i), entry({ children: picks(3).map((c) => `IPY_MODEL_${c}`) })]));
      const shown = picks(4);
      const held = picks(3);
      const live: Record<string, SavedModelState> = Object.fromEntries(held.map((m) => [m, entry({ live: true })]));
      keepSavedModels(live, saved, shown.map(shows));
      const want = new Set(held);
      const stack = [...shown];
      while (stack.length) {
        const m = stack.pop()!;
        if (want.has(m) || !(m in saved)) continue;
        want.add(m);
        stack.push(...(saved[m].state.children as string[]).map((c) => c.slice("IPY_MODEL_".length)));
      }
      expect(new Set(Object.keys(live))).toEqual(want);
      for (const m of held) expect(live[m].state.live).toBe(true);
    }
  });
});

/** ipywidgets' LabWidgetManager as far as a notebook's save and open go. */
class FakeManager implements NotebookManagerLike {
  dirtied = 0;
  live: Record<string, SavedModelState> = {};
  constructor(readonly context: { model: ReturnType<typeof notebookModel> }) {}
  register_model(): void {
    this.setDirty();
  }
  setDirty(): void {
    this.dirtied++;
  }
  async _loadFromNotebook(_model: unknown): Promise<void> {
    await Promise.resolve();
    for (let i = 0; i < 3; i++) this.register_model(); // each saved model restored
  }
  get_state_sync() {
    return { version_major: 2, version_minor: 0, state: { ...this.live } };
  }
}

function notebookModel(saved: SavedState, outputs: unknown[][]) {
  let meta: Record<string, unknown> = { [STATE]: { version_major: 2, version_minor: 0, state: saved } };
  return {
    getMetadata: (key: string) => (key === "widgets" ? meta : undefined),
    setMetadata: (_key: string, value: Record<string, unknown>) => (meta = value),
    cells: [
      { type: "markdown", toJSON: () => ({ cell_type: "markdown", source: "ex" }) },
      ...outputs.map((o) => ({ type: "code", toJSON: () => ({ cell_type: "code", outputs: o }) })),
    ],
  };
}

describe("keepOpenedModels on a notebook's widget manager", () => {
  it("saves, and saves again, every model the notebook was opened with that its outputs show", () => {
    const model = notebookModel(savedNotebook(), [shows("ex"), shows("sl")]);
    const manager = new FakeManager({ model });
    keepOpenedModels(manager);
    keepOpenedModels(manager); // once only
    for (let save = 0; save < 2; save++) {
      const state = manager.get_state_sync().state;
      expect(Object.keys(state).sort()).toEqual(["ex", "fe", "lay", "r0", "sl", "sty"]);
      model.setMetadata("widgets", { [STATE]: { version_major: 2, version_minor: 0, state } }); // as _saveState does
    }
    expect(notebookOutputs(model)).toEqual([shows("ex"), shows("sl")]);
  });

  it("does not mark the notebook changed while restoring its saved models, and does after", async () => {
    const manager = new FakeManager({ model: notebookModel({}, []) });
    keepOpenedModels(manager);
    await manager._loadFromNotebook!(null);
    expect(manager.dirtied).toBe(0);
    manager.register_model(); // a widget the kernel makes
    expect(manager.dirtied).toBe(1);
  });
});
