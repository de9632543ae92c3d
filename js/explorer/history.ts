// The step tree as rows to draw: pre-order, with depth, the current step and the path to it marked,
// failed attempts hanging under the step they were tried from.

import type { FailureInfo, StepId, StepInfo } from "../lib/types";

export interface HistoryRow {
  kind: "step" | "failure";
  id: StepId;
  depth: number;
  label: string;
  current: boolean;
  onPath: boolean; // an ancestor of the current step (what undo walks back through)
  branch: boolean; // starts a sibling branch
  stepKind?: string; // "decision", "replay", ... (plain applies have none shown)
  failure?: FailureInfo;
}

const same = (a: StepId | null | undefined, b: StepId | null | undefined) => a !== null && a !== undefined && b !== null && b !== undefined && String(a) === String(b);

export function historyRows(steps: StepInfo[], failures: FailureInfo[], current: StepId | null): HistoryRow[] {
  const byId = new Map<string, StepInfo>();
  for (const s of steps) byId.set(String(s.id), s);
  const path = new Set<string>();
  for (let s = current === null ? undefined : byId.get(String(current)); s; s = s.parent === null ? undefined : byId.get(String(s.parent))) path.add(String(s.id));

  const failuresAt = new Map<string, FailureInfo[]>();
  for (const f of failures) {
    const k = String(f.parent);
    failuresAt.set(k, [...(failuresAt.get(k) ?? []), f]);
  }

  const rows: HistoryRow[] = [];
  const roots = steps.filter((s) => s.parent === null || s.parent === undefined || !byId.has(String(s.parent)));
  const visit = (step: StepInfo, depth: number, branch: boolean) => {
    rows.push({
      kind: "step",
      id: step.id,
      depth,
      label: step.label || step.primitive || "original program",
      current: same(step.id, current),
      onPath: path.has(String(step.id)),
      branch,
      stepKind: step.kind && step.kind !== "apply" && step.kind !== "root" ? step.kind : undefined,
    });
    for (const f of failuresAt.get(String(step.id)) ?? []) {
      rows.push({ kind: "failure", id: f.id, depth: depth + 1, label: f.label, current: false, onPath: false, branch: false, failure: f });
    }
    const kids = (step.children ?? []).map((c) => byId.get(String(c))).filter((c): c is StepInfo => !!c);
    // The first child continues at the same depth (a linear history reads as a list); later children are branches.
    kids.forEach((child, i) => visit(child, i === 0 ? depth : depth + 1, i > 0));
  };
  for (const r of roots) visit(r, 0, false);
  return rows;
}

/**
 * Steps a diff can be taken against, in two groups: the path back to the original program (parent
 * first, as undo would walk it), then every other step in the order the History pane lists them.
 */
export function diffBaseGroups(steps: StepInfo[], current: StepId | null): { path: StepInfo[]; others: StepInfo[] } {
  const byId = new Map(steps.map((s) => [String(s.id), s]));
  const cur = current === null ? undefined : byId.get(String(current));
  const path: StepInfo[] = [];
  for (let s = cur?.parent == null ? undefined : byId.get(String(cur.parent)); s; s = s.parent == null ? undefined : byId.get(String(s.parent))) path.push(s);
  const onPath = new Set(path.map((s) => String(s.id)));
  const others = historyRows(steps, [], current)
    .filter((r) => !r.current && !onPath.has(String(r.id)))
    .map((r) => byId.get(String(r.id)))
    .filter((s): s is StepInfo => !!s);
  return { path, others };
}

/** The same steps as one list: the path first (parent first), then the others as History lists them. */
export function diffBases(steps: StepInfo[], current: StepId | null): StepInfo[] {
  const { path, others } = diffBaseGroups(steps, current);
  return [...path, ...others];
}

/**
 * Where redo goes from `current`: the child that was current last (`visited`: parent -> child),
 * else the newest child; null when there is none. The Session's tree follows the same rule
 * (History.redo_target, mlc_lab/core/history.py); js/__tests__/history_rule.test.ts,
 * tests/unit/test_history.py (History alone) and tests/unit/test_history_rule.py (the Session)
 * drive all three through one recorded walk (js/__tests__/fixtures/history_walk.json).
 */
export function redoTarget(steps: StepInfo[], current: StepId | null, visited: ReadonlyMap<string, StepId>): StepId | null {
  if (current === null) return null;
  const cur = steps.find((s) => String(s.id) === String(current));
  const children = cur?.children ?? [];
  if (!children.length) return null;
  const last = visited.get(String(current));
  return last !== undefined && children.some((c) => String(c) === String(last)) ? last : children[children.length - 1];
}
