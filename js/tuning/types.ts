// Mirrors of the TuningDashboard traits (mlc_lab/widgets/tuning.py).

export type Bytes = DataView | ArrayBuffer | Uint8Array | null | undefined;

export interface BestTrial {
  trial?: number;
  latency_s?: number;
  gflops?: number | null;
  confirmed_latency_s?: number; // re-timed by measure()'s method at the end of the run
  confirmed_trial?: number;
  method?: string;
}

export interface Roof {
  peak_gflops?: number;
  bandwidth_gbs?: number;
  intensity?: number; // the program's FLOPs per byte (compulsory traffic)
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
  phase: string; // what the job does now ("measuring candidate 5 of 16"), "" when not running
  pending: Bytes; // the current batch's candidates measured so far (float64 s, NaN = failed)
  stopped_early: string; // why a finished run has fewer trials than asked
  roof: Roof;
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
