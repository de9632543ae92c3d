// The latency-per-trial chart (plotly.js basic bundle). Redraws are coalesced to one per animation
// frame: the kernel may push several updates per second while a job runs.

import Plotly from "plotly.js-basic-dist-min";
import { type Series, logTicks } from "./data";

const COLORS = { point: "#1f77b4", best: "#ff7f0e", fail: "#d62728", selected: "#2ca02c" };

export function plotData(s: Series, selected: number, failSummaries: Map<number, string>): unknown[] {
  const data: unknown[] = [
    {
      type: "scatter", mode: "markers", name: "trial",
      x: s.okX, y: s.okY, customdata: s.okX, text: s.okText,
      hovertemplate: "trial %{x}<br>%{text}<extra></extra>",
      marker: { color: COLORS.point, size: 7, opacity: 0.75 },
    },
    {
      type: "scatter", mode: "lines", name: "best so far",
      x: s.bestX, y: s.bestY, hoverinfo: "skip",
      line: { color: COLORS.best, width: 2, shape: "hv" },
    },
  ];
  if (s.failX.length) {
    data.push({
      type: "scatter", mode: "markers", name: `failed (${s.failX.length})`,
      x: s.failX, y: s.failY, customdata: s.failX,
      text: s.failX.map((i) => failSummaries.get(i) ?? "failed"),
      hovertemplate: "trial %{x} failed<br>%{text}<extra></extra>",
      marker: { color: COLORS.fail, symbol: "x", size: 9 },
    });
  }
  if (s.pendX.length) {
    data.push({
      type: "scatter", mode: "markers", name: "this batch (measuring)",
      x: s.pendX, y: s.pendY, hovertemplate: "trial %{x} (just measured)<extra></extra>",
      marker: { color: COLORS.point, size: 7, symbol: "circle-open" },
    });
  }
  const i = s.okX.indexOf(selected);
  const j = i < 0 ? s.failX.indexOf(selected) : -1;
  if (i >= 0 || j >= 0) {
    data.push({
      type: "scatter", mode: "markers", name: `trial ${selected}`, showlegend: false, hoverinfo: "skip",
      x: [selected], y: [i >= 0 ? s.okY[i] : s.failY[j]],
      marker: { color: "rgba(0,0,0,0)", size: 16, line: { color: COLORS.selected, width: 2.5 } },
    });
  }
  return data;
}

/** What an empty chart says, by the job's status: a run that ended with nothing measured must not
 * read as one still waiting. */
export function emptyChartText(status: string): string {
  switch (status) {
    case "cancelled": return "cancelled before any candidate was measured";
    case "cancelling": return "cancelling…";
    case "failed": return "the job failed before any candidate was measured";
    case "interrupted": return "the job stopped before any candidate was measured";
    case "done": return "the job ended without a measured candidate";
    default: return "waiting for the first measured candidate…";
  }
}

export function plotLayout(s: Series, dark: boolean, height: number, status = "running"): Record<string, unknown> {
  const fg = dark ? "#d0d0d0" : "#333";
  const grid = dark ? "rgba(255,255,255,0.12)" : "rgba(0,0,0,0.08)";
  const empty = !s.okX.length && !s.failX.length && !s.pendX.length;
  // whole trials from 0 to the count asked for, from the first frame (no -1..6, no half trials)
  const xaxis = { title: { text: "trial" }, gridcolor: grid, zeroline: false, tickformat: "d", dtick: s.total > 20 ? undefined : 1,
    range: [-0.5, Math.max(1, s.total) - 0.5], rangemode: "nonnegative" };
  return {
    height,
    margin: { l: 64, r: 16, t: 10, b: 44 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: fg, size: 12 },
    showlegend: true,
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom", bgcolor: "rgba(0,0,0,0)" }, // left: the modebar sits right
    xaxis,
    annotations: empty ? [{ text: emptyChartText(status), showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: fg } }] : [],
    yaxis: {
      ...(empty ? { showticklabels: false, range: [0, 1] } : {}),
      title: { text: s.metric === "gflops" ? "GFLOPS (higher is better)" : `latency (${s.unit}, lower is better)` },
      type: "log", gridcolor: grid, zeroline: false,
      ...(logTicks([...s.okY, ...s.failY, ...s.bestY, ...s.pendY]) ?? {}),
    },
    hovermode: "closest",
    uirevision: s.metric, // keep the user's zoom across live updates; reset it when the metric changes
  };
}

export class TrialPlot {
  private frame = 0;
  private pending: [unknown[], Record<string, unknown>] | null = null;
  private listening = false;
  private disposed = false;

  private drawn = false;
  private readonly resizer: ResizeObserver | null = null;

  constructor(
    readonly el: HTMLElement,
    private readonly onPick: (trial: number) => void,
  ) {
    // The notebook lays the output out after render(): follow the container's width, not the window's.
    if (typeof ResizeObserver !== "undefined") {
      let pending = 0;
      this.resizer = new ResizeObserver(() => {
        if (pending || !this.drawn) return;
        pending = requestAnimationFrame(() => {
          pending = 0;
          if (!this.disposed && this.el.isConnected) Plotly.Plots?.resize(this.el);
        });
      });
      this.resizer.observe(el);
    }
  }

  draw(data: unknown[], layout: Record<string, unknown>): void {
    this.pending = [data, layout];
    if (this.frame) return;
    const run = () => {
      this.frame = 0;
      this.flush();
    };
    this.frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : (setTimeout(run, 16) as unknown as number);
  }

  /** Draw now (tests; and the first render, so the element has content at once). */
  flush(): void {
    if (!this.pending || this.disposed) return;
    const [data, layout] = this.pending;
    this.pending = null;
    const done = Plotly.react(this.el, data, layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] });
    Promise.resolve(done).then(
      () => {
        this.drawn = true;
        this.listen();
      },
      () => undefined,
    );
  }

  private listen(): void {
    const gd = this.el as HTMLElement & { on?: (ev: string, cb: (e: any) => void) => void };
    if (this.listening || typeof gd.on !== "function") return;
    this.listening = true;
    gd.on("plotly_click", (ev: any) => {
      const p = ev?.points?.[0];
      const trial = p?.customdata ?? p?.x;
      if (typeof trial === "number") this.onPick(trial);
    });
  }

  dispose(): void {
    this.disposed = true;
    this.resizer?.disconnect();
    if (this.frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(this.frame);
    try {
      Plotly.purge(this.el);
    } catch {
      /* never drawn */
    }
  }
}

/** The roofline view: the machine's roof (log-log) and every trial at the program's intensity. */
export function rooflineData(s: Series, roof: { peak_gflops?: number; bandwidth_gbs?: number; intensity?: number }): unknown[] {
  const { peak_gflops: peak, bandwidth_gbs: bw, intensity } = roof;
  if (!peak || !bw || !intensity) return [];
  const ridge = peak / bw;
  const lo = Math.min(intensity, ridge) / 8;
  const hi = Math.max(intensity, ridge) * 8;
  return [
    {
      type: "scatter", mode: "lines", name: `roof (${peak.toFixed(0)} GFLOP/s, ${bw.toFixed(1)} GB/s)`,
      x: [lo, ridge, hi], y: [bw * lo, peak, peak], hoverinfo: "skip", line: { color: COLORS.fail, width: 2 },
    },
    {
      type: "scatter", mode: "markers", name: "trial",
      x: s.okY.map(() => intensity), y: s.okY, customdata: s.okX, text: s.okText,
      hovertemplate: "trial %{customdata}<br>%{text}<br>%{x:.1f} FLOPs/byte<extra></extra>",
      marker: { color: COLORS.point, size: 7, opacity: 0.6 },
    },
  ];
}

export function rooflineLayout(dark: boolean, height: number): Record<string, unknown> {
  const fg = dark ? "#d0d0d0" : "#333";
  const grid = dark ? "rgba(255,255,255,0.12)" : "rgba(0,0,0,0.08)";
  return {
    height, margin: { l: 64, r: 16, t: 10, b: 44 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: fg, size: 12 }, showlegend: true,
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom", bgcolor: "rgba(0,0,0,0)" },
    xaxis: { title: { text: "arithmetic intensity (FLOPs per byte)" }, type: "log", gridcolor: grid },
    yaxis: { title: { text: "GFLOP/s" }, type: "log", gridcolor: grid },
    hovermode: "closest", uirevision: "roofline",
  };
}
