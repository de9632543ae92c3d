// The dashboard's DOM: header with status and Cancel, progress, the chart, failed candidates, and the
// selected trial (trace, script, diff against the best). All state comes from the model's traits.

import type { AnyModel, Host } from "@anywidget/types";
import { clear, h, keepKeys } from "../lib/dom";
import { Rpc, RpcFailure } from "../lib/rpc";
import { isDarkTheme } from "../lib/theme";
import { type Metric, buildSeries, formatDuration, formatGflops, formatLatency, toFloat64 } from "./data";
import { TrialPlot, plotData, plotLayout, rooflineData, rooflineLayout } from "./plot";
import type { TrialDetail, TuningTraits } from "../lib/model";

type Tab = "diff" | "trace" | "script" | "error";

const STATUS_TEXT: Record<string, string> = {
  running: "running",
  cancelling: "cancelling…",
  done: "done",
  cancelled: "cancelled",
  failed: "failed",
  interrupted: "interrupted",
  "not started": "not started",
};

export class DashboardView {
  readonly root: HTMLDivElement;
  private readonly rpc: Rpc;
  private readonly plot: TrialPlot;
  private metric: Metric = "latency";
  private tab: Tab | null = null;
  private explorerRef: string | null = null;
  private explorerAbort: AbortController | null = null;
  private readonly off: Array<() => void> = [];

  private readonly els = {
    title: h("span", { class: "mlc-t-title" }),
    meta: h("span", { class: "mlc-t-meta" }),
    status: h("span", { class: "mlc-t-status" }),
    cancel: h("button", { class: "mlc-t-btn mlc-t-cancel", title: "Stop the job; every trial measured so far stays in the work directory" }, "Cancel"),
    fill: h("div", { class: "mlc-t-fill" }),
    summary: h("div", { class: "mlc-t-summary" }),
    jobError: h("pre", { class: "mlc-t-job-error" }),
    latencyBtn: h("button", { class: "mlc-t-btn mlc-t-metric", dataset: { metric: "latency" } }, "latency"),
    gflopsBtn: h("button", { class: "mlc-t-btn mlc-t-metric", dataset: { metric: "gflops" } }, "GFLOPS"),
    rooflineBtn: h("button", { class: "mlc-t-btn mlc-t-metric", dataset: { metric: "roofline" } }, "roofline"),
    phase: h("div", { class: "mlc-t-phase" }),
    stopped: h("div", { class: "mlc-t-stopped" }),
    machines: h("details", { class: "mlc-t-machines" }),
    bestBtn: h("button", { class: "mlc-t-btn mlc-t-show-best" }, "Show best"),
    plot: h("div", { class: "mlc-t-plot" }),
    failHead: h("div", { class: "mlc-t-fail-head" }),
    failList: h("ul", { class: "mlc-t-fail-list" }),
    failures: h("aside", { class: "mlc-t-failures" }),
    detail: h("div", { class: "mlc-t-detail" }),
    notice: h("div", { class: "mlc-t-notice" }),
    explorer: h("div", { class: "mlc-t-explorer" }),
  };

  constructor(
    private readonly model: AnyModel<TuningTraits>,
    private readonly host?: Host,
  ) {
    const e = this.els;
    this.rpc = new Rpc(model as any);
    this.plot = new TrialPlot(e.plot, (trial) => this.select(trial));
    e.failures.append(e.failHead, e.failList);
    this.root = h(
      "div",
      { class: "mlc-tuning" },
      h("div", { class: "mlc-t-head" }, e.title, e.meta, h("span", { class: "mlc-t-spacer" }), e.status, e.cancel),
      h("div", { class: "mlc-t-progress" }, h("div", { class: "mlc-t-bar" }, e.fill), e.summary),
      e.phase,
      e.stopped,
      e.machines,
      e.jobError,
      h("div", { class: "mlc-t-toolbar" }, h("span", { class: "mlc-t-label" }, "y axis:"), e.latencyBtn, e.gflopsBtn, e.rooflineBtn, h("span", { class: "mlc-t-spacer" }), e.bestBtn),
      h("div", { class: "mlc-t-main" }, e.plot, e.failures),
      e.notice,
      e.detail,
      e.explorer,
    );
    keepKeys(this.root);
    e.cancel.addEventListener("click", () => this.cancel());
    e.latencyBtn.addEventListener("click", () => this.setMetric("latency"));
    e.gflopsBtn.addEventListener("click", () => this.setMetric("gflops"));
    e.rooflineBtn.addEventListener("click", () => this.setMetric("roofline"));
    e.bestBtn.addEventListener("click", () => {
      const best = this.model.get("best");
      if (best && typeof best.trial === "number") this.select(best.trial);
    });
    e.failList.addEventListener("click", (ev) => {
      const li = (ev.target as HTMLElement).closest<HTMLElement>(".mlc-t-failure");
      if (li?.dataset.trial) this.select(Number(li.dataset.trial));
    });

    const on = (names: string[], fn: () => void) => {
      for (const n of names) {
        model.on(`change:${n}`, fn);
        this.off.push(() => model.off(`change:${n}`, fn));
      }
    };
    on(["status", "done", "total", "best", "failed_count", "elapsed", "job_error", "func", "target", "settings", "flops", "phase", "stopped_early", "roof"], () => this.renderHeader());
    on(["latency", "flops", "selected", "failures", "pending", "total", "roof", "status"], () => this.renderPlot());
    on(["failures", "failed_count", "selected"], () => this.renderFailures());
    on(["detail", "selected"], () => this.renderDetail());
    on(["notice"], () => this.renderNotice());
    on(["machines"], () => this.renderMachines());
    on(["explorer"], () => this.renderExplorer());
    this.renderAll();
    this.plot.flush();
  }

  renderAll(): void {
    this.renderHeader();
    this.renderMachines();
    this.renderPlot();
    this.renderFailures();
    this.renderDetail();
    this.renderNotice();
    this.renderExplorer();
  }

  // --- actions -----------------------------------------------------------------------------------
  select(trial: number): void {
    if (this.model.get("selected") === trial) return;
    this.tab = null;
    this.model.set("selected", trial);
    this.model.save_changes();
  }

  setMetric(metric: Metric): void {
    if (metric === "gflops" && !(this.model.get("flops") > 0)) return;
    if (metric === "roofline" && !this.model.get("roof")?.intensity) return;
    this.metric = metric;
    this.renderPlot();
    this.renderHeader();
  }

  async cancel(): Promise<void> {
    this.els.cancel.disabled = true;
    this.els.cancel.textContent = "Cancelling…";
    try {
      await this.rpc.call("cancel");
    } catch (err) {
      this.showProblem(err);
      this.renderHeader();
    }
  }

  async openInExplorer(trial: number): Promise<void> {
    const btn = this.els.detail.querySelector<HTMLButtonElement>(".mlc-t-open");
    if (btn) btn.disabled = true;
    try {
      await this.rpc.call("open_in_explorer", { trial });
    } catch (err) {
      this.showProblem(err);
    } finally {
      if (btn) btn.disabled = false;
    }
  }

  private showProblem(err: unknown): void {
    const text = err instanceof RpcFailure ? err.error.summary : String((err as Error)?.message ?? err);
    this.els.notice.textContent = text;
    this.els.notice.className = "mlc-t-notice mlc-t-problem";
  }

  // --- rendering -----------------------------------------------------------------------------------
  renderHeader(): void {
    const m = this.model;
    const e = this.els;
    const status = m.get("status") || "";
    e.title.textContent = `Tuning ${m.get("func") || ""}`.trim();
    e.meta.textContent = [m.get("target"), m.get("settings")].filter(Boolean).join(" · ");
    e.status.textContent = STATUS_TEXT[status] ?? status;
    e.status.dataset.status = status;
    const running = status === "running";
    e.cancel.disabled = !running;
    e.cancel.textContent = status === "cancelling" ? "Cancelling…" : "Cancel";
    e.cancel.hidden = !(running || status === "cancelling");
    const done = m.get("done") || 0;
    const total = m.get("total") || 0;
    const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
    e.fill.style.width = `${pct.toFixed(1)}%`;
    e.fill.dataset.status = status;
    const parts = [`${done} / ${total} trials`];
    const failed = m.get("failed_count") || 0;
    if (failed) parts.push(`${failed} failed`);
    const best = m.get("best") || {};
    if (typeof best.latency_s === "number") {
      const g = formatGflops(best.gflops);
      parts.push(`best ${formatLatency(best.latency_s)}${g ? ` (${g})` : ""} at trial ${best.trial}`);
      if (typeof best.confirmed_latency_s === "number") parts.push(`re-timed by measure(): ${formatLatency(best.confirmed_latency_s)}`);
    }
    const elapsed = toFloat64(m.get("elapsed"));
    let last = NaN;
    for (let i = elapsed.length - 1; i >= 0; i--) if (Number.isFinite(elapsed[i])) { last = elapsed[i]; break; }
    if (Number.isFinite(last)) parts.push(formatDuration(last));
    e.summary.textContent = parts.join(" · ");
    if (typeof best.method === "string" && best.method) e.summary.title = `timing: ${best.method}`;
    const phase = running ? m.get("phase") || "" : "";
    e.phase.textContent = phase;
    e.phase.hidden = !phase;
    const stopped = m.get("stopped_early") || "";
    e.stopped.textContent = stopped;
    e.stopped.hidden = !stopped;
    const roof = m.get("roof") || {};
    e.rooflineBtn.disabled = !roof.intensity;
    e.rooflineBtn.title = roof.intensity ? "every trial on the machine's roofline (mlc_lab.machine())" : "the machine's roofline is not measured yet: run mlc_lab.machine()";
    e.rooflineBtn.classList.toggle("mlc-t-on", this.metric === "roofline");
    const jobError = m.get("job_error") || "";
    e.jobError.textContent = jobError;
    e.jobError.hidden = !jobError;
    const canGflops = m.get("flops") > 0;
    e.gflopsBtn.disabled = !canGflops;
    e.gflopsBtn.title = canGflops ? "" : "the job did not record the program's FLOP count";
    e.latencyBtn.classList.toggle("mlc-t-on", this.metric === "latency");
    e.gflopsBtn.classList.toggle("mlc-t-on", this.metric === "gflops");
    e.bestBtn.disabled = typeof best.trial !== "number";
  }

  renderPlot(): void {
    const m = this.model;
    const latency = toFloat64(m.get("latency"));
    const series = buildSeries(latency, m.get("flops") || 0, this.metric, toFloat64(m.get("pending")), m.get("total") || 0);
    const summaries = new Map<number, string>();
    for (const f of m.get("failures") || []) summaries.set(f.trial, f.summary);
    const height = Math.max(200, parseInt(String(m.get("height") || "380"), 10) || 380);
    this.els.plot.dataset.points = String(series.okX.length);
    this.els.plot.dataset.failed = String(series.failX.length);
    const roof = this.metric === "roofline" ? rooflineData(series, m.get("roof") || {}) : [];
    if (roof.length) this.plot.draw(roof, rooflineLayout(isDarkTheme(), height));
    else this.plot.draw(plotData(series, m.get("selected"), summaries), plotLayout(series, isDarkTheme(), height, m.get("status") || "running"));
  }

  // Where the job measures when not here: each server lost or left out, each batch round with where it
  // ran and how long it waited. Open by itself when something went wrong.
  renderMachines(): void {
    const box = this.els.machines;
    const machines = this.model.get("machines") || {};
    clear(box);
    box.hidden = !machines.via;
    if (!machines.via) return;
    const lines = machines.lines || [];
    const problems = lines.filter((l) => l.problem).length;
    const head = `Measured ${machines.via}` + (problems ? ` · ${problems} problem${problems > 1 ? "s" : ""}` : "");
    box.append(h("summary", { class: `mlc-t-machines-head${problems ? " mlc-t-problem" : ""}` }, head));
    const list = h("ul", { class: "mlc-t-machines-list" });
    for (const line of lines) list.append(h("li", { class: line.problem ? "mlc-t-problem" : "" }, line.text));
    if (!lines.length) list.append(h("li", { class: "mlc-t-loading" }, "nothing measured there yet"));
    box.append(list);
    if (problems && !box.dataset.seen) {
      box.open = true;
      box.dataset.seen = "1";
    }
  }

  renderFailures(): void {
    const m = this.model;
    const e = this.els;
    const items = m.get("failures") || [];
    const count = m.get("failed_count") || 0;
    e.failures.hidden = count === 0;
    e.failHead.textContent = `Failed candidates (${count})`;
    clear(e.failList);
    const selected = m.get("selected");
    for (const f of items) {
      e.failList.append(
        h(
          "li",
          { class: `mlc-t-failure${f.trial === selected ? " mlc-t-selected" : ""}`, dataset: { trial: String(f.trial) }, title: f.summary },
          h("span", { class: "mlc-t-fail-trial" }, `#${f.trial}`),
          h("span", { class: "mlc-t-fail-text" }, f.summary || "failed"),
        ),
      );
    }
    if (count > items.length) e.failList.append(h("li", { class: "mlc-t-more" }, `… and ${count - items.length} more`));
  }

  renderDetail(): void {
    const m = this.model;
    const box = this.els.detail;
    clear(box);
    const selected = m.get("selected");
    box.hidden = selected < 0;
    if (selected < 0) return;
    const d: TrialDetail = m.get("detail") || {};
    const close = h("button", { class: "mlc-t-btn mlc-t-close", title: "Close" }, "×");
    close.addEventListener("click", () => this.select(-1));
    if (d.trial !== selected) {
      box.append(h("div", { class: "mlc-t-detail-head" }, h("b", null, `Trial ${selected}`), h("span", { class: "mlc-t-spacer" }), close), h("div", { class: "mlc-t-loading" }, "Replaying the trace…"));
      return;
    }
    const facts: string[] = [];
    if (d.ok) {
      facts.push(formatLatency(d.latency_s));
      if (d.gflops) facts.push(formatGflops(d.gflops));
      if (d.best_trial === d.trial) facts.push("the best so far");
      else if (typeof d.vs_best === "number") facts.push(`${d.vs_best.toFixed(2)}× the best (trial ${d.best_trial})`);
    } else if (d.problem) facts.push(d.problem);
    else facts.push(`failed: ${d.error_summary || "no detail"}`);
    if (d.where) facts.push(`on ${d.where}${typeof d.waited_s === "number" ? `, after waiting ${d.waited_s.toFixed(1)} s` : ""}`);
    const open = h("button", { class: "mlc-t-btn mlc-t-open", title: "Replay this trial's trace as a new branch of the session" }, "Open in explorer");
    open.disabled = !d.trace;
    open.addEventListener("click", () => this.openInExplorer(selected));
    box.append(
      h("div", { class: "mlc-t-detail-head" },
        h("b", null, `Trial ${selected}`),
        h("span", { class: `mlc-t-facts${d.ok ? "" : " mlc-t-problem"}` }, facts.join(" · ")),
        h("span", { class: "mlc-t-spacer" }), open, close),
    );
    const tabs: Tab[] = [];
    if (d.error) tabs.push("error");
    if (d.diff || (d.best_trial !== null && d.best_trial !== undefined && d.best_trial !== d.trial && d.script)) tabs.push("diff");
    if (d.trace) tabs.push("trace");
    if (d.script) tabs.push("script");
    if (!tabs.length) return;
    const tab: Tab = this.tab && tabs.includes(this.tab) ? this.tab : tabs[0];
    const labels: Record<Tab, string> = { diff: `Diff vs best (#${d.best_trial})`, trace: "Trace", script: "Script", error: "Error" };
    const bar = h("div", { class: "mlc-t-tabs" });
    for (const t of tabs) {
      const b = h("button", { class: `mlc-t-tab${t === tab ? " mlc-t-on" : ""}`, dataset: { tab: t } }, labels[t]);
      b.addEventListener("click", () => {
        this.tab = t;
        this.renderDetail();
      });
      bar.append(b);
    }
    box.append(bar);
    if (d.script_problem) box.append(h("div", { class: "mlc-t-problem mlc-t-script-problem" }, d.script_problem));
    box.append(this.tabBody(tab, d));
  }

  private tabBody(tab: Tab, d: TrialDetail): HTMLElement {
    if (tab === "diff") {
      const pre = h("pre", { class: "mlc-t-pre mlc-t-diff", dataset: { tab } });
      if (!d.diff) pre.textContent = "The same program as the best trial.";
      for (const line of (d.diff || "").split("\n")) {
        const cls = line.startsWith("+++") || line.startsWith("---") ? "mlc-d-file" : line.startsWith("@@") ? "mlc-d-hunk" : line.startsWith("+") ? "mlc-d-add" : line.startsWith("-") ? "mlc-d-del" : "mlc-d-ctx";
        pre.append(h("span", { class: `mlc-d-line ${cls}` }, line), "\n");
      }
      return pre;
    }
    const text = tab === "trace" ? d.trace : tab === "script" ? d.script : d.error;
    return h("pre", { class: "mlc-t-pre", dataset: { tab } }, text || "");
  }

  renderNotice(): void {
    const text = this.model.get("notice") || "";
    this.els.notice.textContent = text;
    this.els.notice.className = "mlc-t-notice";
    this.els.notice.hidden = !text;
  }

  renderExplorer(): void {
    const ref = this.model.get("explorer");
    if (!ref || ref === this.explorerRef) return;
    this.explorerRef = ref;
    this.explorerAbort?.abort();
    const abort = new AbortController();
    this.explorerAbort = abort;
    clear(this.els.explorer);
    if (!this.host || typeof this.host.getWidget !== "function") {
      this.els.explorer.textContent = "Display `dashboard.explorer` in a cell to see the explorer.";
      return;
    }
    this.host
      .getWidget(ref)
      .then((w) => w.render({ el: this.els.explorer, signal: abort.signal }))
      .catch((err) => this.showProblem(err));
  }

  dispose(): void {
    for (const f of this.off) f();
    this.explorerAbort?.abort();
    this.rpc.dispose();
    this.plot.dispose();
  }
}
