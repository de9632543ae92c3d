// Documents: a trace file (.trace, .trace.json) and a tuning run (its database_tuning_record.json)
// open in a tab. At once they are shown read-only from the file (the trace's steps; the run's
// trials in the dashboard). Through a kernel (started for the document when it opens, if the
// setting says so, or by "Open with kernel") the same tab shows the live widget — the explorer
// with the trace replayed, the dashboard with its session — run by mlc_lab in the document's own
// kernel session (kernel_view.ts). "Open as notebook" writes a notebook beside the file that does
// the same (mlc_lab.open_trace / mlc_lab.open_tuning_run) and runs it.

import type { JupyterFrontEnd } from "@jupyterlab/application";
import { ToolbarButton } from "@jupyterlab/apputils";
import { ABCWidgetFactory, DocumentRegistry, DocumentWidget } from "@jupyterlab/docregistry";
import type { IRenderMimeRegistry } from "@jupyterlab/rendermime";
import { Panel, Widget } from "@lumino/widgets";
import { KernelView, type LiveState } from "./kernel_view";
import { SavedModel } from "../../lib/saved";
import { markKernel } from "../../lib/offline";
import { basename, dirname, py } from "./notebooks";
import { runState } from "./tuning_run";

export const TRACE_FACTORY = "mlc_lab trace";
export const RUN_FACTORY = "mlc_lab tuning run";

type OpenWithKernel = (path: string) => Promise<void>;

/** What a document factory needs besides the file: the app's services and renderers, and the settings. */
export interface LiveOptions {
  app: JupyterFrontEnd;
  rendermime: IRenderMimeRegistry | null; // none: documents stay read-only
  startKernel: () => boolean; // the "documentKernel" setting: start a kernel when a document opens
  openAsNotebook: OpenWithKernel;
}

/** The steps of a trace, one line each: TVM's printed trace (sch.* calls) or its JSON. */
export function traceSteps(text: string, path: string): string[] {
  if (path.endsWith(".json")) {
    try {
      const data = JSON.parse(text);
      const insts: any[] = Array.isArray(data) ? (Array.isArray(data[0]) && typeof data[0][0] !== "string" ? data[0] : data) : [];
      return insts.filter((i) => Array.isArray(i) && typeof i[0] === "string").map((i) => `${i[0]}(${JSON.stringify(i[1] ?? []).slice(1, -1)})`);
    } catch {
      return [];
    }
  }
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /(^|=\s*)sch\.\w+\(/.test(l));
}

class TraceView extends Widget {
  constructor(private context: DocumentRegistry.Context) {
    super();
    this.addClass("mlc-lab-trace-doc");
    this.node.style.cssText = "overflow:auto;padding:8px 12px;font:13px var(--jp-code-font-family, monospace)";
    void context.ready.then(() => this.draw());
    context.model.contentChanged.connect(() => this.draw());
  }

  private draw(): void {
    const text = this.context.model.toString();
    const steps = traceSteps(text, this.context.path);
    const head = document.createElement("div");
    head.className = "mlc-lab-trace-head";
    head.style.cssText = "font:13px var(--jp-ui-font-family, sans-serif);margin-bottom:6px;color:var(--jp-ui-font-color1)";
    head.textContent = `${steps.length} schedule step${steps.length === 1 ? "" : "s"}, read-only. “Open with kernel” replays them here in the explorer on the program beside this file (${basename(this.context.path).replace(/\.trace(\.json)?$/, ".py")}).`;
    const list = document.createElement("ol");
    list.className = "mlc-lab-trace-steps";
    for (const s of steps) {
      const li = document.createElement("li");
      li.textContent = s;
      list.append(li);
    }
    this.node.replaceChildren(head, list);
  }
}

class TuningRunView extends Widget {
  private cleanup: (() => void) | null = null;
  constructor(
    private context: DocumentRegistry.Context,
    private app: JupyterFrontEnd,
  ) {
    super();
    this.addClass("mlc-lab-run-doc");
    this.node.style.cssText = "overflow:auto;padding:8px";
    void context.ready.then(() => this.draw());
  }

  private async read(path: string): Promise<string | undefined> {
    try {
      const m = await this.app.serviceManager.contents.get(path, { content: true, format: "text" });
      return typeof m.content === "string" ? m.content : undefined;
    } catch {
      return undefined;
    }
  }

  private async draw(): Promise<void> {
    const dir = dirname(this.context.path);
    const at = (name: string) => (dir ? `${dir}/${name}` : name);
    const [trials, job, status] = await Promise.all(["mlc_lab_trials.jsonl", "mlc_lab_job.json", "mlc_lab_status.json"].map((n) => this.read(at(n))));
    const state = runState({ trials, job, status, records: this.context.model.toString() }, dir || ".");
    const model = new SavedModel("tuning-run", state, null as never);
    markKernel(model, () => false);
    const { default: dashboard } = await import("../../tuning_dashboard");
    this.cleanup?.();
    this.node.replaceChildren();
    const el = document.createElement("div");
    el.className = "mlc-lab";
    this.node.append(el);
    const done = dashboard.render({ model: model as never, el, host: {} as never } as never);
    this.cleanup = typeof done === "function" ? done : null;
  }

  override dispose(): void {
    this.cleanup?.();
    super.dispose();
  }
}

/** The tab's content: the read-only view, and the live one below it once a kernel runs it. */
class DocumentView extends Panel {
  readonly live: KernelView | null;
  constructor(readonly readOnly: Widget, context: DocumentRegistry.Context, code: string, options: LiveOptions) {
    super();
    this.addClass("mlc-lab-doc");
    this.node.style.cssText = "overflow:auto";
    this.addWidget(readOnly);
    this.live = options.rendermime
      ? new KernelView({ services: options.app.serviceManager, rendermime: options.rendermime, path: context.path, code, title: basename(context.path) })
      : null;
    if (this.live) {
      this.addWidget(this.live);
      // Live, the read-only copy goes away; back to read-only (or a failure), it is shown again.
      this.live.stateChanged.connect((_s, state) => (state === "live" ? this.readOnly.hide() : this.readOnly.show()));
    }
  }
}

const STATE_TEXT: Record<LiveState, string> = {
  idle: "read-only",
  starting: "starting a kernel…",
  live: "live (kernel)",
  "no-kernel": "read-only",
  failed: "read-only",
};

function documentWidget(context: DocumentRegistry.Context, readOnly: Widget, code: string, options: LiveOptions) {
  const content = new DocumentView(readOnly, context, code, options);
  const w = new DocumentWidget({ content, context });
  const live = content.live;
  const status = new Widget();
  status.addClass("mlc-lab-doc-status");
  status.node.style.cssText = "font:12px var(--jp-ui-font-family, sans-serif);padding:0 8px;align-self:center;color:var(--jp-ui-font-color2)";
  const toggle = new ToolbarButton({
    label: "Open with kernel",
    className: "mlc-lab-doc-kernel",
    tooltip: "Run this document through a kernel of its own, here: the live mlc_lab widget instead of the read-only view",
    onClick: () => void (live?.state === "live" || live?.state === "starting" ? live.stop() : live?.start()),
  });
  const draw = () => {
    const state = live?.state ?? "no-kernel";
    const why = live?.why || (live ? "" : "no renderers for a live view");
    status.node.textContent = `${STATE_TEXT[state]}${why && state !== "live" ? `: ${why}` : ""}`;
    status.node.dataset.state = state;
    const label = state === "live" || state === "starting" ? "Read-only" : "Open with kernel";
    const button = toggle.node.querySelector(".jp-ToolbarButtonComponent-label");
    if (button) button.textContent = label;
    toggle.node.dataset.label = label;
  };
  live?.stateChanged.connect(draw);
  w.toolbar.addItem("mlc-lab-doc-status", status);
  if (live) w.toolbar.addItem("mlc-lab-open-kernel", toggle);
  w.toolbar.addItem(
    "mlc-lab-open-notebook",
    new ToolbarButton({
      label: "Open as notebook",
      tooltip: "Write a notebook beside this file that opens it as a live mlc_lab widget, and run it",
      onClick: () => void options.openAsNotebook(context.path),
    }),
  );
  void context.ready.then(() => {
    draw();
    if (live && options.startKernel()) void live.start();
  });
  return w;
}

export class TraceFactory extends ABCWidgetFactory<DocumentWidget<DocumentView>> {
  constructor(options: DocumentRegistry.IWidgetFactoryOptions, private live: LiveOptions) {
    super(options);
  }
  protected createNewWidget(context: DocumentRegistry.Context): DocumentWidget<DocumentView> {
    const code = `import mlc_lab\n\nmlc_lab.open_trace(${py(basename(context.path))})`;
    return documentWidget(context, new TraceView(context), code, this.live);
  }
}

export class TuningRunFactory extends ABCWidgetFactory<DocumentWidget<DocumentView>> {
  constructor(options: DocumentRegistry.IWidgetFactoryOptions, private live: LiveOptions) {
    super(options);
  }
  protected createNewWidget(context: DocumentRegistry.Context): DocumentWidget<DocumentView> {
    // The kernel runs in the record file's folder: the work directory is "."
    const code = "import mlc_lab\n\nmlc_lab.open_tuning_run('.')";
    return documentWidget(context, new TuningRunView(context, this.live.app), code, this.live);
  }
}
