// Generated from mlc_lab/model/steps.py by `python -m mlc_lab.core.model_ts`: do not edit.

export interface BufferInfo {
  name: string;
  shape: number[] | string;
  dtype: string;
  scope: string;
  origin: string;
}

export interface IterVar {
  name: string;
  kind: string;
  extent: number | string | null;
  binding: string;
}

export interface LoopNode {
  kind: "loop";
  name: string;
  qualified: string;
  extent: number | string;
  min: number | string;
  loop_kind: "serial" | "parallel" | "vectorized" | "unrolled" | "thread_binding";
  thread: string | null;
  annotations: Record<string, unknown>;
  line: number;
  end_line: number;
  children: (LoopNode | BlockNode)[];
  in_init?: boolean;
}

export interface BlockNode {
  kind: "block";
  name: string;
  iter_vars: IterVar[];
  reads: string[];
  writes: string[];
  has_init: boolean;
  predicate: string | null;
  alloc_buffers: string[];
  annotations: Record<string, unknown>;
  line: number;
  end_line: number;
  children: (LoopNode | BlockNode)[];
  in_init?: boolean;
}

export interface FuncNode {
  kind: "func";
  name: string;
  buffers: BufferInfo[];
  children: (LoopNode | BlockNode)[];
}

/** ``{"func": focus function, "functions": [FuncNode, ...]}``: the loop nest of one step. */
export interface LoopTree {
  func: string | null;
  functions: FuncNode[];
}

/** One sampling instruction of a step's trace, with the values it may take. */
export interface Decision {
  index: number;
  position: number;
  kind: string;
  value: unknown;
  choices: unknown[] | null;
  loop: string | null;
  extent: number | null;
  n?: number;
  max_innermost_factor?: number;
  candidates?: unknown[];
  probs?: unknown[];
}

/** What the history shows of a step: enough to draw its row. Never changes once made. */
export interface StepSummary {
  id: number;
  parent: number | null;
  kind: string;
  primitive: string | null;
  label: string;
}

/** A step that was tried and failed, kept in the session's history (``Session.failed``). */
export interface FailedAttempt {
  id: number;
  parent: number | null;
  primitive: string;
  label: string;
  summary: string;
  detail: string;
  involved: string[];
}

/** Everything a view shows of one step, computed once when the step is first looked at. */
export interface StepView {
  id: number;
  parent: number | null;
  kind: string;
  primitive: string | null;
  label: string;
  script: string;
  loop_tree: LoopTree;
  trace: string;
  changed_lines: number[];
  created: string[];
  decisions: Decision[];
  measurement: unknown;
}
