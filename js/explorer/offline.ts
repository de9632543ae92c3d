// The explorer without a kernel (a saved notebook, a static page): the requests it still sends
// there, answered from what it recorded while it ran (mlc_lab/widgets/explorer.py, _record_step).
// Undo, redo, go to step and diffs are not requests: the view answers them from the steps it
// holds, live and offline alike (js/explorer/view.ts, moveTo).

import { bufferText } from "../lib/rpc";
import { type OfflineAnswer, type OfflineHandler, recordData, recordedModel, recordedReply } from "../lib/offline";
import { STEP_IMPLIED } from "../lib/model";
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
  const summaries = async (): Promise<StepSummary[]> => {
    const all = (await Promise.all(recordedIds().map(load))).filter((r) => r !== null);
    return all
      .map(({ step }) => ({ id: step.id, parent: step.parent, kind: step.kind, primitive: step.primitive, label: step.label }))
      .sort((a, b) => a.id - b.id);
  };

  return async (method, params) => {
    if (STEP_IMPLIED.has(method)) {
      // recorded under the step they were asked at (the panel asks about "the current step"):
      // which requests those are, the table says (mlc_lab/model/requests.py, step_implied)
      const cur = current();
      return cur ? recordedReply(model, method, { ...params, step: cur.id }) : null;
    }
    switch (method) {
      case "history":
        return ok({ from: 0, steps: await summaries() });
      case "clear_error":
        model.set("error", {});
        return ok();
      default:
        return null;
    }
  };
}
