// The class server's JSON as the widgets receive it (mlc_lab/classroom/store.py: leaderboard(),
// summary(), verdict(); mlc_lab/widgets/classroom.py: the traits).

export interface TaskInfo {
  name: string;
  title: string;
  points: number;
}

export interface BoardRow {
  name: string;
  rank: number;
  score: number;
  tasks_passed: string[];
  best_latency_ms: number | null;
  submissions: number;
}

export interface Board {
  title?: string;
  max_score?: number;
  tasks?: TaskInfo[];
  rows?: BoardRow[];
  submissions?: number;
  queued?: number;
}

export interface TaskRate {
  name: string;
  title: string;
  passed: number;
  students: number;
  pass_rate: number;
}

export interface Failure {
  task: string | null;
  message: string;
  count: number;
  students: number;
}

export interface Stuck {
  name: string;
  task: string;
  failed_attempts: number;
  stuck: boolean;
  last_message: string | null;
}

export interface Summary {
  title?: string;
  students?: number;
  submissions?: number;
  queued?: number;
  tasks?: TaskRate[];
  latency?: { students: Array<{ name: string; latency_ms: number }>; min?: number; median?: number; max?: number };
  common_failures?: Failure[];
  stuck?: Stuck[];
}

export interface Verdict {
  id: number;
  status: string;
  score?: number;
  max_score?: number;
  latency_ms?: number | null;
  rank?: number | null;
  students?: number;
  error?: string | null;
  tasks?: Array<{ name: string; title: string; passed: boolean; messages: string[] }>;
}

export interface ClassSubmission {
  state?: "sending" | "graded" | "queued" | "error";
  name?: string;
  step?: number;
  text?: string;
  verdict?: Verdict;
}
