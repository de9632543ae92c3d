// The widget models a notebook was opened with stay in its next save until a kernel replaces them.
// JupyterLab's widget manager saves only the models its kernel holds (comm_live): a notebook
// reopened after its kernel was shut down gets a fresh kernel that holds none, so with "Save Widget
// State Automatically" on, the next save or autosave wrote 0 models and the next open showed "model
// not found" (issue 27). Worse, restoring the saved models at open registered each of them, which
// marks the notebook changed, so the autosave wiped them with no action from the student.
// So this wraps one notebook's widget manager: what it saves is the kernel's models plus each model
// of the notebook's current widget state (as opened, or as last saved) that an output of the notebook
// still shows, directly or through another kept model (a Box's children, a slider's layout, an
// explorer's records); a model the kernel holds wins. A model is "replaced" once no output shows it
// (the cell was re-run or cleared), and is then dropped. Restoring the saved models marks nothing.

import { WIDGET_STATE_MIME, type SavedModelState, type SavedState } from "../../lib/saved";
import type { ManagerLike } from "./widget_state";

/** What this needs of a notebook's model (JupyterLab's NotebookModel). */
export interface NotebookModelLike {
  getMetadata?(key: string): unknown;
  metadata?: { get?(key: string): unknown };
  cells?: Iterable<{ type?: string; toJSON?(): unknown }>;
}

/** A notebook's widget manager as ipywidgets' LabWidgetManager is (the parts used here). */
export interface NotebookManagerLike extends ManagerLike {
  context?: { model?: NotebookModelLike | null } | null;
  setDirty?(): void;
  _loadFromNotebook?(model: unknown): Promise<void>;
}

const PATCHED = Symbol("mlc-lab-kept-models");
// How one model names another: ipywidgets' "IPY_MODEL_<id>" and anywidget's "anywidget:<id>" (the
// FrontEnd model holding mlc_lab's code, a dashboard's explorer).
const MODEL_REFS = ["IPY_MODEL_", "anywidget:"];
const MAX_ID = 200; // longer strings are content (code, text), never a model id

/** The widget state saved in a notebook's metadata, or null. */
export function notebookWidgetState(model: NotebookModelLike | null | undefined): SavedState | null {
  const meta = (model?.getMetadata ? model.getMetadata("widgets") : model?.metadata?.get?.("widgets")) as
    | Record<string, { state?: SavedState }>
    | undefined;
  const state = meta?.[WIDGET_STATE_MIME]?.state;
  return state && typeof state === "object" ? state : null;
}

/** The outputs of a notebook's code cells, as nbformat writes them. */
export function notebookOutputs(model: NotebookModelLike | null | undefined): unknown[] {
  const outputs: unknown[] = [];
  for (const cell of model?.cells ?? []) {
    if (cell.type !== "code" || !cell.toJSON) continue;
    outputs.push((cell.toJSON() as { outputs?: unknown }).outputs ?? []);
  }
  return outputs;
}

/** The short strings under ``value`` (where model ids are: bare in a widget-view output, as a
 *  reference in a widget's state), as ids. */
function referencedIds(value: unknown, out: Set<string>): void {
  if (typeof value === "string") {
    if (value.length > MAX_ID) return;
    const ref = MODEL_REFS.find((p) => value.startsWith(p));
    out.add(ref ? value.slice(ref.length) : value);
  } else if (Array.isArray(value)) for (const v of value) referencedIds(v, out);
  else if (value && typeof value === "object") for (const v of Object.values(value)) referencedIds(v, out);
}

/** Add to ``live`` (the models a kernel holds, as they are about to be saved) each model of ``saved``
 *  that ``outputs`` show, directly or through a model added, and that ``live`` lacks. Returns the ids
 *  added. The entries are copied as they were saved (their buffers included). */
export function keepSavedModels(live: Record<string, SavedModelState>, saved: SavedState | null, outputs: unknown): string[] {
  if (!saved) return [];
  const added: string[] = [];
  const pending: unknown[] = [outputs];
  while (pending.length) {
    const ids = new Set<string>();
    referencedIds(pending.pop(), ids);
    for (const id of ids) {
      if (!Object.prototype.hasOwnProperty.call(saved, id) || Object.prototype.hasOwnProperty.call(live, id)) continue;
      live[id] = saved[id];
      added.push(id);
      pending.push(saved[id].state);
    }
  }
  return added;
}

/** Make ``manager``'s saves keep the saved models its notebook's outputs still show, and its
 *  restoring of them at open leave the notebook unchanged. */
export function keepOpenedModels(manager: NotebookManagerLike): void {
  const m = manager as NotebookManagerLike & { [PATCHED]?: boolean };
  if (m[PATCHED]) return;
  m[PATCHED] = true;

  const notebook = () => manager.context?.model ?? null;
  const getState = manager.get_state_sync.bind(manager);
  manager.get_state_sync = (options) => {
    const result = getState(options);
    const model = notebook();
    if (model) keepSavedModels((result.state ??= {}), notebookWidgetState(model), notebookOutputs(model));
    return result;
  };

  // ipywidgets marks the notebook changed for every model it registers; at open that is each saved
  // model it restores, which changes nothing in the file.
  const setDirty = manager.setDirty?.bind(manager);
  const load = manager._loadFromNotebook?.bind(manager);
  if (!setDirty || !load) return;
  let restoring = 0;
  manager.setDirty = () => {
    if (!restoring) setDirty();
  };
  manager._loadFromNotebook = async (model) => {
    restoring++;
    try {
      await load(model);
    } finally {
      restoring--;
    }
  };
}
