// A tuning run's work directory as the dashboard's state, read from its files in the browser
// (no kernel): mlc_lab's per-trial log when mlc_lab ran the job, else meta_schedule's own
// database_tuning_record.json. Mirrors mlc_lab/widgets/tuning.py's job_snapshot.

export interface TrialLine {
  line?: number;
  latency_s?: number | null;
  error?: string | null;
}

export interface RunFiles {
  trials?: string; // mlc_lab_trials.jsonl
  job?: string; // mlc_lab_job.json
  status?: string; // mlc_lab_status.json
  records?: string; // database_tuning_record.json
}

const FAILED_RUN_SECS = 1e9; // meta_schedule writes 1e10 s for a candidate that failed to build or run

function jsonLines(text: string | undefined): unknown[] {
  const out: unknown[] = [];
  for (const line of (text ?? "").split("\n")) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      /* a line being written while we read: skip it */
    }
  }
  return out;
}

function parse<T>(text: string | undefined, fallback: T): T {
  try {
    return text ? (JSON.parse(text) as T) : fallback;
  } catch {
    return fallback;
  }
}

function summary(error: string): string {
  const lines = error.trim().split("\n").filter((l) => l.trim());
  const last = lines.length ? lines[lines.length - 1] : error;
  return last.length > 240 ? `${last.slice(0, 239)}…` : last;
}

function targetLabel(t: Record<string, unknown>): string {
  const parts = [t.kind, t.mcpu || t.arch, t["num-cores"] ? `${t["num-cores"]} cores` : ""].filter(Boolean);
  return parts.join(" ");
}

/** The dashboard's traits for a run, from its files. */
export function runState(files: RunFiles, workDir: string): Record<string, unknown> {
  let latency: number[] = [];
  const failures: Array<{ trial: number; summary: string }> = [];
  const trials = jsonLines(files.trials) as TrialLine[];
  if (trials.length) {
    trials.forEach((t, i) => {
      const ok = !t.error && typeof t.latency_s === "number";
      latency.push(ok ? (t.latency_s as number) : NaN);
      if (!ok) failures.push({ trial: i, summary: summary(t.error || "failed") });
    });
  } else {
    for (const [i, rec] of (jsonLines(files.records) as any[]).entries()) {
      const runSecs: number[] = Array.isArray(rec?.[1]?.[1]) ? rec[1][1] : [];
      const ok = runSecs.length > 0 && runSecs.every((s) => s < FAILED_RUN_SECS);
      latency.push(ok ? runSecs.reduce((a, b) => a + b, 0) / runSecs.length : NaN);
      if (!ok) failures.push({ trial: i, summary: "the candidate failed to build or run" });
    }
  }
  const job = parse<Record<string, any>>(files.job, {});
  const status = parse<Record<string, any>>(files.status, {});
  const flops = Number(job.flops || 0);
  let best: Record<string, unknown> = {};
  latency.forEach((l, i) => {
    if (!Number.isNaN(l) && (best.latency_s === undefined || l < (best.latency_s as number))) best = { trial: i, latency_s: l };
  });
  if (best.latency_s !== undefined) best.gflops = flops ? flops / (best.latency_s as number) / 1e9 : null;
  const bytes = (xs: number[]) => new DataView(new Float64Array(xs).buffer);
  latency = latency.map((x) => (Number.isFinite(x) ? x : NaN));
  return {
    work_dir: workDir,
    func: String(job.func_name ?? ""),
    target: job.target ? targetLabel(job.target) : "",
    settings: job.strategy ? `${job.strategy} · ${job.cost_model ?? ""} · ${job.space?.kind ?? ""}` : "",
    status: String(status.state ?? (latency.length ? "saved" : "empty")),
    job_error: "",
    done: latency.length,
    total: Number(job.trials || latency.length),
    latency: bytes(latency),
    elapsed: bytes(latency.map(() => NaN)),
    flops,
    best,
    failed_count: failures.length,
    failures: failures.slice(0, 200),
    selected: -1,
    detail: {},
    notice: "Read from the work directory without a kernel: “Open with kernel” shows traces, diffs and the explorer.",
    explorer: null,
    updated_at: 0,
    height: "420px",
  };
}
