// Names the explorer's code uses for the generated contract (js/lib/model.ts, from mlc_lab/model/),
// and the history row the page builds from the steps' summaries.

export type StepId = number | string;

// The loop tree and the step: generated from mlc_lab/model/steps.py (js/lib/model.ts).
import type { BlockNode, FailedAttempt, FuncNode, HistoryResult, LoopNode, StepSummary, StepView } from "./model";

export type { BlockNode, BufferInfo, Decision, ExplorerError, ExplorerTraits, FuncNode, IterVar, LoopNode, LoopTree, RecordCut, Selection, StepSummary, StepView } from "./model";

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
