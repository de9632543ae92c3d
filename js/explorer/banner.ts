// The explorer's error banner: a failed step's sentence, the names involved (a click selects one),
// TVM's detail folded away, and a dismiss button; or a local error (a request that failed).

import { h } from "../lib/dom";
import { RpcFailure } from "../lib/rpc";
import type { ExplorerError } from "../lib/types";

/** Draw `err` into the banner (none: hide it); `earlier`: the error is of an earlier attempt. */
export function renderBanner(banner: HTMLElement, err: ExplorerError | null, how: { earlier: boolean; pick(name: string): void; dismiss(): void }): void {
  banner.hidden = !err;
  if (!err) {
    banner.replaceChildren();
    return;
  }
  const details = err.detail ? h("details", { class: "mlc-error-detail" }, h("summary", {}, "details"), h("pre", {}, err.detail)) : null;
  const involved = (err.involved ?? []).length
    ? h("div", { class: "mlc-involved-list" }, "involved: ", ...(err.involved ?? []).map((n) => h("span", { class: "mlc-chip mlc-chip-involved", onclick: () => how.pick(n) }, n)))
    : null;
  banner.replaceChildren(
    h(
      "div",
      { class: "mlc-banner-main" },
      h("span", { class: "mlc-banner-icon" }, "✗"),
      h("span", { class: "mlc-error-summary" }, errorTitle(err)),
      h("span", { class: "mlc-muted" }, how.earlier ? " (an earlier attempt)" : " — nothing was changed"),
      h("span", { class: "mlc-spacer" }),
      h("button", { class: "mlc-btn mlc-dismiss", title: "dismiss (Esc)", onclick: () => how.dismiss() }, "×"),
    ),
    involved ?? "",
    details ?? "",
  );
}

export function showLocalError(banner: HTMLElement, err: unknown): void {
  const summary = err instanceof RpcFailure ? err.error.summary : err instanceof Error ? err.message : String(err);
  banner.hidden = false;
  banner.replaceChildren(h("div", { class: "mlc-banner-main" }, h("span", { class: "mlc-banner-icon" }, "!"), h("span", { class: "mlc-error-summary" }, summary)));
}

/** "split: the factors ..." unless the summary already names the primitive. */
export function errorTitle(err: ExplorerError): string {
  const p = err.primitive;
  return p && !err.summary.startsWith(p) ? `${p}: ${err.summary}` : err.summary;
}
