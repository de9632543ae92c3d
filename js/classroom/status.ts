// The header line of a polled class widget: title, counts, when it was last refreshed, why not.

import type { AnyModel } from "@anywidget/types";
import { h } from "../lib/dom";
import type { PolledTraits } from "../lib/model";
import type { Rpc } from "../lib/rpc";
import { ago } from "./format";

export function statusLine(model: AnyModel<PolledTraits>, rpc: Rpc, title: string, counts: string): HTMLElement {
  const err = model.get("error");
  return h(
    "div",
    { class: "mlc-class-head" },
    h("b", { class: "mlc-class-title" }, title),
    h("span", { class: "mlc-class-counts" }, counts),
    h("span", { class: "mlc-spacer" }),
    err ? h("span", { class: "mlc-class-error", title: err }, `⚠ ${err}`) : h("span", { class: "mlc-class-updated", title: model.get("server") }, `updated ${ago(model.get("updated"))}`),
    h("button", { class: "mlc-class-refresh", title: "Refresh now", onclick: () => void rpc.call("class_refresh").catch(() => undefined) }, "⟳"),
  );
}
