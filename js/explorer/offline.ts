// The explorer without a kernel (a saved notebook, a static page): it steps through the steps it
// recorded while it ran (mlc_lab/widgets/explorer.py, Explorer._record_step) — goto, undo, redo,
// the history, diffs against any recorded step — by setting its own `step` trait, as Python would.

import { bufferText } from "../lib/rpc";
import { type OfflineAnswer, type OfflineHandler, recordData, recordedModel, recordedReply } from "../lib/offline";
import type { StepData, StepSummary } from "../lib/types";

interface ExplorerLikeModel {
  get(name: string): any;
  set(name: string, value: unknown): void;
}

const ok = (result: unknown = {}, buffers: DataView[] = []): OfflineAnswer => ({ result, buffers });

function decode(value: unknown): StepData | null {
  if (!value) return null;
  try {
    const text = typeof value === "string" ? value : bufferText(value as DataView);
    return text ? (JSON.parse(text) as StepData) : null;
  } catch {
    return null;
  }
}

export function explorerOffline(model: ExplorerLikeModel): OfflineHandler {
  const steps = new Map<string, { data: DataView; step: StepData }>();
  const load = async (id: unknown) => {
    const key = String(id);
    if (!steps.has(key)) {
      const rec = await recordedModel(model, `step:${key}`);
      const data = rec ? await recordData(rec) : undefined;
      const step = decode(data);
      if (!data || !step) return null;
      steps.set(key, { data, step });
    }
    return steps.get(key)!;
  };
  const recordedIds = () =>
    Object.keys((model.get("_mlc_recorded") ?? {}) as Record<string, string>)
      .filter((k) => k.startsWith("step:"))
      .map((k) => k.slice(5));
  const current = () => decode(model.get("step"));
  const goto = async (id: unknown): Promise<OfflineAnswer | null> => {
    const rec = await load(id);
    if (!rec) return notRecorded(id);
    model.set("step", rec.data);
    return ok({ step: rec.step.id });
  };
  const summaries = async (): Promise<StepSummary[]> => {
    const all = (await Promise.all(recordedIds().map(load))).filter((r) => r !== null);
    return all
      .map(({ step }) => ({ id: step.id, parent: step.parent, kind: step.kind, primitive: step.primitive, label: step.label }))
      .sort((a, b) => a.id - b.id);
  };

  // A step the record left out (it keeps the last `max_steps`): say so, not "needs a kernel".
  const notRecorded = (id: unknown): OfflineAnswer | null => {
    const cut = (model.get("record_cut") ?? {}) as { max_steps?: number; steps?: number };
    if (!cut.max_steps) return null;
    return {
      result: null,
      buffers: [],
      error: { summary: `Step ${String(id)} is not in this saved record: it keeps the last ${cut.max_steps} steps of ${cut.steps}. Re-run the notebook to see it.`, type: "not_recorded" },
    };
  };

  return async (method, params) => {
    switch (method) {
      case "access_footprint":
      case "access_gpu_stats": {
        // recorded under the step they were asked at (the panel asks about "the current step")
        const cur = current();
        return cur ? recordedReply(model, method, { ...params, step: cur.id }) : null;
      }
      case "history":
        return ok({ from: 0, steps: await summaries() });
      case "goto":
        return goto(params.step);
      case "undo": {
        const cur = current();
        return cur && cur.parent !== null && cur.parent !== undefined ? goto(cur.parent) : null;
      }
      case "redo": {
        const cur = current();
        if (!cur) return null;
        const children = (await summaries()).filter((s) => String(s.parent) === String(cur.id));
        return children.length ? goto(children[children.length - 1].id) : null;
      }
      case "script_at": {
        const rec = await load(params.step);
        if (!rec) return null;
        const bytes = new TextEncoder().encode(rec.step.script);
        return ok({ bytes: bytes.length, step: rec.step.id }, [new DataView(bytes.buffer)]);
      }
      case "select_name": {
        const name = params.name;
        model.set("selection", typeof name === "string" && name ? { kind: params.kind ?? "loop", name } : {});
        return ok();
      }
      case "clear_error":
        model.set("error", {});
        return ok();
      default:
        return null;
    }
  };
}
