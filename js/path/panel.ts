// The explorer's way to a target program: a bar under the toolbar ("9 steps to TargetModule", Hint,
// Show the way, and after a wrong step the step to go back to) and the Way tab (every step of the way
// with its sentence, the trace that replays it). Python side: mlc_lab/widgets/path.py (traits
// path_setup and path; the way from a step arrives after the step's own state, and an answer for a
// step the page has left is never shown). A saved view shows the way recorded for a step, or says
// that the step's way needs a kernel.

import type { AnyModel } from "@anywidget/types";
import type { TreeIndex } from "../explorer/tree";
import { h, keepFocus } from "../lib/dom";
import type { ExplorerTraits, PathAnswer, PathSetup, StepPath } from "../lib/model";
import { kernelLive, recordedResult } from "../lib/offline";
import { Panel } from "../lib/panel";
import type { StepId } from "../lib/types";
import { type HintForm, hintForm } from "./fill";

export type { PathSetup, StepPath } from "../lib/model";

const NO_KERNEL = "needs a running kernel: this saved view recorded the way from the steps shown while it ran.";

// ---- pure helpers (tested without a DOM) -------------------------------------------------------

/** Whether a way is about the step shown. */
export function pathFor(report: StepPath | Record<string, never> | null | undefined, step: StepId): StepPath | null {
  return report && "step" in report && String(report.step) === String(step) ? (report as StepPath) : null;
}

export type WayState = "none" | "pending" | "error" | "unreached" | "back" | "at" | "steps";

export interface WayStatus {
  state: WayState;
  /** The sentence the bar shows. */
  text: string;
  /** Steps left to the target (after going back, when `undoTo` is set). */
  remaining: number;
  /** The step to go back to first, or null. */
  undoTo: StepId | null;
  /** Whether the Hint button has a step to fill in. */
  canHint: boolean;
}

const steps = (n: number) => `${n} step${n === 1 ? "" : "s"}`;

/** What the bar says about the way from `step` (`label`: a step's label, for "go back to step 3 (…)"). */
export function wayStatus(report: StepPath | null, step: StepId, label: (id: StepId) => string | undefined = () => undefined): WayStatus {
  const none = { remaining: 0, undoTo: null, canHint: false };
  if (!report) return { ...none, state: "pending", text: `finding the way from step ${step}…` };
  if (report.error || !report.answer) return { ...none, state: "error", text: `The way could not be found: ${report.error ?? "no answer"}` };
  const a: PathAnswer = report.answer;
  const n = a.steps.length;
  const canHint = !!report.hint?.step && a.undo_to === null;
  if (a.status === "unreached") return { ...none, state: "unreached", text: `Not reachable from here: ${a.why}` };
  if (a.undo_to !== null) {
    const what = label(a.undo_to);
    return {
      state: "back",
      text: `Not reachable from step ${a.start}: go back to step ${a.undo_to}${what ? ` (${what})` : ""}, then ${n ? steps(n) : "it is the target"}`,
      remaining: n,
      undoTo: a.undo_to,
      canHint: false,
    };
  }
  const names = a.status === "names" ? ` (equal up to block names: ${a.why})` : "";
  if (!n) return { ...none, state: "at", text: a.status === "names" ? `At the target up to block names: ${a.why}` : "At the target: TVM's structural_equal holds" };
  return { state: "steps", text: `${steps(n)} to the target${names}`, remaining: n, undoTo: null, canHint };
}

/** The Way tab's label: how far, at a glance. */
export function wayBadge(status: WayStatus): string {
  switch (status.state) {
    case "steps":
      return `Way ${status.remaining}`;
    case "at":
      return "Way ✓";
    case "back":
      return "Way ↶";
    case "unreached":
      return "Way ✗";
    default:
      return "Way";
  }
}

// ---- the bar and the tab ----------------------------------------------------------------------

export interface WayPanelHost {
  /** Open a hint's form (select its loop or block, fill the form in); `note` is the hint's sentence. */
  openForm(form: HintForm, note: string): void;
  /** Move to a step the page holds (the step to go back to). */
  goTo(step: StepId): void;
  /** Show the Way tab. */
  showWay(): void;
  /** A step's label, from the history. */
  label(step: StepId): string | undefined;
  /** The loop tree of the current step. */
  tree(): TreeIndex;
}

export interface WayInput {
  setup: PathSetup | Record<string, never>;
  report: StepPath | Record<string, never> | null;
  step: StepId;
  live: boolean;
}

export class WayPanel extends Panel<[step: StepId]> {
  /** The bar under the toolbar. */
  readonly bar: HTMLElement;
  /** The Way tab's content. */
  readonly el: HTMLElement;
  private readonly status = h("span", { class: "mlc-way-status", role: "status" });
  private readonly hintBtn: HTMLButtonElement;
  private readonly backBtn: HTMLButtonElement;
  private readonly wayBtn: HTMLButtonElement;
  private last: StepPath | null = null; // the last way shown (kept, dimmed, while the next is found)
  private offline = new Map<string, StepPath | null | "pending">();
  private paths = new Map<string, StepPath>(); // step id -> the way from it, as sent (back at a step: shown at once)
  private shown = "";
  private step: StepId | null = null;
  /** The way shown for the current step (null while it is found). */
  current: StepPath | null = null;
  /** What the bar says now. */
  now: WayStatus = { state: "none", text: "", remaining: 0, undoTo: null, canHint: false };

  constructor(
    private readonly model: AnyModel<ExplorerTraits>,
    private readonly host: WayPanelHost,
  ) {
    super();
    const btn = (label: string, title: string, cls: string, onclick: () => void) => h("button", { class: `mlc-btn ${cls}`, title, onclick, onmousedown: keepFocus }, label) as HTMLButtonElement;
    this.hintBtn = btn("Hint", "Open the next step's form, filled in: press Apply to make it", "mlc-way-hint", () => this.hint());
    this.backBtn = btn("↶ Go back", "Go back to the step from which the target can be reached", "mlc-way-back", () => {
      if (this.now.undoTo !== null) host.goTo(this.now.undoTo);
    });
    this.wayBtn = btn("Show the way", "Every step to the target, each with why", "mlc-way-show", () => host.showWay());
    this.bar = h("div", { class: "mlc-way-bar", hidden: true }, h("span", { class: "mlc-way-target" }), this.status, this.backBtn, this.hintBtn, this.wayBtn);
    this.el = h("div", { class: "mlc-way", role: "region", "aria-label": "The way to the target" });
    // The page keeps the way from each step it was sent (the view redraws on the same changes).
    const keep = () => {
      const way = model.get("path") as StepPath | Record<string, never> | undefined;
      if (way && "step" in way) this.paths.set(String(way.step), way as StepPath);
    };
    const forget = () => this.paths.clear();
    keep();
    model.on("change:path", keep);
    model.on("change:path_setup", forget);
    this.onDispose(() => model.off("change:path", keep));
    this.onDispose(() => model.off("change:path_setup", forget));
  }

  /** Whether the explorer has a target program. */
  get on(): boolean {
    const setup = this.model.get("path_setup") as PathSetup | undefined;
    return !!setup?.available;
  }

  /** Follow the current step: the bar, and the tab when shown. */
  show(step: StepId): void {
    const input = { setup: this.model.get("path_setup") ?? {}, report: this.paths.get(String(step)) ?? this.model.get("path") ?? {}, step, live: kernelLive(this.model) };
    this.update(input, !this.el.hidden);
  }

  /** The Way tab's label for what the bar says now. */
  get badge(): string {
    return wayBadge(this.now);
  }

  /** Hint: the next step's primitive, its form filled in on the loop or block it acts on. */
  hint(): void {
    const step = this.current?.hint?.step;
    if (step && this.now.canHint) this.host.openForm(hintForm(step, this.host.tree()), `Hint: ${step.reason}`);
  }

  /** Draw the way from `input.step`; returns the way shown (null when none is). */
  update(input: WayInput, tabShown: boolean): StepPath | null {
    const { setup, step, live } = input;
    this.bar.hidden = !("available" in setup && setup.available);
    if (this.bar.hidden) {
      this.current = null;
      return null;
    }
    (this.bar.firstChild as HTMLElement).textContent = `→ ${setup.name ?? "the target"}:`;
    let report = pathFor(input.report, step);
    this.step = step;
    if (!report && !live) {
      const key = String(step);
      if (!this.offline.has(key)) {
        this.offline.set(key, "pending");
        void recordedResult(this.model, "path", { step })
          .catch(() => null)
          .then((rec) => {
            this.offline.set(key, rec);
            if (String(this.step) === key && !this.isDisposed) this.update(input, tabShown);
          });
      }
      const rec = this.offline.get(key);
      if (rec && rec !== "pending") report = rec;
      else if (!rec) {
        this.current = null;
        this.now = { state: "none", text: `The way from step ${key} ${NO_KERNEL}`, remaining: 0, undoTo: null, canHint: false };
        this.drawBar();
        this.drawTab(null, true, setup, `nokernel:${key}`);
        return null;
      }
    }
    if (report) this.last = report;
    this.current = report;
    this.now = wayStatus(report, step, (id) => this.host.label(id));
    this.drawBar();
    if (tabShown) this.drawTab(report ?? this.last, !report, setup, `${JSON.stringify(report ?? this.last)}:${!report}:${step}`);
    return report;
  }

  private drawBar(): void {
    const s = this.now;
    this.status.textContent = s.text;
    this.status.dataset.state = s.state;
    this.hintBtn.disabled = !s.canHint;
    this.hintBtn.title = s.canHint ? "Open the next step's form, filled in: press Apply to make it" : s.state === "back" ? `Go back to step ${s.undoTo} first` : s.state === "at" ? "At the target: nothing left to do" : "No next step to show";
    this.backBtn.hidden = s.undoTo === null;
    if (s.undoTo !== null) this.backBtn.textContent = `↶ Go to step ${s.undoTo}`;
  }

  private drawTab(report: StepPath | null, stale: boolean, setup: PathSetup | Record<string, never>, key: string): void {
    if (key === this.shown) return;
    this.shown = key;
    const name = ("name" in setup && setup.name) || "the target";
    const head = h("div", { class: "mlc-way-head" }, h("div", { class: "mlc-way-title" }, `The way to ${name}`), h("div", { class: "mlc-muted" }, this.now.text));
    const body: HTMLElement[] = [head];
    const a = report?.answer;
    if (a) {
      const rows: HTMLElement[] = [];
      if (a.undo_to !== null) {
        const what = this.host.label(a.undo_to);
        const go = h("button", { class: "mlc-btn mlc-way-goto", onclick: () => this.host.goTo(a.undo_to as StepId), onmousedown: keepFocus }, `Go to step ${a.undo_to}`);
        rows.push(h("li", { class: "mlc-way-step mlc-way-undo" }, h("span", { class: "mlc-way-label" }, `↶ go back to step ${a.undo_to}${what ? ` (${what})` : ""}`), h("span", { class: "mlc-way-reason" }, `the target cannot be reached from step ${a.start}`), go));
      }
      a.steps.forEach((s, i) =>
        rows.push(
          h("li", { class: `mlc-way-step${i === 0 && a.undo_to === null ? " mlc-way-next" : ""}`, dataset: { primitive: s.primitive } }, h("code", { class: "mlc-way-label" }, s.label), h("span", { class: "mlc-way-reason" }, s.reason)),
        ),
      );
      if (rows.length) body.push(h("ol", { class: "mlc-way-steps" }, ...rows));
      if (a.status !== "unreached" && a.trace)
        body.push(h("details", { class: "mlc-way-trace" }, h("summary", {}, "The whole schedule as a trace (TVM replays it)"), h("pre", {}, a.trace)));
      if (Object.keys(a.renamed ?? {}).length)
        body.push(h("div", { class: "mlc-muted mlc-way-note" }, `Blocks the target names otherwise: ${Object.entries(a.renamed).map(([k, v]) => `${k} → ${v}`).join(", ")}`));
      body.push(h("div", { class: "mlc-muted mlc-way-note", title: "time the kernel took to find this way" }, `found in ${Math.round(report?.ms ?? a.seconds * 1000)} ms; each way is confirmed by TVM's structural_equal`));
    } else if (report?.error) body.push(h("div", { class: "mlc-error-text mlc-way-note" }, report.error));
    this.el.replaceChildren(h("div", { class: `mlc-way-body${stale ? " mlc-stale" : ""}` }, ...body));
  }
}
