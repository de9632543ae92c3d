// Measurements in the explorer: the text next to a history row, and the latency-by-step plot (an
// inline SVG, log scale) along the current path. Python: Explorer.measurements / .measuring
// (mlc_lab/widgets/explorer.py), which mirror Session.measurements.

import { type Measurement, MEASUREMENT_HOVER, PARALLEL_FLOOR, QUIET_CORES, type Roof as ModelRoof, STEADY_SPREAD } from "../lib/model";
import type { StepId, StepInfo } from "../lib/types";
import { formatLatency, threeDigits as precise } from "../lib/units";

/** Each measured step's Measurement (generated from mlc_lab/model/measure.py), by step id. */
export type Measurements = Record<string, Measurement>;

export type { MeasuringInfo } from "../lib/model";

const SVG = "http://www.w3.org/2000/svg";

export { formatLatency };

export function formatGflops(g: number | null | undefined): string {
  if (g === null || g === undefined || !Number.isFinite(g)) return "";
  return `${precise(g)} GFLOP/s`;
}

/** What a history row shows: latency and throughput (or that the measurement failed). */
export function measurementText(m: Measurement): string {
  if (m.error) return `failed: ${m.error_kind ?? "error"}`;
  const g = formatGflops(m.gflops);
  return g ? `${formatLatency(m.latency_s)} · ${g}` : formatLatency(m.latency_s);
}

/** ✓ / ✗ for the check against the original program ("" when it was not checked). */
export function checkMark(m: Measurement): string {
  if (m.error || m.correct === null || m.correct === undefined) return "";
  return m.correct ? "✓" : "✗";
}

export function checkTitle(m: Measurement): string {
  const err = m.max_abs_error;
  const shown = err === null || err === undefined ? "not checked" : `max |error| ${err.toPrecision(3)}`;
  if (m.correct === true) return `correct: matches the original program (${shown})`;
  if (m.correct === false) return `WRONG: differs from the original program (${shown})`;
  return shown;
}

/** Hover text of a measured step: the spread of the repeats, the target, the check. */
export function measurementTitle(m: Measurement): string {
  if (m.error) return m.error;
  const parts = [`median ${formatLatency(m.latency_s)} of ${m.repeats ?? "?"} runs on ${m.target || "?"}`];
  if (m.min_s != null && m.max_s != null) parts.push(`min ${formatLatency(m.min_s)}, max ${formatLatency(m.max_s)}`);
  if (m.std_s != null) parts.push(`std ${formatLatency(m.std_s)}`);
  if (m.gflops != null) parts.push(formatGflops(m.gflops));
  if (m.fraction_of_peak != null) parts.push(`${(100 * m.fraction_of_peak).toFixed(1)}% of the machine's roof at ${precise(m.intensity ?? 0)} FLOPs/byte`);
  if (m.fraction_of_peak != null && m.bytes_source) parts.push(`bytes: ${m.bytes_source.split(":")[0]}`);
  if (m.threads != null) parts.push(`${m.threads} thread(s), ${m.cache ?? "warm"} cache${m.load != null ? `, load ${m.load}` : ""}`);
  if (m.others_cores != null) {
    parts.push(m.others_cores < QUIET_CORES
      ? "quiet machine while it ran"
      : `busy machine: other processes used ${m.others_cores.toFixed(2)} cores while it ran (compare with care)`);
  }
  if (m.parallel_speed != null && m.parallel_speed < PARALLEL_FLOOR) {
    parts.push(`shared cores: the process got ${(100 * m.parallel_speed).toFixed(0)}% of its cores' speed ` +
      "(the host ran them on fewer physical cores; compare with care)");
  }
  const spread = m.iqr_s != null && m.latency_s ? m.iqr_s / m.latency_s : null;
  if (spread != null && spread > STEADY_SPREAD) {
    const rounds = m.rounds != null && m.rounds > 1 ? `, the steadiest of ${m.rounds} rounds` : "";
    parts.push(`unsteady: the repeats spread ${(100 * spread).toFixed(0)}% of their median${rounds} (compare with care)`);
  }
  for (const { field, label, unit } of MEASUREMENT_HOVER) parts.push(...hoverLine(label, unit, m[field]));
  parts.push(checkTitle(m));
  return parts.join("\n");
}

/** "label: value unit" of a field the contract marks as shown on hover (nothing when it is empty). */
function hoverLine(label: string, unit: string, value: unknown): string[] {
  if (value === null || value === undefined || value === "") return [];
  if (unit === "s" && typeof value === "number") return [`${label}: ${formatLatency(value)}`];
  const text = typeof value === "number" ? precise(value) : typeof value === "object" ? JSON.stringify(value) : String(value);
  return [`${label}: ${text}${unit ? ` ${unit}` : ""}`];
}

export interface PlotPoint {
  id: StepId;
  label: string;
  latency: number; // seconds, > 0
  correct: boolean | null;
  current: boolean;
  after: boolean; // beyond the current step (what redo would reach)
  target: string;
}

/**
 * Measured steps along the current path: root -> current, then on along the newest child (the
 * steps redo walks to), so undoing does not hide what was measured after.
 */
export function plotPoints(steps: StepInfo[], current: StepId | null, measurements: Measurements): PlotPoint[] {
  const byId = new Map(steps.map((s) => [String(s.id), s]));
  const path: StepInfo[] = [];
  for (let s = current === null ? undefined : byId.get(String(current)); s; s = s.parent == null ? undefined : byId.get(String(s.parent))) path.unshift(s);
  const nCurrent = path.length;
  const seen = new Set(path.map((s) => String(s.id)));
  for (let s = path.at(-1); s && s.children?.length; ) {
    const next = byId.get(String(s.children[s.children.length - 1]));
    if (!next || seen.has(String(next.id))) break;
    seen.add(String(next.id));
    path.push(next);
    s = next;
  }
  const out: PlotPoint[] = [];
  path.forEach((s, i) => {
    const m = measurements[String(s.id)];
    if (!m || m.error || !(typeof m.latency_s === "number" && m.latency_s > 0)) return;
    out.push({
      id: s.id,
      label: s.label || s.primitive || "original program",
      latency: m.latency_s,
      correct: m.correct ?? null,
      current: String(s.id) === String(current),
      after: i >= nCurrent,
      target: m.target ?? "",
    });
  });
  return out;
}

/** Log-scale y axis: the decades the data spans, a little padded (always > 0). */
export function logRange(values: number[]): [number, number] {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  let a = Math.log10(lo);
  let b = Math.log10(hi);
  if (b - a < 0.3) {
    const mid = (a + b) / 2;
    a = mid - 0.15;
    b = mid + 0.15;
  }
  const pad = (b - a) * 0.12;
  return [a - pad, b + pad];
}

/** Tick values (seconds): powers of 10 inside the range, else the ends and their middle. */
export function logTicks(range: [number, number]): number[] {
  const [a, b] = range;
  const decades: number[] = [];
  for (let d = Math.ceil(a); d <= Math.floor(b); d++) decades.push(10 ** d);
  if (decades.length >= 2) return decades;
  const ticks = [a + (b - a) * 0.1, (a + b) / 2, b - (b - a) * 0.1].map((x) => Number((10 ** x).toPrecision(2)));
  return [...new Set(ticks)];
}

export interface PlotOptions {
  width?: number;
  height?: number;
  onPick?: (id: StepId) => void; // click on a point
}

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, ...children: Array<SVGElement | string>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.append(c);
  return node;
}

/** Latency per measured step (x: steps in path order, y: log latency). Empty input gives null. */
export function latencyPlot(points: PlotPoint[], opts: PlotOptions = {}): SVGSVGElement | null {
  if (!points.length) return null;
  const width = opts.width ?? 260;
  const height = opts.height ?? 120;
  const left = 48;
  const right = 10;
  const top = 8;
  const bottom = 20;
  const range = logRange(points.map((p) => p.latency));
  const x = (i: number) => (points.length === 1 ? (left + width - right) / 2 : left + (i * (width - left - right)) / (points.length - 1));
  const y = (v: number) => top + ((range[1] - Math.log10(v)) / (range[1] - range[0])) * (height - top - bottom);
  const svg = el("svg", { class: "mlc-latency-plot", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "latency per measured step (log scale)" });
  for (const t of logTicks(range)) {
    const ty = y(t);
    svg.append(
      el("line", { class: "mlc-plot-grid", x1: left, x2: width - right, y1: ty.toFixed(1), y2: ty.toFixed(1) }),
      el("text", { class: "mlc-plot-tick", x: left - 4, y: (ty + 3).toFixed(1), "text-anchor": "end" }, formatLatency(t)),
    );
  }
  svg.append(el("line", { class: "mlc-plot-axis", x1: left, x2: left, y1: top, y2: height - bottom }));
  if (points.length > 1) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(p.latency).toFixed(1)}`).join(" ");
    svg.append(el("path", { class: "mlc-plot-line", d, fill: "none" }));
  }
  points.forEach((p, i) => {
    const cls = ["mlc-plot-point"];
    if (p.current) cls.push("mlc-plot-current");
    if (p.after) cls.push("mlc-plot-after");
    if (p.correct === false) cls.push("mlc-plot-wrong");
    const title = `step ${p.id}: ${p.label}\n${formatLatency(p.latency)} on ${p.target || "?"}${p.correct === false ? "\nWRONG result" : ""}`;
    const dot = el("circle", { class: cls.join(" "), cx: x(i).toFixed(1), cy: y(p.latency).toFixed(1), r: p.current ? 5 : 4, "data-step": String(p.id) }, el("title", {}, title));
    if (opts.onPick) dot.addEventListener("click", () => opts.onPick!(p.id));
    svg.append(dot, el("text", { class: "mlc-plot-xlabel", x: x(i).toFixed(1), y: height - 6, "text-anchor": "middle" }, String(p.id)));
  });
  return svg;
}

// --- roofline view ---------------------------------------------------------------------------
// The same measured steps placed on the machine's roofline (log-log: arithmetic intensity in
// FLOPs per byte against GFLOP/s). The roof is mlc_lab.machine(): min(peak, bandwidth x intensity);
// each Measurement carries the machine's figures, so no extra state is needed.

/** The machine's roof: the generated Roof (mlc_lab/model/tuning.py) with both figures known. */
export type Roof = Required<Pick<ModelRoof, "peak_gflops" | "bandwidth_gbs">>;

export interface RooflinePoint extends PlotPoint {
  intensity: number; // FLOPs per byte
  gflops: number;
  fraction: number | null; // of the roof at this intensity
}

/** The machine's roof, from any measurement that carries it (null when none does). */
export function roofOf(measurements: Measurements): Roof | null {
  for (const m of Object.values(measurements)) {
    if (m.machine_peak_gflops && m.machine_bandwidth_gbs) return { peak_gflops: m.machine_peak_gflops, bandwidth_gbs: m.machine_bandwidth_gbs };
  }
  return null;
}

export function rooflinePoints(points: PlotPoint[], measurements: Measurements): RooflinePoint[] {
  const out: RooflinePoint[] = [];
  for (const p of points) {
    const m = measurements[String(p.id)];
    if (!m || !m.intensity || !m.gflops || !(m.intensity > 0) || !(m.gflops > 0)) continue;
    out.push({ ...p, intensity: m.intensity, gflops: m.gflops, fraction: m.fraction_of_peak ?? null });
  }
  return out;
}

function decadeTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let d = Math.floor(Math.log10(lo)); d <= Math.ceil(Math.log10(hi)); d++) if (10 ** d >= lo && 10 ** d <= hi) out.push(10 ** d);
  return out.length >= 2 ? out : [lo, hi].map((v) => Number(v.toPrecision(2)));
}

/** Steps on the roofline; null when no point or no roof is known. */
export function rooflinePlot(points: RooflinePoint[], roof: Roof | null, opts: PlotOptions = {}): SVGSVGElement | null {
  if (!points.length || !roof) return null;
  const width = opts.width ?? 260;
  const height = opts.height ?? 140;
  const [left, right, top, bottom] = [48, 10, 8, 22];
  const ridge = roof.peak_gflops / roof.bandwidth_gbs;
  const xs = [...points.map((p) => p.intensity), ridge];
  const xlo = Math.min(...xs) / 3;
  const xhi = Math.max(...xs) * 3;
  const ylo = Math.min(...points.map((p) => p.gflops), roof.bandwidth_gbs * xlo) / 2;
  const yhi = roof.peak_gflops * 2;
  const X = (v: number) => left + ((Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo))) * (width - left - right);
  const Y = (v: number) => top + ((Math.log10(yhi) - Math.log10(v)) / (Math.log10(yhi) - Math.log10(ylo))) * (height - top - bottom);
  const svg = el("svg", { class: "mlc-roofline-plot", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "roofline: GFLOP/s against FLOPs per byte (log-log)" });
  for (const t of decadeTicks(ylo, yhi)) {
    svg.append(
      el("line", { class: "mlc-plot-grid", x1: left, x2: width - right, y1: Y(t).toFixed(1), y2: Y(t).toFixed(1) }),
      el("text", { class: "mlc-plot-tick", x: left - 4, y: (Y(t) + 3).toFixed(1), "text-anchor": "end" }, `${precise(t)}`),
    );
  }
  for (const t of decadeTicks(xlo, xhi)) {
    svg.append(el("text", { class: "mlc-plot-tick", x: X(t).toFixed(1), y: height - 10, "text-anchor": "middle" }, `${precise(t)}`));
  }
  svg.append(el("text", { class: "mlc-plot-tick", x: width - right, y: height - 1, "text-anchor": "end" }, "FLOPs/byte"));
  svg.append(el("text", { class: "mlc-plot-tick", x: 2, y: top + 8 }, "GFLOP/s"));
  const roofPath = `M${X(xlo).toFixed(1)},${Y(roof.bandwidth_gbs * xlo).toFixed(1)} L${X(ridge).toFixed(1)},${Y(roof.peak_gflops).toFixed(1)} L${X(xhi).toFixed(1)},${Y(roof.peak_gflops).toFixed(1)}`;
  svg.append(
    el("path", { class: "mlc-roof", d: roofPath, fill: "none" },
      el("title", {}, `roof: ${precise(roof.peak_gflops)} GFLOP/s peak, ${precise(roof.bandwidth_gbs)} GB/s (ridge at ${precise(ridge)} FLOPs/byte)`)),
  );
  for (const p of points) {
    const cls = ["mlc-plot-point"];
    if (p.current) cls.push("mlc-plot-current");
    if (p.after) cls.push("mlc-plot-after");
    if (p.correct === false) cls.push("mlc-plot-wrong");
    const frac = p.fraction === null ? "" : `, ${(100 * p.fraction).toFixed(1)}% of the roof`;
    const title = `step ${p.id}: ${p.label}\n${formatGflops(p.gflops)} at ${precise(p.intensity)} FLOPs/byte${frac}`;
    const dot = el("circle", { class: cls.join(" "), cx: X(p.intensity).toFixed(1), cy: Y(p.gflops).toFixed(1), r: p.current ? 5 : 4, "data-step": String(p.id) }, el("title", {}, title));
    if (opts.onPick) dot.addEventListener("click", () => opts.onPick!(p.id));
    svg.append(dot);
  }
  return svg;
}
