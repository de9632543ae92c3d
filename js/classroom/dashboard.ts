// The teacher's dashboard: per-task pass rates, the latency distribution, the most common failures,
// who is stuck at which task, and the leaderboard. Re-drawn whenever the kernel pushes new figures.

import { h } from "../lib/dom";
import { ms, percent } from "./format";
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

/** Each student's best passing latency as a tick on one axis (linear from the fastest to the slowest). */
export function latencyPlot(summary: Summary): HTMLElement {
  const lat = summary.latency ?? { students: [] };
  const points = lat.students ?? [];
  if (!points.length) return h("div", { class: "mlc-class-empty mlc-latency" }, "No passing submission has been timed yet.");
  const lo = lat.min ?? points[0].latency_ms;
  const hi = lat.max ?? points[points.length - 1].latency_ms;
  const span = hi - lo || 1;
  const W = 600;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} 40`);
  svg.setAttribute("class", "mlc-latency-svg");
  svg.setAttribute("preserveAspectRatio", "none");
  const axis = document.createElementNS(ns, "line");
  Object.entries({ x1: "10", x2: String(W - 10), y1: "30", y2: "30", class: "mlc-latency-axis" }).forEach(([k, v]) => axis.setAttribute(k, v));
  svg.append(axis);
  points.forEach((p, i) => {
    // a tick per student (a circle would be stretched: the plot fills the width, not the ratio)
    const c = document.createElementNS(ns, "line");
    const x = (10 + ((p.latency_ms - lo) / span) * (W - 20)).toFixed(1);
    const top = 6 + (i % 3) * 4;
    Object.entries({ x1: x, x2: x, y1: String(top), y2: "30" }).forEach(([k, v]) => c.setAttribute(k, v));
    c.setAttribute("class", "mlc-latency-dot");
    c.dataset.name = p.name;
    const title = document.createElementNS(ns, "title");
    title.textContent = `${p.name}: ${ms(p.latency_ms)}`;
    c.append(title);
    svg.append(c);
  });
  return h(
    "div",
    { class: "mlc-latency" },
    svg,
    h("div", { class: "mlc-latency-legend" }, `fastest ${ms(lat.min)} · median ${ms(lat.median)} · slowest ${ms(lat.max)} (${points.length} student${points.length === 1 ? "" : "s"})`),
  );
}

export function failuresTable(summary: Summary): HTMLElement {
  const rows = summary.common_failures ?? [];
  if (!rows.length) return h("div", { class: "mlc-class-empty" }, "No failures yet.");
  return h(
    "table",
    { class: "mlc-class-table mlc-failures" },
    h("thead", {}, h("tr", {}, h("th", {}, "Task"), h("th", {}, "What was wrong"), h("th", {}, "Students"), h("th", {}, "Times"))),
    h(
      "tbody",
      {},
      rows.map((f) => h("tr", {}, h("td", {}, f.task ?? "(not graded)"), h("td", { class: "mlc-failure-message" }, f.message), h("td", {}, String(f.students)), h("td", {}, String(f.count)))),
    ),
  );
}

export function stuckTable(summary: Summary): HTMLElement {
  const rows = summary.stuck ?? [];
  if (!rows.length) return h("div", { class: "mlc-class-empty" }, "Nobody is stuck: every student who handed in has passed every task.");
  return h(
    "table",
    { class: "mlc-class-table mlc-stuck-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Pseudonym"), h("th", {}, "At task"), h("th", {}, "Failed tries"), h("th", {}, "Last message"))),
    h(
      "tbody",
      {},
      rows.map((s) =>
        h(
          "tr",
          { class: s.stuck ? "mlc-stuck-row mlc-stuck" : "mlc-stuck-row", dataset: { name: s.name, task: s.task } },
          h("td", {}, s.name),
          h("td", {}, s.task),
          h("td", {}, String(s.failed_attempts)),
          h("td", { class: "mlc-failure-message" }, s.last_message ?? ""),
        ),
      ),
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
    section("mlc-sec-failures", "Most common failures", failuresTable(summary)),
    section("mlc-sec-stuck", "Who is at which task", stuckTable(summary)),
    section("mlc-sec-board", "Leaderboard", boardTable(board)),
  );
}
