// Views without a kernel: a widget restored from a saved notebook, or shown on a static page.
// The loader marks the model with a liveness test; Rpc answers requests on an offline model at once
// with a plain "needs a running kernel" error, which the views already show like any other error.

import { type ErrorInfo, type RequestName, type RequestParams, type RequestResults, canonicalJson, recordKey } from "./model";

// The record key is generated with the table of requests (mlc_lab/model/requests.py -> js/lib/model.ts).
export { canonicalJson, recordKey };

const KEY = "__mlc_kernel_live__";
const REFUSED = "__mlc_kernel_refused__";
const LOST = "__mlc_kernel_lost__";

export const NEEDS_KERNEL =
  "This needs a running kernel, and this view has none behind it (a saved notebook, or a kernel restarted or shut down since its cell ran). Re-run the notebook cell that made it to apply, measure or tune.";

/** Attach a liveness test to a model (the loader does it; static pages mark every model offline). */
export function markKernel(model: object, live: () => boolean): void {
  Object.defineProperty(model, KEY, { value: live, configurable: true, enumerable: false });
}

/** False only when a liveness test says the kernel is gone; models never marked count as live. */
export function kernelLive(model: object): boolean {
  const live = (model as Record<string, unknown>)[KEY];
  return typeof live === "function" ? Boolean(live()) : true;
}

/** Be told when the kernel behind a live view goes (restarted or shut down): the loader watches the
 *  comm (js/loader.ts); Rpc fails the requests in flight, the notice says so, views drop what was
 *  running. Returns the unsubscription. */
export function onKernelLost(model: object, listener: () => void): () => void {
  const m = model as Record<string, unknown>;
  if (!(LOST in m)) Object.defineProperty(model, LOST, { value: new Set<() => void>(), configurable: true, enumerable: false });
  const set = m[LOST] as Set<() => void>;
  set.add(listener);
  return () => set.delete(listener);
}

/** The kernel behind `model` is gone: tell every listener (the loader calls it once per loss). */
export function kernelLost(model: object): void {
  const set = (model as Record<string, unknown>)[LOST] as Set<() => void> | undefined;
  for (const listener of [...(set ?? [])]) listener();
}

/** What a view says once its kernel is gone: what happened, and how to go on. */
export const KERNEL_LOST =
  "The kernel behind this view was restarted or shut down: what you see is its last state, and what was running (a measurement, an analysis) was stopped. Re-run the notebook cell that made it (and the cells it uses) to apply, measure or tune again.";

/** Be told when a request is refused for want of a kernel (the banner says so, whatever the view). */
export function onRefused(model: object, listener: (method: string) => void): void {
  Object.defineProperty(model, REFUSED, { value: listener, configurable: true, enumerable: false });
}

/** Called by Rpc when it refuses a request on an offline model. */
export function refused(model: object, method: string): void {
  const listener = (model as Record<string, unknown>)[REFUSED];
  if (typeof listener === "function") listener(method);
}

/** Make a banner say that a control needed the kernel (which control, in plain words). `lost`: the
 *  view had a kernel when it was drawn (restarted or shut down since), else it is a saved view. */
export function bannerRefused(banner: HTMLElement, method: string, lost = false): void {
  const what = method.replace(/_/g, " ");
  const why = lost ? "the kernel behind this view was restarted or shut down" : "this is a saved view";
  banner.textContent = `"${what}" needs a running kernel: ${why}. Re-run the notebook cell that made it to apply, measure or tune.`;
  banner.dataset.refused = method;
  banner.animate?.([{ opacity: 0.35 }, { opacity: 1 }], { duration: 400 });
}

/** The notice above a widget: at once when it is drawn without a kernel; else at the first request
 *  refused for want of one (a kernel restarted or shut down since), so that no click or key goes
 *  unanswered. Returns its cleanup. */
export function kernelNotice(model: object, el: HTMLElement, live: () => boolean): () => void {
  const lost = live();
  let banner: HTMLElement | null = lost ? null : offlineBanner(el.ownerDocument);
  if (banner) el.prepend(banner);
  const show = (): HTMLElement => {
    if (!banner) {
      banner = offlineBanner(el.ownerDocument);
      el.prepend(banner);
    }
    return banner;
  };
  onRefused(model, (method) => bannerRefused(show(), method, lost));
  // A live view whose kernel goes says so at once, before any click (and a click then says it again).
  const unsubscribe = onKernelLost(model, () => {
    const b = show();
    b.textContent = KERNEL_LOST;
    b.dataset.lost = "true";
  });
  return () => {
    unsubscribe();
    banner?.remove();
  };
}

/** A one-line notice above a widget shown without a kernel. */
export function offlineBanner(doc: Document = document): HTMLElement {
  const el = doc.createElement("div");
  el.className = "mlc-offline-banner";
  el.setAttribute("role", "note");
  el.textContent =
    "Saved view, no kernel: browse the history, scripts, memory and trials as recorded. Applying primitives, measuring and tuning need the notebook re-run.";
  el.style.cssText =
    "font:12px/1.4 var(--jp-ui-font-family, system-ui, sans-serif);color:var(--jp-ui-font-color1, #1f2328);" +
    "background:var(--jp-warn-color3, #fff8e1);border:1px solid var(--jp-warn-color2, #ffcc80);" +
    "border-radius:3px;padding:3px 8px;margin:0 0 4px 0";
  return el;
}

// ---- answers without a kernel ---------------------------------------------------------------
// A widget records what a saved view needs (mlc_lab/widgets/_base.py, RpcWidget.mlc_record): the
// last replies to some requests, and (the explorer) every step it showed, each in a model-only
// `Recorded` child listed in the `_mlc_recorded` trait. Offline, Rpc answers from those records,
// then from the view's own offline handler (js/explorer/offline.ts); only then does it refuse.

export interface OfflineAnswer {
  result: unknown;
  buffers: DataView[];
  /** A recorded error reply (e.g. "this step has no GPU kernel"): the request fails with it. */
  error?: ErrorInfo; // a recorded failure, as the kernel answered it (mlc_lab/model/errors.py)
}

export type OfflineHandler = (method: string, params: Record<string, unknown>) => Promise<OfflineAnswer | null>;

const HANDLER = "__mlc_offline_handler__";
const HELD = "__mlc_held_steps__";

// The steps an explorer's page holds (id -> the `step` trait's bytes as sent), found by the value of
// its `step` trait: JupyterLab's widget-state save (js/labextension/src/widget_state.ts) records those
// the kernel has not recorded yet (it records 2 s after the last change, off the click's path). Keyed
// by the trait's value, not the model: a view gets anywidget's proxy of the model, the save the model
// itself, and both read the same value. On globalThis: the labextension is another bundle.
function heldRegistry(): WeakMap<object, ReadonlyMap<string, DataView>> {
  const g = globalThis as Record<string, unknown>;
  return (g[HELD] ??= new WeakMap()) as WeakMap<object, ReadonlyMap<string, DataView>>;
}

/** Publish the steps a view holds, under the value of the `step` trait it shows. */
export function setHeldSteps(current: unknown, steps: ReadonlyMap<string, DataView>): void {
  if (current && typeof current === "object") heldRegistry().set(current, steps);
}

/** The steps held by a view of the explorer whose `step` trait has this value. */
export function heldSteps(current: unknown): ReadonlyMap<string, DataView> | undefined {
  return current && typeof current === "object" ? heldRegistry().get(current) : undefined;
}

export function setOfflineHandler(model: object, handler: OfflineHandler): void {
  Object.defineProperty(model, HANDLER, { value: handler, configurable: true, enumerable: false });
}

export function offlineHandler(model: object): OfflineHandler | undefined {
  const h = (model as Record<string, unknown>)[HANDLER];
  return typeof h === "function" ? (h as OfflineHandler) : undefined;
}


interface ModelWithManager {
  get(name: string): any;
  widget_manager?: { get_model(id: string): Promise<any> | any };
}

/** The `Recorded` child model kept under ``key``, or null. */
export async function recordedModel(model: object, key: string): Promise<ModelWithManager | null> {
  const m = model as ModelWithManager;
  const refs = (m.get("_mlc_recorded") ?? {}) as Record<string, string>;
  const ref = refs[key];
  if (!ref || !m.widget_manager) return null;
  try {
    return (await m.widget_manager.get_model(ref.replace(/^IPY_MODEL_/, ""))) ?? null;
  } catch {
    return null;
  }
}

const asView = (b: unknown): DataView =>
  b instanceof DataView ? b : b instanceof ArrayBuffer ? new DataView(b) : ArrayBuffer.isView(b) ? new DataView(b.buffer, b.byteOffset, b.byteLength) : new DataView(new ArrayBuffer(0));

/** Bytes of a gzip-compressed record (mlc_lab/widgets/_base.py, Recorded.make). */
export async function gunzip(view: DataView): Promise<DataView> {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(bytes);
      c.close();
    },
  });
  const stream = source.pipeThrough(new DecompressionStream("gzip") as unknown as ReadableWritablePair<Uint8Array, Uint8Array>);
  return new DataView(await new Response(stream).arrayBuffer());
}

/** A record's `data` as it was before it was stored (decompressed if it was compressed). */
export async function recordData(rec: { get(name: string): any }): Promise<DataView | undefined> {
  const data = rec.get("data") as unknown;
  if (!data || !isBytes(data)) return undefined; // `{}`: bytes lost by a save that wrote them as JSON
  const view = asView(data);
  if (!view.byteLength) return undefined;
  return rec.get("encoding") === "gzip" ? gunzip(view) : view;
}

const isBytes = (b: unknown) => b instanceof DataView || b instanceof ArrayBuffer || ArrayBuffer.isView(b);

/** The result recorded for a request of the table (mlc_lab/model/requests.py), typed by it; null when
 *  none was recorded or the recorded reply is an error. */
export async function recordedResult<K extends RequestName>(model: object, method: K, params: RequestParams[K]): Promise<RequestResults[K] | null> {
  const answer = await recordedReply(model, method, params as Record<string, unknown>);
  return answer && !answer.error ? (answer.result as RequestResults[K]) : null;
}

/** A recorded reply to ``method(params)``, or null. */
export async function recordedReply(model: object, method: string, params: Record<string, unknown>): Promise<OfflineAnswer | null> {
  const rec = await recordedModel(model, recordKey(method, params));
  if (!rec) return null;
  const gz = rec.get("encoding") === "gzip";
  let result: unknown = null;
  try {
    let text = String(rec.get("result") ?? "null");
    if (text === "") {
      const data = await recordData(rec);
      text = data ? new TextDecoder().decode(data) : "null";
    }
    result = JSON.parse(text);
  } catch {
    return null;
  }
  const stored = (rec.get("buffers") ?? []) as unknown[];
  if (!stored.every(isBytes)) return null; // bytes lost in the save: as good as not recorded
  const raw = stored.map(asView);
  const buffers = gz ? await Promise.all(raw.map(gunzip)) : raw;
  if (rec.get("ok") === false) return { result: null, buffers: [], error: (result ?? { summary: "failed" }) as OfflineAnswer["error"] };
  return { result, buffers };
}
