// @vitest-environment jsdom
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

// plotly.js needs a real layout engine; jsdom has none. The stub records what would be drawn and
// lets a test fire plotly's click event.
const plotly = vi.hoisted(() => {
  const calls: Array<{ el: HTMLElement; data: any[]; layout: any }> = [];
  const handlers = new Map<HTMLElement, Map<string, (e: any) => void>>();
  return {
    calls,
    handlers,
    react: vi.fn((el: HTMLElement, data: any[], layout: any) => {
      calls.push({ el, data, layout });
      (el as any).on = (ev: string, cb: (e: any) => void) => {
        if (!handlers.has(el)) handlers.set(el, new Map());
        handlers.get(el)!.set(ev, cb);
      };
      return Promise.resolve(el);
    }),
    purge: vi.fn(),
  };
});
vi.mock("plotly.js-basic-dist-min", () => ({ default: { react: plotly.react, purge: plotly.purge } }));

import widget from "../tuning_dashboard";
import { buildSeries, formatLatency, pickUnit, toFloat64 } from "../tuning/data";
import { plotLayout, rooflineData } from "../tuning/plot";
import { type Rendered, eventModel, render } from "./fixtures";

function f64(values: number[]): DataView {
  const arr = new Float64Array(values);
  return new DataView(arr.buffer);
}

const FLOPS = 2 * 64 ** 3;

function fakeModel(initial: Record<string, unknown> = {}) {
  return eventModel({
    work_dir: "/tmp/wd",
    func: "mm_relu",
    target: "llvm cascadelake 2 cores",
    settings: "evolutionary · xgb · auto",
    status: "running",
    job_error: "",
    done: 4,
    total: 16,
    latency: f64([4e-4, 2e-4, NaN, 1e-4]),
    elapsed: f64([1, 2, 3, 4.5]),
    flops: FLOPS,
    best: { trial: 3, latency_s: 1e-4, gflops: FLOPS / 1e-4 / 1e9 },
    failed_count: 1,
    failures: [{ trial: 2, summary: "RuntimeError: out of memory" }],
    selected: -1,
    detail: {},
    notice: "",
    explorer: null,
    updated_at: 0,
    height: "380px",
    ...initial,
  });
}

type Model = ReturnType<typeof fakeModel>;
let model: Model;
let view: Rendered;
let host: { getWidget: ReturnType<typeof vi.fn>; getModel: ReturnType<typeof vi.fn> };

const $ = (sel: string) => view.el.querySelector<HTMLElement>(sel);
const $$ = (sel: string) => Array.from(view.el.querySelectorAll<HTMLElement>(sel));
const frame = () => new Promise((r) => setTimeout(r, 30));
const lastPlot = () => plotly.calls[plotly.calls.length - 1];

async function mount(initial: Record<string, unknown> = {}) {
  model = fakeModel(initial);
  host = { getWidget: vi.fn(), getModel: vi.fn() };
  view = await render(widget, model, { host });
  await frame();
}

beforeEach(async () => {
  plotly.calls.length = 0;
  plotly.react.mockClear();
  await mount();
});
afterEach(() => view.dispose());

describe("data", () => {
  it("decodes float64 buffers, even at an odd offset", () => {
    expect(Array.from(toFloat64(f64([1.5, 2])))).toEqual([1.5, 2]);
    const raw = new Uint8Array(17);
    raw.set(new Uint8Array(new Float64Array([3.25, 4]).buffer), 1);
    expect(Array.from(toFloat64(new DataView(raw.buffer, 1, 16)))).toEqual([3.25, 4]);
    expect(toFloat64(null).length).toBe(0);
  });

  it("builds points, the best-so-far line and failure marks", () => {
    const s = buildSeries(new Float64Array([4e-4, 2e-4, NaN, 1e-4, 3e-4]), FLOPS, "latency");
    expect(s.unit).toBe("µs");
    expect(s.okX).toEqual([0, 1, 3, 4]);
    expect(s.okY.map((v) => Math.round(v))).toEqual([400, 200, 100, 300]);
    expect(s.bestX).toEqual([0, 1, 2, 3, 4]);
    expect(s.bestY.map((v) => Math.round(v))).toEqual([400, 200, 200, 100, 100]);
    expect(s.failX).toEqual([2]);
    expect(s.failY[0]).toBeCloseTo(600); // above the slowest trial
    expect(s.bestTrial).toBe(3);
    const g = buildSeries(new Float64Array([4e-4, NaN, 1e-4]), FLOPS, "gflops");
    expect(g.metric).toBe("gflops");
    expect(g.okY[1]).toBeCloseTo(FLOPS / 1e-4 / 1e9);
    expect(g.bestY[2]).toBeCloseTo(FLOPS / 1e-4 / 1e9); // best so far rises
    expect(g.failY[0]).toBeLessThan(Math.min(...g.okY)); // below the lowest GFLOPS
    expect(buildSeries(new Float64Array([1e-4]), 0, "gflops").metric).toBe("latency"); // no FLOP count
  });

  it("shows the current batch live and spans the trials asked for from the first frame", () => {
    const s = buildSeries(new Float64Array([4e-4, 2e-4]), FLOPS, "latency", new Float64Array([3e-4, NaN, 1e-4]), 16);
    expect(s.pendX).toEqual([2, 4]); // after the committed trials; a failed one is not drawn
    expect(s.pendY.map((v) => Math.round(v))).toEqual([300, 100]);
    expect(s.total).toBe(16);
    const empty = plotLayout(buildSeries(new Float64Array(0), FLOPS, "latency", new Float64Array(0), 16), false, 300) as any;
    expect(empty.xaxis.range).toEqual([-0.5, 15.5]); // 0..15, not plotly's -1..6
    expect(empty.xaxis.tickformat).toBe("d"); // whole trials only
    expect(empty.annotations[0].text).toMatch(/waiting/);
    expect((plotLayout(s, false, 300) as any).annotations).toEqual([]);
  });

  it("places every trial under the machine's roof", () => {
    const s = buildSeries(new Float64Array([4e-4, 1e-4]), FLOPS, "roofline");
    const data = rooflineData(s, { peak_gflops: 200, bandwidth_gbs: 10, intensity: 5 }) as any[];
    expect(data[0].y).toEqual([10 * data[0].x[0], 200, 200]); // bandwidth slope, then the flat peak
    expect(data[0].x[1]).toBe(20); // the ridge: 200 / 10 FLOPs per byte
    expect(data[1].x).toEqual([5, 5]);
    expect(data[1].y[1]).toBeCloseTo(FLOPS / 1e-4 / 1e9);
    expect(rooflineData(s, {})).toEqual([]); // no machine figures yet: no roofline
  });

  it("formats latencies with a unit that fits", () => {
    expect(pickUnit(5e-5).name).toBe("µs");
    expect(formatLatency(5.002e-5)).toBe("50.0 µs");
    expect(formatLatency(0.0123)).toBe("12.3 ms");
    expect(formatLatency(2.5)).toBe("2.50 s");
    expect(formatLatency(null)).toBe("—");
  });
});

describe("dashboard view", () => {
  it("shows status, progress, best and a Cancel button while running", () => {
    expect($(".mlc-t-title")!.textContent).toBe("Tuning mm_relu");
    expect($(".mlc-t-meta")!.textContent).toBe("llvm cascadelake 2 cores · evolutionary · xgb · auto");
    expect($(".mlc-t-status")!.dataset.status).toBe("running");
    expect(parseFloat($(".mlc-t-fill")!.style.width)).toBe(25);
    const summary = $(".mlc-t-summary")!.textContent!;
    expect(summary).toContain("4 / 16 trials");
    expect(summary).toContain("1 failed");
    expect(summary).toContain("best 100 µs (5.2 GFLOPS) at trial 3");
    expect(summary).toContain("5 s");
    const cancel = $(".mlc-t-cancel") as HTMLButtonElement;
    expect(cancel.hidden).toBe(false);
    expect(cancel.disabled).toBe(false);
  });

  it("draws latency points, the best line and failed trials marked", () => {
    const { data, layout } = lastPlot();
    expect(data.map((d: any) => d.name)).toEqual(["trial", "best so far", "failed (1)"]);
    expect(data[0].x).toEqual([0, 1, 3]);
    expect(data[1].line.shape).toBe("hv");
    expect(data[2].x).toEqual([2]);
    expect(data[2].text).toEqual(["RuntimeError: out of memory"]);
    expect(data[2].marker.symbol).toBe("x");
    expect(layout.yaxis.type).toBe("log");
    expect(layout.yaxis.title.text).toContain("latency (µs");
    expect($(".mlc-t-plot")!.dataset.points).toBe("3");
  });

  it("updates live: new trials are coalesced into one redraw per frame", async () => {
    const before = plotly.calls.length;
    model.set("latency", f64([4e-4, 2e-4, NaN, 1e-4, 5e-5]));
    model.set("done", 5);
    model.set("best", { trial: 4, latency_s: 5e-5, gflops: FLOPS / 5e-5 / 1e9 });
    await frame();
    expect(plotly.calls.length).toBe(before + 1);
    expect(lastPlot().data[0].x).toEqual([0, 1, 3, 4]);
    expect($(".mlc-t-summary")!.textContent).toContain("5 / 16 trials");
    expect($(".mlc-t-summary")!.textContent).toContain("at trial 4");
  });

  it("toggles the y axis to GFLOPS", async () => {
    ($(".mlc-t-metric[data-metric='gflops']") as HTMLButtonElement).click();
    await frame();
    expect(lastPlot().layout.yaxis.title.text).toContain("GFLOPS");
    expect(lastPlot().data[0].y[2]).toBeCloseTo(FLOPS / 1e-4 / 1e9);
    expect($(".mlc-t-metric[data-metric='gflops']")!.classList.contains("mlc-t-on")).toBe(true);
  });

  it("GFLOPS is off when the job has no FLOP count", async () => {
    view.dispose();
    await mount({ flops: 0 });
    expect(($(".mlc-t-metric[data-metric='gflops']") as HTMLButtonElement).disabled).toBe(true);
  });

  it("Cancel goes to Python as a request", async () => {
    ($(".mlc-t-cancel") as HTMLButtonElement).click();
    expect(model.send).toHaveBeenCalledTimes(1);
    const [msg] = model.send.mock.calls[0];
    expect(msg).toMatchObject({ kind: "mlc-request", method: "cancel", params: {} });
    expect(($(".mlc-t-cancel") as HTMLButtonElement).disabled).toBe(true);
    model.emit({ kind: "mlc-response", id: msg.id, ok: true, result: { status: "cancelling" } });
    model.set("status", "cancelling");
    expect($(".mlc-t-cancel")!.textContent).toBe("Cancelling…");
    model.set("status", "cancelled");
    expect($(".mlc-t-cancel")!.hidden).toBe(true);
    expect($(".mlc-t-status")!.textContent).toBe("cancelled");
  });

  it("a run cancelled before any measured candidate says so on the chart, not 'waiting'", async () => {
    view.dispose();
    await mount({ done: 0, latency: f64([]), elapsed: f64([]), best: {}, failed_count: 0, failures: [] });
    expect(lastPlot().layout.annotations[0].text).toMatch(/waiting for the first measured candidate/);
    model.set("status", "cancelled");
    await frame();
    expect(lastPlot().layout.annotations[0].text).toBe("cancelled before any candidate was measured");
    expect($(".mlc-t-status")!.textContent).toBe("cancelled");
  });

  it("a failed cancel request is shown", async () => {
    ($(".mlc-t-cancel") as HTMLButtonElement).click();
    const [msg] = model.send.mock.calls[0];
    model.emit({ kind: "mlc-response", id: msg.id, ok: false, error: { summary: "the job is not running" } });
    await frame();
    expect($(".mlc-t-notice")!.textContent).toBe("the job is not running");
    expect($(".mlc-t-notice")!.classList.contains("mlc-t-problem")).toBe(true);
  });

  it("lists failed candidates; clicking one selects it", () => {
    expect($(".mlc-t-fail-head")!.textContent).toBe("Failed candidates (1)");
    const li = $(".mlc-t-failure[data-trial='2']")!;
    expect(li.textContent).toContain("RuntimeError: out of memory");
    (li.querySelector(".mlc-t-fail-text") as HTMLElement).click();
    expect(model.state.selected).toBe(2);
    expect(model.save_changes).toHaveBeenCalledTimes(1);
  });

  it("hides the failure list when nothing failed", async () => {
    view.dispose();
    await mount({ failed_count: 0, failures: [], latency: f64([1e-4]) });
    expect($(".mlc-t-failures")!.hidden).toBe(true);
  });

  it("clicking a point selects its trial; the detail shows the diff against the best", async () => {
    const click = plotly.handlers.get($(".mlc-t-plot")!)!.get("plotly_click")!;
    click({ points: [{ x: 1, customdata: 1 }] });
    expect(model.state.selected).toBe(1);
    expect(model.save_changes).toHaveBeenCalled();
    expect($(".mlc-t-loading")).not.toBeNull(); // until Python answers with the detail
    model.set("detail", {
      trial: 1, ok: true, latency_s: 2e-4, gflops: 2.6, best_trial: 3, vs_best: 2,
      trace: "sch.split(...)", script: "for i in range(64):", diff: "--- trial 3 (best)\n+++ trial 1\n@@ -1 +1 @@\n-a\n+b\n same",
    });
    expect($(".mlc-t-facts")!.textContent).toBe("200 µs · 2.6 GFLOPS · 2.00× the best (trial 3)");
    expect($$(".mlc-t-tab").map((t) => t.dataset.tab)).toEqual(["diff", "trace", "script"]);
    expect($(".mlc-d-add")!.textContent).toBe("+b");
    expect($(".mlc-d-del")!.textContent).toBe("-a");
    expect($(".mlc-d-hunk")!.textContent).toBe("@@ -1 +1 @@");
    ($(".mlc-t-tab[data-tab='trace']") as HTMLElement).click();
    expect($(".mlc-t-pre")!.textContent).toBe("sch.split(...)");
    await frame();
    // the selected point is ringed on the plot
    expect(lastPlot().data.some((d: any) => d.name === "trial 1")).toBe(true);
    // close
    ($(".mlc-t-close") as HTMLElement).click();
    expect(model.state.selected).toBe(-1);
    expect($(".mlc-t-detail")!.hidden).toBe(true);
  });

  it("a failed trial opens on its error", () => {
    model.set("selected", 2);
    model.set("detail", { trial: 2, ok: false, error: "Traceback\nRuntimeError: oom", error_summary: "RuntimeError: oom", trace: "t", script: "s", best_trial: 3, diff: "-x\n+y" });
    expect($(".mlc-t-facts")!.textContent).toBe("failed: RuntimeError: oom");
    expect($(".mlc-t-tab.mlc-t-on")!.dataset.tab).toBe("error");
    expect($(".mlc-t-pre")!.textContent).toContain("RuntimeError: oom");
  });

  it("Show best selects the best trial", () => {
    ($(".mlc-t-show-best") as HTMLElement).click();
    expect(model.state.selected).toBe(3);
  });

  it("Open in explorer asks Python, then renders the child explorer widget", async () => {
    model.set("selected", 3);
    model.set("detail", { trial: 3, ok: true, latency_s: 1e-4, best_trial: 3, trace: "t", script: "s", diff: "" });
    ($(".mlc-t-open") as HTMLButtonElement).click();
    const [msg] = model.send.mock.calls[0];
    expect(msg).toMatchObject({ method: "open_in_explorer", params: { trial: 3 } });
    const render = vi.fn(() => Promise.resolve());
    host.getWidget.mockResolvedValue({ exports: {}, render });
    model.set("explorer", "anywidget:abc");
    model.set("notice", "trial 3 is now step 4 of the session");
    await frame();
    expect(host.getWidget).toHaveBeenCalledWith("anywidget:abc");
    expect(render).toHaveBeenCalledTimes(1);
    expect((render.mock.calls[0] as any)[0].el).toBe($(".mlc-t-explorer"));
    expect($(".mlc-t-notice")!.textContent).toBe("trial 3 is now step 4 of the session");
    model.set("explorer", "anywidget:abc"); // the same child: not rendered twice
    await frame();
    expect(render).toHaveBeenCalledTimes(1);
  });

  it("shows why a job failed", () => {
    model.set("status", "failed");
    model.set("job_error", "ValueError: the space function raised");
    expect($(".mlc-t-job-error")!.hidden).toBe(false);
    expect($(".mlc-t-job-error")!.textContent).toContain("ValueError");
    expect($(".mlc-t-fill")!.dataset.status).toBe("failed");
  });

  it("says nothing of machines elsewhere for a local run", () => {
    expect($(".mlc-t-machines")!.hidden).toBe(true);
  });

  it("lists where each batch round ran and how long it waited, and opens itself on a problem", async () => {
    model.set("machines", {
      via: "by Slurm: each round a job",
      lines: [{ text: "round 1: Slurm job 7 on node3, waited 1.0 s, ran 5.0 s, 16 measured", problem: false }],
    });
    await frame();
    const box = $(".mlc-t-machines") as HTMLDetailsElement;
    expect(box.hidden).toBe(false);
    expect($(".mlc-t-machines-head")!.textContent).toBe("Measured by Slurm: each round a job");
    expect($$(".mlc-t-machines-list li").map((li) => li.textContent)).toEqual([
      "round 1: Slurm job 7 on node3, waited 1.0 s, ran 5.0 s, 16 measured",
    ]);
    expect(box.open).toBe(false);
    model.set("machines", {
      via: "on the servers of the RPC tracker 10.0.0.1:9190 (key 'gpu'), 3 at once",
      lines: [{ text: "10.0.0.5:9090 hung (it did not answer for 75 s): left out of this job", problem: true }],
    });
    await frame();
    expect($(".mlc-t-machines-head")!.textContent).toContain("· 1 problem");
    expect($(".mlc-t-machines-list li.mlc-t-problem")!.textContent).toContain("left out of this job");
    expect(box.open).toBe(true);
  });

  it("a trial measured elsewhere says where and after how long a wait", async () => {
    model.set("selected", 3);
    model.set("detail", { trial: 3, ok: true, latency_s: 1e-4, best_trial: 3, trace: "t", where: "Slurm job 7 on node3", waited_s: 2.5 });
    await frame();
    expect($(".mlc-t-facts")!.textContent).toContain("on Slurm job 7 on node3, after waiting 2.5 s");
  });

  it("cleans up: listeners removed, plot purged", () => {
    view.dispose();
    expect(plotly.purge).toHaveBeenCalled();
    expect(model.handlerCount()).toBe(0);
  });
});

describe("log ticks", () => {
  it("labels 1, 2, 5 of each decade in full", async () => {
    const { logTicks } = await import("../tuning/data");
    expect(logTicks([20, 1500])).toEqual({
      tickvals: [10, 20, 50, 100, 200, 500, 1000, 2000],
      ticktext: ["10", "20", "50", "100", "200", "500", "1000", "2000"],
    });
    expect(logTicks([0.03, 0.09])).toEqual({ tickvals: [0.01, 0.02, 0.05, 0.1, 0.2], ticktext: ["0.01", "0.02", "0.05", "0.1", "0.2"] });
    expect(logTicks([1e-3, 1e6])!.tickvals).toEqual([0.001, 0.01, 0.1, 1, 10, 100, 1000, 10000, 100000, 1000000]);
    expect(logTicks([NaN])).toBeNull();
    expect(logTicks([5])!.tickvals).toEqual([2, 5, 10]);
  });
});

describe("keys in a notebook", () => {
  it("keys pressed in the dashboard do not reach the notebook (Ctrl chords do)", () => {
    const seen: string[] = [];
    const record = (ev: KeyboardEvent) => seen.push(`${ev.ctrlKey ? "Ctrl+" : ""}${ev.key}`);
    document.addEventListener("keydown", record);
    const root = view.el.querySelector<HTMLElement>(".mlc-tuning")!;
    expect(root.hasAttribute("data-lm-suppress-shortcuts")).toBe(false);
    const target = root.querySelector<HTMLElement>("button") ?? root;
    for (const key of ["ArrowDown", "a", "b", "Enter"]) target.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
    target.dispatchEvent(new KeyboardEvent("keydown", { key: "s", ctrlKey: true, bubbles: true }));
    document.removeEventListener("keydown", record);
    expect(seen).toEqual(["Ctrl+s"]);
  });
});
