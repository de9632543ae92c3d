// The steps this page holds: the `step` trait's bytes of every step it was sent (or that its saved
// record keeps), and their scripts, so that undo, redo, go to step and diffs need no kernel.

import type { AnyModel } from "@anywidget/types";
import { recordData, recordedModel, setHeldSteps } from "../lib/offline";
import type { ExplorerTraits, StepData, StepId } from "../lib/types";
import { readStep } from "./state";

export class HeldSteps {
  private bytes = new Map<string, DataView>();
  readonly scripts = new Map<string, string>(); // step id -> script (immutable per step)

  constructor(private model: AnyModel<ExplorerTraits>) {}

  /** Keep the `step` trait's step (its bytes as sent): the page can show it again by itself. */
  hold(): StepData {
    const raw = this.model.get("step") as unknown;
    const step = readStep(raw as DataView);
    const bytes = raw instanceof DataView ? raw : raw instanceof ArrayBuffer ? new DataView(raw) : null;
    if (bytes && bytes.byteLength) this.bytes.set(String(step.id), bytes);
    setHeldSteps(raw, this.bytes); // what a save made before the kernel records them keeps
    this.scripts.set(String(step.id), step.script);
    return step;
  }

  /** The bytes of step `id` as the `step` trait carries them: held, or read from its record. */
  async stepBytes(id: StepId): Promise<DataView | null> {
    const key = String(id);
    const held = this.bytes.get(key);
    if (held) return held;
    const rec = await recordedModel(this.model, `step:${key}`);
    const data = rec ? await recordData(rec) : undefined;
    if (!data || !data.byteLength || String(readStep(data).id) !== key) return null;
    this.bytes.set(key, data);
    return data;
  }

  /** Why a saved view cannot show a step (its record keeps the last `max_steps`). */
  notRecorded(id: StepId): string {
    const cut = (this.model.get("record_cut") ?? {}) as { max_steps?: number; steps?: number };
    return cut.max_steps
      ? `Step ${String(id)} is not in this saved record: it keeps the last ${cut.max_steps} steps of ${cut.steps}. Re-run the notebook to see it.`
      : `Step ${String(id)} is not in this saved record. Re-run the notebook to see it.`;
  }
}
