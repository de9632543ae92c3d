// Saved mlc_lab widgets in a notebook render without a kernel. JupyterLab's widget manager loads a
// notebook's saved widget state only once a kernel is connected (with none, every saved widget stays
// text; with one, a saved model the new kernel does not know is "model not found"). This patch puts
// a renderer in front of the widget-view mime type in each notebook: an output whose model is an
// mlc_lab widget saved in the notebook's metadata renders from that state (lib/saved.ts), read-only
// where it needs Python; anything else goes to ipywidgets' own renderer, as before.
// Like ipywidgets' renderer it is not "safe": it only runs in trusted notebooks.

import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { PanelLayout, Widget } from "@lumino/widgets";
import { SavedWidgets, WIDGET_STATE_MIME, WIDGET_VIEW_MIME, type SavedState } from "../../lib/saved";

interface RenderMimeLike {
  addFactory(factory: IRenderMime.IRendererFactory, rank?: number): void;
  getFactory(mimeType: string): IRenderMime.IRendererFactory | undefined;
}

interface NotebookPanelLike {
  content: { rendermime: RenderMimeLike };
  context: { model: { getMetadata?: (key: string) => any; metadata?: any } | null };
}

const PATCHED = Symbol("mlc-lab-saved-outputs");

function savedStateOf(panel: NotebookPanelLike): SavedState | null {
  const model = panel.context.model as any;
  const meta = model?.getMetadata ? model.getMetadata("widgets") : model?.metadata?.get?.("widgets");
  return (meta?.[WIDGET_STATE_MIME]?.state as SavedState) ?? null;
}

class SavedWidgetRenderer extends Widget implements IRenderMime.IRenderer {
  private cleanup: (() => void) | null = null;

  constructor(
    private readonly options: IRenderMime.IRendererOptions,
    private readonly saved: () => SavedWidgets | null,
    private readonly delegate: () => IRenderMime.IRendererFactory | null,
  ) {
    super();
    this.layout = new PanelLayout();
    this.addClass("mlc-lab-saved-output");
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const source = model.data[WIDGET_VIEW_MIME] as { model_id?: string } | undefined;
    const id = source?.model_id ?? "";
    const widgets = this.saved();
    if (widgets && id && widgets.entryOf(id)) {
      this.cleanup?.();
      this.node.replaceChildren();
      try {
        this.cleanup = await widgets.render(id, this.node);
      } catch (err) {
        this.node.textContent = `mlc_lab could not show this saved widget: ${err instanceof Error ? err.message : String(err)}`;
      }
      return;
    }
    const factory = this.delegate();
    if (factory) {
      const inner = factory.createRenderer(this.options);
      (this.layout as PanelLayout).addWidget(inner);
      return inner.renderModel(model);
    }
    // No kernel and not an mlc_lab widget: what JupyterLab shows for it anyway, its text.
    const text = model.data["text/plain"];
    const pre = document.createElement("pre");
    pre.textContent = typeof text === "string" ? text : "";
    this.node.replaceChildren(pre);
  }

  override dispose(): void {
    this.cleanup?.();
    this.cleanup = null;
    super.dispose();
  }
}

/** Put the saved-widget renderer in front of a notebook's widget-view renderer, and keep it there. */
export function patchNotebook(panel: NotebookPanelLike): void {
  const rm = panel.content.rendermime as RenderMimeLike & { [PATCHED]?: boolean };
  if (rm[PATCHED]) return;
  rm[PATCHED] = true;
  let delegate: IRenderMime.IRendererFactory | null = null;
  const existing = rm.getFactory(WIDGET_VIEW_MIME);
  let cache: { state: SavedState; widgets: SavedWidgets } | null = null;
  const saved = () => {
    const state = savedStateOf(panel);
    if (!state) return null;
    if (!cache || cache.state !== state) cache = { state, widgets: new SavedWidgets(state) };
    return cache.widgets;
  };
  const ours: IRenderMime.IRendererFactory = {
    safe: false,
    mimeTypes: [WIDGET_VIEW_MIME],
    createRenderer: (options) => new SavedWidgetRenderer(options, saved, () => delegate),
  };
  if (existing && existing !== ours) delegate = existing;
  const addFactory = rm.addFactory.bind(rm);
  // ipywidgets registers its renderer once a kernel is ready (removing every other renderer of the
  // mime type first): keep it as the delegate, and ours in front of it.
  rm.addFactory = (factory, rank) => {
    addFactory(factory, rank);
    if (factory !== ours && factory.mimeTypes.includes(WIDGET_VIEW_MIME)) {
      delegate = factory;
      addFactory(ours, -20);
    }
  };
  addFactory(ours, -20);
}
