// Generated from mlc_lab/model/ by `python -m mlc_lab.core.model_ts`: do not edit.

export const QUIET_CORES = 0.25;
export const PARALLEL_FLOOR = 0.8;
export const STEADY_SPREAD = 0.1;

/** The one vocabulary of error kinds: what each means, whether it is transient (a saved notebook
 *  does not keep it) and whether it is a measurement's failure (the explorer's banner shows it). */
export const ERROR_KINDS = {
  build: {"means": "the program does not build", "transient": false, "measurement": true},
  run: {"means": "the program failed while running or being timed", "transient": false, "measurement": true},
  check: {"means": "the program's output or parameters differ from the reference's", "transient": false, "measurement": true},
  crash: {"means": "the worker process running the program crashed", "transient": true, "measurement": true},
  timeout: {"means": "the program ran past the time limit", "transient": true, "measurement": true},
  no_gpu: {"means": "no CUDA GPU on this machine", "transient": false, "measurement": true},
  does_not_build: {"means": "the GPU schedule does not build (TVM or the OpenCL compiler refuses it)", "transient": false, "measurement": true},
  could_not_run: {"means": "the CPU run of a GPU schedule cannot run this program (its numbers are not judged)", "transient": false, "measurement": true},
  gpu_check: {"means": "the program cannot run on a GPU as it is (unbound loops, GPU limits)", "transient": false, "measurement": true},
  elsewhere: {"means": "the machines that measure elsewhere did not take it (an RPC tracker or server, a batch round)", "transient": true, "measurement": true},
  internal: {"means": "an unexpected failure inside mlc_lab", "transient": false, "measurement": true},
  busy: {"means": "another measurement of this explorer is running", "transient": true, "measurement": true},
  usage: {"means": "a request or command was used the wrong way", "transient": false, "measurement": false},
  protocol: {"means": "the worker process answered something it should not", "transient": false, "measurement": false},
  schedule: {"means": "a sweep's schedule failed for one value", "transient": false, "measurement": false},
  bad_request: {"means": "the request's parameters are wrong", "transient": true, "measurement": false},
  unknown: {"means": "no such request", "transient": true, "measurement": false},
  unknown_step: {"means": "no such step", "transient": true, "measurement": false},
  no_kernel: {"means": "the page has no kernel to answer (a saved view)", "transient": true, "measurement": false},
  unknown_loop: {"means": "no such loop in the program", "transient": false, "measurement": false},
  unknown_name: {"means": "no loop or block by that name", "transient": false, "measurement": false},
  too_large: {"means": "more than the view draws", "transient": false, "measurement": false},
  analysis: {"means": "the access analysis cannot answer for this loop", "transient": false, "measurement": false},
  cancelled: {"means": "the analysis was cancelled (by the person, a newer request or a new step)", "transient": true, "measurement": false},
  bad_target: {"means": "a target the Compiler view cannot compile for", "transient": false, "measurement": false},
  step: {"means": "a schedule primitive failed; the session is unchanged", "transient": false, "measurement": false},
  history: {"means": "nothing to undo or redo", "transient": false, "measurement": false},
  trace: {"means": "a trace was refused or failed to replay", "transient": false, "measurement": false},
  decision: {"means": "a sampled decision is not valid for its instruction", "transient": false, "measurement": false},
  load: {"means": "a module, script or file could not be loaded", "transient": false, "measurement": false},
  convert: {"means": "legacy code could not be parsed", "transient": false, "measurement": false},
  tune: {"means": "a tuning job could not be started or read", "transient": false, "measurement": false},
  error: {"means": "another error mlc_lab raised on purpose", "transient": false, "measurement": false},
} as const;
export type ErrorKind = keyof typeof ERROR_KINDS;

/** Every kind of GPU kernel hazard, and what the page calls it. */
export const HAZARD_KINDS = {"race": "race", "out_of_bounds": "out of bounds", "thread_extent": "thread extent", "spill": "spill", "limit": "limit", "allocation": "allocation", "aliasing": "aliasing layout"} as const;
export type HazardKind = keyof typeof HAZARD_KINDS;

/** The thread axes bind takes, as the explorer's form offers them (mlc_lab/model/steps.py). */
export const THREAD_AXES = ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread.x", "vthread.y", "vthread.z"] as const;

/** The primitives whose loops are passed positionally (mlc_lab/model/path.py: PathStep.call). */
export const PATH_VARIADIC = {"reorder": "ordered_loops", "fuse": "loops", "merge": "loops"} as const;

/** A Bytes trait as the page reads it. */
export type Bytes = DataView | ArrayBuffer | Uint8Array | null | undefined;

export interface BufferInfo {
  name: string;
  shape: (number | string)[];
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

/** The summaries of steps `from`, `from + 1`, ... (from 0: the whole list). */
export interface HistoryResult {
  from: number;
  steps: StepSummary[];
  visited?: Record<string, number | string>;
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
  error_kind: ErrorKind | null;
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
  where: string | null;
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
export const EMPTY_MEASUREMENT: Measurement = {"latency_s": null, "std_s": null, "repeats": 0, "flops": 0.0, "gflops": null, "max_abs_error": null, "target": "", "error": null, "error_kind": null, "min_s": null, "max_s": null, "results_s": [], "max_rel_error": null, "correct": null, "build_s": null, "func_name": null, "iqr_s": null, "threads": null, "cache": "warm", "method": "", "load": null, "where": null, "others_cores": null, "parallel_speed": null, "rounds": null, "bytes": null, "bytes_source": "", "bytes_by_buffer": {}, "intensity": null, "peak_gflops": null, "fraction_of_peak": null, "machine_peak_gflops": null, "machine_bandwidth_gbs": null};

/** The Measurement fields a hover text lists (field metadata `hover`): label, unit. */
export const MEASUREMENT_HOVER: ReadonlyArray<{ field: keyof Measurement; label: string; unit: string }> = [
  {"field": "build_s", "label": "build", "unit": "s"},
  {"field": "where", "label": "measured on", "unit": ""},
];

/** A loop as the memory view names it. */
export interface LoopInfo {
  name: string;
  ref: string;
  extent: number | null;
  min: number;
  thread: string | null;
  loop_kind: string | null;
}

/** A loop around the one shown, with the value the analysis fixed it at. */
export interface EnclosingLoop {
  name: string;
  ref: string;
  extent: number | null;
  min: number;
  thread: string | null;
  loop_kind: string | null;
  value: number;
}

/** One array of a footprint: the index of its binary buffer and how to read it. */
export interface ArrayDescr {
  buffer: number;
  dtype: string;
  size: number;
  nbytes: number;
  enc?: "deflate";
}

/** The arrays of one buffer over its crop box (none when it is untouched; thread/block on GPU). */
export interface BufferArrays {
  reads?: ArrayDescr;
  writes?: ArrayDescr;
  first_touch?: ArrayDescr;
  count?: ArrayDescr;
  thread?: ArrayDescr;
  block?: ArrayDescr;
}

/** What one loop does to one buffer, in numbers (mlc_lab.core.access.Footprint.summary). */
export interface BufferStats {
  buffer: string;
  shape: number[];
  dtype: string;
  scope: string;
  itemsize: number;
  distinct: number;
  accesses: number;
  n_reads: number;
  n_writes: number;
  reuse: number;
  cache_lines: number;
  bounds: ([number, number] | null)[];
  strides: Record<string, number | null>;
}

export interface CropBox {
  offset: number[];
  shape: number[];
  pool?: number[];
}

/** A buffer's statistics and its arrays over the touched box. */
export interface BufferPayload {
  buffer: string;
  shape: number[];
  dtype: string;
  scope: string;
  itemsize: number;
  distinct: number;
  accesses: number;
  n_reads: number;
  n_writes: number;
  reuse: number;
  cache_lines: number;
  bounds: ([number, number] | null)[];
  strides: Record<string, number | null>;
  crop: CropBox;
  arrays: BufferArrays;
}

/** The footprint of one loop (the JSON half of ``access_footprint``'s answer). */
export interface FootprintResult {
  loop: LoopInfo;
  enclosing: EnclosingLoop[];
  at: Record<string, number>;
  swept?: string[];
  shape_vars?: Record<string, number>;
  steps: number;
  gpu: boolean;
  launch: Record<string, number>;
  buffers: BufferPayload[];
}

/** One access of a block body, as one warp issues it (Nsight Compute vocabulary). */
export interface WarpAccess {
  buffer: string;
  block: string;
  kind: string;
  scope: string;
  index: string;
  requests: number;
  lanes: number;
  vector: number;
  active_lanes: number;
  sectors_per_request: number | null;
  sectors: number | null;
  efficiency: number | null;
  wavefronts: number | null;
  bank_conflicts: number | null;
  ways: number | null;
  max_ways: number | null;
  layout: Record<string, unknown> | null;
  note: string | null;
}

/** Per-access warp statistics of one warp (the answer of ``access_gpu_stats``). */
export interface GpuStats {
  warp: number;
  threads: number[];
  launch: Record<string, number>;
  accesses: WarpAccess[];
}

/** The fastest trial so far (empty before one succeeded), and its re-timing at the end of the run. */
export interface BestTrial {
  trial?: number;
  latency_s?: number;
  gflops?: number | null;
  confirmed_latency_s?: number;
  confirmed_trial?: number;
  method?: string;
}

/** The machine's roofline (when already measured) and the program's arithmetic intensity (empty: unknown). */
export interface Roof {
  peak_gflops?: number;
  bandwidth_gbs?: number;
  intensity?: number;
}

/** A failed trial and the line of its error that says why. */
export interface FailureItem {
  trial: number;
  summary: string;
}

/** One trial as the dashboard shows it when selected: only ``trial`` and ``problem`` when it cannot */
export interface TrialDetail {
  trial?: number;
  ok?: boolean;
  latency_s?: number | null;
  gflops?: number | null;
  run_secs?: number[];
  error?: string;
  error_summary?: string;
  trace?: string;
  script?: string;
  script_problem?: string;
  diff?: string;
  best_trial?: number | null;
  vs_best?: number | null;
  problem?: string;
  where?: string | null;
  waited_s?: number | null;
}

/** One thing said of the machines that measure elsewhere: a server lost or left out of the job, a */
export interface MachineLine {
  text: string;
  problem: boolean;
}

/** Where a job measures when not here (empty for the local runner): how (``via``), and what happened. */
export interface Machines {
  via?: string;
  lines?: MachineLine[];
}

/** One pass that `tvm.compile` ran. `script` is the module after it when it changed something; */
export interface PassStep {
  index: number;
  name: string;
  phase: string;
  status: "changed" | "no-op" | "failed";
  depth: number;
  base: number;
  note: string;
  script: string | null;
  error: string | null;
  seconds: number;
}

/** What the machine code of one loop of the schedule looks like. */
export interface LoopFacts {
  loop: string;
  name: string;
  line: number;
  end_line: number;
  kind: string;
  extent: number | null;
  innermost: boolean;
  asm_lines: number[];
  ir_lines: number[];
  vector_width: number;
  register: string;
  vector_fma: number;
  scalar_fma: number;
  vector_arith: number;
  scalar_arith: number;
  vector_loads: number;
  vector_stores: number;
  scalar_loads: number;
  scalar_stores: number;
  broadcasts: number;
  gathers: number;
  in_llvm_ir: boolean | null;
  unrolled_copies: number | null;
  runtime_calls: Record<string, number>;
  approximate: boolean;
  verdict: string;
  is_vector: boolean;
  scalar_fallbacks: number;
}

/** One CUDA kernel, from ptxas -v and the PTX text. */
export interface KernelFacts {
  name: string;
  registers: number | null;
  shared_bytes: number;
  stack_bytes: number;
  spill_stores: number;
  spill_loads: number;
  vector_loads: number;
  vector_stores: number;
  scalar_loads: number;
  scalar_stores: number;
  shared_loads: number;
  fma: number;
  barriers: number;
  facts_from: "ptxas" | "source";
}

/** A shared or local buffer at the size one block / one thread keeps it. */
export interface GpuBuffer {
  name: string;
  scope: string;
  shape: (number | null)[];
  dtype: string;
  bytes: number | null;
}

/** An array a CUDA kernel's source declares (the facts without ptxas). */
export interface KernelArray {
  name: string;
  scope: string;
  elements: number | null;
  dtype: string;
  bytes: number | null;
}

/** Everything about how one step compiles for one target (see `Session.lower`). */
export interface Lowering {
  target: string;
  kind: "cpu" | "cuda";
  func_name: string;
  script: string;
  passes: PassStep[];
  ok: boolean;
  error: string | null;
  step: number | null;
  llvm_ir: string;
  asm: string;
  cuda_source: string;
  ptx: string | null;
  ptx_error: string | null;
  ptxas_report: string;
  target_cpu: string;
  cpu_features: string[];
  problems: string[];
  loops: LoopFacts[];
  kernels: KernelFacts[];
  cuda_loop_lines: Record<string, number[]>;
  arch: string;
  gpu_buffers: GpuBuffer[];
  kernel_arrays: Record<string, KernelArray[]>;
  verdict: string;
  seconds: number;
  timings: Record<string, number>;
}

/** One line of the Checks panel: a verdict (``CheckResult.to_json``) and the check's title. */
export interface CheckLine {
  name: string;
  title: string;
  ok: boolean;
  verdict: "pass" | "fail" | "unjudged";
  message: string;
  where: string | null;
  evidence: Record<string, unknown>;
}

/** A hazard as it crosses to the page (``Hazard.to_json``). */
export interface HazardInfo {
  kind: HazardKind;
  message: string;
  where: string | null;
}

/** The Checks panel's report of one step (or why it could not be computed: ``error``). */
export interface StepChecks {
  step: number | string;
  target?: "cpu" | "cuda" | null;
  checks?: CheckLine[];
  hazards?: HazardInfo[];
  tasks?: TaskVerdict[];
  ms?: number;
  error?: string;
}

/** A group of checks the panel lists under one title (an assignment's task). */
export interface ChecksTask {
  title: string;
  checks: string[];
  points?: number | null;
}

/** What the Checks panel lists (``{"available": False}``: the session cannot check). */
export interface ChecksSetup {
  available?: boolean;
  title?: string | null;
  target?: string | null;
  names?: string[] | null;
  tasks?: ChecksTask[];
}

/** The hazards a step created (its parent did not have them), how many it has, and the hazards of its */
export interface StepHazards {
  new: HazardInfo[];
  count: number;
  resolved?: HazardInfo[];
}

/** The leaderboard (``/api/leaderboard``; ``title``: the server adds the assignment's). */
export interface Board {
  title?: string;
  max_score: number;
  tasks: ClassTask[];
  rows: BoardRow[];
  submissions: number;
  queued: number;
  notice?: string;
}

/** One student on the leaderboard, by the pseudonym the teacher approved (or "student N"): the */
export interface BoardRow {
  name: string;
  rank: number;
  score: number;
  tasks_passed: string[];
  best_latency_ms: number | null;
  submissions: number;
  you?: boolean;
  spread_ms?: number | null;
  load?: number | null;
  quiet?: boolean | null;
  tie?: boolean;
}

/** The explorer's Submit bar (its ``class_submission`` trait; {} before the first submission). */
export interface ClassSubmission {
  state?: "sending" | "graded" | "queued" | "error";
  name?: string;
  step?: number | string;
  text?: string;
  verdict?: Verdict;
  client_id?: string;
}

/** The teacher's view of a class (``/api/summary``). */
export interface ClassSummary {
  title?: string;
  students: number;
  submissions: number;
  queued: number;
  tasks: TaskRate[];
  latency: LatencySpread;
  common_failures: CommonFailure[];
  stuck: StuckStudent[];
  refused?: RefusedHandIn[];
  notice?: string;
}

/** One task of the class's assignment. */
export interface ClassTask {
  name: string;
  title: string;
  points: number;
}

/** Who the server takes a token for (``/api/me``): a student (id and leaderboard name) or the teacher. */
export interface ClassIdentity {
  teacher: boolean;
  student: string | null;
  name: string | null;
  notice?: string;
}

/** A failure message, how often it was met and by how many students (task null: not graded at all). */
export interface CommonFailure {
  task: string | null;
  message: string;
  count: number;
  students: number;
}

/** One student's submissions, oldest first (``/api/history``). */
export interface History {
  student: string;
  submissions: Verdict[];
  notice?: string;
}

/** Each student's best passing latency, and their minimum, median and maximum. */
export interface LatencySpread {
  students: StudentLatency[];
  min?: number;
  median?: number;
  max?: number;
}

/** A hand-in the grader refused, flagged for the teacher: an ``attack`` (a trace reaching for what */
export interface RefusedHandIn {
  id: number;
  name: string;
  pseudonym: string;
  kind: "attack" | "mistake";
  why: string;
  file: string | null;
  message: string;
  at: number;
}

export interface StudentLatency {
  name: string;
  latency_ms: number;
  spread_ms?: number | null;
  load?: number | null;
  quiet?: boolean | null;
  rank?: number;
  tie?: boolean;
}

/** The first task a student has not passed, and how often they failed it. */
export interface StuckStudent {
  name: string;
  task: string;
  failed_attempts: number;
  stuck: boolean;
  last_message: string | null;
}

/** How many of the students who handed anything in passed one task. */
export interface TaskRate {
  name: string;
  title: string;
  passed: number;
  students: number;
  pass_rate: number;
}

/** One task of a graded submission. */
export interface TaskVerdict {
  name: string;
  title: string | null;
  points: number | null;
  max_points: number | null;
  passed: boolean | null;
  messages: string[] | null;
}

/** One submission as its student sees it (no trace); the rest once it is graded. ``name``: the */
export interface Verdict {
  id: number;
  name: string;
  student?: string;
  task: string | null;
  status: string;
  submitted_at: number;
  client_id?: string | null;
  file?: string | null;
  retries?: number;
  notice?: string;
  score?: number | null;
  max_score?: number | null;
  passing?: boolean;
  latency_ms?: number | null;
  error?: string | null;
  tasks?: TaskVerdict[];
  hazards?: unknown[];
  notes?: string[];
  correct?: unknown;
  timing?: unknown;
  timing_error?: string | null;
  rank?: number | null;
  tie?: boolean;
  students?: number;
}

/** One primitive of the way: ``primitive`` (TVM's name), ``arguments`` (TVM's parameter names to */
export interface PathStep {
  primitive: string;
  arguments: Record<string, unknown>;
  reason: string;
  label: string;
}

/** The way from a step to a target, or why there is none. */
export interface PathAnswer {
  status: "reached" | "names" | "unreached";
  steps: PathStep[];
  trace: string;
  why: string;
  seconds: number;
  start: number;
  undo_to: number | null;
  renamed: Record<string, string>;
}

/** The next step to the target and the one sentence a student reads: ``step`` (None when the */
export interface Hint {
  step: PathStep | null;
  sentence: string;
  remaining: number;
  status: "reached" | "names" | "unreached";
  undo_to: number | null;
}

/** The explorer's way target (``{}``: none): what it is called and where it came from. */
export interface PathSetup {
  available?: boolean;
  name?: string;
  source?: "program" | "assignment";
  gpu?: boolean;
}

/** The way from one step to the explorer's target (or why it could not be found: ``error``). */
export interface StepPath {
  step: number | string;
  answer?: PathAnswer;
  hint?: Hint;
  ms?: number;
  error?: string;
}

/** A failed request's answer: one sentence, and what else the error knows. */
export interface ErrorInfo {
  summary: string;
  type?: ErrorKind;
  detail?: string;
  involved?: string[];
  primitive?: string;
  line?: number | null;
  shape_vars?: string[];
  step?: number | string;
}

/** Why the memory view shows no footprint of ``loop``. */
export interface AccessError {
  summary: string;
  type?: ErrorKind;
  detail?: string;
  involved?: string[];
  primitive?: string;
  line?: number | null;
  shape_vars?: string[];
  step?: number | string;
  loop: string;
}

/** mlc_lab.widgets.AccessView. */
export interface AccessViewTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  loop_tree_json: Bytes;
  current: number | string | null;
  loop: string;
  at: Record<string, number>;
  color_by: "access" | "order" | "thread" | "block";
  warp: number;
  block: number;
  time: number;
  region: "auto" | "buffer" | "touched";
  sweep_threads: boolean;
  shape_vars: Record<string, number>;
  height: string;
  error: AccessError | Empty;
}

/** mlc_lab.widgets.classroom.ClassDashboard. */
export interface ClassDashboardTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  server: string;
  error: string;
  updated: number;
  refresh_s: number;
  summary: ClassSummary | Empty;
  board: Board | Empty;
}

/** The class server the Submit bar hands steps in to (``identified``: the kernel holds a class */
export interface ClassroomInfo {
  server: string;
  identified?: boolean;
  title?: string;
  tasks?: ClassroomTask[];
  assignment_error?: string;
}

/** One task of the class's assignment as the Submit bar lists it. */
export interface ClassroomTask {
  name: string;
  title: string;
  points: number;
  checks: string[];
}

/** ``{}``: a dict trait with nothing to show yet. */
export type Empty = Record<string, never>;

/** The explorer's banner: the last failed click, with what it was (``source``) and a fresh ``id``. */
export interface ExplorerError {
  summary: string;
  type?: ErrorKind;
  detail?: string;
  involved?: string[];
  primitive?: string;
  line?: number | null;
  shape_vars?: string[];
  step?: number | string;
  id: number;
  source: string;
  label?: string;
}

/** mlc_lab.widgets.Explorer. */
export interface ExplorerTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  func: string;
  step: Bytes;
  history: HistoryResult | Empty;
  selection: Selection | Empty;
  error: ExplorerError | Empty;
  failures: FailedAttempt[];
  height: string;
  record_cut: RecordCut | Empty;
  measurements: Record<string, Measurement>;
  measuring: MeasuringInfo | Empty;
  checks_setup: ChecksSetup;
  checks: StepChecks | Empty;
  hazards: Record<string, StepHazards>;
  classroom: ClassroomInfo | Empty;
  class_submission: ClassSubmission;
  compiler_target: string;
  target: string;
  path_setup: PathSetup | Empty;
  path: StepPath | Empty;
}

/** mlc_lab.widgets.classroom.Leaderboard. */
export interface LeaderboardTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  server: string;
  error: string;
  updated: number;
  refresh_s: number;
  board: Board | Empty;
  highlight: string;
}

/** The measurement in flight: its step and target. */
export interface MeasuringInfo {
  step: number | string;
  target: string;
}

/** What a class widget refreshed from the class server syncs. */
export interface PolledTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  server: string;
  error: string;
  updated: number;
  refresh_s: number;
}

/** What the saved record leaves out (steps beyond ``max_steps``, replies dropped for room). */
export interface RecordCut {
  max_steps: number;
  steps: number;
  steps_recorded: number;
  replies_dropped: number;
}

/** What every mlc_lab widget syncs: which view draws it, where its code is, its saved records. */
export interface RpcTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
}

/** The loop or block picked (qualified name when it has one). */
export interface Selection {
  kind: "loop" | "block" | "func";
  name: string;
}

/** mlc_lab.widgets.TuningDashboard. */
export interface TuningTraits {
  _mlc_entry: string;
  _mlc_front_end: string;
  _mlc_recorded: Record<string, string>;
  work_dir: string;
  func: string;
  target: string;
  settings: string;
  status: string;
  job_error: string;
  done: number;
  total: number;
  latency: Bytes;
  elapsed: Bytes;
  phase: string;
  pending: Bytes;
  stopped_early: string;
  roof: Roof;
  flops: number;
  best: BestTrial;
  failed_count: number;
  failures: FailureItem[];
  machines: Machines;
  selected: number;
  detail: TrialDetail | Empty;
  notice: string;
  explorer: string | null;
  updated_at: number;
  height: string;
}

/** A view's request: ``method`` is a key of :data:`REQUESTS`, ``id`` correlates the response. */
export interface RequestMessage {
  kind: "mlc-request";
  id: string;
  method: string;
  params: Record<string, unknown>;
}

/** The answer to a request (its buffers travel beside it): ``result`` when ``ok``, else ``error``. */
export interface ResponseMessage {
  kind: "mlc-response";
  id: string;
  ok: boolean;
  elapsed_ms: number;
  result?: unknown;
  error?: ErrorInfo;
}

/** The explorer page's note that it now shows ``step``; the kernel's Session follows (no answer). */
export interface FollowMessage {
  kind: "mlc-follow";
  step: number | string;
}

/** One CUDA kernel of a step, with its launch facts. */
export interface CudaKernel {
  name: string;
  threads_per_block?: number;
  blocks?: number;
  shared_bytes?: number;
  local_bytes?: number;
  thread_extents?: Record<string, number>;
}

/** A schedule primitive with its arguments (then_split: a sampled tile is split at once). */
export interface ApplyParams {
  primitive: string;
  args?: unknown[] | null;
  kwargs?: Record<string, unknown> | null;
  then_split?: boolean;
}

/** A request that changed the session: the step it is at now (apply: the names it made). */
export interface StepResult {
  step: number | string;
  names?: unknown;
}

/** No parameters. */
export type NoParams = Record<string, never>;

/** A sampled decision's new value (by its index in the trace). */
export interface SetDecisionParams {
  index: number;
  value: unknown;
}

/** A trace's text, replayed as a new branch. */
export interface ReplayParams {
  trace: string;
}

/** One step of the history, by id. */
export interface StepParams {
  step: number | string;
}

/** A text reply: its UTF-8 bytes are the reply's first buffer. */
export interface TextResult {
  bytes: number;
  step?: number | string;
  format?: string;
}

/** Which form of the trace: "text" or "json". */
export interface ExportTraceParams {
  format?: string;
}

/** Where a step is measured: "cpu" or "cuda". */
export interface MeasureParams {
  target?: string;
  step?: number | string | null;
}

/** A step's new measurement (``target`` as the page names it: "cpu", "cuda"). */
export interface MeasureResult {
  step: number | string;
  measurement: Measurement;
}

/** Nothing to answer but that it was done. */
export type NoResult = Record<string, never>;

/** A step's CUDA source (and its PTX). */
export interface CudaSourceParams {
  step?: number | string | null;
  ptx?: boolean;
}

/** A step's CUDA source, its kernels, and its PTX (or why there is none). */
export interface CudaSource {
  step: number | string;
  source: string;
  kernels: CudaKernel[];
  ptx: string | null;
  ptx_error: string | null;
}

/** A step compiled for a target ("cpu", "cuda", an sm_ name). */
export interface LowerParams {
  step?: number | string | null;
  target?: string;
}

/** A student's name and the class task the current step is submitted for. */
export interface ClassSubmitParams {
  name?: string;
  task?: string | null;
  client_id?: string;
}

/** The step handed in; its verdict arrives in the ``class_submission`` trait. */
export interface SubmitResult {
  step: number | string;
}

/** A step of the history (default: the current one). */
export interface MaybeStepParams {
  step?: number | string | null;
}

/** The loop whose footprint is drawn, where the enclosing loops stand, and the shapes' values. */
export interface FootprintParams {
  loop: string;
  at?: Record<string, unknown> | null;
  sweep_threads?: boolean;
  shape_vars?: Record<string, unknown> | null;
}

/** A loop's GPU access statistics, for one warp and block (default: the first). */
export interface GpuStatsParams {
  loop: string;
  at?: Record<string, unknown> | null;
  warp?: number | null;
  block?: number | null;
  shape_vars?: Record<string, unknown> | null;
}

/** The tuning job's status after the request ("running", "cancelling", "done", ...). */
export interface JobStatus {
  status: string;
}

/** A tuning trial (default: the best). */
export interface OpenTrialParams {
  trial?: number | null;
}

/** What the dashboard says about the request (an explorer opened on a trial). */
export interface NoticeResult {
  notice: string;
}

/** Why the refresh failed ("" when it worked). */
export interface RefreshResult {
  error: string;
}

/** Every request a widget answers (mlc_lab/model/requests.py): background, kept replies (0: not
 *  recorded), step-implied (recorded under the current step), the reply has buffers, its error kinds,
 *  how long the page waits for its answer (js/lib/rpc.ts). */
export const REQUESTS = {
  apply: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["step", "usage", "unknown_loop", "unknown_name"], "timeout_s": 120.0},
  history: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 120.0},
  set_decision: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["decision", "trace"], "timeout_s": 120.0},
  replay: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["trace", "load"], "timeout_s": 120.0},
  goto: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["unknown_step"], "timeout_s": 120.0},
  script_at: {"background": false, "keep": 0, "step_implied": false, "buffers": true, "errors": ["unknown_step"], "timeout_s": 120.0},
  export_trace: {"background": false, "keep": 0, "step_implied": false, "buffers": true, "errors": ["usage"], "timeout_s": 120.0},
  measure: {"background": true, "keep": 0, "step_implied": false, "buffers": false, "errors": ["busy", "usage", "no_gpu", "unknown_step", "build", "run", "check", "crash", "timeout", "gpu_check", "cancelled"], "timeout_s": 300.0},
  measure_cancel: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 300.0},
  cuda_source: {"background": true, "keep": 2, "step_implied": false, "buffers": false, "errors": ["no_gpu", "gpu_check", "build", "unknown_step", "usage"], "timeout_s": 300.0},
  lower: {"background": true, "keep": 2, "step_implied": false, "buffers": false, "errors": ["bad_target", "build", "unknown_step", "usage"], "timeout_s": 300.0},
  clear_error: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 120.0},
  class_submit: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["usage", "busy", "error"], "timeout_s": 600.0},
  checks: {"background": true, "keep": 2, "step_implied": false, "buffers": false, "errors": ["unknown_step"], "timeout_s": 120.0},
  path: {"background": true, "keep": 2, "step_implied": false, "buffers": false, "errors": ["unknown_step"], "timeout_s": 120.0},
  access_footprint: {"background": true, "keep": 2, "step_implied": true, "buffers": true, "errors": ["unknown_loop", "unknown_name", "too_large", "analysis", "usage", "cancelled"], "timeout_s": 300.0},
  access_gpu_stats: {"background": true, "keep": 2, "step_implied": true, "buffers": false, "errors": ["unknown_loop", "unknown_name", "too_large", "analysis", "usage", "cancelled"], "timeout_s": 300.0},
  access_cancel: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 300.0},
  export_html: {"background": false, "keep": 0, "step_implied": false, "buffers": true, "errors": [], "timeout_s": 120.0},
  cancel: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 120.0},
  open_in_explorer: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": ["tune", "usage"], "timeout_s": 120.0},
  refresh: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 120.0},
  class_refresh: {"background": false, "keep": 0, "step_implied": false, "buffers": false, "errors": [], "timeout_s": 120.0},
} as const;
export type RequestName = keyof typeof REQUESTS;
export const REQUEST = "mlc-request";
export const RESPONSE = "mlc-response";
/** The explorer page's note that it shows another step (FollowMessage; no answer). */
export const FOLLOW = "mlc-follow";

/** The requests that ask about the current step without naming it. */
export const STEP_IMPLIED: ReadonlySet<string> = new Set(["access_footprint", "access_gpu_stats"]);

/** Each request's parameters. */
export interface RequestParams {
  apply: ApplyParams;
  history: NoParams;
  set_decision: SetDecisionParams;
  replay: ReplayParams;
  goto: StepParams;
  script_at: StepParams;
  export_trace: ExportTraceParams;
  measure: MeasureParams;
  measure_cancel: NoParams;
  cuda_source: CudaSourceParams;
  lower: LowerParams;
  clear_error: NoParams;
  class_submit: ClassSubmitParams;
  checks: MaybeStepParams;
  path: MaybeStepParams;
  access_footprint: FootprintParams;
  access_gpu_stats: GpuStatsParams;
  access_cancel: NoParams;
  export_html: NoParams;
  cancel: NoParams;
  open_in_explorer: OpenTrialParams;
  refresh: NoParams;
  class_refresh: NoParams;
}

/** Each request's result (the reply's JSON; its buffers travel beside it). */
export interface RequestResults {
  apply: StepResult;
  history: HistoryResult;
  set_decision: StepResult;
  replay: StepResult;
  goto: StepResult;
  script_at: TextResult;
  export_trace: TextResult;
  measure: MeasureResult;
  measure_cancel: NoResult;
  cuda_source: CudaSource;
  lower: Lowering;
  clear_error: NoResult;
  class_submit: SubmitResult;
  checks: StepChecks;
  path: StepPath;
  access_footprint: FootprintResult;
  access_gpu_stats: GpuStats;
  access_cancel: NoResult;
  export_html: TextResult;
  cancel: JobStatus;
  open_in_explorer: NoticeResult;
  refresh: JobStatus;
  class_refresh: RefreshResult;
}

/** JSON with sorted keys and no spaces: Python's json.dumps(sort_keys=True, separators=(",", ":")). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** The key of a recorded reply (mlc_lab.model.requests.record_key): the method, a space, its parameters. */
export const recordKey = (method: string, params: object = {}): string => `${method} ${canonicalJson(params)}`;
