// What the explorer's front end knows of the session: the current step (one StepView, sent whole
// as the `step` trait) and the step tree, grown by the deltas Python sends in the `history` trait.

import { parseJsonBuffer } from "../lib/rpc";
import type { Decision, HistoryDelta, LoopTree, StepData, StepInfo, StepSummary } from "../lib/types";

const EMPTY_STEP: StepData = {
  id: 0,
  parent: null,
  kind: "root",
  primitive: null,
  label: "",
  script: "",
  loop_tree: { func: "", functions: [] },
  trace: "",
  changed_lines: [],
  created: [],
  decisions: [],
  measurement: null,
};

/** The `step` trait (UTF-8 JSON of a StepView) as an object; an empty trait reads as an empty step. */
export function readStep(value: DataView | ArrayBuffer | string | null | undefined): StepData {
  const data = parseJsonBuffer<Partial<StepData>>(value);
  return { ...EMPTY_STEP, ...data, loop_tree: (data.loop_tree as LoopTree) ?? EMPTY_STEP.loop_tree, decisions: (data.decisions as Decision[]) ?? [] };
}

/** The step tree seen so far. Deltas are idempotent: the same delta twice leaves the same list. */
export class History {
  private list: StepSummary[] = [];
  private withChildren: StepInfo[] | null = null;

  /** Apply `{from, steps}`; false when it leaves a gap (ask Python for the whole history). */
  apply(delta: HistoryDelta | Record<string, never> | null | undefined): boolean {
    if (!delta || !("steps" in delta) || !Array.isArray(delta.steps)) return true;
    const from = typeof delta.from === "number" ? delta.from : 0;
    if (from > this.list.length) return false;
    this.list = [...this.list.slice(0, from), ...delta.steps];
    this.withChildren = null;
    return true;
  }

  get length(): number {
    return this.list.length;
  }

  /** Every step with its children (in the order they were made). */
  steps(): StepInfo[] {
    if (this.withChildren) return this.withChildren;
    const kids = new Map<string, Array<number | string>>();
    for (const s of this.list) {
      if (s.parent === null || s.parent === undefined) continue;
      const k = String(s.parent);
      kids.set(k, [...(kids.get(k) ?? []), s.id]);
    }
    this.withChildren = this.list.map((s) => ({ ...s, primitive: s.primitive ?? "", children: kids.get(String(s.id)) ?? [] }));
    return this.withChildren;
  }

  hasChildren(id: number | string | null): boolean {
    return id !== null && this.list.some((s) => s.parent !== null && String(s.parent) === String(id));
  }
}
