// Widgets without a kernel, from saved widget state: the notebook's `widgets` metadata (what
// nbclient's store_widget_state and JupyterLab's "save widget state" write) or a static page's copy
// of it. A SavedModel answers get/set/on/off like anywidget's model (set/save_changes stay in the
// page, so sliders, scrubbing, stepping and playing still work), a host resolves "anywidget:<id>"
// among the saved models, and the front end is imported once, from the saved FrontEnd model.
// Used by the JupyterLab extension (saved outputs in a notebook) and by `mlc-lab export` pages.

import { loadFrontEnd } from "../loader";
import { bannerRefused, markKernel, offlineBanner, onRefused, setOfflineHandler } from "./offline";

export const WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json";
export const WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json";

export interface SavedBuffer {
  path: Array<string | number>;
  encoding: "base64" | "hex";
  data: string;
}

export interface SavedModelState {
  model_name: string;
  model_module: string;
  model_module_version?: string;
  state: Record<string, unknown>;
  buffers?: SavedBuffer[];
}

export type SavedState = Record<string, SavedModelState>;

type Handler = (...args: unknown[]) => void;

function decodeBuffer(b: SavedBuffer): DataView {
  let bytes: Uint8Array;
  if (b.encoding === "hex") {
    bytes = new Uint8Array(b.data.length / 2);
    for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(b.data.slice(2 * i, 2 * i + 2), 16);
  } else bytes = Uint8Array.from(atob(b.data), (c) => c.charCodeAt(0));
  return new DataView(bytes.buffer);
}

/** A saved model's state with its binary buffers put back where they were taken from. */
export function stateWithBuffers(entry: SavedModelState): Record<string, unknown> {
  const state: Record<string, unknown> = structuredClone(entry.state ?? {});
  for (const b of entry.buffers ?? []) {
    let obj: any = state;
    for (const key of b.path.slice(0, -1)) obj = obj[key];
    obj[b.path[b.path.length - 1]] = decodeBuffer(b);
  }
  return state;
}

export class SavedModel {
  private handlers = new Map<string, Set<Handler>>();
  readonly comm_live = false;
  constructor(
    readonly id: string,
    private state: Record<string, unknown>,
    readonly widget_manager: SavedWidgets,
  ) {}

  get(name: string): any {
    return this.state[name];
  }

  set(name: string, value: unknown): void {
    this.state[name] = value;
    for (const h of [...(this.handlers.get(`change:${name}`) ?? [])]) h(this, value);
    for (const h of [...(this.handlers.get("change") ?? [])]) h(this);
  }

  on(event: string, handler: Handler): void {
    for (const name of event.split(/\s+/)) {
      if (!this.handlers.has(name)) this.handlers.set(name, new Set());
      this.handlers.get(name)!.add(handler);
    }
  }

  off(event?: string | null, handler?: Handler | null): void {
    if (!event) {
      if (!handler) this.handlers.clear();
      else for (const set of this.handlers.values()) set.delete(handler);
      return;
    }
    for (const name of event.split(/\s+/)) {
      if (handler) this.handlers.get(name)?.delete(handler);
      else this.handlers.delete(name);
    }
  }

  save_changes(): void {
    /* nothing to save to: the page keeps the change */
  }

  send(): void {
    /* no kernel; Rpc never gets here (the model is marked offline) */
  }
}

/** The saved models of one notebook (or page), rendered on demand. */
export class SavedWidgets {
  private models = new Map<string, SavedModel>();
  constructor(private readonly saved: SavedState) {}

  has(id: string): boolean {
    return id in this.saved;
  }

  /** The view this saved model renders with ("explorer", ...), or "" if it is not an mlc_lab widget. */
  entryOf(id: string): string {
    const entry = this.saved[id]?.state?._mlc_entry;
    return typeof entry === "string" ? entry : "";
  }

  async get_model(id: string): Promise<SavedModel> {
    let model = this.models.get(id);
    if (!model) {
      const entry = this.saved[id];
      if (!entry) throw new Error(`widget model ${id} was not saved with this notebook`);
      model = new SavedModel(id, stateWithBuffers(entry), this);
      markKernel(model, () => false);
      this.models.set(id, model);
    }
    return model;
  }

  private host(signal: AbortSignal) {
    const ref = (r: string) => (r.startsWith("anywidget:") ? r.slice("anywidget:".length) : r);
    return {
      getModel: (r: string) => this.get_model(ref(r)),
      getWidget: async (r: string) => ({
        exports: {},
        render: async ({ el, signal: childSignal }: { el: HTMLElement; signal?: AbortSignal }) => {
          const dispose = await this.renderInto(ref(r), el, false);
          for (const s of [signal, childSignal]) s?.addEventListener("abort", dispose, { once: true });
        },
      }),
    };
  }

  /** Render saved widget ``id`` into ``el``; returns its cleanup. */
  async render(id: string, el: HTMLElement): Promise<() => void> {
    return this.renderInto(id, el, true);
  }

  private async renderInto(id: string, el: HTMLElement, banner: boolean): Promise<() => void> {
    const model = await this.get_model(id);
    const entry = this.entryOf(id);
    const frontEnd = await this.get_model(String(model.get("_mlc_front_end") || "").replace(/^anywidget:/, ""));
    const mod = await loadFrontEnd(frontEnd as never);
    const view = mod.widgets[entry];
    if (!view) throw new Error(`the saved front end has no view called "${entry}"`);
    const handler = mod.offline?.[entry];
    if (handler) setOfflineHandler(model, handler(model));
    const abort = new AbortController();
    const root = document.createElement("div");
    root.className = "mlc-lab";
    if (banner) {
      const notice = offlineBanner();
      onRefused(model, (method) => bannerRefused(notice, method));
      el.append(notice);
    }
    el.append(root);
    const cleanup = await view.render({ model, el: root, host: this.host(abort.signal), experimental: {} });
    return () => {
      abort.abort();
      if (typeof cleanup === "function") (cleanup as () => void)();
      el.replaceChildren();
    };
  }
}
