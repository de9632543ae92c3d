// The TuningDashboard traits (mlc_lab/widgets/tuning.py).

export type Bytes = DataView | ArrayBuffer | Uint8Array | null | undefined;

// The dashboard's plain data is generated from mlc_lab/model/tuning_view.py (js/lib/model.ts).
import type { BestTrial, FailureItem, Roof, TrialDetail } from "../lib/model";

export type { BestTrial, FailureItem, Roof, TrialDetail };

export interface TuningModel {
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
  phase: string; // what the job does now ("measuring candidate 5 of 16"), "" when not running
  pending: Bytes; // the current batch's candidates measured so far (float64 s, NaN = failed)
  stopped_early: string; // why a finished run has fewer trials than asked
  roof: Roof;
  flops: number;
  best: BestTrial;
  failed_count: number;
  failures: FailureItem[];
  selected: number;
  detail: TrialDetail; // {} while no trial is selected
  notice: string;
  explorer: string | null;
  updated_at: number;
  height: string;
}
