// Packages this extension takes from JupyterLab's shared scope at run time (never bundled, never
// installed with npm): JupyterLab's output area (a core package) and the ipywidgets manager of
// jupyterlab_widgets (ipywidgets' JupyterLab extension, which anywidget needs anyway). Only what
// js/labextension/src/kernel_view.ts uses is declared.

declare module "@jupyterlab/outputarea" {
  import type { ISessionContext } from "@jupyterlab/apputils";
  import type { IRenderMimeRegistry } from "@jupyterlab/rendermime";
  import type { Widget } from "@lumino/widgets";

  export class OutputAreaModel {
    constructor(options?: { trusted?: boolean });
    readonly length: number;
    clear(wait?: boolean): void;
    toJSON(): Array<{ output_type: string; [key: string]: unknown }>;
    dispose(): void;
  }

  export class SimplifiedOutputArea extends Widget {
    constructor(options: { model: OutputAreaModel; rendermime: IRenderMimeRegistry });
    readonly model: OutputAreaModel;
  }

  export namespace OutputArea {
    function execute(code: string, output: SimplifiedOutputArea, sessionContext: ISessionContext, metadata?: object): Promise<unknown>;
  }
}

declare module "@jupyter-widgets/jupyterlab-manager" {
  import type { IRenderMimeRegistry } from "@jupyterlab/rendermime";
  import type { IDisposable } from "@lumino/disposable";

  /** Binds a widget manager for the context's kernel to `rendermime` (what notebooks and consoles get). */
  export function registerWidgetManager(context: unknown, rendermime: IRenderMimeRegistry, renderers: Iterable<unknown>): IDisposable;
}
