// Generated from mlc_lab/model/ (steps.py, measurement.py) by `python -m mlc_lab.core.model_ts`: do not edit.

export const QUIET_CORES = 0.25;
export const PARALLEL_FLOOR = 0.8;
export const STEADY_SPREAD = 0.1;

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

/** One timing of one program. Times are seconds; `error` is set (and the numbers are empty) */
export interface Measurement {
  latency_s: number | null;
  std_s: number | null;
  repeats: number;
  flops: number;
  gflops: number | null;
  max_abs_error: number | null;
  target: string;
  error: string | null;
  error_kind: string | null;
  min_s: number | null;
  max_s: number | null;
  results_s: number[];
  max_rel_error: number | null;
  correct: boolean | null;
  build_s: number | null;
  func_name: string | null;
  iqr_s: number | null;
  threads: number | null;
  cache: string;
  method: string;
  load: number | null;
  others_cores: number | null;
  parallel_speed: number | null;
  rounds: number | null;
  bytes: number | null;
  bytes_source: string;
  bytes_by_buffer: Record<string, number>;
  intensity: number | null;
  peak_gflops: number | null;
  fraction_of_peak: number | null;
  machine_peak_gflops: number | null;
  machine_bandwidth_gbs: number | null;
}

/** A Measurement with every field at its default (its encoding, as Python writes it). */
export const EMPTY_MEASUREMENT: Measurement = {"latency_s": null, "std_s": null, "repeats": 0, "flops": 0.0, "gflops": null, "max_abs_error": null, "target": "", "error": null, "error_kind": null, "min_s": null, "max_s": null, "results_s": [], "max_rel_error": null, "correct": null, "build_s": null, "func_name": null, "iqr_s": null, "threads": null, "cache": "warm", "method": "", "load": null, "others_cores": null, "parallel_speed": null, "rounds": null, "bytes": null, "bytes_source": "", "bytes_by_buffer": {}, "intensity": null, "peak_gflops": null, "fraction_of_peak": null, "machine_peak_gflops": null, "machine_bandwidth_gbs": null};

/** The Measurement fields a hover text lists (field metadata `hover`): label, unit. */
export const MEASUREMENT_HOVER: ReadonlyArray<{ field: keyof Measurement; label: string; unit: string }> = [
  {"field": "build_s", "label": "build", "unit": "s"},
];

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
  measurement: Measurement | null;
}
