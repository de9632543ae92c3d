// Opening a notebook is no change to it. When its kernel starts, JupyterLab fills in the notebook's
// `language_info` from the kernel (the Python version, the lexer, the file extension) and counts that
// as a change: a lecture notebook, shipped with `{"name": "python"}` (the version differs from machine
// to machine), asked to be saved as soon as it was opened, before anything was done in it. This keeps
// a notebook unchanged while what differs from its last clean content is only what the kernel fills in;
// the next save writes the kernel's language_info with the rest.

interface Signal<T> {
  connect(fn: (sender: unknown, args: T) => void): unknown;
}

export interface CleanModelLike {
  dirty: boolean;
  stateChanged: Signal<{ name: string; newValue: unknown }>;
  toJSON(): unknown;
}

export interface CleanPanelLike {
  context: { ready: Promise<unknown>; model: CleanModelLike | null };
}

/** Metadata the kernel fills in, not the person. */
const KERNEL_FILLS = ["language_info"];

/** The notebook's content but for what the kernel fills in. */
function content(model: CleanModelLike): string {
  const nb = (model.toJSON() ?? {}) as { metadata?: Record<string, unknown> };
  const metadata = { ...(nb.metadata ?? {}) };
  for (const key of KERNEL_FILLS) delete metadata[key];
  return JSON.stringify({ ...nb, metadata });
}

/** Keep `model` clean while it differs from its last clean content only in what the kernel fills in
 *  (compared when it is marked changed: once per save, whatever the order of JupyterLab's signals). */
export function keepCleanOnKernelInfo(model: CleanModelLike): void {
  let clean: string | null = model.dirty ? null : content(model);
  model.stateChanged.connect((_sender, change) => {
    if (change.name !== "dirty") return;
    if (change.newValue === false) clean = content(model); // opened, or saved: this is its content
    else if (clean !== null && content(model) === clean) model.dirty = false;
  });
}

/** Every notebook panel, once its model is loaded. */
export function keepPanelClean(panel: CleanPanelLike): void {
  void panel.context.ready.then(() => {
    if (panel.context.model) keepCleanOnKernelInfo(panel.context.model);
  });
}
