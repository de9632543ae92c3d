// The leaderboard table (students' widget, and a part of the teacher's dashboard).

import { h } from "../lib/dom";
import { loadNote, ms, points } from "./format";
import type { Board } from "../lib/model";

export function boardTable(board: Partial<Board>, highlight = ""): HTMLElement {
  const rows = board.rows ?? [];
  const tasks = board.tasks ?? [];
  if (!rows.length) return h("div", { class: "mlc-class-empty" }, "No submissions yet.");
  return h(
    "table",
    { class: "mlc-class-table mlc-board" },
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Pseudonym"), h("th", {}, "Score"), h("th", {}, "Best latency"), h("th", {}, "Tasks"), h("th", {}, "Submissions"))),
    h(
      "tbody",
      {},
      rows.map((r) =>
        h(
          "tr",
          { class: r.name === highlight ? "mlc-board-row mlc-board-you" : "mlc-board-row", dataset: { name: r.name, rank: String(r.rank) } },
          h("td", { class: "mlc-board-rank", title: r.tie ? "a tie: within the spread of the two timings (wider for one taken on a busy machine, never past 2x)" : "" }, `${r.tie ? "=" : ""}${r.rank}`),
          h("td", { class: "mlc-board-name" }, r.name),
          h("td", { class: "mlc-board-score" }, `${points(r.score)} / ${points(board.max_score)}`),
          h(
            "td",
            { class: "mlc-board-latency", title: "the fastest of this student's passing submissions, timed by measure()'s method; ± the repeats' interquartile range" },
            `${ms(r.best_latency_ms)}${r.spread_ms ? ` ± ${ms(r.spread_ms)}` : ""}`,
            r.best_latency_ms !== null && loadNote(r) ? h("span", { class: r.quiet === false ? "mlc-board-load mlc-busy" : "mlc-board-load" }, ` ${loadNote(r)}`) : "",
          ),
          h(
            "td",
            { class: "mlc-board-tasks" },
            tasks.map((t) => h("span", { class: r.tasks_passed.includes(t.name) ? "mlc-chip mlc-chip-ok" : "mlc-chip", title: t.title }, r.tasks_passed.includes(t.name) ? `✓ ${t.name}` : t.name)),
          ),
          h("td", {}, String(r.submissions)),
        ),
      ),
    ),
  );
}
