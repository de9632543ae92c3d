// The History tab of the explorer: the step tree as rows (current step, branches, failed attempts,
// measurements and hazards per step) and the latency / roofline plot under it.

import type { AnyModel } from "@anywidget/types";
import { h, revealInContainer } from "../lib/dom";
import type { Measurement } from "../lib/model";
import type { ExplorerTraits, FailureInfo, RecordCut, StepId, StepInfo } from "../lib/types";
import { hazardMark, pathAfter } from "../checks/panel";
import { historyRows } from "./history";
import { type MeasuringInfo, checkMark, checkTitle, latencyPlot, measurementText, measurementTitle, plotPoints, roofOf, rooflinePlot, rooflinePoints } from "../measure/measure";
import { kernelLive } from "../lib/offline";
import { Panel } from "../lib/panel";

type Model = AnyModel<ExplorerTraits>;

/** Below this height (px) the History pane shows the latency plot folded to one line. */
export const SHORT_HISTORY_PX = 320;

/** What the pane needs of the explorer view. */
export interface HistoryPaneHost {
  steps(): StepInfo[];
  current(): StepId;
  /** Go to a step (the view moves by itself when it holds the step). */
  moveTo(id: StepId): void;
  /** Show a failed attempt in the banner, tree and code. */
  inspect(failure: FailureInfo): void;
}

export class HistoryPane extends Panel<[]> {
  readonly list = h("div", { class: "mlc-history" });
  readonly plot = h("div", { class: "mlc-plot", hidden: true });
  readonly el = h("div", { class: "mlc-history-tab" }, this.list, this.plot);

  constructor(
    private model: Model,
    private host: HistoryPaneHost,
  ) {
    super();
    this.followHeight();
  }

  private shape = "";
  private rows: ReturnType<typeof historyRows> = [];

  /** Draw the rows of the history (the plot is drawn by `drawPlot`). */
  show(): void {
    const rows = historyRows(this.host.steps(), this.model.get("failures") ?? [], this.host.current());
    const measured = this.model.get("measurements") ?? {};
    const measuring = measuringStep(this.model);
    const mOf = (r: (typeof rows)[number]): Measurement | undefined => (r.kind === "step" ? measured[String(r.id)] : undefined);
    const mKey = (r: (typeof rows)[number]) => {
      const m = mOf(r);
      return `${m ? `${measurementText(m)}${checkMark(m)}${m.max_abs_error ?? ""}` : ""}${r.kind === "step" && measuring === String(r.id) ? "…" : ""}`;
    };
    // Undo/redo/goto only move the current step: restyle the rows instead of rebuilding them.
    const hazards = this.model.get("hazards") ?? {};
    const steps = this.host.steps();
    const hMark = (r: (typeof rows)[number]) => (r.kind === "step" ? hazardMark(hazards[String(r.id)], { path: pathAfter(steps, r.id, this.host.current()), hazards }) : null);
    const shape = rows.map((r) => `${r.kind}:${r.id}:${r.depth}:${r.branch ? 1 : 0}:${r.stepKind ?? ""}:${r.label}:${mKey(r)}:${hMark(r)?.title ?? ""}`).join("|");
    const existing = this.list.querySelectorAll<HTMLElement>(".mlc-hrow");
    if (shape === this.shape && existing.length === rows.length) {
      rows.forEach((r, i) => {
        const el = existing[i];
        el.classList.toggle("mlc-current", r.current);
        el.classList.toggle("mlc-onpath", r.onPath);
        el.title = r.failure ? el.title : r.current ? "current step" : "go to this step";
        if (r.kind === "step") el.querySelector(".mlc-hmark")!.textContent = r.current ? "●" : r.branch ? "┬" : "○";
      });
      this.rows = rows;
      revealInContainer(this.list, this.list.querySelector<HTMLElement>(".mlc-current"));
      return;
    }
    this.shape = shape;
    this.rows = rows;
    const list = h("div", { class: "mlc-history-list" });
    for (const r of rows) {
      const cls = ["mlc-hrow", `mlc-hrow-${r.kind}`];
      if (r.current) cls.push("mlc-current");
      if (r.onPath) cls.push("mlc-onpath");
      if (r.branch) cls.push("mlc-branch");
      const row = h(
        "div",
        {
          class: cls.join(" "),
          style: { paddingLeft: `${6 + r.depth * 14}px` },
          dataset: { step: String(r.id) },
          title: r.failure ? `${r.failure.summary}\n\n${r.failure.detail}` : r.current ? "current step" : "go to this step",
          onclick: () => {
            if (r.failure) this.host.inspect(r.failure);
            else if (!this.rows.find((x) => x.kind === "step" && x.id === r.id)?.current) this.host.moveTo(r.id);
          },
        },
        h("span", { class: "mlc-hmark" }, r.kind === "failure" ? "✗" : r.current ? "●" : r.branch ? "┬" : "○"),
        h("span", { class: "mlc-hlabel" }, r.label),
        ((m) => (m ? h("span", { class: `mlc-hhazard${m.resolved ? " mlc-hhazard-resolved" : ""}`, title: m.title }, m.text) : null))(hMark(r)),
        r.stepKind ? h("span", { class: "mlc-hkind", title: `a ${r.stepKind} step` }, r.stepKind) : null,
        r.failure ? h("span", { class: "mlc-hsummary" }, r.failure.summary) : null,
        this.measureCell(mOf(r), r.kind === "step" && measuring === String(r.id)),
      );
      list.append(row);
    }
    this.list.replaceChildren(...[this.recordCutNote()].filter((n) => n !== null), list);
    revealInContainer(this.list, list.querySelector<HTMLElement>(".mlc-current"));
  }

  /** A saved view whose record was cut says so above its history (live views have the kernel). */
  private recordCutNote(): HTMLElement | null {
    const cut = this.model.get("record_cut") as RecordCut | Record<string, never> | undefined;
    if (kernelLive(this.model) || !cut || !("max_steps" in cut)) return null;
    const parts: string[] = [];
    if (cut.steps > cut.steps_recorded)
      parts.push(`This saved record keeps ${cut.steps_recorded} of the session's ${cut.steps} steps (records are capped at ${cut.max_steps} steps): the others need the notebook re-run.`);
    if (cut.replies_dropped > 0)
      parts.push(`${cut.replies_dropped} older panel answer${cut.replies_dropped === 1 ? " was" : "s were"} dropped to keep the notebook small.`);
    return parts.length ? h("div", { class: "mlc-record-cut", role: "note" }, parts.join(" ")) : null;
  }

  /** Latency, GFLOP/s and ✓/✗ next to a measured step's label (or "measuring…"). */
  private measureCell(m: Measurement | undefined, running: boolean): HTMLElement | null {
    if (running) return h("span", { class: "mlc-hmeasure mlc-hmeasuring" }, "measuring…");
    if (!m) return null;
    const mark = checkMark(m);
    return h(
      "span",
      { class: `mlc-hmeasure${m.error ? " mlc-error-text" : ""}`, title: measurementTitle(m) },
      h("span", { class: "mlc-hlatency" }, measurementText(m)),
      mark ? h("span", { class: `mlc-hcheck ${m.correct ? "mlc-ok-text" : "mlc-error-text"}`, title: checkTitle(m) }, mark) : null,
    );
  }

  /** The History pane keeps the current row in view at any height: whenever its list changes height
   *  (the plot opened, the explorer resized or maximised, the tab shown again), the row is revealed;
   *  and the plot is drawn again once the pane has a height that makes it short or not (it may have
   *  been drawn while the tab was hidden, with no height to go by). */
  private followHeight(): void {
    if (typeof ResizeObserver !== "function") return;
    let listHeight = -1;
    const observer = new ResizeObserver(() =>
      requestAnimationFrame(() => {
        if (this.isDisposed) return;
        if (this.list.clientHeight !== listHeight) {
          listHeight = this.list.clientHeight;
          revealInContainer(this.list, this.list.querySelector<HTMLElement>(".mlc-current"));
        }
        const room = this.el.clientHeight;
        if (room > 0 && this.plotShort !== room < SHORT_HISTORY_PX) this.drawPlot();
      }),
    );
    observer.observe(this.list);
    observer.observe(this.el);
    this.onDispose(() => observer.disconnect());
  }

  /** Whether the plot was last drawn for a short pane; null: drawn with no height to go by. */
  private plotShort: boolean | null = null;

  /** The latency-by-step plot under the history (measured steps on the current path). */
  drawPlot(): void {
    const measured = this.el.clientHeight;
    this.plotShort = measured > 0 ? measured < SHORT_HISTORY_PX : null;
    const points = plotPoints(this.host.steps(), this.host.current(), this.model.get("measurements") ?? {});
    if (!points.length) {
      // Nothing measured: no plot, and no reading of the pane's width (that would force a layout of
      // everything just redrawn, on every click).
      this.plot.hidden = true;
      if (this.plot.firstChild) this.plot.replaceChildren();
      return;
    }
    const width = Math.max(180, Math.min(420, (this.el.clientWidth || 268) - 8));
    // A short pane (the explorer inside a cell) keeps its height for the history rows: the plot
    // is one line there until asked for, and then a smaller one.
    const room = measured || 400;
    const plotHeight = (full: number) => Math.max(64, Math.min(full, Math.round(room * 0.4) - 22));
    const short = room < SHORT_HISTORY_PX;
    const fold = h("button", { class: "mlc-plot-toggle mlc-plot-fold", title: "the plot takes room from the history here; ⤢ gives both room" },
      this.plotOpen ? "hide" : "show plot");
    fold.addEventListener("click", () => {
      this.plotOpen = !this.plotOpen;
      this.drawPlot();
    });
    if (short && !this.plotOpen) {
      this.plot.hidden = false;
      this.plot.replaceChildren(h("div", { class: "mlc-section-title" }, `Latency per step (${points.length} measured)`, " ", fold));
      return;
    }
    const onPick = (id: StepId) => this.host.moveTo(id);
    const measurements = this.model.get("measurements") ?? {};
    const roofline = this.plotMode === "roofline" ? rooflinePlot(rooflinePoints(points, measurements), roofOf(measurements), { width, height: plotHeight(140), onPick }) : null;
    const svg = roofline ?? latencyPlot(points, { width, height: plotHeight(120), onPick });
    this.plot.hidden = !svg;
    const toggle = h("button", { class: "mlc-plot-toggle", title: "switch between latency per step and the machine's roofline" },
      this.plotMode === "roofline" ? "latency" : "roofline");
    toggle.addEventListener("click", () => {
      this.plotMode = this.plotMode === "roofline" ? "latency" : "roofline";
      this.drawPlot();
    });
    const title = roofline ? "Steps on the roofline (GFLOP/s against FLOPs/byte)" : "Latency per step (log scale)";
    this.plot.replaceChildren(...(svg ? [h("div", { class: "mlc-section-title" }, title, " ", toggle, short ? fold : ""), svg] : []));
  }

  private plotMode: "latency" | "roofline" = "latency";
  /** In a short History pane the plot starts folded; "show plot" opens it until "hide". */
  private plotOpen = false;
}

/** The step a measurement is running for (as text), or null; none once the kernel is gone (its
 *  worker died with it: the `measuring` trait that says otherwise will never be cleared). */
export function measuringStep(model: Model): string | null {
  if (!kernelLive(model)) return null;
  const m = model.get("measuring") as MeasuringInfo | Record<string, never> | undefined;
  return m && "step" in m && m.step !== null && m.step !== undefined ? String(m.step) : null;
}
