// mlc_lab's JupyterLab extension (prebuilt, shipped in the wheel: no node at install time).
// - saved mlc_lab widgets render in notebooks without a kernel (saved_outputs.ts);
// - Launcher tiles and palette commands: "New schedule exploration" (a notebook pre-filled from a
//   course program or a .py file) and "Open tuning run";
// - documents: .trace / .trace.json and a tuning run's database_tuning_record.json open in a tab;
// - settings: default target, trials, work-directory root, whether documents start a kernel;
// - "open in a side panel" for the explorer in a notebook (side_panel.ts);
// - opening a notebook does not mark it changed when its kernel fills in language_info (clean_open.ts).
// The widgets themselves stay anywidget modules (js/mlc_lab.ts); this extension only hosts them.

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from "@jupyterlab/application";
import { Dialog, ICommandPalette, showDialog } from "@jupyterlab/apputils";
import { ILauncher } from "@jupyterlab/launcher";
import { IRenderMimeRegistry } from "@jupyterlab/rendermime";
import { ISettingRegistry } from "@jupyterlab/settingregistry";
import { Widget } from "@lumino/widgets";
import { RUN_FACTORY, TRACE_FACTORY, TraceFactory, TuningRunFactory } from "./documents";
import {
  DEFAULT_SETTINGS,
  type ProgramChoice,
  type Settings,
  basename,
  dirname,
  explorationNotebook,
  traceNotebook,
  tuningRunNotebook,
} from "./notebooks";
import { exploreIcon, tuningIcon } from "./icons";
import { COURSE_PROGRAMS } from "./programs";
import { keepPanelClean } from "./clean_open";
import { patchNotebook } from "./saved_outputs";
import { offerSidePanels } from "./side_panel";

const PLUGIN_ID = "mlc-lab-jupyterlab:plugin";
export const COMMANDS = {
  newExploration: "mlc-lab:new-exploration",
  openTuningRun: "mlc-lab:open-tuning-run",
};
const CATEGORY = "mlc_lab";

class ChoiceBody extends Widget implements Dialog.IBodyWidget<ProgramChoice | null> {
  private select: HTMLSelectElement;
  private file: HTMLInputElement;
  constructor(defaultPath: string) {
    super();
    this.addClass("mlc-lab-new-exploration");
    this.select = document.createElement("select");
    for (const p of COURSE_PROGRAMS) this.select.append(new Option(p.title, p.name));
    this.select.append(new Option("A .py file (below)", ""));
    this.file = document.createElement("input");
    this.file.placeholder = "path/to/program.py (relative to the server root)";
    this.file.value = defaultPath;
    if (defaultPath) this.select.value = "";
    for (const el of [this.select, this.file]) el.style.cssText = "display:block;width:100%;margin:4px 0";
    const label = document.createElement("label");
    label.textContent = "Program to explore";
    this.node.append(label, this.select, this.file);
  }
  getValue(): ProgramChoice | null {
    const name = this.select.value;
    if (name) {
      const p = COURSE_PROGRAMS.find((x) => x.name === name)!;
      return { kind: "course", name: p.name, title: p.title };
    }
    const path = this.file.value.trim();
    return path ? { kind: "file", path } : null;
  }
}

class PathBody extends Widget implements Dialog.IBodyWidget<string> {
  private input: HTMLInputElement;
  constructor(value: string, hint: string) {
    super();
    this.input = document.createElement("input");
    this.input.value = value;
    this.input.style.cssText = "display:block;width:100%;margin:4px 0";
    const p = document.createElement("div");
    p.textContent = hint;
    this.node.append(p, this.input);
  }
  getValue(): string {
    return this.input.value.trim();
  }
}

async function writeNotebook(app: JupyterFrontEnd, dir: string, stem: string, content: object): Promise<string> {
  const contents = app.serviceManager.contents;
  // Pick a free name from the folder's listing (probing names one by one would log 404s).
  const listing = await contents.get(dir, { content: true });
  const taken = new Set<string>(Array.isArray(listing.content) ? listing.content.map((m: { name: string }) => m.name) : []);
  let name = "";
  for (let i = 0; i < 1000 && !name; i++) {
    const candidate = `${stem}${i ? `-${i}` : ""}.ipynb`;
    if (!taken.has(candidate)) name = candidate;
  }
  if (!name) throw new Error(`no free notebook name for ${stem} in ${dir || "/"}`);
  const path = dir ? `${dir}/${name}` : name;
  await contents.save(path, { type: "notebook", format: "json", content });
  return path;
}

async function openAndRun(app: JupyterFrontEnd, path: string, run: boolean): Promise<void> {
  const widget: any = await app.commands.execute("docmanager:open", { path, factory: "Notebook" });
  if (!run || !widget?.sessionContext) return;
  await widget.sessionContext.ready;
  await widget.context?.ready;
  await app.commands.execute("notebook:run-all-cells");
}

/** The current file-browser folder (Launcher tiles open notebooks there), or the root. */
function currentFolder(app: JupyterFrontEnd): string {
  const widget: any = app.shell.currentWidget;
  const path: string | undefined = widget?.cwd ?? widget?.context?.path;
  if (!path) return "";
  return widget?.cwd !== undefined ? path : dirname(path);
}

/** Saved widgets, in every notebook panel from its creation (before its outputs render); the notebook
 *  factory may be registered after this plugin activates (Notebook 7 does). */
function hookNotebooks(app: JupyterFrontEnd): void {
  const hooked = new Set<unknown>();
  const hook = () => {
    const notebooks = app.docRegistry.getWidgetFactory("Notebook");
    if (!notebooks || hooked.has(notebooks)) return;
    hooked.add(notebooks);
    notebooks.widgetCreated.connect((_sender, panel) => {
      patchNotebook(panel as never);
      keepPanelClean(panel as never); // opening a notebook marks it changed no more (clean_open.ts)
    });
  };
  hook();
  offerSidePanels(app); // "open in a side panel" for explorers in notebook outputs
  app.docRegistry.changed.connect((_sender, change) => {
    if (change.type === "widgetFactory" && change.change === "added") hook();
  });
}

/** The user's settings, kept current as they change (defaults when the registry cannot load them). */
async function loadSettings(registry: ISettingRegistry | null): Promise<{ current: Settings }> {
  const settings = { current: { ...DEFAULT_SETTINGS } };
  if (!registry) return settings;
  try {
    const loaded = await registry.load(PLUGIN_ID);
    const read = () => {
      settings.current = { ...DEFAULT_SETTINGS, ...(loaded.composite as Partial<Settings>) };
    };
    read();
    loaded.changed.connect(read);
  } catch (err) {
    console.warn("mlc_lab: settings unavailable, using defaults", err);
  }
  return settings;
}

/** "New schedule exploration": a notebook on a course program or a .py file (asked for when not given). */
function addNewExploration(app: JupyterFrontEnd, settings: { current: Settings }): void {
  app.commands.addCommand(COMMANDS.newExploration, {
    label: "New schedule exploration",
    icon: exploreIcon,
    caption: "A notebook with the schedule explorer on a course program or a .py file",
    execute: async (args) => {
      let choice: ProgramChoice | null = null;
      if (typeof args.program === "string") {
        const p = COURSE_PROGRAMS.find((x) => x.name === args.program);
        if (p) choice = { kind: "course", name: p.name, title: p.title };
      } else if (typeof args.path === "string") choice = { kind: "file", path: args.path };
      if (!choice) {
        const selected: any = (app.shell.currentWidget as any)?.selectedItems?.()?.next?.();
        const py = selected?.value?.path ?? selected?.path ?? "";
        const result = await showDialog({
          title: "New schedule exploration",
          body: new ChoiceBody(typeof py === "string" && py.endsWith(".py") ? py : ""),
          buttons: [Dialog.cancelButton(), Dialog.okButton({ label: "Create" })],
        });
        if (!result.button.accept || !result.value) return;
        choice = result.value;
      }
      const stem = choice.kind === "course" ? `explore-${choice.name}` : `explore-${basename(choice.path).replace(/\.py$/, "")}`;
      const path = await writeNotebook(app, typeof args.cwd === "string" ? args.cwd : currentFolder(app), stem, explorationNotebook(choice, settings.current));
      await openAndRun(app, path, args.run === true);
      return path;
    },
  });
}

/** "Open tuning run": a run's work directory (asked for when not given) in the dashboard document. */
function addOpenTuningRun(app: JupyterFrontEnd, settings: { current: Settings }): void {
  app.commands.addCommand(COMMANDS.openTuningRun, {
    label: "Open tuning run",
    icon: tuningIcon,
    caption: "Show a tuning run's work directory in the dashboard",
    execute: async (args) => {
      let dir = typeof args.path === "string" ? args.path : "";
      if (!dir) {
        const result = await showDialog({
          title: "Open tuning run",
          body: new PathBody(settings.current.workDirRoot, "The run's work directory (it holds database_tuning_record.json):"),
          buttons: [Dialog.cancelButton(), Dialog.okButton({ label: "Open" })],
        });
        if (!result.button.accept || !result.value) return;
        dir = result.value;
      }
      dir = dir.replace(/\/?database_tuning_record\.json$/, "").replace(/\/$/, "");
      const record = dir ? `${dir}/database_tuning_record.json` : "database_tuning_record.json";
      return app.commands.execute("docmanager:open", { path: record, factory: RUN_FACTORY });
    },
  });
}

/** The documents: a .trace file and a tuning run's records open in a tab (a notebook on request). */
function addDocuments(app: JupyterFrontEnd, rendermime: IRenderMimeRegistry | null, settings: { current: Settings }): void {
  const openTraceWithKernel = async (tracePath: string) => {
    const path = await writeNotebook(app, dirname(tracePath), `${basename(tracePath).replace(/\.trace(\.json)?$/, "")}-explore`, traceNotebook(basename(tracePath)));
    await openAndRun(app, path, true);
  };
  const openRunWithKernel = async (recordPath: string) => {
    const dir = dirname(recordPath);
    const path = await writeNotebook(app, dirname(dir), `${basename(dir) || "tuning"}-dashboard`, tuningRunNotebook(basename(dir) || "."));
    await openAndRun(app, path, true);
  };
  app.docRegistry.addFileType({
    name: "mlc-lab-trace",
    displayName: "Schedule trace",
    extensions: [".trace"],
    pattern: "^.*\\.trace(\\.json)?$",
    mimeTypes: ["text/plain"],
    fileFormat: "text",
    contentType: "file",
  });
  app.docRegistry.addFileType({
    name: "mlc-lab-tuning-record",
    displayName: "Tuning run records",
    pattern: "^database_tuning_record\\.json$",
    mimeTypes: ["application/json"],
    fileFormat: "text",
    contentType: "file",
  });
  const live = (openAsNotebook: (path: string) => Promise<void>) => ({
    app,
    rendermime,
    startKernel: () => settings.current.documentKernel,
    openAsNotebook,
  });
  app.docRegistry.addWidgetFactory(
    new TraceFactory({ name: TRACE_FACTORY, fileTypes: ["mlc-lab-trace"], defaultFor: ["mlc-lab-trace"], readOnly: true }, live(openTraceWithKernel)),
  );
  app.docRegistry.addWidgetFactory(
    new TuningRunFactory(
      { name: RUN_FACTORY, fileTypes: ["mlc-lab-tuning-record"], defaultFor: ["mlc-lab-tuning-record"], readOnly: true },
      live(openRunWithKernel),
    ),
  );
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "mlc_lab: Launcher, commands, documents, settings, saved widgets without a kernel",
  autoStart: true,
  optional: [ILauncher, ICommandPalette, ISettingRegistry, IRenderMimeRegistry],
  activate: async (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    registry: ISettingRegistry | null,
    rendermime: IRenderMimeRegistry | null,
  ) => {
    hookNotebooks(app);
    const settings = await loadSettings(registry);
    addNewExploration(app, settings);
    addOpenTuningRun(app, settings);
    if (launcher) {
      launcher.add({ command: COMMANDS.newExploration, category: CATEGORY, rank: 1 });
      launcher.add({ command: COMMANDS.openTuningRun, category: CATEGORY, rank: 2 });
    }
    if (palette) {
      palette.addItem({ command: COMMANDS.newExploration, category: CATEGORY });
      palette.addItem({ command: COMMANDS.openTuningRun, category: CATEGORY });
    }
    addDocuments(app, rendermime, settings);
  },
};

export default plugin;
