// What the explorer's front end knows of the session: the current step (one StepView, sent whole
// as the `step` trait) and the step tree, grown by the deltas Python sends in the `history` trait.

import { parseJsonBuffer } from "../lib/rpc";
import type { Decision, HistoryDelta, LoopTree, StepData, StepId, StepInfo, StepSummary } from "../lib/types";
import { redoTarget } from "./history";

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
};

/** The `step` trait (UTF-8 JSON of a StepView) as an object; an empty trait reads as an empty step. */
export function readStep(value: DataView | ArrayBuffer | string | null | undefined): StepData {
  const data = parseJsonBuffer<Partial<StepData>>(value);
  return { ...EMPTY_STEP, ...data, loop_tree: (data.loop_tree as LoopTree) ?? EMPTY_STEP.loop_tree, decisions: (data.decisions as Decision[]) ?? [] };
}

/** Whether two steps are one: a step never changes once made, so its id says. */
export function sameStep(a: Pick<StepData, "id">, b: Pick<StepData, "id">): boolean {
  return a.id === b.id;
}

/** Whether two steps' sampled decisions read the same (what a redraw of the decisions would show). */
export function sameDecisions(a: readonly Decision[], b: readonly Decision[]): boolean {
  return a.length === b.length && a.every((d, i) => samePlain(d, b[i]));
}

/** Structural equality of plain JSON data (numbers, text, lists, objects), key order aside. */
function samePlain(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  const bo = b as Record<string, unknown>;
  return ka.length === kb.length && ka.every((k) => k in bo && samePlain((a as Record<string, unknown>)[k], bo[k]));
}

/** The step tree seen so far. Deltas are idempotent: the same delta twice leaves the same list.
 * It also keeps, per step, the child that was current last: where redo goes (see redoTarget). */
export class History {
  private list: StepSummary[] = [];
  private withChildren: StepInfo[] | null = null;
  private readonly visited = new Map<string, StepId>();

  /** Apply `{from, steps}`; false when it leaves a gap (ask Python for the whole history). */
  apply(delta: HistoryDelta | Record<string, never> | null | undefined): boolean {
    if (!delta || !("steps" in delta) || !Array.isArray(delta.steps)) return true;
    const from = typeof delta.from === "number" ? delta.from : 0;
    if (from > this.list.length) return false;
    const known = this.list.length;
    this.list = [...this.list.slice(0, from), ...delta.steps];
    const visited = (delta as { visited?: Record<string, StepId> }).visited;
    if (from === 0 && visited) {
      // the whole history (opening, a reload): the Session says where redo goes from each step
      this.visited.clear();
      for (const [parent, child] of Object.entries(visited)) this.visited.set(parent, child);
    }
    // a new step is the child visited last of its parent (as the Session's _add_step)
    for (const s of delta.steps.slice(Math.max(0, known - from))) if (s.parent !== null && s.parent !== undefined) this.visited.set(String(s.parent), s.id);
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

  /** The page shows `id` now (whoever moved there): redo from its parent comes back to it. */
  visit(id: StepId | null): void {
    if (id === null) return;
    const s = this.list.find((x) => String(x.id) === String(id));
    if (s && s.parent !== null && s.parent !== undefined) this.visited.set(String(s.parent), s.id);
  }

  /** Where redo goes from `current` (null: nothing to redo). */
  redoTarget(current: StepId | null): StepId | null {
    return redoTarget(this.steps(), current, this.visited);
  }

  hasChildren(id: number | string | null): boolean {
    return id !== null && this.list.some((s) => s.parent !== null && String(s.parent) === String(id));
  }
}
