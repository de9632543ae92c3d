// Entries of the class widgets: the students' leaderboard and the teacher's dashboard
// (mlc_lab/widgets/classroom.py). Both re-draw whenever the kernel pushes the server's figures.

import type { AnyModel, RenderProps } from "@anywidget/types";
import css from "./classroom/classroom.css";
import { dashboardBody } from "./classroom/dashboard";
import { boardTable } from "./classroom/leaderboard";
import { statusLine } from "./classroom/status";
import type { ClassDashboardTraits, LeaderboardTraits, PolledTraits } from "./lib/model";
import { Rpc } from "./lib/rpc";
import { ensureStyle } from "./lib/theme";

export { css as classroomCss };

function mount<M extends PolledTraits>(model: AnyModel<M>, el: HTMLElement, cls: string, draw: (rpc: Rpc) => HTMLElement[], traits: string[]) {
  ensureStyle("mlc-lab-classroom-style", css);
  const rpc = new Rpc(model as any);
  const root = document.createElement("div");
  root.className = `mlc-class ${cls}`;
  const redraw = () => root.replaceChildren(...draw(rpc));
  for (const t of traits) model.on(`change:${t}`, redraw);
  redraw();
  el.classList.add("mlc-lab");
  el.append(root);
  return () => {
    for (const t of traits) model.off(`change:${t}`, redraw);
    rpc.dispose();
    root.remove();
  };
}

export const leaderboard = {
  render({ model, el }: RenderProps<LeaderboardTraits>) {
    return mount(model, el, "mlc-leaderboard", (rpc) => {
      const board = model.get("board") ?? {};
      const n = board.rows?.length ?? 0;
      const counts = `${n} student${n === 1 ? "" : "s"} · ${board.submissions ?? 0} submissions${board.queued ? ` · ${board.queued} being graded` : ""}`;
      return [statusLine(model, rpc, `Leaderboard: ${board.title ?? ""}`, counts), boardTable(board, model.get("highlight"))];
    }, ["board", "highlight", "error", "updated"]);
  },
};

export const class_dashboard = {
  render({ model, el }: RenderProps<ClassDashboardTraits>) {
    return mount(model, el, "mlc-class-dashboard", (rpc) => {
      const s = model.get("summary") ?? {};
      const counts = `${s.students ?? 0} students · ${s.submissions ?? 0} submissions${s.queued ? ` · ${s.queued} being graded` : ""}`;
      return [statusLine(model, rpc, `Class: ${s.title ?? ""}`, counts), dashboardBody(s, model.get("board") ?? {})];
    }, ["summary", "board", "error", "updated"]);
  },
};
