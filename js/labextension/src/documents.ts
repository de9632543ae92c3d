// Documents: a trace file (.trace, .trace.json) and a tuning run (its database_tuning_record.json)
// open in a tab. Without a kernel they are shown read-only from the file (the trace's steps; the
// run's trials in the dashboard); "Open with kernel" writes a notebook beside the file that opens
// the same thing as live widgets (mlc_lab.open_trace / mlc_lab.open_tuning_run) and runs it.

import type { JupyterFrontEnd } from "@jupyterlab/application";
import { ToolbarButton } from "@jupyterlab/apputils";
import { ABCWidgetFactory, DocumentRegistry, DocumentWidget } from "@jupyterlab/docregistry";
import { Widget } from "@lumino/widgets";
import { SavedModel } from "../../lib/saved";
import { markKernel } from "../../lib/offline";
import { basename, dirname } from "./notebooks";
import { runState } from "./tuning_run";

export const TRACE_FACTORY = "mlc_lab trace";
export const RUN_FACTORY = "mlc_lab tuning run";

type OpenWithKernel = (path: string) => Promise<void>;

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
    head.textContent = `${steps.length} schedule step${steps.length === 1 ? "" : "s"}, read-only. “Open with kernel” replays them in the explorer on the program beside this file (${basename(this.context.path).replace(/\.trace(\.json)?$/, ".py")}).`;
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

function kernelButton(path: () => string, open: OpenWithKernel): ToolbarButton {
  return new ToolbarButton({
    label: "Open with kernel",
    tooltip: "Write a notebook beside this file that opens it as a live mlc_lab widget, and run it",
    onClick: () => void open(path()),
  });
}

export class TraceFactory extends ABCWidgetFactory<DocumentWidget<TraceView>> {
  constructor(options: DocumentRegistry.IWidgetFactoryOptions, private open: OpenWithKernel) {
    super(options);
  }
  protected createNewWidget(context: DocumentRegistry.Context): DocumentWidget<TraceView> {
    const w = new DocumentWidget({ content: new TraceView(context), context });
    w.toolbar.addItem("mlc-lab-open-kernel", kernelButton(() => context.path, this.open));
    return w;
  }
}

export class TuningRunFactory extends ABCWidgetFactory<DocumentWidget<TuningRunView>> {
  constructor(options: DocumentRegistry.IWidgetFactoryOptions, private app: JupyterFrontEnd, private open: OpenWithKernel) {
    super(options);
  }
  protected createNewWidget(context: DocumentRegistry.Context): DocumentWidget<TuningRunView> {
    const w = new DocumentWidget({ content: new TuningRunView(context, this.app), context });
    w.toolbar.addItem("mlc-lab-open-kernel", kernelButton(() => context.path, this.open));
    return w;
  }
}
