// The explorer view: wires the panels to the widget model. Traits are the state; user actions go
// to Python as requests (lib/rpc) and come back as trait changes, so a step applied from Python
// and a click render through the same path.

import type { AnyModel } from "@anywidget/types";
import { AccessPanel } from "../access/panel";
import { h, keepFocus, keepKeys, revealInContainer } from "../lib/dom";
import { FOLLOW, type FollowMessage, type RequestParams } from "../lib/model";

/** The requests that change the session: Python answers with the new state (and maybe a selection). */
type StepRequest = "apply" | "goto" | "set_decision" | "replay";
import { kernelLive, onKernelLost, recordedReply, recordedResult } from "../lib/offline";
import type { Panel } from "../lib/panel";
import { Rpc, RpcFailure, bufferText } from "../lib/rpc";
import type { ExplorerError, ExplorerTraits, FailureInfo, HistoryDelta, Selection, StepData, StepId } from "../lib/types";
import { ChecksPanel, type StepChecks, type ChecksSetup, type StepHazards, checksBadge, reportFor } from "../checks/panel";
import { WayPanel } from "../path/panel";
import { type HintForm, hintedCall } from "../path/fill";
import { CodeView, type DiffMode, type Marks } from "./code";
import { CompilerPanel } from "../lowering/compiler";
import { CudaPanel } from "../lowering/cuda";
import { type FormHandle, renderForm } from "./forms";
import { renderBanner, showLocalError } from "./banner";
import { HistoryPane } from "./history_pane";
import { Measuring } from "./measuring";
import { type PendingClick, recordLatency } from "./latency";
import { ExplorerLayout, sidePanelButton } from "./layout";
import { isEditableTarget, keyAction, toggleHelp } from "./keys";
import type { Measurements } from "../measure/measure";
import { type ApplyCall, type Offer, applicable, buildCall, defaultValues, offerForKey } from "./primitives";
import { HeldSteps } from "./held";
import { History, readStep, sameDecisions, sameStep } from "./state";
import { exportHtml, exportTrace } from "./export";
import { Toolbar, type ToolbarHost } from "./toolbar";
import { type Tab, Tabs } from "./tabs";
import { TracePanel } from "./trace";
import { type Entry, TreeIndex, lineSpan } from "./tree";
import { renderTree } from "./tree_view";

type Model = AnyModel<ExplorerTraits>;

/** What a redraw looks at: a trait by its name, or a part of the current step by its field's name
 * (the `step` trait itself: the current step is another one). */
type Part = keyof ExplorerTraits | Exclude<keyof StepData, "id">;

export { BUSY_DELAY_MS } from "./toolbar";

export class ExplorerView {
  readonly root: HTMLElement;
  private rpc: Rpc;
  private index: TreeIndex;
  private code: CodeView;
  private trace: TracePanel;
  private treeHost: HTMLElement;
  private primHost: HTMLElement;
  private historyPane: HistoryPane;
  private banner: HTMLElement;
  private bar: Toolbar;
  private tabs: Tabs;
  private checksPanel: ChecksPanel;
  private way: WayPanel; // the way to a target program: the bar under the toolbar and the Way tab
  private collapsed = new Set<string>();
  private revealedKey: string | null = null;
  private form: { offer: Offer; handle: FormHandle; entryKey: string } | null = null;
  private inspected: FailureInfo | null = null;
  private diffMode: DiffMode = "off";
  // Every step this page has held, by id: undo, redo, go to step and diffs are answered from
  // these, live and offline alike (see moveTo).
  private held: HeldSteps;
  private reports = new Map<string, StepChecks>(); // step id -> its checks report, as sent
  private pendingClick: PendingClick | null = null;
  private dirty = new Set<Part>();
  private flushQueued = false;
  private disposers: Array<() => void> = [];
  private memory: AccessPanel; // the access view, below the body when open (toolbar "Memory")
  private memoryHost: HTMLElement;
  private measuring: Measuring; // Measure, its Cancel and their requests (measuring.ts)
  private memoryRpc: Rpc; // the memory panel's analyses too: a long one shows its own progress
  private cuda: CudaPanel;
  private cudaOn = false;
  private compiler: CompilerPanel; // the "Compiler" view: passes, code, loop facts (compiler.ts)
  private compilerOn = false;
  private layout: ExplorerLayout;
  private model: Model;
  private cur: StepData; // the current step, decoded from the `step` trait
  private history = new History();

  constructor(model: AnyModel<ExplorerTraits>) {
    this.model = model;
    this.rpc = new Rpc(model);
    this.memoryRpc = new Rpc(model);
    this.held = new HeldSteps(model);
    this.cur = this.held.hold();
    this.index = new TreeIndex(this.cur.loop_tree);

    this.bar = new Toolbar(this.toolbarHandlers());
    this.measuring = new Measuring(model, this.bar, this.bar.el, (err) => this.showLocalError(err));
    this.memory = new AccessPanel({ request: (method, params) => this.memoryRpc.call(method, params), maxPx: 200, onProgress: (cb) => this.memoryRpc.listen("mlc-progress", (m) => cb(Number(m.done), Number(m.total))), stepKey: () => String(this.current()) });
    this.memoryHost = h("div", { class: "mlc-memory", hidden: true }, this.memory.el);
    const toolbarEnd = this.bar.el.lastElementChild!;
    this.banner = h("div", { class: "mlc-banner", hidden: true });

    this.treeHost = h("div", { class: "mlc-tree", role: "tree" });
    this.primHost = h("div", { class: "mlc-primitives" });
    // Panes placed by explorer.css: beside the code when it keeps 80 columns, else docked below it.
    const left = h(
      "div",
      { class: "mlc-left" },
      h("div", { class: "mlc-pane mlc-pane-tree" }, h("div", { class: "mlc-section-title" }, "Loop nest"), this.treeHost),
      h("div", { class: "mlc-pane mlc-pane-prims" }, h("div", { class: "mlc-section-title" }, "Primitives"), this.primHost),
    );
    const center = h("div", { class: "mlc-center" });
    this.trace = new TracePanel({
      replay: (text) => void this.replay(text),
      setDecision: (index, value) => this.call("set_decision", { index, value }, "set_decision"),
      exportTrace: (format) => void this.exportTrace(format),
      importTrace: (text, filename) => void this.importTrace(text, filename),
    });
    this.historyPane = this.historyPaneOf(model);
    this.checksPanel = new ChecksPanel({
      pick: (name) => this.selectName(name),
      recorded: (step) => recordedResult(model, "checks", { step }),
    });
    this.way = new WayPanel(model, {
      openForm: (form, note) => this.openOffer(form.offer, { ...form, note }),
      goTo: (step) => void this.moveTo(step, "goto"),
      showWay: () => this.tabs.show("way"),
      label: (step) => this.history.steps().find((s) => String(s.id) === String(step))?.label,
      tree: () => this.index,
    });
    this.tabs = new Tabs({ history: this.historyPane.el, trace: this.trace.el, checks: this.checksPanel.el, way: this.way.el }, (name) => this.tabShown(name));
    const right = h("div", { class: "mlc-right" }, this.tabs.bar, this.historyPane.el, this.trace.el, this.checksPanel.el, this.way.el);
    this.root = h(
      "div",
      { class: "mlc-explorer", tabindex: "0", style: { height: model.get("height") || "640px" } },
      this.bar.el,
      this.way.bar,
      this.banner,
      h("div", { class: "mlc-body" }, left, center, right),
      this.memoryHost,
    );
    this.layout = new ExplorerLayout(this.root, () => (this.memoryHost.hidden ? 0 : 520), () => this.layoutHeight());
    toolbarEnd.before(this.layout.maximizeBtn);
    this.layout.maximizeBtn.before(sidePanelButton(this.root));
    this.root.append(this.layout.grip);
    this.root.addEventListener("click", (ev) => {
      if ((ev.target as HTMLElement | null)?.closest?.(".mlc-more-room")) this.layout.setMaximized(true);
    });
    this.layoutHeight();
    this.code = new CodeView(center, (line) => this.selectAtLine(line));
    this.cuda = new CudaPanel(model);
    center.append(this.cuda.el);
    this.compiler = new CompilerPanel(model, (name) => this.selectName(name));
    center.append(this.compiler.el);
    this.root.addEventListener("keydown", (ev) => this.onKey(ev));
    keepKeys(this.root);
    this.tabs.show("history");

    this.watchTraits(model);
    for (const name of ["script", "loop_tree", "history", "decisions", "trace", "error", "step", "measuring", "checks", "path"] as const) this.dirty.add(name);
    this.flush();
  }

  private toolbarHandlers(): ToolbarHost {
    return {
      undo: () => void this.undo(),
      redo: () => void this.redo(),
      measure: () => void this.measure(),
      cancelMeasure: () => void this.measuring.cancel(),
      toggleMemory: () => this.toggleMemory(),
      exportHtml: () => void this.exportHtml(),
      toggleHelp: () => this.toggleHelp(),
      modeChanged: (mode) => {
        if (mode === "unified" || mode === "split") this.pendingClick = { t0: performance.now(), primitive: "diff" };
        this.setCuda(mode === "cuda");
        this.setCompiler(mode === "compiler");
        this.diffMode = this.cudaOn || this.compilerOn ? "off" : (mode as DiffMode);
        this.bar.baseSel.hidden = this.diffMode === "off";
        if (this.diffMode !== "off") this.drawBases();
        void this.renderDiff();
      },
      baseChanged: () => {
        this.pendingClick = { t0: performance.now(), primitive: "diff" };
        void this.renderDiff();
      },
      busyShown: (shown) => this.root.classList.toggle("mlc-busy-state", shown),
    };
  }

  private historyPaneOf(model: Model): HistoryPane {
    return new HistoryPane(model, {
      steps: () => this.history.steps(),
      current: () => this.current(),
      moveTo: (id) => void this.moveTo(id, "goto"),
      inspect: (failure) => {
        this.inspected = failure;
        this.drawBanner();
        this.drawTree();
        this.drawCode(false);
      },
    });
  }

  /** The traits that redraw a part, and the checks reports kept per step. */
  private watchTraits(model: Model): void {
    const watch = (name: keyof ExplorerTraits, cb = () => this.invalidate(name)) => {
      model.on(`change:${name}`, cb);
      this.disposers.push(() => model.off(`change:${name}`, cb));
    };
    for (const name of ["failures", "selection", "error", "height", "measurements", "measuring", "hazards", "path", "path_setup"] as const) watch(name);
    // Each step's checks report is kept: back at a step, the page shows it (Python sends it once).
    watch("checks", () => {
      const report = this.model.get("checks") as StepChecks | Record<string, never>;
      if (report && "step" in report) this.reports.set(String(report.step), report as StepChecks);
      this.invalidate("checks");
    });
    const firstReport = model.get("checks" as never) as unknown as StepChecks | Record<string, never> | undefined;
    if (firstReport && "step" in firstReport) this.reports.set(String(firstReport.step), firstReport as StepChecks);
    watch("checks_setup", () => {
      this.reports.clear();
      this.invalidate("checks_setup");
    });
    watch("step", () => this.onStep());
    // The kernel went: what it was measuring will never be answered (its worker died with it).
    this.disposers.push(onKernelLost(model, () => this.invalidate("measuring")));
    watch("history", () => this.onHistory());
    this.onHistory();
  }

  // ---- traits -> what changed ------------------------------------------------------------------

  /** A new current step: mark what differs from the one shown (one redraw for the whole message). A step
   *  never changes once made: its id says if it is another; parts are compared to spare shared redraws. */
  private onStep(): void {
    const prev = this.cur;
    const next = this.held.hold();
    this.cur = next;
    this.history.visit(next.id);
    if (sameStep(next, prev)) return;
    for (const name of ["step", "loop_tree"] as const) this.invalidate(name);
    if (next.script !== prev.script) this.invalidate("script");
    if (next.changed_lines.join() !== prev.changed_lines.join()) this.invalidate("changed_lines");
    if (!sameDecisions(next.decisions, prev.decisions)) this.invalidate("decisions");
    if (next.trace !== prev.trace) this.invalidate("trace");
  }

  /** The history trait holds what changed; a gap (a view opened late) is filled by asking Python. */
  private onHistory(): void {
    const delta = this.model.get("history") as HistoryDelta | Record<string, never>;
    if (this.history.apply(delta)) {
      this.invalidate("history");
      return;
    }
    void this.rpc
      .call("history")
      .then((reply) => {
        if (this.history.apply(reply.result)) this.invalidate("history");
      })
      .catch((err) => this.showLocalError(err));
  }

  private current(): StepId {
    return this.cur.id;
  }

  // ---- state -> DOM ----------------------------------------------------------------------------

  private invalidate(name: Part): void {
    this.dirty.add(name);
    if (this.flushQueued) return;
    this.flushQueued = true;
    // Python sends a step's traits in one message; draw once after all of its change events.
    queueMicrotask(() => this.flush());
  }

  private flush(): void {
    this.flushQueued = false;
    const tFlush = performance.now();
    if (this.pendingClick && this.pendingClick.tState === undefined) this.pendingClick.tState = tFlush;
    const hadFocus = typeof document !== "undefined" && this.root.contains(document.activeElement);
    const d = this.dirty;
    this.dirty = new Set();
    const has = (...names: Part[]) => names.some((n) => d.has(n));
    // Each panel's drawing time goes with a click's latency sample (what a redraw costs, where).
    const panels: Record<string, number> = {};
    const timed = (name: string, draw: () => void) => {
      const t = performance.now();
      draw();
      panels[name] = (panels[name] ?? 0) + performance.now() - t;
    };
    if (has("loop_tree")) this.index = new TreeIndex(this.cur.loop_tree);
    if (has("height")) this.layoutHeight();
    if (has("error", "failures")) this.inspected = null;
    // The CodeMirror panes first. A CodeMirror update that redraws lines reads the DOM selection,
    // which in Chrome lays out the page there and then: done before any other pane is written, that
    // layout covers only the editor's own changed lines, and the rest is laid out once, in the frame.
    if (has("script", "changed_lines", "loop_tree", "selection", "error")) timed("code", () => this.drawCode(has("selection")));
    if (has("trace")) timed("trace", () => this.trace.setTrace(this.cur.trace));
    if (has("loop_tree", "selection", "error")) {
      timed("tree", () => this.drawTree());
      timed("primitives", () => this.drawPrimitives(has("loop_tree")));
    }
    if (!this.memoryHost.hidden && has("loop_tree", "selection", "step")) timed("memory", () => this.syncMemory(has("loop_tree", "step")));
    if (has("history", "step", "failures", "measurements", "measuring", "hazards")) timed("history", () => this.historyPane.show());
    if (has("checks", "checks_setup", "step")) timed("checks", () => this.drawChecks());
    if (has("path", "path_setup", "step", "history")) timed("way", () => this.drawWay());
    if (has("history", "step", "measurements")) timed("plot", () => this.historyPane.drawPlot());
    if (has("measuring")) this.measuring.draw();
    if (this.cudaOn && has("step")) void this.cuda.show(this.current());
    if (this.compilerOn && has("loop_tree", "selection", "step")) timed("compiler", () => this.syncCompiler(has("step")));
    if (has("history", "step")) timed("toolbar", () => this.drawToolbar());
    if (has("error")) this.drawBanner();
    if (has("decisions")) timed("decisions", () => this.trace.setDecisions(this.cur.decisions));
    if (has("error")) this.drawTraceError();
    if (this.diffMode !== "off" && has("script", "step", "history")) void this.renderDiff();
    if (has("script", "error") && this.pendingClick) {
      this.pendingClick.drawMs = performance.now() - tFlush;
      this.pendingClick.panels = panels;
      this.recordLatency();
    }
    // Redrawn panels may have removed the focused button: keep keyboard focus in the explorer.
    if (hadFocus && !this.root.contains(document.activeElement)) this.root.focus({ preventScroll: true });
  }

  private selection(): Selection | null {
    const s = this.model.get("selection") as Selection | Record<string, never>;
    return s && "name" in s && s.name ? (s as Selection) : null;
  }

  private selectedEntry(): Entry | undefined {
    return this.index.find(this.selection());
  }

  private shownError(): ExplorerError | null {
    if (this.inspected) return { ...this.inspected, source: "apply" };
    const e = this.model.get("error") as ExplorerError | Record<string, never>;
    return e && "summary" in e && e.summary ? (e as ExplorerError) : null;
  }

  private involvedEntries(): Entry[] {
    return this.index.findAll(this.shownError()?.involved ?? []);
  }

  private drawTree(): void {
    const sel = this.selectedEntry();
    const selectedEl = renderTree(
      this.treeHost,
      this.index,
      { selectedKey: sel?.key ?? null, involvedKeys: new Set(this.involvedEntries().map((e) => e.key)), collapsed: this.collapsed },
      (e) => this.select(e),
      (e) => {
        if (this.collapsed.has(e.key)) this.collapsed.delete(e.key);
        else this.collapsed.add(e.key);
        this.drawTree();
      },
      (e) => this.hover(e),
    );
    if (selectedEl && sel?.key !== this.revealedKey) {
      this.revealedKey = sel?.key ?? null;
      revealInContainer(this.treeHost, selectedEl);
    }
  }

  /** Preview a tree row's lines in the code while the mouse is over it. */
  private hover(e: Entry | null): void {
    const span = e ? lineSpan(e.node) : null;
    const marks = this.code.currentMarks;
    if ((marks.hover ?? null) === span || (marks.hover && span && marks.hover[0] === span[0] && marks.hover[1] === span[1])) return;
    this.code.setMarks({ ...marks, hover: span });
  }

  private drawCode(scroll: boolean): void {
    const sel = this.selectedEntry();
    const span = sel ? lineSpan(sel.node) : null;
    const marks: Marks = {
      changed: this.cur.changed_lines,
      selected: span,
      involved: this.involvedEntries()
        .map((e) => lineSpan(e.node))
        .filter((s): s is [number, number] => !!s)
        .map(([a]) => [a, a] as [number, number]),
    };
    const changed: [number, number] | null = marks.changed.length ? [Math.min(...marks.changed), Math.max(...marks.changed)] : null;
    this.code.update(this.cur.script, marks, scroll && span ? span : changed);
  }

  private primOffers: Offer[] = [];
  private primShown: { markup: string; form: HTMLElement | null } | null = null;

  private drawPrimitives(treeChanged: boolean): void {
    const sel = this.selectedEntry();
    const offers = applicable(sel, this.index);
    this.primOffers = offers;
    if (this.form && (treeChanged || this.form.entryKey !== (sel?.key ?? ""))) this.form = null;
    const header = sel
      ? h("div", { class: "mlc-prim-target" }, `${sel.node.kind} `, h("b", {}, sel.ref))
      : h("div", { class: "mlc-muted" }, "Select a loop or block (click, or ↑↓ in the tree) to see what applies.");
    const buttons = h("div", { class: "mlc-prim-buttons" });
    for (const offer of offers) {
      const b = h(
        "button",
        {
          class: `mlc-btn mlc-prim${this.form?.offer === offer || this.form?.offer.spec === offer.spec ? " mlc-active" : ""}`,
          dataset: { primitive: offer.spec.name },
          title: `${offer.spec.help}${offer.spec.key ? ` (key ${offer.spec.key})` : ""}`,
          // The offer of the latest draw (a kept button outlives the tree it was drawn for).
          onclick: () => this.openOffer(this.primOffers.find((o) => o.spec === offer.spec) ?? offer),
          onmousedown: keepFocus,
        },
        offer.spec.name,
        offer.spec.key ? h("kbd", {}, offer.spec.key) : null,
      );
      buttons.append(b);
    }
    const form = this.form ? this.form.handle.el : null;
    const markup = header.outerHTML + buttons.outerHTML;
    // Most steps leave the selection's offers as they were: then the pane's elements stay, and the
    // frame has nothing of it to restyle or lay out.
    if (this.primShown && this.primShown.markup === markup && this.primShown.form === form && this.primHost.firstChild) return;
    this.primShown = { markup, form };
    this.primHost.replaceChildren(header, buttons, form ?? "");
  }

  /** The Checks panel follows the current step; its tab says how many checks hold and the hazards. */
  private drawChecks(): void {
    const state = { setup: this.model.get("checks_setup") ?? {}, report: this.reports.get(String(this.current())) ?? this.model.get("checks") ?? {}, step: this.current(), live: kernelLive(this.model) };
    // A hidden panel is drawn when its tab is shown: a click then only relabels the tab.
    if (!this.checksPanel.el.hidden) this.checksPanel.show(state);
    const report = this.checksPanel.el.hidden ? reportFor(state.report, state.step) : this.checksPanel.report;
    const badge = checksBadge(report);
    this.tabs.label("checks", badge ? `Checks ${badge.passed}/${badge.total}${badge.hazards ? ` ⚠${badge.hazards}` : ""}` : "Checks", { warn: !!badge && badge.warn });
  }

  /** The way follows the current step: its bar, its tab when shown, the tab's label. */
  private drawWay(): void {
    this.way.show(this.current());
    this.tabs.label("way", this.way.badge, { on: this.way.on });
  }

  /** Measure the current step on the chosen target (button or key m). */
  measure(): Promise<void> {
    return this.measuring.measure(this.current());
  }

  private setCuda(on: boolean): void {
    this.cudaOn = on;
    this.cuda.el.hidden = !on;
    this.code.el.hidden = on;
    if (on) void this.cuda.show(this.current());
  }

  private setCompiler(on: boolean): void {
    this.compilerOn = on;
    this.compiler.el.hidden = !on;
    if (on) {
      this.code.el.hidden = true;
      this.syncCompiler(true);
    }
  }

  /** The Compiler view follows the current step and highlights the selected loop (or the block's loop). */
  private syncCompiler(stepChanged: boolean): void {
    let e = this.selectedEntry();
    while (e && e.node.kind !== "loop") e = e.parent ?? undefined;
    this.compiler.select(e ? e.ref : null);
    if (stepChanged) void this.compiler.show(this.current());
  }

  private drawToolbar(): void {
    this.bar.drawStep(this.cur, this.history.hasChildren(this.cur.id));
    if (this.diffMode !== "off") this.drawBases();
  }

  private drawBases(): void {
    this.bar.drawBases(this.history.steps(), this.current());
  }

  private drawBanner(): void {
    const err = this.shownError();
    this.root.classList.toggle("mlc-has-error", !!err);
    renderBanner(this.banner, err, { earlier: !!this.inspected, pick: (name) => this.selectName(name), dismiss: () => this.dismissError() });
  }

  private drawTraceError(): void {
    const err = this.shownError();
    if (err && err.source === "replay") this.trace.showError(err.line ?? null, err.summary);
    else this.trace.showError(null, "");
  }

  private async renderDiff(): Promise<void> {
    const current = this.cur.script;
    if (this.diffMode === "off" || !this.bar.base) {
      this.code.showDiff("off", "", current);
      return;
    }
    const base = this.bar.base;
    let original = this.held.scripts.get(base);
    if (original === undefined) {
      const held = await this.held.stepBytes(base);
      if (held) original = readStep(held).script;
      else if (!kernelLive(this.model)) {
        this.showLocalError(new Error(this.held.notRecorded(base)));
        return;
      } else {
        try {
          // a step this page never held (made before it opened, not yet recorded): the kernel has it
          const reply = await this.rpc.call("script_at", { step: base });
          original = bufferText(reply.buffers[0]);
        } catch (err) {
          this.showLocalError(err);
          return;
        }
      }
      this.held.scripts.set(base, original);
    }
    if (this.bar.base === base && (this.diffMode as DiffMode) !== "off") {
      this.code.showDiff(this.diffMode, original, this.cur.script);
      if (this.pendingClick?.primitive === "diff") this.recordLatency();
    }
  }

  // ---- the history, answered by the page -------------------------------------------------------
  // The page holds every step it was sent or that was recorded for it; undo, redo and go to step
  // show one of those at once, live or in a saved view, by the same code. A live kernel's Session
  // follows with a note that needs no answer (Explorer._follow), so Python sees the same step.

  private undo(): Promise<void> {
    return this.cur.parent === null || this.cur.parent === undefined ? Promise.resolve() : this.moveTo(this.cur.parent, "undo");
  }

  private redo(): Promise<void> {
    const target = this.history.redoTarget(this.cur.id);
    return target === null ? Promise.resolve() : this.moveTo(target, "redo");
  }

  /** Show step `id` (undo, redo, go to step): from the steps held, else from the records. */
  async moveTo(id: StepId, label: string): Promise<void> {
    if (String(id) === String(this.cur.id)) return;
    this.pendingClick = { t0: performance.now(), primitive: label };
    const data = await this.held.stepBytes(id);
    const live = kernelLive(this.model);
    if (!data) {
      // Not held (a step made before this page opened, not recorded yet): the kernel sends it.
      if (live) await this.call("goto", { step: id }, label, false);
      else {
        this.pendingClick = null;
        this.showLocalError(new Error(this.held.notRecorded(id)));
      }
      return;
    }
    this.model.set("step", data);
    if (live) this.model.send({ kind: FOLLOW, step: id } satisfies FollowMessage);
  }

  private toggleMemory(): void {
    this.memoryHost.hidden = !this.memoryHost.hidden;
    this.bar.memoryBtn.classList.toggle("mlc-active", !this.memoryHost.hidden);
    this.layoutHeight();
    if (!this.memoryHost.hidden) this.syncMemory(true);
    else this.memory.stop();
  }

  /** The memory panel follows the selection: a loop, or the loop around a selected block. */
  private syncMemory(programChanged: boolean): void {
    let e = this.selectedEntry();
    while (e && e.node.kind !== "loop") e = e.parent ?? undefined;
    void this.memory.show(e ? e.ref : null, undefined, programChanged);
  }

  private layoutHeight(): void {
    const base = this.layout.baseHeight(this.model.get("height") || "640px");
    this.root.style.height = this.memoryHost.hidden ? base : `calc(${base} + 520px)`;
  }

  private tabShown(name: Tab): void {
    if (name === "trace") this.trace.show();
    if (name === "checks") this.drawChecks();
    if (name === "way") this.drawWay();
  }

  private toggleHelp(): void {
    toggleHelp(this.root);
  }

  // ---- user actions -> Python ------------------------------------------------------------------

  select(entry: Entry | undefined): void {
    if (!entry) return;
    // A click inside the explorer already focuses it (tabindex); focusing again costs a layout.
    if (!this.root.contains(document.activeElement)) this.root.focus({ preventScroll: true });
    const sel: Selection = { kind: entry.node.kind, name: entry.ref };
    const cur = this.selection();
    if (cur && cur.kind === sel.kind && cur.name === sel.name) return;
    this.model.set("selection", sel);
    this.model.save_changes();
    this.invalidate("selection"); // the model may not echo our own change
  }

  private selectName(name: string): void {
    this.select(this.index.findName(name));
  }

  private selectAtLine(line: number): void {
    const e = this.index.atLine(line);
    if (e) this.select(e);
  }

  /** Open a primitive's form (a click, a key), or a hint's (`hinted`): on its loop or block, filled in,
   * its sentence above the fields (the student presses Apply: the step is theirs, sent as a click's). */
  private openOffer(offer: Offer, hinted?: HintForm & { note: string }): void {
    if (hinted?.entry) this.select(hinted.entry);
    const sel = this.selectedEntry();
    if (!sel && !hinted) return;
    if (!offer.fields.length && !hinted && sel) {
      void this.apply(buildCall(offer.spec, sel, {}));
      return;
    }
    if (!hinted && this.form && this.form.offer.spec === offer.spec) {
      this.form = null;
      this.drawPrimitives(false);
      return;
    }
    const values = hinted?.values ?? defaultValues(offer.fields);
    const handle = renderForm(
      offer,
      values,
      () => void this.apply(hinted ? hintedCall(hinted, values) : buildCall(offer.spec, sel!, values)),
      () => {
        this.form = null;
        this.drawPrimitives(false);
        this.root.focus({ preventScroll: true });
      },
      hinted?.note,
    );
    this.form = { offer, handle, entryKey: sel?.key ?? "" };
    this.drawPrimitives(false);
    handle.focus();
    revealInContainer(this.primHost, handle.el); // the whole form, its Apply button included
  }

  /** One intent, one step: while an apply is on its way, a second one (a double-click on Apply, a
   * key pressed again before the new step is drawn) is dropped; it would act on the old selection. */
  private applying = false;

  async apply(call: ApplyCall): Promise<void> {
    if (this.applying) return;
    this.applying = true;
    this.pendingClick = { t0: performance.now(), primitive: call.primitive };
    try {
      const ok = await this.call("apply", call, call.primitive, false);
      if (ok) {
        this.form = null;
        this.drawPrimitives(false);
      }
    } finally {
      this.applying = false;
    }
  }

  private async replay(text: string): Promise<void> {
    this.trace.note("replaying…");
    const ok = await this.call("replay", { trace: text }, "replay");
    if (ok) {
      this.trace.resetToSession();
      this.trace.note("replayed as a new branch");
    }
  }

  /** A trace file (JSON or text): replayed as a new branch; if refused, shown so the line can be fixed. */
  private async importTrace(text: string, filename: string): Promise<void> {
    this.trace.note(`importing ${filename}…`);
    const ok = await this.call("replay", { trace: text }, "replay");
    if (ok) {
      this.trace.resetToSession();
      this.trace.note(`imported ${filename} as a new branch`);
    } else {
      this.trace.setText(text, false);
      this.drawTraceError();
    }
  }

  /** Send a request; Python updates the traits (and the error trait on failure). */
  private async call<K extends StepRequest>(method: K, params: RequestParams[K], label: string = method, clearTiming = true): Promise<boolean> {
    if (clearTiming) this.pendingClick = { t0: performance.now(), primitive: label };
    this.setBusy(true);
    try {
      const reply = await this.rpc.call<StepRequest>(method, params);
      const last = typeof window !== "undefined" ? window.__mlcLab?.latencies.at(-1) : undefined;
      if (last && last.primitive === label && last.kernelMs === undefined) last.kernelMs = reply.elapsedMs;
      else if (this.pendingClick) this.pendingClick.kernelMs = reply.elapsedMs;
      return true; // the new selection (apply's new loops) comes with the state, not in the reply
    } catch (err) {
      if (!(err instanceof RpcFailure)) this.showLocalError(err);
      // An RpcFailure's error is already in the `error` trait (Python set it before answering).
      return false;
    } finally {
      this.setBusy(false);
    }
  }

  private dismissError(): void {
    if (this.inspected) {
      this.inspected = null;
      this.drawBanner();
      this.drawTree();
      this.drawCode(false);
      return;
    }
    void this.rpc.call("clear_error").catch(() => undefined);
  }

  private showLocalError(err: unknown): void {
    showLocalError(this.banner, err);
  }

  private async exportTrace(format: "json" | "text" | "python"): Promise<void> {
    try {
      await exportTrace(this.rpc, format, { root: this.root, func: this.model.get("func") || "", note: (text) => this.trace.note(text) });
    } catch (err) {
      this.showLocalError(err);
    }
  }

  private async exportHtml(): Promise<void> {
    try {
      await exportHtml(this.rpc, this.model.get("func") || "");
    } catch (err) {
      this.showLocalError(err);
    }
  }

  private onKey(ev: KeyboardEvent): void {
    if (isEditableTarget(ev.target)) return;
    const action = keyAction(ev);
    if (!action) return;
    ev.preventDefault();
    ev.stopPropagation();
    const sel = this.selectedEntry();
    switch (action.type) {
      case "undo":
        void this.undo();
        break;
      case "redo":
        void this.redo();
        break;
      case "move":
        this.select(this.index.next(sel, action.delta));
        break;
      case "parent":
        if (sel?.parent) this.select(sel.parent);
        break;
      case "child":
        if (sel) this.select(this.index.firstChild(sel));
        break;
      case "escape":
        if (this.root.querySelector(".mlc-help")) this.toggleHelp();
        else if (this.form) {
          this.form = null;
          this.drawPrimitives(false);
        } else if (this.shownError()) this.dismissError();
        else if (this.layout.maximized) this.layout.setMaximized(false);
        break;
      case "help":
        this.toggleHelp();
        break;
      case "measure":
        void this.measure();
        break;
      case "primitive": {
        const offer = offerForKey(applicable(sel, this.index), action.key);
        if (offer) this.openOffer(offer);
        break;
      }
    }
  }

  private setBusy(busy: boolean): void {
    this.bar.setBusy(busy, this.rpc.inFlight);
  }

  /** Click-to-render latency: from the click to the first frame painted with the new state. */
  private recordLatency(): void {
    const pending = this.pendingClick;
    this.pendingClick = null;
    if (pending) recordLatency(this.root, pending);
  }

  /** The panels of lib/panel.ts: each ends as the others do (dispose). */
  private get panels(): Panel<never>[] {
    return [this.memory, this.cuda, this.compiler, this.trace, this.historyPane, this.checksPanel, this.way];
  }

  dispose(): void {
    this.bar.dispose();
    for (const d of this.disposers) d();
    for (const part of [...this.panels, this.layout, this.rpc, this.measuring, this.memoryRpc, this.code]) part.dispose();
    this.root.remove();
  }
}
