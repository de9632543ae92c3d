// Pure data shaping for the dashboard (no DOM, no plotly): decoded latencies -> plot series.

import type { Bytes } from "../lib/model";
import { formatLatency } from "../lib/units";

export type Metric = "latency" | "gflops" | "roofline";

/** float64 little-endian bytes (a trait synced as a binary buffer) -> Float64Array (a copy, aligned). */
export function toFloat64(value: Bytes): Float64Array {
  if (!value) return new Float64Array(0);
  let bytes: Uint8Array;
  if (value instanceof DataView) bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  else if (value instanceof Uint8Array) bytes = value;
  else bytes = new Uint8Array(value);
  const n = Math.floor(bytes.byteLength / 8);
  const out = new Float64Array(n);
  new Uint8Array(out.buffer).set(bytes.subarray(0, n * 8));
  return out;
}

export interface Unit {
  name: string; // "µs" | "ms" | "s"
  scale: number; // seconds -> unit
}

/** A latency unit that keeps the typical value between 1 and 1000. */
export function pickUnit(seconds: number): Unit {
  if (!(seconds > 0) || !Number.isFinite(seconds)) return { name: "ms", scale: 1e3 };
  if (seconds < 1e-3) return { name: "µs", scale: 1e6 };
  if (seconds < 1) return { name: "ms", scale: 1e3 };
  return { name: "s", scale: 1 };
}

export { formatLatency };

export function formatGflops(g: number | null | undefined): string {
  if (g === null || g === undefined || !Number.isFinite(g)) return "";
  return `${g >= 100 ? g.toFixed(0) : g.toFixed(1)} GFLOPS`;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 60) return `${seconds.toFixed(0)} s`;
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds - m * 60);
  return m < 60 ? `${m} min ${s} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

export interface Series {
  metric: Metric;
  unit: string; // axis title unit
  okX: number[];
  okY: number[];
  okText: string[];
  bestX: number[];
  bestY: number[];
  failX: number[];
  failY: number[];
  pendX: number[]; // the current batch, measured but not yet committed by meta_schedule
  pendY: number[];
  bestTrial: number | null;
  count: number;
  total: number; // trials asked for: the x axis spans them from the start
}

/** Points per successful trial, the best-so-far step line, and failed trials at the plot's edge. */
export function buildSeries(latency: Float64Array, flops: number, metric: Metric, pending: Float64Array = new Float64Array(0), total = 0): Series {
  let best = Infinity;
  let bestTrial: number | null = null;
  for (let i = 0; i < latency.length; i++) {
    const v = latency[i];
    if (Number.isFinite(v) && v < best) {
      best = v;
      bestTrial = i;
    }
  }
  const gflops = (metric === "gflops" || metric === "roofline") && flops > 0;
  const unit = gflops ? { name: "GFLOPS", scale: 1 } : pickUnit(Number.isFinite(best) ? best : NaN);
  const y = (s: number) => (gflops ? flops / s / 1e9 : s * unit.scale);
  const s: Series = {
    metric: gflops ? "gflops" : "latency",
    unit: unit.name,
    okX: [], okY: [], okText: [], bestX: [], bestY: [], failX: [], failY: [], pendX: [], pendY: [],
    bestTrial,
    count: latency.length,
    total: Math.max(total, latency.length + pending.length),
  };
  let running = Infinity;
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < latency.length; i++) {
    const v = latency[i];
    if (Number.isFinite(v)) {
      const yv = y(v);
      s.okX.push(i);
      s.okY.push(yv);
      s.okText.push(flops > 0 ? `${formatLatency(v)} · ${formatGflops(flops / v / 1e9)}` : formatLatency(v));
      lo = Math.min(lo, yv);
      hi = Math.max(hi, yv);
      if (v < running) running = v;
    } else {
      s.failX.push(i);
    }
    if (Number.isFinite(running)) {
      s.bestX.push(i);
      s.bestY.push(y(running));
    }
  }
  // Failed candidates sit just past the worst edge: above the slowest latency, below the lowest GFLOPS.
  const edge = !Number.isFinite(lo) ? 1 : gflops ? lo / 1.5 : hi * 1.5;
  s.failY = s.failX.map(() => edge);
  pending.forEach((v, i) => {
    if (!Number.isFinite(v)) return;
    s.pendX.push(latency.length + i);
    s.pendY.push(y(v));
  });
  return s;
}

/** Tick labels for a log axis: 1, 2 and 5 of each decade in range (decades only when many), written
 * out in full ("200", "0.05"): plotly's own log ticks label the 2s and 5s with a bare digit. */
export function logTicks(values: number[]): { tickvals: number[]; ticktext: string[] } | null {
  const finite = values.filter((v) => Number.isFinite(v) && v > 0);
  if (!finite.length) return null;
  // generous bounds: plotly draws only the ticks inside the range it picks (with its own padding)
  const lo = Math.min(...finite) / 3;
  const hi = Math.max(...finite) * 3;
  let vals: number[] = [];
  for (let k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(hi)); k++) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** k;
      if (v >= lo && v <= hi) vals.push(Number(v.toPrecision(1)));
    }
  }
  if (vals.length > 13) vals = vals.filter((v) => /^(0\.0*)?1/.test(String(v)));
  if (vals.length < 2) return null;
  return { tickvals: vals, ticktext: vals.map((v) => (v >= 1 ? String(Math.round(v)) : String(v))) };
}
