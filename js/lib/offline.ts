// Views without a kernel: a widget restored from a saved notebook, or shown on a static page.
// The loader marks the model with a liveness test; Rpc answers requests on an offline model at once
// with a plain "needs a running kernel" error, which the views already show like any other error.

const KEY = "__mlc_kernel_live__";
const REFUSED = "__mlc_kernel_refused__";

export const NEEDS_KERNEL =
  "This needs a running kernel: this is a saved view (no kernel behind it). Re-run the notebook cell that made it to apply, measure or tune.";

/** Attach a liveness test to a model (the loader does it; static pages mark every model offline). */
export function markKernel(model: object, live: () => boolean): void {
  Object.defineProperty(model, KEY, { value: live, configurable: true, enumerable: false });
}

/** False only when a liveness test says the kernel is gone; models never marked count as live. */
export function kernelLive(model: object): boolean {
  const live = (model as Record<string, unknown>)[KEY];
  return typeof live === "function" ? Boolean(live()) : true;
}

/** Be told when a request is refused for want of a kernel (the banner says so, whatever the view). */
export function onRefused(model: object, listener: (method: string) => void): void {
  Object.defineProperty(model, REFUSED, { value: listener, configurable: true, enumerable: false });
}

/** Called by Rpc when it refuses a request on an offline model. */
export function refused(model: object, method: string): void {
  const listener = (model as Record<string, unknown>)[REFUSED];
  if (typeof listener === "function") listener(method);
}

/** Make a banner say that a control needed the kernel (which control, in plain words). */
export function bannerRefused(banner: HTMLElement, method: string): void {
  const what = method.replace(/_/g, " ");
  banner.textContent = `"${what}" needs a running kernel: this is a saved view. Re-run the notebook cell that made it to apply, measure or tune.`;
  banner.dataset.refused = method;
  banner.animate?.([{ opacity: 0.35 }, { opacity: 1 }], { duration: 400 });
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
