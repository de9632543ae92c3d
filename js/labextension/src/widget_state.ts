// What JupyterLab's own widget-state saving ("Save Widget State Automatically", then save) writes
// for mlc_lab widgets, made complete. That saving serialises the page's models (ipywidgets'
// get_state_sync), which loses two things a saved view needs:
// - binary traits of models without serializers: ipywidgets' base WidgetModel copies attributes
//   through JSON, so the bytes of every model-only `Recorded` child (the explorer's recorded steps,
//   the memory view's recorded footprints) are written as `{}`; a saved view then has no steps, no
//   heatmaps, and failed to decompress the empty records ("Failed to fetch").
// - the explorer's `history` trait is the last delta Python sent (`{"from": 9, "steps": [...]}`),
//   not the whole history: Python sends the whole only when a view opens or a page reloads.
// - the records of the newest steps: the kernel records steps 2 s after the last change (off the
//   click's path), so a save right after a burst of clicks would lack the burst's steps.
// So this wraps one notebook's widget manager: it keeps each explorer's whole history from the
// deltas it sees, and its get_state_sync puts the missing bytes back (as base64 buffers, where
// nbclient would have written them), the whole history in place of the delta, and a record of each
// step the page holds that is newer than the newest the kernel recorded.

import { heldSteps } from "../../lib/offline";
import type { SavedBuffer, SavedModelState } from "../../lib/saved";

interface ModelLike {
  model_id: string;
  attributes: Record<string, unknown>;
  get(name: string): unknown;
  on(event: string, handler: () => void): void;
  once?(event: string, handler: () => void): void;
}

export interface ManagerLike {
  get_state_sync(options?: Record<string, unknown>): { state?: Record<string, SavedModelState> } & Record<string, unknown>;
  register_model(id: string, model: Promise<ModelLike>): void;
  _modelsSync?: Map<string, ModelLike>;
}

interface Summary {
  id: number | string;
  [k: string]: unknown;
}

const PATCHED = Symbol("mlc-lab-complete-widget-state");

function isBinary(value: unknown): value is ArrayBuffer | ArrayBufferView {
  return value instanceof ArrayBuffer || ArrayBuffer.isView(value);
}

function base64(value: ArrayBuffer | ArrayBufferView): string {
  const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

/** Every binary value under ``value`` with its path (as ipywidgets' remove_buffers finds them). */
function binaries(value: unknown, path: Array<string | number>, out: Array<[Array<string | number>, ArrayBuffer | ArrayBufferView]>): void {
  if (isBinary(value)) out.push([path, value]);
  else if (Array.isArray(value)) value.forEach((v, i) => binaries(v, [...path, i], out));
  else if (value && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype)
    for (const [k, v] of Object.entries(value)) binaries(v, [...path, k], out);
}

function setAt(state: Record<string, unknown>, path: Array<string | number>, value: unknown): void {
  let obj: any = state;
  for (const key of path.slice(0, -1)) {
    if (obj[key] === null || typeof obj[key] !== "object") return;
    obj = obj[key];
  }
  obj[path[path.length - 1]] = value;
}

/** The whole history of one explorer model, grown from the deltas of its `history` trait. */
class WholeHistory {
  private steps: Summary[] | null = [];
  merge(delta: unknown): void {
    const d = delta as { from?: unknown; steps?: unknown } | null;
    if (!d || !Array.isArray(d.steps)) return;
    const from = typeof d.from === "number" ? d.from : 0;
    if (from === 0) this.steps = [...(d.steps as Summary[])];
    else if (this.steps && from <= this.steps.length) this.steps = [...this.steps.slice(0, from), ...(d.steps as Summary[])];
    else this.steps = null; // a delta we did not see: leave the trait as it is (the view asks Python)
  }
  get whole(): { from: 0; steps: Summary[] } | null {
    return this.steps ? { from: 0, steps: this.steps } : null;
  }
}

/** Make ``manager``'s get_state_sync (what JupyterLab saves) complete for mlc_lab's models. */
export function completeWidgetState(manager: ManagerLike): void {
  const m = manager as ManagerLike & { [PATCHED]?: boolean };
  if (m[PATCHED]) return;
  m[PATCHED] = true;
  const models = new Map<string, ModelLike>();
  const histories = new Map<string, WholeHistory>();
  const track = (model: ModelLike) => {
    if (!model || models.has(model.model_id)) return;
    models.set(model.model_id, model);
    model.once?.("comm:close", () => {
      models.delete(model.model_id);
      histories.delete(model.model_id);
    });
    if (model.get("_mlc_entry") !== "explorer") return;
    const history = new WholeHistory();
    histories.set(model.model_id, history);
    history.merge(model.get("history"));
    model.on("change:history", () => history.merge(model.get("history")));
  };
  const register = manager.register_model.bind(manager);
  manager.register_model = (id, promise) => {
    register(id, promise);
    promise.then(track, () => undefined);
  };
  for (const model of manager._modelsSync?.values() ?? []) track(model);

  const getState = manager.get_state_sync.bind(manager);
  manager.get_state_sync = (options) => {
    const result = getState(options);
    for (const [id, entry] of Object.entries(result.state ?? {})) {
      const model = models.get(id);
      if (!model || !entry?.state) continue;
      const have = new Set((entry.buffers ?? []).map((b) => JSON.stringify(b.path)));
      const found: Array<[Array<string | number>, ArrayBuffer | ArrayBufferView]> = [];
      for (const [key, value] of Object.entries(model.attributes)) if (key in entry.state) binaries(value, [key], found);
      const added: SavedBuffer[] = [];
      for (const [path, value] of found) {
        if (have.has(JSON.stringify(path))) continue;
        setAt(entry.state, path, null);
        added.push({ path, encoding: "base64", data: base64(value) });
      }
      if (added.length) entry.buffers = [...(entry.buffers ?? []), ...added];
      const whole = histories.get(id)?.whole;
      if (whole && "history" in entry.state) entry.state.history = whole;
    }
    for (const id of histories.keys()) recordNewestSteps(result.state ?? {}, id, heldSteps(models.get(id)?.get("step")));
    return result;
  };
}

// At most this many steps are recorded by the page in one save (the kernel keeps up to 200 in all).
const PAGE_RECORDS = 50;

/** Add to a saved state a record (a model-only `Recorded`, as mlc_lab/widgets/_base.py makes them) of
 *  each step of explorer ``id`` that the page holds and that is newer than every step the kernel
 *  recorded; older steps missing from the records were dropped by the kernel on purpose. */
function recordNewestSteps(state: Record<string, SavedModelState>, id: string, held: ReadonlyMap<string, DataView> | undefined): void {
  const entry = state[id]?.state as Record<string, unknown> | undefined;
  const recorded = entry?._mlc_recorded as Record<string, string> | undefined;
  if (!entry || !recorded || !held?.size) return;
  const ids = Object.keys(recorded).filter((k) => k.startsWith("step:")).map((k) => Number(k.slice(5)));
  // a record the kernel made: its model's name and module, which the new ones copy
  const template = Object.values(state).find((m) => typeof m.state?.key === "string" && String(m.state.key).startsWith("step:"));
  if (!ids.length || !template) return;
  const newest = Math.max(...ids);
  const missing = [...held.keys()].filter((k) => Number(k) > newest).slice(-PAGE_RECORDS);
  const added: Record<string, string> = {};
  for (const step of missing) {
    const modelId = `mlc${Date.now().toString(16)}${Math.random().toString(16).slice(2, 10)}${step}`;
    const { buffers: _b, state: base, ...meta } = template;
    state[modelId] = {
      ...meta,
      state: { ...base, key: `step:${step}`, result: "null", data: null, buffers: [], ok: true, encoding: "" },
      buffers: [{ path: ["data"], encoding: "base64", data: base64(held.get(step)!) }],
    };
    added[`step:${step}`] = `IPY_MODEL_${modelId}`;
  }
  if (missing.length) entry._mlc_recorded = { ...recorded, ...added };
}
