// "Open in a side panel" for mlc_lab views in notebooks: the view asks with a DOM event (see
// js/lib/host.ts); this runs JupyterLab's own "Create New View for Output" on the cell holding the
// view (notebook:create-output-view), which opens a second view of the same widget model, kept
// live by the notebook's widget manager. JupyterLab puts it below the notebook (split-bottom);
// it is moved to the right split, where a tall explorer has room beside the notebook.

import type { JupyterFrontEnd } from "@jupyterlab/application";
import { OPEN_SIDE_PANEL, setHostOffer } from "../../lib/host";

const COMMAND = "notebook:create-output-view";

interface CellLike {
  node: HTMLElement;
}
interface NotebookPanelLike {
  id: string;
  node: HTMLElement;
  context: { path: string };
  content: { widgets: readonly CellLike[]; activeCellIndex: number };
}

function notebookOf(app: JupyterFrontEnd, el: HTMLElement): NotebookPanelLike | null {
  for (const w of app.shell.widgets("main")) {
    const panel = w as unknown as Partial<NotebookPanelLike>;
    if (panel.content && Array.isArray(panel.content.widgets) && w.node.contains(el)) return panel as NotebookPanelLike;
  }
  return null;
}

async function openBeside(app: JupyterFrontEnd, panel: NotebookPanelLike, index: number): Promise<void> {
  const before = new Set(app.shell.widgets("main"));
  await app.commands.execute(COMMAND, { path: panel.context.path, index });
  for (const w of app.shell.widgets("main")) {
    if (before.has(w) || !w.node.querySelector(".jp-LinkedOutputView, .jp-OutputArea")) continue;
    app.shell.add(w, "main", { ref: panel.id, mode: "split-right" });
    app.shell.activateById(w.id);
  }
}

export function offerSidePanels(app: JupyterFrontEnd): void {
  // JupyterLab's dock panel has a right split; Notebook 7's one-document shell has none.
  const can = (el: HTMLElement) =>
    app.name === "JupyterLab" &&
    app.commands.hasCommand(COMMAND) && !!el.closest(".jp-Notebook .jp-Cell .jp-OutputArea") && !el.closest(".jp-LinkedOutputView");
  setHostOffer({ canOpenSidePanel: can });
  document.addEventListener(OPEN_SIDE_PANEL, (ev) => {
    const el = ev.target as HTMLElement | null;
    if (!el || !can(el)) return;
    const panel = notebookOf(app, el);
    const index = panel ? panel.content.widgets.findIndex((cell) => cell.node.contains(el)) : -1;
    if (!panel || index < 0) return;
    ev.stopPropagation();
    void openBeside(app, panel, index).catch((err: unknown) => console.warn("mlc_lab: could not open a side panel", err));
  });
}
