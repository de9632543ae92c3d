// The `_esm` of every mlc_lab widget: a few hundred bytes instead of a 0.5-1.7 MB bundle per
// instance. The bundle itself lives once per page (kernel in Jupyter, browser session in marimo) in a
// model-only widget (FrontEnd, in mlc_lab/widgets/_base.py) whose `code` trait holds it gzip-compressed and base64-encoded; this
// loader fetches that model through anywidget's host, imports the bundle once per page (keyed by
// its digest, so saved notebooks and live kernels share it), and renders the widget's entry.
//
// It also tells the views whether a kernel is behind them: a widget restored from a saved notebook
// (or a static page) has no live comm, and requests that need Python are answered at once with
// "needs a running kernel" instead of waiting for a reply that never comes (see lib/rpc.ts).

import type { AnyModel } from "@anywidget/types";
import { type OfflineHandler, kernelLost, kernelNotice, markKernel, setOfflineHandler } from "./lib/offline";

export interface FrontEndModule {
  widgets: Record<string, { render: (props: any) => unknown }>;
  offline?: Record<string, (model: any) => OfflineHandler>;
}

type Loaded = Promise<FrontEndModule>;

const PAGE_KEY = "__mlc_lab_front_ends__";

function pageCache(): Map<string, Loaded> {
  const g = globalThis as unknown as Record<string, Map<string, Loaded>>;
  g[PAGE_KEY] ??= new Map();
  return g[PAGE_KEY];
}

async function importBundle(code: string, encoding: string): Promise<FrontEndModule> {
  let text = code;
  if (encoding === "gzip+base64") {
    const bytes = Uint8Array.from(atob(code), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    text = await new Response(stream).text();
  }
  const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
  try {
    return (await import(/* webpackIgnore: true */ /* @vite-ignore */ url)) as FrontEndModule;
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** The page's front-end module: imported once per digest, whatever the number of widgets. */
export function loadFrontEnd(frontEnd: AnyModel<any>): Loaded {
  const digest = String(frontEnd.get("digest") || "");
  const cache = pageCache();
  let loaded = digest ? cache.get(digest) : undefined;
  if (!loaded) {
    loaded = importBundle(String(frontEnd.get("code") || ""), String(frontEnd.get("encoding") || ""));
    if (digest) cache.set(digest, loaded);
    loaded.catch(() => digest && cache.delete(digest));
  }
  return loaded;
}

interface Liveness {
  live: () => boolean;
  /** Call `lost` once when the kernel goes (ipywidgets' manager marks every model's comm dead when its
   *  kernel restarts or shuts down); returns the unsubscription. */
  watch: (lost: () => void) => () => void;
}

/** Whether the model behind a widget reference still has a kernel (a live comm) behind it. */
async function liveness(model: any, ref: string): Promise<Liveness> {
  const manager = model.widget_manager;
  const id = ref.startsWith("anywidget:") ? ref.slice("anywidget:".length) : ref;
  try {
    const raw = await manager?.get_model?.(id);
    if (raw && typeof raw.comm_live === "boolean") {
      const live = () => raw.comm_live === true && !!raw.comm;
      const watch = (lost: () => void) => {
        if (typeof raw.on !== "function") return () => {};
        let was = live();
        const check = () => {
          const now = live();
          if (was && !now) lost();
          was = now;
        };
        raw.on("comm_live_update", check);
        return () => raw.off?.("comm_live_update", check);
      };
      return { live, watch };
    }
  } catch {
    /* fall through: a host without ipywidgets' manager (a static page sets liveness itself) */
  }
  return { live: () => true, watch: () => () => {} };
}

async function render(props: { model: AnyModel<any>; el: HTMLElement; host?: any; experimental?: any }) {
  const { model, el, host } = props;
  const ref = String(model.get("_mlc_front_end") || "");
  const entry = String(model.get("_mlc_entry") || "");
  try {
    if (!ref || !host?.getModel) throw new Error("this page has no mlc_lab front end (anywidget >= 0.11 is needed)");
    const frontEnd = await host.getModel(ref);
    const [mod, { live, watch }] = await Promise.all([loadFrontEnd(frontEnd), liveness(model, ref)]);
    const widget = mod.widgets[entry];
    if (!widget) throw new Error(`the front end has no view called "${entry}"`);
    markKernel(model, live);
    const handler = mod.offline?.[entry];
    if (handler) setOfflineHandler(model, handler(model));
    const cleanup = await widget.render({ ...props, model });
    const notice = kernelNotice(model, el, live);
    const unwatch = watch(() => kernelLost(model));
    return () => {
      unwatch();
      notice();
      if (typeof cleanup === "function") cleanup();
    };
  } catch (err) {
    el.textContent = `mlc_lab could not show this widget: ${err instanceof Error ? err.message : String(err)}`;
    el.style.cssText = "padding:8px;border:1px solid #d32f2f;color:#d32f2f";
    return undefined;
  }
}

export default { render };
