// A document's live view: a kernel session of the document's own (JupyterLab's SessionContext, the
// session path being the document's, so the kernel's working directory is the document's folder),
// `mlc_lab` code run in it, and its output drawn in the tab by JupyterLab's SimplifiedOutputArea —
// what the console and "Create New View for Output" use. Widgets in that output render through an
// ipywidgets manager bound to this kernel (registerWidgetManager of jupyterlab_widgets, the one
// notebooks get), so the explorer or dashboard in the tab is as live as in a notebook.
//
// The code comes from mlc_lab (documents.py: open_trace, open_tuning_run) and only names the file:
// the trace is parsed by mlc_lab's whitelist parser, never run.

import { SessionContext, type ISessionContext } from "@jupyterlab/apputils";
import type { IRenderMimeRegistry } from "@jupyterlab/rendermime";
import type { ServiceManager } from "@jupyterlab/services";
import type { SimplifiedOutputArea } from "@jupyterlab/outputarea";
import type { IDisposable } from "@lumino/disposable";
import { Signal } from "@lumino/signaling";
import { Panel } from "@lumino/widgets";

export type LiveState = "idle" | "starting" | "live" | "no-kernel" | "failed";

// Loaded when a document first goes live, not with the extension: without ipywidgets' JupyterLab
// extension the documents stay read-only and everything else still works.
type Libraries = [typeof import("@jupyterlab/outputarea"), typeof import("@jupyter-widgets/jupyterlab-manager")];
let libraries: Promise<Libraries> | null = null;
const loadLibraries = () =>
  (libraries ??= Promise.all([import("@jupyterlab/outputarea"), import("@jupyter-widgets/jupyterlab-manager")]).catch((err) => {
    libraries = null;
    throw new Error(`the widget manager of ipywidgets' JupyterLab extension is not available (${err instanceof Error ? err.message : String(err)})`);
  }));

export interface KernelViewOptions {
  services: ServiceManager.IManager;
  rendermime: IRenderMimeRegistry;
  path: string; // the document's path: the session's path (and so the kernel's folder)
  code: string; // what to run: its last expression is the widget
  title: string;
}

/** Where the output area lives; hidden until the kernel has answered. */
export class KernelView extends Panel {
  readonly stateChanged = new Signal<this, LiveState>(this);
  private session: SessionContext | null = null;
  private manager: IDisposable | null = null;
  private output: SimplifiedOutputArea | null = null;
  private _state: LiveState = "idle";
  private _why = "";

  constructor(private readonly options: KernelViewOptions) {
    super();
    this.addClass("mlc-lab-live");
    this.node.style.cssText = "overflow:auto;padding:4px 8px";
    this.hide();
  }

  get state(): LiveState {
    return this._state;
  }

  /** Why there is no live view (no Python kernel, the code failed...); "" when live. */
  get why(): string {
    return this._why;
  }

  get sessionContext(): ISessionContext | null {
    return this.session;
  }

  private setState(state: LiveState, why = ""): void {
    this._state = state;
    this._why = why;
    this.stateChanged.emit(state);
  }

  /** Start (or reuse) the document's kernel and run the code. False when no kernel could be had. */
  async start(): Promise<boolean> {
    if (this._state === "starting" || this._state === "live") return this._state === "live";
    this.setState("starting");
    const { services, path, title } = this.options;
    try {
      await services.ready;
      const specs = services.kernelspecs.specs;
      const python = specs ? Object.values(specs.kernelspecs).find((s) => s?.language?.toLowerCase() === "python") : undefined;
      if (!python) {
        this.setState("no-kernel", "no Python kernel is installed for this server");
        return false;
      }
      this.session ??= new SessionContext({
        sessionManager: services.sessions,
        specsManager: services.kernelspecs,
        path,
        name: title,
        type: "mlc_lab",
        kernelPreference: { name: python.name, shouldStart: true, canStart: true, autoStartDefault: true },
      });
      const needsChoice = await this.session.initialize();
      if (needsChoice || !this.session.session?.kernel) {
        this.setState("no-kernel", "no kernel was started for this document");
        return false;
      }
      await this.session.ready;
      const libs = await loadLibraries();
      this.bindWidgets(this.session, libs);
      await this.run(libs);
      return (this._state as LiveState) === "live";
    } catch (err) {
      this.setState("failed", err instanceof Error ? err.message : String(err));
      return false;
    }
  }

  /** A widget manager for this kernel on our own copy of the rendermime (as notebooks get one). */
  private bindWidgets(session: SessionContext, [{ OutputAreaModel, SimplifiedOutputArea }, { registerWidgetManager }]: Libraries): void {
    if (this.manager) return;
    const rendermime = this.options.rendermime.clone();
    // What registerWidgetManager reads of a notebook's context: its kernel session, the signal it
    // saves widget state on (never: a document saves nothing), and the notebook model it would
    // restore saved widgets from (there are none).
    const context = {
      path: this.options.path,
      sessionContext: session,
      saveState: new Signal<unknown, string>(this),
      model: { getMetadata: () => undefined, setMetadata: () => undefined, dirty: false },
      urlResolver: rendermime.resolver,
    };
    this.manager = registerWidgetManager(context, rendermime, []);
    this.output = new SimplifiedOutputArea({ model: new OutputAreaModel({ trusted: true }), rendermime });
    this.output.addClass("mlc-lab-live-output");
    this.addWidget(this.output);
  }

  private async run([{ OutputArea }]: Libraries): Promise<void> {
    if (!this.session || !this.output) return;
    this.output.model.clear();
    const reply: any = await OutputArea.execute(this.options.code, this.output, this.session);
    const outputs = this.output.model.toJSON();
    const error = outputs.find((o) => o.output_type === "error") as { ename?: string; evalue?: string } | undefined;
    if (reply?.content?.status === "error" || error) {
      // The output area shows the traceback; the read-only view stays next to it.
      this.show();
      this.setState("failed", `${error?.ename ?? "error"}: ${error?.evalue ?? reply?.content?.evalue ?? ""}`);
      return;
    }
    this.show();
    this.setState("live");
  }

  /** Back to read-only: the document's kernel is shut down (it was started for this view only). */
  async stop(): Promise<void> {
    this.manager?.dispose();
    this.manager = null;
    this.output?.dispose();
    this.output = null;
    const session = this.session;
    this.session = null;
    this.hide();
    this.setState("idle");
    if (session) {
      try {
        await session.shutdown();
      } finally {
        session.dispose();
      }
    }
  }

  override dispose(): void {
    if (this.isDisposed) return;
    void this.stop();
    super.dispose();
  }
}
