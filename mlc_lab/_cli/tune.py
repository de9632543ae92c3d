"""`mlc-lab tune FILE --trials N`: run meta_schedule, show progress, write report.html, print JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from mlc_lab._units import format_latency


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "tune",
        help="tune a program with meta_schedule (resumable)",
        description="Tune FILE's program with meta_schedule in a subprocess. Progress goes to stderr; "
        "WORK_DIR/report.html gets the latency plot, the best trace and program; one JSON object is "
        "printed. Running again on the same WORK_DIR continues from the trials already there.",
    )
    p.add_argument("file", help="a .py file or TVMScript text file holding the program")
    p.add_argument("--trials", type=int, required=True, help="total number of trials (those in WORK_DIR count)")
    p.add_argument("--target", default="cpu", help="cpu (native, all cores) or cuda (default: cpu)")
    p.add_argument("--work-dir", default="tune_tmp", help="where records are kept (default: ./tune_tmp)")
    p.add_argument(
        "--space",
        default="auto",
        help="auto (meta_schedule's own space) or session:TRACE (search around the splits of a trace file)",
    )
    p.add_argument(
        "--runner",
        metavar="SPEC",
        help="where candidates are timed: local (default), rpc://HOST:PORT/KEY (a TVM RPC tracker's servers), "
        "batch:slurm[:PARTITION] (each round a Slurm job) or batch:COMMAND (each round run as COMMAND FOLDER)",
    )
    p.add_argument("--rpc", metavar="HOST:PORT:KEY", help="the same as --runner rpc://HOST:PORT/KEY")
    p.add_argument(
        "--servers", type=int, default=1, help="with an rpc:// runner: candidates measured at once (default: 1)"
    )
    p.add_argument(
        "--database",
        metavar="DIR|rpc://HOST:PORT",
        help="a class's shared database (a folder, or one served by `mlc-lab database serve`): "
        "start from its records, add ours at the end",
    )
    p.add_argument("--func", help="the function to tune when the module has several")
    p.add_argument("--per-iter", type=int, default=16, help="candidates per search round (default: 16)")
    p.add_argument("--seed", type=int, help="random seed of the search")
    return p


def _bar(done: int, total: int, best: float | None, width: int = 30) -> str:
    frac = min(1.0, done / total) if total else 1.0
    filled = int(round(frac * width))
    best_txt = f"  best {format_latency(best)}" if best is not None else ""
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}{best_txt}"


def _space_and_runner(args: argparse.Namespace) -> tuple[str, str | None, str]:
    """(space, trace file or None, runner) from the options, each checked: a UsageError otherwise."""
    from mlc_lab.errors import UsageError

    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.target not in ("cpu", "cuda", "llvm", "gpu"):
        raise UsageError(f"--target must be cpu or cuda, not {args.target!r}")
    space, trace = "auto", None
    if args.space.startswith("session:"):
        space, trace = "session", args.space[len("session:") :]
        if not trace:
            raise UsageError("--space session:TRACE needs a trace file")
    elif args.space != "auto":
        raise UsageError(f"--space must be auto or session:TRACE, not {args.space!r}")
    runner = args.runner or "local"
    if args.rpc and args.runner:
        raise UsageError("give --runner or --rpc, not both")
    if args.rpc:
        parts = args.rpc.split(":")
        if len(parts) != 3 or not parts[1].isdigit():
            raise UsageError(f"--rpc must be HOST:PORT:KEY, not {args.rpc!r}")
        runner = f"rpc://{parts[0]}:{parts[1]}/{parts[2]}"
    return space, trace, runner


def _follow(job: Any, tty: bool) -> tuple[float | None, bool]:
    """Draw the progress bar on stderr until the job ends or Ctrl-C cancels it: (the search's best
    latency, whether it was interrupted)."""
    last = best = None
    try:
        while True:
            running = job.status == "running"
            recs = job.records(with_traces=False)
            best = min((r.latency_s for r in recs if r.ok), default=None)
            line = _bar(len(recs), job.trials, best)
            if line != last:
                print(("\r" + line) if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
                last = line
            if not running:
                return best, False
            time.sleep(0.5)
    except KeyboardInterrupt:
        job.cancel()
        return best, True


def run(args: argparse.Namespace) -> int:
    from mlc_lab._cli.bench import load_session
    from mlc_lab.core.tuning import tune, write_report

    space, trace, runner = _space_and_runner(args)
    session = load_session(args.file, args.func, trace)
    job = tune(
        session,
        target=args.target,
        trials=args.trials,
        space=space,
        work_dir=args.work_dir,
        runner=runner,
        num_trials_per_iter=args.per_iter,
        seed=args.seed,
        database=args.database,
        servers=args.servers,
    )
    tty = sys.stderr.isatty()
    best, interrupted = _follow(job, tty)
    if tty:
        print(file=sys.stderr)
    report = write_report(job, os.path.join(job.work_dir, "report.html"))
    summary = job.summary()
    if summary["best_latency_s"] is not None:  # the figure the JSON gives, in the progress line's unit
        print(
            f"best: {format_latency(summary['best_latency_s'])} (best_latency_s in the JSON below; "
            f"the search's own figure was {format_latency(best) if best is not None else '—'})",
            file=sys.stderr,
        )
    keys = ("trials", "best_latency_s", "best_gflops", "best_trace")
    out = {k: summary[k] for k in keys} | {"report": report, "status": summary["status"], "work_dir": job.work_dir}
    print(json.dumps(out))
    if interrupted:
        return 130
    if summary["status"] == "failed":
        print(f"mlc-lab: tuning failed: {summary['error']}", file=sys.stderr)
        return 1
    return 0
