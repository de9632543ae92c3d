// The right pane's tabs: History, Trace & decisions, Checks and (with a target program) Way. One
// panel is shown at a time; a tab's label can carry a count, and a tab can be off (hidden).

import { h } from "../lib/dom";

export const TABS = ["history", "trace", "checks", "way"] as const;
export type Tab = (typeof TABS)[number];
const LABELS: Record<Tab, string> = { history: "History", trace: "Trace & decisions", checks: "Checks", way: "Way" };

export class Tabs {
  readonly bar = h("div", { class: "mlc-tabs" });
  private buttons = {} as Record<Tab, HTMLElement>;

  /** `panels`: each tab's panel; `shown(name)` runs after a tab is shown (to draw it). */
  constructor(
    private readonly panels: Record<Tab, HTMLElement>,
    private readonly shown: (name: Tab) => void,
  ) {
    for (const name of TABS) {
      this.buttons[name] = h("button", { class: `mlc-tab mlc-tab-${name}`, dataset: { tab: name }, onclick: () => this.show(name) }, LABELS[name]);
      this.bar.append(this.buttons[name]);
    }
  }

  show(name: Tab): void {
    for (const [k, el] of Object.entries(this.panels)) el.hidden = k !== name;
    for (const [k, b] of Object.entries(this.buttons)) b.classList.toggle("mlc-active", k === name);
    this.shown(name);
  }

  /** A tab's label (`warn`: it reads red); a tab that is off is hidden, and History shown in its place. */
  label(name: Tab, text: string, { on = true, warn = false }: { on?: boolean; warn?: boolean } = {}): void {
    const b = this.buttons[name];
    b.textContent = text;
    b.hidden = !on;
    b.classList.toggle("mlc-tab-warn", warn);
    if (!on && !this.panels[name].hidden) this.show("history");
  }
}
