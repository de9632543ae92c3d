// Mirrors of the TuningDashboard traits (mlc_lab/widgets/tuning.py).

export type Bytes = DataView | ArrayBuffer | Uint8Array | null | undefined;

export interface BestTrial {
  trial?: number;
  latency_s?: number;
  gflops?: number | null;
}

export interface FailureItem {
  trial: number;
  summary: string;
}

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
}

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
  flops: number;
  best: BestTrial;
  failed_count: number;
  failures: FailureItem[];
  selected: number;
  detail: TrialDetail;
  notice: string;
  explorer: string | null;
  updated_at: number;
  height: string;
}
