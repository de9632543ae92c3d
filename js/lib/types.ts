// The plain data that mlc_lab's Python side puts into widget traits. The step and the loop tree
// come from js/lib/model.ts (generated from mlc_lab/model/steps.py); the rest mirrors
// mlc_lab/widgets/explorer.py.

export type StepId = number | string;

// The loop tree and the step: generated from mlc_lab/model/steps.py (js/lib/model.ts).
import type { BlockNode, FailedAttempt, FuncNode, HistoryResult, LoopNode, StepSummary, StepView } from "./model";

export type { BlockNode, BufferInfo, Decision, FuncNode, IterVar, LoopNode, LoopTree, StepSummary, StepView } from "./model";

export type LoopKind = LoopNode["loop_kind"];
export type TreeNode = LoopNode | BlockNode;
export type AnyNode = TreeNode | FuncNode;

/** The `step` trait, decoded. */
export type StepData = StepView;

export interface StepInfo {
  id: StepId;
  parent: StepId | null;
  children: StepId[];
  primitive: string;
  label: string;
  kind?: string; // "root" | "apply" | "decision" | "replay" | "run"
}

/** The `history` trait: the summaries of steps `from`, `from + 1`, ... (from 0: the whole list); the
 *  `history` request's result (mlc_lab/model/requests.py). */
export type HistoryDelta = HistoryResult;


/** A failed attempt as the Session keeps it (mlc_lab.model.steps.FailedAttempt). */
export type FailureInfo = FailedAttempt;


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
  /** What the saved record leaves out ({} when nothing; mlc_lab/widgets/explorer.py, Explorer.record_cut). */
  record_cut?: RecordCut | Record<string, never>;
}

export interface RecordCut {
  max_steps: number;
  steps: number;
  steps_recorded: number;
  replies_dropped: number;
}
