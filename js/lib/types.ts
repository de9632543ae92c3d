// Mirrors of the plain data that mlc_lab's Python side puts into widget traits.
// Python: mlc_lab/core/session.py (loop_tree, steps, decisions) and mlc_lab/widgets/explorer.py.

export type StepId = number | string;

export type LoopKind = "serial" | "parallel" | "vectorized" | "unrolled" | "thread_binding";

export interface BufferInfo {
  name: string;
  shape: number[];
  dtype: string;
  scope: string;
}

export interface IterVar {
  name: string;
  kind: string; // "spatial" | "reduce" | "scan" | "opaque" ...
  extent: number | string;
  binding: string;
}

export interface LoopNode {
  kind: "loop";
  name: string;
  qualified: string;
  extent: number | string;
  min: number | string;
  loop_kind: LoopKind;
  thread: string | null;
  annotations: Record<string, unknown>;
  line: number;
  end_line: number;
  children: TreeNode[];
}

export interface BlockNode {
  kind: "block";
  name: string;
  qualified?: string;
  iter_vars: IterVar[];
  reads: string[];
  writes: string[];
  has_init: boolean;
  predicate?: string | null; // T.where(...) guard, e.g. after a non-dividing split
  alloc_buffers: Array<BufferInfo | string>;
  annotations: Record<string, unknown>;
  line: number;
  end_line: number;
  children: TreeNode[];
}

export interface FuncNode {
  kind: "func";
  name: string;
  buffers: BufferInfo[];
  line?: number;
  end_line?: number;
  children: TreeNode[];
}

export type TreeNode = LoopNode | BlockNode;
export type AnyNode = TreeNode | FuncNode;

export interface LoopTree {
  func: string;
  functions: FuncNode[];
}

export interface StepInfo {
  id: StepId;
  parent: StepId | null;
  children: StepId[];
  primitive: string;
  label: string;
  kind?: string; // "root" | "apply" | "decision" | "replay" | "run"
}

/** A history entry as Python sends it (mlc_lab.core.model.StepSummary). */
export interface StepSummary {
  id: number;
  parent: number | null;
  kind: string;
  primitive: string | null;
  label: string;
}

/** The `history` trait: the summaries of steps `from`, `from + 1`, ... (from 0: the whole list). */
export interface HistoryDelta {
  from: number;
  steps: StepSummary[];
}

/** The `step` trait, decoded (mlc_lab.core.model.StepView.to_json). */
export interface StepData extends StepSummary {
  script: string;
  loop_tree: LoopTree;
  trace: string;
  changed_lines: number[];
  created: string[];
  decisions: Decision[];
  measurement: unknown;
}

export interface FailureInfo {
  id: number;
  parent: StepId | null; // the step the attempt was made from
  primitive: string;
  label: string;
  summary: string;
  detail: string;
  involved: string[];
}

export interface Decision {
  index: number;
  kind: "SamplePerfectTile" | "SampleCategorical" | string;
  value: unknown;
  choices: unknown[];
  loop: string | null;
  extent: number | null;
}

export interface ExplorerError {
  source?: string; // "apply" | "replay" | "decision" | "rpc"
  primitive?: string;
  summary: string;
  detail?: string;
  involved?: string[];
  line?: number | null;
}

export interface Selection {
  kind: "loop" | "block" | "func";
  name: string; // qualified name when the node has one
}

/** The synced traits of mlc_lab.widgets.Explorer. */
export interface ExplorerModel {
  func: string;
  step: DataView | ArrayBuffer | null; // UTF-8 JSON of the current StepView (StepData)
  history: HistoryDelta | Record<string, never>;
  selection: Selection | Record<string, never>;
  error: ExplorerError | Record<string, never>;
  failures: FailureInfo[];
  height: string;
}
