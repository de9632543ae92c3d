// The teacher's dashboard: per-task pass rates, the latency distribution, the most common failures,
// who is stuck at which task, and the leaderboard. Re-drawn whenever the kernel pushes new figures.

import { h } from "../lib/dom";
import { loadNote, ms, percent } from "./format";
import { boardTable } from "./leaderboard";
import type { Board, ClassSummary } from "../lib/model";

/** The summary as the trait holds it: {} before the first refresh. */
type Summary = Partial<ClassSummary>;

export function passRates(summary: Summary): HTMLElement {
  const tasks = summary.tasks ?? [];
  return h(
    "div",
    { class: "mlc-class-rates" },
    tasks.map((t) =>
      h(
        "div",
        { class: "mlc-rate", dataset: { task: t.name } },
        h("span", { class: "mlc-rate-name", title: t.title }, t.name),
        h("span", { class: "mlc-rate-bar" }, h("span", { class: "mlc-rate-fill", style: { width: percent(t.pass_rate) } })),
        h("span", { class: "mlc-rate-text" }, `${t.passed}/${t.students} (${percent(t.pass_rate)})`),
      ),
    ),
  );
}

/** A round number at or above `x` (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten): the axis's end. */
export function niceCeil(x: number): number {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  return ([1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((m) => m * p >= x * (1 - 1e-9)) ?? 10) * p;
}

/** Each student's best passing latency as a bar on an axis from zero, with its value, its spread
 * (the repeats' interquartile range, a whisker), the load it was timed under and its rank (ties marked "="). */
export function latencyPlot(summary: Summary): HTMLElement {
  const lat = summary.latency ?? { students: [] };
  const points = lat.students ?? [];
  if (!points.length) return h("div", { class: "mlc-class-empty mlc-latency" }, "No passing submission has been timed yet.");
  const top = niceCeil(Math.max(...points.map((p) => p.latency_ms + (p.spread_ms ?? 0))));
  const pct = (v: number) => `${Math.max(0, Math.min(100, (v / top) * 100)).toFixed(2)}%`;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => f * top);
  const rows = points.map((p) => {
    const spread = p.spread_ms ?? 0;
    return h(
      "div",
      { class: p.quiet === false ? "mlc-latency-row mlc-latency-busy" : "mlc-latency-row", dataset: { name: p.name, rank: String(p.rank ?? "") } },
      h("span", { class: "mlc-latency-rank" }, p.rank ? `${p.tie ? "=" : ""}${p.rank}` : ""),
      h("span", { class: "mlc-latency-name", title: p.name }, p.name),
      h(
        "span",
        { class: "mlc-latency-track" },
        h("span", { class: "mlc-latency-dot", dataset: { name: p.name }, style: { width: pct(p.latency_ms) } }),
        ...(spread > 0 ? [h("span", { class: "mlc-latency-spread", style: { left: pct(p.latency_ms - spread), width: pct(2 * spread) } })] : []),
      ),
      h("span", { class: "mlc-latency-value" }, `${ms(p.latency_ms)}${spread > 0 ? ` ± ${ms(spread)}` : ""}`),
      h("span", { class: "mlc-latency-load" }, loadNote(p)),
    );
  });
  const axis = h(
    "div",
    { class: "mlc-latency-row mlc-latency-axisrow" },
    h("span", {}),
    h("span", {}),
    h("span", { class: "mlc-latency-axis" }, ticks.map((t) => h("span", { class: "mlc-latency-tick", style: { left: pct(t) } }, t === 0 ? "0" : ms(t)))),
    h("span", {}),
    h("span", {}),
  );
  const ties = points.some((p) => p.tie);
  return h(
    "div",
    { class: "mlc-latency" },
    ...rows,
    axis,
    h(
      "div",
      { class: "mlc-latency-legend" },
      `fastest ${ms(lat.min)} · median ${ms(lat.median)} · slowest ${ms(lat.max)} (${points.length} student${points.length === 1 ? "" : "s"}); ` +
        `± the repeats' interquartile range${ties ? `; = a tie: within the spread of the two timings (wider for one taken on a busy machine, never past 2x)` : ""}`,
    ),
  );
}

/** A table of the class's `rows` (one `row` each under the `heads`), or the `empty` sentence when there are none. */
function classTable<T>(rows: T[], empty: string, cls: string, heads: string[], row: (r: T) => HTMLElement): HTMLElement {
  if (!rows.length) return h("div", { class: "mlc-class-empty" }, empty);
  return h(
    "table",
    { class: `mlc-class-table ${cls}` },
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", {}, t)))),
    h("tbody", {}, rows.map(row)),
  );
}

/** The hand-ins the grader refused, attacks first: for the teacher to look at. An attack (a trace reaching
 * for what no schedule does) is told apart from an honest mistake; each row names the student as the
 * teacher knows them and, beside it, the pseudonym the class sees. */
export function refusedTable(summary: Summary): HTMLElement {
  const rows = [...(summary.refused ?? [])].sort((a, b) => Number(b.kind === "attack") - Number(a.kind === "attack"));
  return classTable(rows, "No hand-in was refused.", "mlc-refused", ["Student", "What it was", "Hand-in", "Why the grader refused it"], (r) =>
    h(
      "tr",
      { class: `mlc-refused-row mlc-refused-${r.kind}`, dataset: { name: r.name, kind: r.kind } },
      h("td", {}, r.name, r.pseudonym && r.pseudonym !== r.name ? h("span", { class: "mlc-refused-pseudonym", title: "what the class sees" }, ` · ${r.pseudonym}`) : ""),
      h("td", { class: "mlc-refused-kind", title: r.why }, r.kind === "attack" ? `⚠ attack${r.why ? `: ${r.why}` : ""}` : "a mistake"),
      h("td", {}, `#${r.id}${r.file ? ` ${r.file}` : ""}`),
      h("td", { class: "mlc-failure-message" }, r.message),
    ),
  );
}

function refusedTitle(summary: Summary): string {
  const all = summary.refused ?? [];
  const attacks = all.filter((r) => r.kind === "attack").length;
  return attacks ? `⚠ Refused hand-ins (${all.length}, ${attacks} attack${attacks === 1 ? "" : "s"}): look at these` : `Refused hand-ins (${all.length}): honest mistakes`;
}

export function failuresTable(summary: Summary): HTMLElement {
  return classTable(summary.common_failures ?? [], "No failures yet.", "mlc-failures", ["Task", "What was wrong", "Students", "Times"], (f) =>
    h("tr", {}, h("td", {}, f.task ?? "(not graded)"), h("td", { class: "mlc-failure-message" }, f.message), h("td", {}, String(f.students)), h("td", {}, String(f.count))),
  );
}

export function stuckTable(summary: Summary): HTMLElement {
  const empty = "Nobody is stuck: every student who handed in has passed every task.";
  return classTable(summary.stuck ?? [], empty, "mlc-stuck-table", ["Student", "At task", "Failed tries", "Last message"], (s) =>
    h(
      "tr",
      { class: s.stuck ? "mlc-stuck-row mlc-stuck" : "mlc-stuck-row", dataset: { name: s.name, task: s.task } },
      h("td", {}, s.name),
      h("td", {}, s.task),
      h("td", {}, String(s.failed_attempts)),
      h("td", { class: "mlc-failure-message" }, s.last_message ?? ""),
    ),
  );
}

export function dashboardBody(summary: Summary, board: Partial<Board>): HTMLElement {
  const section = (cls: string, title: string, body: HTMLElement) => h("section", { class: `mlc-class-section ${cls}` }, h("h4", {}, title), body);
  return h(
    "div",
    { class: "mlc-class-body" },
    section("mlc-sec-rates", "Pass rate per task", passRates(summary)),
    section("mlc-sec-latency", "Best latency per student", latencyPlot(summary)),
    ...((summary.refused ?? []).length ? [section(`mlc-sec-refused${(summary.refused ?? []).some((r) => r.kind === "attack") ? " mlc-has-attacks" : ""}`, refusedTitle(summary), refusedTable(summary))] : []),
    section("mlc-sec-failures", "Most common failures", failuresTable(summary)),
    section("mlc-sec-stuck", "Who is at which task", stuckTable(summary)),
    section("mlc-sec-board", "Leaderboard", boardTable(board)),
  );
}
