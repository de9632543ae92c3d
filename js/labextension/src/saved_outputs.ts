// Saved mlc_lab widgets in a notebook render without a kernel. JupyterLab's widget manager loads a
// notebook's saved widget state only once a kernel is connected (with none, every saved widget stays
// text; with one, a saved model the new kernel does not know is "model not found"). This patch puts
// a renderer in front of the widget-view mime type in each notebook: an output whose model is an
// mlc_lab widget saved in the notebook's metadata renders from that state (lib/saved.ts), read-only
// where it needs Python; anything else goes to ipywidgets' own renderer, as before.
// Like ipywidgets' renderer it is not "safe": it only runs in trusted notebooks.

import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { PanelLayout, Widget } from "@lumino/widgets";
import { SavedWidgets, WIDGET_VIEW_MIME, type SavedState } from "../../lib/saved";
import { keepOpenedModels, notebookWidgetState, type NotebookManagerLike, type NotebookModelLike } from "./kept_models";
import { completeWidgetState } from "./widget_state";

interface RenderMimeLike {
  addFactory(factory: IRenderMime.IRendererFactory, rank?: number): void;
  getFactory(mimeType: string): IRenderMime.IRendererFactory | undefined;
}

interface NotebookPanelLike {
  content: { rendermime: RenderMimeLike };
  context: { model: NotebookModelLike | null };
}

const PATCHED = Symbol("mlc-lab-saved-outputs");

/** What ipywidgets' renderer needs from its manager here (a private field of its renderer). */
interface LiveManager {
  restoredStatus: boolean;
  restored: { connect(fn: () => void): void; disconnect(fn: () => void): void };
  get_model(id: string): Promise<{ comm_live?: boolean } | undefined>;
}

/** The widget-view renderer a notebook delegates to: ipywidgets' current factory, and whether it is
 * bound to a widget manager (registered once the kernel is ready) or still the placeholder. */
class Delegate {
  factory: IRenderMime.IRendererFactory | null = null;
  bound = false;
  readonly renderers = new Set<SavedWidgetRenderer>();
  set(factory: IRenderMime.IRendererFactory, bound: boolean): void {
    this.factory = factory;
    this.bound = bound;
    for (const r of [...this.renderers]) r.delegateChanged();
  }
}

/** The manager behind a renderer made by ipywidgets' bound factory, or null if it has none. */
function managerOf(renderer: unknown): Promise<LiveManager> | null {
  const promise = (renderer as { _manager?: { promise?: Promise<LiveManager> } })._manager?.promise;
  return promise instanceof Promise ? promise : null;
}

function whenRestored(manager: LiveManager): Promise<void> {
  if (manager.restoredStatus) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      manager.restored.disconnect(done);
      resolve();
    };
    manager.restored.connect(done);
  });
}

// Why a reload used to leave every widget at "Loading widget...": outputs of a reopened notebook
// render before its kernel is connected, so they get ipywidgets' placeholder renderer, which has no
// widget manager yet. ipywidgets later hands the manager to each placeholder it finds as a direct
// child of an output, and this renderer wrapped them one level down, out of its sight. So the
// renderer below re-renders its output with ipywidgets' bound renderer when that one arrives.
class SavedWidgetRenderer extends Widget implements IRenderMime.IRenderer {
  private cleanup: (() => void) | null = null;
  private inner: { renderer: IRenderMime.IRenderer; factory: IRenderMime.IRendererFactory } | null = null;
  private model: IRenderMime.IMimeModel | null = null;
  private savedShown = false; // the saved view (or why it could not be shown) is on screen
  private generation = 0;

  constructor(
    private readonly options: IRenderMime.IRendererOptions,
    private readonly saved: () => SavedWidgets | null,
    private readonly delegate: Delegate,
  ) {
    super();
    this.layout = new PanelLayout();
    this.addClass("mlc-lab-saved-output");
    delegate.renderers.add(this);
  }

  private modelId(): string {
    const source = this.model?.data[WIDGET_VIEW_MIME] as { model_id?: string } | undefined;
    return source?.model_id ?? "";
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.model = model;
    const generation = ++this.generation;
    const id = this.modelId();
    const widgets = this.saved();
    if (widgets && id && widgets.entryOf(id)) {
      // The saved view at once; the live one instead if the kernel turns out to hold this model.
      this.dropInner();
      await this.renderSaved(widgets, id);
      void this.goLive(generation);
      return;
    }
    return this.renderDelegated(generation);
  }

  /** ipywidgets registered another renderer (bound to the kernel's widget manager): use it. */
  delegateChanged(): void {
    if (!this.model || this.isDisposed) return;
    if (this.inner && this.inner.factory === this.delegate.factory) return;
    const generation = ++this.generation;
    if (this.savedShown) void this.goLive(generation);
    else void this.renderDelegated(generation);
  }

  private async renderSaved(widgets: SavedWidgets, id: string): Promise<void> {
    this.cleanup?.();
    this.cleanup = null;
    this.node.replaceChildren();
    this.savedShown = true;
    try {
      this.cleanup = await widgets.render(id, this.node);
    } catch (err) {
      this.node.textContent = `mlc_lab could not show this saved widget: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  private dropInner(): void {
    if (!this.inner) return;
    this.inner.renderer.dispose();
    this.inner = null;
  }

  private dropSaved(): void {
    this.savedShown = false;
    this.cleanup?.();
    this.cleanup = null;
    this.node.replaceChildren();
  }

  private async renderDelegated(generation: number): Promise<void> {
    const factory = this.delegate.factory;
    const model = this.model!;
    if (!factory) {
      // No kernel and not an mlc_lab widget: what JupyterLab shows for it anyway, its text.
      this.dropInner();
      const text = model.data["text/plain"];
      const pre = document.createElement("pre");
      pre.textContent = typeof text === "string" ? text : "";
      this.node.replaceChildren(pre);
      return;
    }
    // the inner renderer first: emptying the node under it would leave Lumino a node to remove
    // that is no longer there ("removeChild ... not a child of this node")
    this.dropInner();
    this.dropSaved();
    const renderer = factory.createRenderer(this.options);
    this.inner = { renderer, factory };
    (this.layout as PanelLayout).addWidget(renderer);
    if (generation !== this.generation) return;
    return renderer.renderModel(model);
  }

  /** Replace the saved view by ipywidgets' live one if the kernel's widget manager holds the model. */
  private async goLive(generation: number): Promise<void> {
    const factory = this.delegate.factory;
    if (!factory || !this.delegate.bound) return;
    const renderer = factory.createRenderer(this.options);
    const pending = managerOf(renderer);
    let live = false;
    if (pending) {
      const manager = await pending;
      await whenRestored(manager);
      try {
        live = Boolean((await manager.get_model(this.modelId()))?.comm_live);
      } catch {
        live = false; // not in the kernel (a new kernel, or the cell was re-run): keep the saved view
      }
    }
    if (!live || generation !== this.generation || this.isDisposed) {
      renderer.dispose();
      return;
    }
    // the inner renderer first: emptying the node under it would leave Lumino a node to remove
    // that is no longer there ("removeChild ... not a child of this node")
    this.dropInner();
    this.dropSaved();
    this.inner = { renderer, factory };
    (this.layout as PanelLayout).addWidget(renderer);
    await renderer.renderModel(this.model!);
  }

  override dispose(): void {
    this.delegate.renderers.delete(this);
    this.cleanup?.();
    this.cleanup = null;
    this.inner = null;
    super.dispose();
  }
}

/** Put the saved-widget renderer in front of a notebook's widget-view renderer, and keep it there. */
export function patchNotebook(panel: NotebookPanelLike): void {
  const rm = panel.content.rendermime as RenderMimeLike & { [PATCHED]?: boolean };
  if (rm[PATCHED]) return;
  rm[PATCHED] = true;
  const delegate = new Delegate();
  const existing = rm.getFactory(WIDGET_VIEW_MIME);
  let cache: { state: SavedState; widgets: SavedWidgets } | null = null;
  const saved = () => {
    const state = notebookWidgetState(panel.context.model);
    if (!state) return null;
    if (!cache || cache.state !== state) cache = { state, widgets: new SavedWidgets(state) };
    return cache.widgets;
  };
  const ours: IRenderMime.IRendererFactory = {
    safe: false,
    mimeTypes: [WIDGET_VIEW_MIME],
    createRenderer: (options) => new SavedWidgetRenderer(options, saved, delegate),
  };
  // At a panel's creation the notebook's registry holds ipywidgets' placeholder (no manager yet).
  if (existing && existing !== ours) delegate.set(existing, false);
  const addFactory = rm.addFactory.bind(rm);
  // ipywidgets registers its bound renderer once a kernel is ready (removing every other renderer
  // of the mime type first): keep it as the delegate, ours in front of it, and tell our renderers.
  rm.addFactory = (factory, rank) => {
    addFactory(factory, rank);
    if (factory !== ours && factory.mimeTypes.includes(WIDGET_VIEW_MIME)) {
      addFactory(ours, -20);
      delegate.set(factory, true);
      // The notebook's widget manager: what JupyterLab's "save widget state" writes, made complete,
      // and keeping the saved models the kernel has not replaced.
      const probe = factory.createRenderer({ mimeType: WIDGET_VIEW_MIME } as IRenderMime.IRendererOptions);
      const manager = managerOf(probe);
      probe.dispose();
      void manager?.then((m) => {
        const widgets = m as unknown as NotebookManagerLike;
        completeWidgetState(widgets);
        keepOpenedModels(widgets);
      });
    }
  };
  addFactory(ours, -20);
}
