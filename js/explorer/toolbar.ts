// The explorer's toolbar: undo / redo and the current step's label, "working…", Measure and its
// target, Memory, what the code pane shows (code, a diff against another step, CUDA, compiler) and
// the step a diff compares against, Export HTML and help. The view owns what the buttons do.

import { h, keepFocus } from "../lib/dom";
import type { StepId, StepInfo } from "../lib/types";
import { diffBaseGroups } from "./history";

/** A request answered sooner than this shows no "working…" (see Toolbar.setBusy). */
export const BUSY_DELAY_MS = 300;

/** What the toolbar's controls do: the explorer view's actions. */
export interface ToolbarHost {
  undo(): void;
  redo(): void;
  measure(): void;
  /** Stop the measurement in flight (its worker process is stopped). */
  cancelMeasure(): void;
  toggleMemory(): void;
  exportHtml(): void;
  toggleHelp(): void;
  /** The code pane's mode was picked: "off" (code), "unified", "split", "cuda" or "compiler". */
  modeChanged(mode: string): void;
  /** The user picked the step a diff compares against (`base`). */
  baseChanged(): void;
  /** "working…" was shown or hidden. */
  busyShown(shown: boolean): void;
}

/** A toolbar button that keeps the keyboard focus where it was. */
export function button(label: string, title: string, cls: string, onclick: () => void): HTMLButtonElement {
  return h("button", { class: `mlc-btn ${cls}`, title, onclick, onmousedown: keepFocus }, label) as HTMLButtonElement;
}

export class Toolbar {
  readonly el: HTMLElement;
  readonly stepLabel = h("span", { class: "mlc-step-label" });
  readonly undoBtn: HTMLButtonElement;
  readonly redoBtn: HTMLButtonElement;
  readonly diffSel = h("select", { class: "mlc-diff-mode", title: "compare with an earlier step" }) as HTMLSelectElement;
  readonly baseSel = h("select", { class: "mlc-diff-base", title: "step to compare against", hidden: true }) as HTMLSelectElement;
  readonly busyEl = h("span", { class: "mlc-busy", hidden: true }, "working…");
  readonly measureBtn: HTMLButtonElement;
  readonly cancelMeasureBtn: HTMLButtonElement;
  readonly targetSel = h("select", { class: "mlc-measure-target", title: "the target: where Measure runs (this machine's CPU, or a CUDA GPU) and whose checks the Checks tab lists" }) as HTMLSelectElement;
  readonly memoryBtn: HTMLButtonElement;
  /** The step a diff compares against, and whether the user picked it (else it follows the parent). */
  base: string | null = null;
  private baseChosen = false;
  private busyTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private host: ToolbarHost) {
    this.undoBtn = button("↶ Undo", "Undo (Ctrl/⌘+Z)", "mlc-undo", () => host.undo());
    this.redoBtn = button("↷ Redo", "Redo (Ctrl/⌘+Shift+Z or Ctrl+Y)", "mlc-redo", () => host.redo());
    for (const [v, l] of [
      ["off", "Code"],
      ["unified", "Diff: unified"],
      ["split", "Diff: side by side"],
      ["cuda", "CUDA"],
      ["compiler", "Compiler"],
    ])
      this.diffSel.append(h("option", { value: v }, l));
    this.diffSel.addEventListener("change", () => host.modeChanged(this.diffSel.value));
    this.baseSel.addEventListener("change", () => {
      this.base = this.baseSel.value;
      this.baseChosen = true;
      host.baseChanged();
    });
    this.measureBtn = button("Measure", "Build, check and time the current step (key m)", "mlc-measure", () => host.measure());
    this.measureBtn.append(h("kbd", {}, "m"));
    this.cancelMeasureBtn = button("✕ Cancel", "Stop this measurement (its worker process is stopped; the next one starts a fresh one)", "mlc-measure-cancel", () => host.cancelMeasure());
    this.cancelMeasureBtn.hidden = true;
    for (const t of ["cpu", "cuda"]) this.targetSel.append(h("option", { value: t }, t));
    this.memoryBtn = button("Memory", "Show the memory the selected loop touches (heatmaps per buffer)", "mlc-memory-toggle", () => host.toggleMemory());
    this.el = h(
      "div",
      { class: "mlc-toolbar" },
      h("span", { class: "mlc-title" }, "Schedule explorer"),
      this.undoBtn,
      this.redoBtn,
      this.stepLabel,
      this.busyEl,
      h("span", { class: "mlc-spacer" }),
      this.measureBtn,
      this.cancelMeasureBtn,
      this.targetSel,
      this.memoryBtn,
      this.diffSel,
      this.baseSel,
      button("Export HTML", "Download a self-contained HTML page of all steps", "mlc-export-html", () => host.exportHtml()),
      button("?", "Keyboard shortcuts", "mlc-help-btn", () => host.toggleHelp()),
    );
  }

  /** The current step's label and whether undo and redo can go anywhere. */
  drawStep(cur: { id: StepId; parent?: StepId | null; label: string }, canRedo: boolean): void {
    this.undoBtn.disabled = cur.parent === null;
    this.redoBtn.disabled = !canRedo;
    this.stepLabel.textContent = cur.label ? `step ${cur.id}: ${cur.label}` : "";
    this.stepLabel.title = this.stepLabel.textContent; // whole on hover where a narrow cell cuts it
  }

  /** The steps a diff can compare against (only kept up to date while the diff is shown). */
  drawBases(steps: StepInfo[], current: StepId): void {
    const groups = diffBaseGroups(steps, current);
    const bases = [...groups.path, ...groups.others];
    const keep = this.baseChosen ? this.base : null;
    const option = (s: (typeof bases)[number]) => h("option", { value: String(s.id), title: s.label }, `vs ${s.id}: ${s.label}`);
    this.baseSel.replaceChildren(
      ...(groups.path.length ? [h("optgroup", { label: "this path (parent first)" }, ...groups.path.map(option))] : []),
      ...(groups.others.length ? [h("optgroup", { label: "other steps" }, ...groups.others.map(option))] : []),
    );
    this.base = keep && bases.some((s) => String(s.id) === keep) ? keep : bases[0] ? String(bases[0].id) : null;
    if (this.base !== keep) this.baseChosen = false;
    if (this.base) this.baseSel.value = this.base;
  }

  /** "working…" and the progress cursor, for a request that outlasts BUSY_DELAY_MS. A click is
   * usually answered sooner: showing them at once would restyle the whole explorer on the click
   * (the cursor is inherited by every element) and again when the answer lands, just when the new
   * step is to be drawn, for an indicator that flickers for a few frames. `inFlight`: requests
   * still waiting for their answer (the indicator stays while any is). */
  setBusy(busy: boolean, inFlight: number): void {
    if (busy) {
      if (this.busyTimer === null && this.busyEl.hidden) this.busyTimer = setTimeout(() => this.showBusy(true), BUSY_DELAY_MS);
      return;
    }
    if (inFlight > 0) return;
    if (this.busyTimer !== null) clearTimeout(this.busyTimer);
    this.busyTimer = null;
    if (!this.busyEl.hidden) this.showBusy(false);
  }

  private showBusy(shown: boolean): void {
    this.busyTimer = null;
    this.busyEl.hidden = !shown;
    this.host.busyShown(shown);
  }

  dispose(): void {
    if (this.busyTimer !== null) clearTimeout(this.busyTimer);
  }
}
