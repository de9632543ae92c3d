"""Tuning jobs: meta_schedule in its own process group, state on disk, a handle in the kernel.

`tune(...)` writes the job into a work directory, starts it as a detached worker job
(``python -m mlc_lab.core.worker_main --job tune WORK_DIR``, see `mlc_lab.core.worker`) and
returns a `TuneJob` at once. Everything the job learns lands in
meta_schedule's JSON database in that directory (one line per trial, in trial order) plus a side
file with error texts and trace texts, so a cancel, a crash or a kernel restart loses nothing:
`TuneJob.open(work_dir)` reads it all back, and `tune(...)` on the same directory continues,
counting the trials already there toward `trials` (meta_schedule's evolutionary search seeds its
population from the best records in the database).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeVar

from mlc_lab._threads import usable_cores
from mlc_lab.core.worker import job_running, start_job, stop_group
from mlc_lab.errors import NoGPUError, TuneError
from mlc_lab.model.conform import WireData, WireError
from mlc_lab.model.tuning import BEST_FILE, JOB_FILE, LIVE_FILE, LOG_FILE, MODULE_FILE, RECORDS_FILE  # the job's files
from mlc_lab.model.tuning import SPACE_PICKLE, STATUS_FILE, TRIALS_FILE, BestSoFar, JobStatus, StoppedEarly, TrialLine
from mlc_lab.model.tuning import median

W = TypeVar("W", bound=WireData)
FAILED_LATENCY = 1e9  # meta_schedule records a failed candidate as 1e10 s


@dataclass
class TuneRecord:
    """One measured candidate, in trial order. `latency_s` (the median of the runner's repeats,
    `run_secs`, timed by `mlc_lab.tvm.measure`'s TUNING method) is None when it failed (`error`
    says why)."""

    trial: int
    latency_s: float | None
    run_secs: list[float]
    error: str | None
    trace: str | None  # TVM's printed trace (Python), None if not recorded
    trace_json: Any
    elapsed_s: float | None = None  # since the start of the run that measured it
    others_cores: float | None = None  # cores other processes used while it was timed (local runner)
    where: str | None = None  # measured elsewhere: the server (host:port), or the batch round and its machine
    waited_s: float | None = None  # ... and how long it waited for that machine

    @property
    def ok(self) -> bool:
        return self.latency_s is not None

    def to_json(self) -> dict:
        """The one encoding of a record (plain JSON)."""
        return asdict(self)

    to_dict = to_json  # the older name

    @classmethod
    def of_line(cls, trial: int, line: TrialLine, run_secs: list[float], trace_json: Any) -> TuneRecord:
        """The record of a database line (its repeats, `run_secs`, and trace) that the job's `TrialLine`
        describes (its latency, error, trace text, time, and where it was measured)."""
        rec = cls(trial, line.latency_s, run_secs, line.error, line.trace, trace_json, line.t, line.others_cores)
        rec.where, rec.waited_s = line.where, line.waited_s
        return rec


TrialRecord = TuneRecord  # the older name


@dataclass
class BestResult:
    """The job's best candidate. When the run finished, `latency_s` is the figure re-timed by
    `measure` itself in the job's process (`confirmed`: the same build, check and method);
    `tuner_latency_s` is what the search itself recorded. `others_cores` is the CPU time other
    processes used while it was re-timed (see `Measurement.quiet`)."""

    trial: int
    latency_s: float
    trace: str | None
    script: str | None
    gflops: float | None = None
    confirmed: bool = False
    tuner_latency_s: float | None = None
    method: str | None = None
    others_cores: float | None = None
    correct: bool | None = None
    min_s: float | None = None
    parallel_speed: float | None = None  # see Measurement.parallel_speed
    iqr_s: float | None = None

    @property
    def quiet(self) -> bool | None:
        """As `Measurement.quiet`, for the job's re-timing."""
        from mlc_lab._contention import quiet, spread

        return quiet(self.others_cores, self.parallel_speed, spread(self.iqr_s, self.latency_s))


@dataclass
class LiveState:
    """What the job is doing now: its phase ("starting", "building", "measuring", "searching",
    "confirming", "sharing", "done", "exhausted"), the batch size, and the latencies (None: failed) of the
    candidates measured in the current batch, before meta_schedule commits the batch."""

    phase: str
    batch: int
    pending: list
    elapsed_s: float | None = None


def _json_lines(path: str) -> list[dict]:
    """The objects of a JSON-lines file the job appends to (a line being written is left out)."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line being written
    except OSError:
        pass
    return out


def _read_as(tp: type[W], data: Any) -> W | None:
    """A file (or line) of the job's folder read strictly as the type `mlc_lab.model.tuning` declares for it, or
    None when it is not one (not written yet, being written, or not the job's)."""
    try:
        return tp.from_json(data)
    except WireError:
        return None


def _read_json(path: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _pid_is_tune_job(pid: int | None) -> bool:
    return job_running(pid, "tune")


class TuneJob:
    """A handle on a tuning job and its work directory (running or not)."""

    def __init__(self, work_dir: str, proc: subprocess.Popen | None = None) -> None:
        self.work_dir = os.path.abspath(work_dir)
        self._proc = proc
        self._cancelled = False

    # -------------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, work_dir: str) -> "TuneJob":
        """Reopen a job from its work directory (after a cancel, a crash or a kernel restart)."""
        if not os.path.isdir(work_dir):
            raise TuneError(f"no tuning work directory at {work_dir}")
        if not os.path.exists(os.path.join(work_dir, JOB_FILE)) and not os.path.exists(
            os.path.join(work_dir, RECORDS_FILE)
        ):
            raise TuneError(f"{work_dir} holds no tuning job (no {JOB_FILE} nor {RECORDS_FILE})")
        return cls(work_dir)

    def path(self, name: str) -> str:
        """A file of the job's work directory."""
        return os.path.join(self.work_dir, name)

    def session(self) -> Any:
        """A Session of the program this job tunes, read back from the work directory."""
        from mlc_lab.core.session import Session
        from mlc_lab.tvm.measure.build import module_from_text

        path = self.path(MODULE_FILE)
        if not os.path.exists(path):
            raise TuneError(f"{self.work_dir} does not hold the tuned program ({MODULE_FILE})")
        with open(path) as fh:
            module = module_from_text(fh.read())
        return Session(module, self.spec.get("func_name"))

    @property
    def spec(self) -> dict:
        return _read_json(self.path(JOB_FILE)) or {}

    def read_status(self) -> JobStatus:
        """The job's status file as written last (no state before the job wrote one, or when the file
        is not a `JobStatus`)."""
        return _read_as(JobStatus, _read_json(self.path(STATUS_FILE))) or JobStatus()

    def read_best(self) -> BestSoFar | None:
        """The job's best so far as it wrote it (`BEST_FILE`; None before it measured one, or when the
        file is not a `BestSoFar`)."""
        return _read_as(BestSoFar, _read_json(self.path(BEST_FILE)))

    @property
    def pid(self) -> int | None:
        if self._proc is not None:
            return self._proc.pid if self._proc.poll() is None else None
        pid = self.read_status().pid
        return pid if _pid_is_tune_job(pid) else None

    # -------------------------------------------------------------------------------- state

    @property
    def status(self) -> str:
        """ "running", "done", "cancelled", "failed", "interrupted" (the process went away without
        finishing: killed, crashed, machine restarted) or "not started"."""
        st = self.read_status()
        state = st.state
        if self._cancelled or state == "cancelled":
            return "cancelled"
        if self._proc is not None:
            code = self._proc.poll()
            if code is None:
                return "running"
            if state in ("done", "failed"):
                return state
            return "failed" if code > 0 else "interrupted"
        if state in ("done", "failed"):
            return state
        if state in ("starting", "running"):
            return "running" if _pid_is_tune_job(st.pid) else "interrupted"
        return "not started" if not os.path.exists(self.path(RECORDS_FILE)) else "done"

    @property
    def error(self) -> str | None:
        """Why the job failed, in one sentence plus the end of its log."""
        status = self.status
        if status not in ("failed", "interrupted"):
            return None
        msg = self.read_status().error
        if msg is None and self._proc is not None and self._proc.returncode is not None and self._proc.returncode < 0:
            try:
                name = signal.Signals(-self._proc.returncode).name
            except ValueError:
                name = str(-self._proc.returncode)
            msg = f"the tuning process died ({name})"
        msg = msg or "the tuning process stopped before finishing"
        tail = self.log_tail(1500)
        return f"{msg}\n{tail}" if tail else msg

    def log_tail(self, limit: int = 4000) -> str:
        try:
            with open(self.path(LOG_FILE), "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - limit))
                return fh.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    @property
    def trials(self) -> int:
        """The trial count asked for (records already in the work directory count toward it)."""
        return int(self.spec.get("trials", 0))

    @property
    def progress(self) -> tuple[int, int]:
        return len(self.records(with_traces=False)), self.trials

    # -------------------------------------------------------------------------------- records

    def records(self, with_traces: bool = True) -> list[TuneRecord]:
        """Every trial measured so far for this job's workload, in trial order."""
        status = self.read_status()
        index = status.workload_index
        lines = [_read_as(TrialLine, entry) for entry in _json_lines(self.path(TRIALS_FILE))]
        side = {line.line: line for line in lines if line is not None}
        out: list[TrialRecord] = []
        missing: list[tuple[int, str]] = []
        try:
            with open(self.path(RECORDS_FILE)) as fh:
                raw_lines = [x for x in fh if x.strip()]
        except OSError:
            raw_lines = []
        skip = range(*(status.imported.get("lines") or [0, 0]))
        for line_no, raw in enumerate(raw_lines):
            if line_no in skip:
                continue  # records imported from a shared database: not this job's trials
            try:
                obj = json.loads(raw)
                wl, (trace_json, run_secs, *_rest) = obj[0], obj[1]
            except (ValueError, TypeError, IndexError):
                break  # a line being written
            if index is not None and wl != index:
                continue
            secs = [float(x) for x in run_secs]
            entry = side.get(line_no)
            if entry is not None:
                out.append(TuneRecord.of_line(len(out), entry, secs, trace_json))
                continue
            ok = bool(secs) and max(secs) < FAILED_LATENCY
            error = None if ok else "the candidate failed to build or run (no detail recorded)"
            missing.append((len(out), raw))
            out.append(TuneRecord(len(out), median(secs) if ok else None, secs, error, None, trace_json))
        if with_traces and missing:
            from mlc_lab.tvm.tuning.job import trace_text_from_record

            for pos, raw in missing:
                out[pos].trace = trace_text_from_record(self.work_dir, raw)
        return out

    @property
    def flops(self) -> float | None:
        value = self.spec.get("flops")
        return float(value) if value else None

    @property
    def best(self) -> BestResult | None:
        """The fastest trial so far (latency, trace text, and TVMScript when recorded); once the
        run has finished, the figure re-timed by `measure`'s method (`confirmed=True`)."""
        recs = [r for r in self.records(with_traces=False) if r.ok]
        if not recs:
            return None
        latency, rec = min(((r.latency_s, r) for r in recs if r.latency_s is not None), key=lambda x: x[0])
        flops = self.flops
        saved = self.read_best()
        conf = saved.confirmed if saved is not None else None
        if saved is not None and conf is not None and conf.latency_s is not None and saved.trace:
            trial = next((r.trial for r in recs if r.run_secs == conf.run_secs), rec.trial)
            return BestResult(
                trial=trial,
                latency_s=conf.latency_s,
                trace=saved.trace,
                script=saved.script,
                gflops=flops / conf.latency_s / 1e9 if flops else None,
                confirmed=True,
                tuner_latency_s=conf.tuner_latency_s,
                method=conf.method,
                others_cores=conf.others_cores,
                correct=conf.correct,
                min_s=conf.min_s,
                parallel_speed=conf.parallel_speed,
                iqr_s=conf.iqr_s,
            )
        script = None
        trace = rec.trace
        if saved is not None and abs(saved.latency_s - latency) <= 1e-12 * max(1.0, latency):
            script = saved.script
            trace = trace or saved.trace
        if trace is None:
            trace = next((r.trace for r in self.records() if r.trial == rec.trial), None)
        return BestResult(
            trial=rec.trial,
            latency_s=latency,
            trace=trace,
            script=script,
            gflops=flops / latency / 1e9 if flops else None,
            tuner_latency_s=latency,
        )

    def live(self) -> LiveState:
        """The phase the job is in and the candidates measured since the last committed batch."""
        phase, batch, elapsed = "starting", 0, None
        trials: list = []
        st = self.read_status()
        started = st.started_at
        for entry in _json_lines(self.path(LIVE_FILE)):  # a line being written is left out
            if "phase" in entry:
                if entry["phase"] == "starting":
                    trials = []  # a new run in the same work directory counts from 0 again
                phase, batch = entry["phase"], int(entry.get("n") or 0)
            elif "trial" in entry:
                trials.append(entry.get("latency_s"))
            elapsed = entry.get("t", elapsed)
        committed = len(self.records(with_traces=False)) - st.done_before
        pending = trials[committed:] if phase in ("measuring", "building") else []
        if started and phase not in ("done",) and self.status == "running":
            elapsed = time.time() - started
        return LiveState(
            phase=phase if self.status == "running" else self.status, batch=batch, pending=pending, elapsed_s=elapsed
        )

    def events(self) -> list[dict]:
        """What happened to the machines that measure elsewhere, in order, since this run started:
        {"event": "lost" | "hung" | "retry" | "round" | ..., "t", ...} (`mlc_lab.tvm.tuning.live`)."""
        out: list[dict] = []
        for entry in _json_lines(self.path(LIVE_FILE)):
            if entry.get("phase") == "starting":
                out = []
            elif "event" in entry:
                out.append(entry)
        return out

    @property
    def stopped_early(self) -> StoppedEarly | None:
        """{"measured", "requested", "reason"} when the run ended before its trial count because
        the search space had no new candidate left."""
        return self.read_status().stopped_early

    # -------------------------------------------------------------------------------- control

    def wait(self, timeout: float | None = None, poll_s: float = 0.25) -> str:
        """Block until the job ends (or `timeout` seconds pass); returns `status`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._proc is not None:
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            return self.status
        while self.status == "running":
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(poll_s)
        return self.status

    def cancel(self, grace_s: float = 3.0) -> str:
        """Stop the job and every process it started (its process group). Records stay on disk."""
        pid = self.pid
        if pid is None:
            return self.status
        stop_group(pid, grace_s, popen=self._proc)
        if str(self.spec.get("runner", "")).startswith("batch:"):  # its queued or running Slurm jobs too
            from mlc_lab.tvm.measure.batch import cancel_pending

            cancel_pending(self.work_dir)
        st = self.read_status()
        if st.state not in ("done", "failed"):
            st.state, st.finished_at = "cancelled", time.time()
            _write_json(self.path(STATUS_FILE), st.to_json())
        self._cancelled = st.state == "cancelled"
        return self.status

    def summary(self) -> dict:
        """Plain figures for a CLI or a dashboard."""
        best = self.best
        recs = self.records(with_traces=False)
        return {
            "work_dir": self.work_dir,
            "status": self.status,
            "trials": len(recs),
            "trials_requested": self.trials,
            "failed": sum(1 for r in recs if not r.ok),
            "best_latency_s": best.latency_s if best else None,
            "best_gflops": best.gflops if best else None,
            "best_trial": best.trial if best else None,
            "best_trace": best.trace if best else None,
            "best_confirmed": best.confirmed if best else None,
            "best_tuner_latency_s": best.tuner_latency_s if best else None,
            "stopped_early": self.stopped_early,
            "error": self.error,
        }

    def __repr__(self) -> str:
        done, total = self.progress
        return f"TuneJob({self.work_dir!r}, status={self.status!r}, trials={done}/{total})"


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------- tune()


def _session_like(obj: Any) -> bool:
    return hasattr(obj, "original") and hasattr(obj, "module")


def tune(
    session_or_module: Any,
    target: Any = "cpu",
    trials: int = 64,
    space: str | Callable | list = "auto",
    work_dir: str | None = None,
    runner: str = "local",
    *,
    func_name: str | None = None,
    num_trials_per_iter: int = 16,
    seed: int | None = None,
    min_repeat_ms: float = 10.0,
    cost_model: str = "xgb",
    strategy: str = "evolutionary",
    timeout_s: float = 30.0,
    database: str | None = None,
    widen: bool = False,
    population: int | None = None,
    confirm: bool = True,
    servers: int = 1,
) -> TuneJob:
    """Start meta_schedule on a Session (or an IRModule) and return a `TuneJob` at once.

    space: "auto" (meta_schedule's default space, from the session's original program);
           "session" (the session's own steps, each split with literal factors sampled instead);
           a trace in JSON form (same rewriting); or a function `fn(sch) -> sch` such as the
           course's `stochastic_schedule_mm` (shipped to the job with cloudpickle).
    widen: with space="session" or a function, search meta_schedule's default space too (its
           multi-level tiling and parallel/vectorize/unroll choices), for when the student's own
           space holds only a few distinct candidates.
    runner: "local"; "rpc://HOST:PORT/KEY": a TVM RPC tracker's servers (which may run TVM's
           runtime alone), `servers` candidates at once, never two timings at once on one machine,
           a server that dies or hangs worked around; "batch:slurm[:PARTITION]" or "batch:COMMAND":
           each round of candidates a folder that a Slurm job (or `COMMAND FOLDER`) measures
           (docs/measuring.md).
    database: a class's shared meta_schedule database: a folder (e.g. on a shared drive), or
           "rpc://HOST:PORT" / "rpc://TRACKER:PORT/KEY" for one served by `mlc-lab database serve`.
           Its records of the same workload and target seed the search and warm the cost model
           (they do not count as this job's trials), and this job's records are added to it at
           the end (under a lock: many students may finish at once).
    strategy, cost_model: meta_schedule's ("evolutionary" + "xgb" by default; "replay-trace" +
           "random" is plain random sampling, much cheaper per round). `population`: the
           evolutionary search's population (64 for small kernels, 256 above 1e8 FLOPs).
    confirm: at the end, re-time the best candidates by `measure`'s method (`mlc_lab.tvm.measure`);
           `TuneJob.best` then reports that figure.
    work_dir: where everything is kept; a directory that already holds trials continues.
    Every candidate is timed by mlc_lab's one method (`mlc_lab.tvm.measure`, TUNING variant).
    """
    from mlc_lab.tvm.tuning import job as tuning

    if trials < 1:
        raise TuneError("trials must be at least 1")
    checked, module_text, pickled = _checked_request(
        tuning, session_or_module, target, space, runner, func_name, database, widen
    )
    flops, nbytes = _flops_and_bytes(module_text, checked["func_name"])
    spec = {
        "version": 1,
        **checked,
        "trials": int(trials),
        "servers": int(servers),
        "num_trials_per_iter": int(num_trials_per_iter),
        "seed": seed,
        "min_repeat_ms": float(min_repeat_ms),
        "population": population,
        "confirm": bool(confirm),
        "cost_model": cost_model,
        "strategy": strategy,
        "timeout_s": float(timeout_s),
        "num_tuning_cores": usable_cores(),
        "flops": flops,
        "bytes": nbytes,
        "created_at": time.time(),
    }
    return _start(os.path.abspath(work_dir or tuning.scratch_dir()), spec, module_text, pickled)


def _checked_request(
    tuning: Any,
    session_or_module: Any,
    target: Any,
    space: Any,
    runner: str,
    func_name: str | None,
    database: str | None,
    widen: bool,
) -> tuple[dict, str, bytes | None]:
    """What to tune, where and how, each checked in turn (a TuneError for the first wrong one): the
    job file's function, target, space, runner and shared database; the one-function program's
    text; the space function pickled (None for the other kinds of space)."""
    workload = session_or_module
    if _session_like(session_or_module):
        workload = session_or_module.original
        func_name = func_name or getattr(session_or_module, "func_name", None)
    space_spec, pickled = _space_spec(tuning, session_or_module, space)
    try:
        runner_spec = tuning.parse_runner(runner)
    except ValueError as exc:
        raise TuneError(str(exc)) from None
    _check_runner(runner_spec)
    shared_db = _shared_database(database)
    if widen:
        if space_spec["kind"] == "auto":
            raise TuneError(
                "widen=True widens a session-derived or function space; space='auto' is already the default space"
            )
        space_spec["widen"] = True
    try:
        func_name, module_text = tuning.prepare_workload(workload, func_name)
        target_json = tuning.tuning_target(target)
    except ValueError as exc:
        raise TuneError(str(exc)) from None
    if target_json.get("kind") == "cuda" and runner_spec["kind"] == "local":
        _need_a_gpu()
    runner = runner if runner_spec["kind"] in ("rpc", "batch") else "local"
    checked = {
        "func_name": func_name,
        "target": target_json,
        "space": space_spec,
        "runner": runner,
        "shared_db": shared_db,
    }
    return checked, module_text, pickled


def _check_runner(spec: dict) -> None:
    """Say now, not once the job has started, that the measuring machines are not there: a tracker
    that does not answer or lacks the key, a batch command or Slurm's sbatch not on the PATH."""
    import shutil

    if spec["kind"] == "rpc":
        from mlc_lab.tvm.measure import pool

        try:
            pool.check_tracker(spec["host"], spec["port"], spec["key"])
        except pool.PoolError as exc:
            raise TuneError(str(exc)) from None
    elif spec["kind"] == "batch":
        from mlc_lab.tvm.measure import batch

        how = batch.parse_batch(spec["spec"])
        tool = "sbatch" if how.kind == "slurm" else how.command[0]
        if shutil.which(tool) is None:
            where = "is this a Slurm login node?" if how.kind == "slurm" else "give its path, or put it on the PATH"
            raise TuneError(f"the batch runner needs {tool!r}, which is not on the PATH: {where}")


def _space_spec(tuning: Any, session_or_module: Any, space: Any) -> tuple[dict, bytes | None]:
    """The job's space as JSON, and the user's space function pickled (None for the other kinds)."""
    if isinstance(space, str) and space == "auto":
        return {"kind": "auto"}, None
    if isinstance(space, str) and space == "session":
        if not _session_like(session_or_module):
            raise TuneError("space='session' needs a Session (its steps define the search space)")
        return {"kind": "session", "insts": _rewrite(tuning, session_or_module.trace_json)}, None
    if isinstance(space, (list, tuple)):
        return {"kind": "session", "insts": _rewrite(tuning, list(space))}, None
    if callable(space):
        import cloudpickle

        return {"kind": "callable", "name": getattr(space, "__name__", "space")}, cloudpickle.dumps(space)
    raise TuneError(f"space must be 'auto', 'session', a trace (JSON) or a function, not {space!r}")


def _shared_database(database: str | None) -> str | None:
    """A class database as the job reads it: an absolute folder, or an rpc:// address that answers now."""
    if database is None:
        return None
    database = str(database)
    if database.startswith("rpc://"):
        from mlc_lab.tvm.tuning import shared_db

        try:
            shared_db.parse(database)
            shared_db.check(database)  # say now, not when the job has started, that it is not there
        except (ValueError, shared_db.ClassDatabaseError) as exc:
            raise TuneError(str(exc)) from None
        return database
    if "://" in database:
        raise TuneError(
            f"database must be a folder path or 'rpc://HOST:PORT[/KEY]' (a class database served by "
            f"`mlc-lab database serve`), not {database!r}"
        )
    return os.path.abspath(os.path.expanduser(database))


def _need_a_gpu() -> None:
    from mlc_lab.tvm.measure.build import gpu_present

    if not gpu_present():
        raise NoGPUError(
            "no CUDA GPU found; you can still build, inspect and visualise CUDA schedules, "
            "or tune through an RPC runner on a machine that has one (runner='rpc://HOST:PORT/KEY')",
            kind="no_gpu",
        )


def _flops_and_bytes(module_text: str, func_name: str) -> tuple[float | None, float | None]:
    """The function's FLOPs and its compulsory traffic (every element of every argument once: the
    roofline's bytes, as measure's); (None, None) when they cannot be counted."""
    try:
        import numpy as np

        from mlc_lab.tvm.measure.build import estimate_flops, module_from_text, param_specs

        one = module_from_text(module_text)
        flops = estimate_flops(one, func_name)
        specs = param_specs(one, func_name)
        return flops, float(sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for _, shape, dtype in specs))
    except Exception:  # noqa: BLE001
        return None, None


def _start(work_dir: str, spec: dict, module_text: str, pickled: bytes | None) -> TuneJob:
    """Write the job's files into `work_dir` and start it there; a run already going there is refused.
    A directory that already holds trials of the same program keeps their workload's index."""
    os.makedirs(work_dir, exist_ok=True)
    job = TuneJob(work_dir)
    if job.pid is not None:
        raise TuneError(f"a tuning job is already running in {work_dir} (pid {job.pid}); cancel it first")
    old_status = job.read_status()
    try:
        with open(job.path(MODULE_FILE)) as fh:
            old_module = fh.read()
    except OSError:
        old_module = None
    _write_text(job.path(MODULE_FILE), module_text)
    if pickled is not None:
        with open(job.path(SPACE_PICKLE), "wb") as fh:
            fh.write(pickled)
    _write_json(job.path(JOB_FILE), spec)
    status = JobStatus(state="starting", started_at=time.time())
    if old_module == module_text:
        status.workload_index = old_status.workload_index
    _write_json(job.path(STATUS_FILE), status.to_json())

    proc = start_job("tune", work_dir, job.path(LOG_FILE))
    status.pid = proc.pid
    current = job.read_status()
    if current.state == "starting" and current.pid is None:
        _write_json(job.path(STATUS_FILE), status.to_json())
    return TuneJob(work_dir, proc)


def _rewrite(tuning: Any, trace_json: Any) -> list:
    try:
        return tuning.rewrite_session_space(trace_json)
    except ValueError as exc:
        raise TuneError(str(exc)) from None


def _write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------- report


def write_report(job: TuneJob, path: str | None = None) -> str:
    """A self-contained HTML page: latency per trial with the best so far, the best trace and script."""
    import html

    import plotly.graph_objects as go

    path = path or os.path.join(job.work_dir, "report.html")
    recs = job.records(with_traces=False)
    ok = [r for r in recs if r.ok]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[r.trial for r in ok],
            y=[r.latency_s * 1e3 for r in ok if r.latency_s is not None],
            mode="markers",
            name="trial",
        )
    )
    best_x, best_y, cur = [], [], None
    for r in recs:
        if r.latency_s is not None and (cur is None or r.latency_s < cur):
            cur = r.latency_s
        if cur is not None:
            best_x.append(r.trial)
            best_y.append(cur * 1e3)
    fig.add_trace(go.Scatter(x=best_x, y=best_y, mode="lines", name="best so far", line={"shape": "hv"}))
    failed = [r for r in recs if not r.ok]
    if failed:
        top = max((r.latency_s for r in ok if r.latency_s is not None), default=1e-3) * 1e3
        fig.add_trace(
            go.Scatter(
                x=[r.trial for r in failed],
                y=[top] * len(failed),
                mode="markers",
                name="failed",
                marker={"symbol": "x", "color": "red"},
                text=[(r.error or "")[:200] for r in failed],
            )
        )
    fig.update_layout(
        title=f"meta_schedule: {len(recs)} trials", xaxis_title="trial", yaxis_title="latency (ms)", yaxis_type="log"
    )
    summary = job.summary()
    best = job.best
    spec = job.spec
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>mlc-lab tuning report</title>",
        "<style>body{font-family:sans-serif;margin:2em} pre{background:#f6f8fa;padding:1em;overflow:auto}</style>",
        "</head><body>",
        f"<h1>Tuning report: {html.escape(str(spec.get('func_name', '')))}</h1>",
        "<ul>",
        f"<li>status: {html.escape(summary['status'])}</li>",
        f"<li>trials: {summary['trials']} (failed {summary['failed']})</li>",
        f"<li>target: <code>{html.escape(json.dumps(spec.get('target')))}</code></li>",
    ]
    if best is not None:
        gf = f", {best.gflops:.1f} GFLOPS" if best.gflops else ""
        parts.append(f"<li>best: {best.latency_s * 1e3:.4f} ms at trial {best.trial}{gf}</li>")
    parts.append("</ul>")
    parts.append(fig.to_html(full_html=False, include_plotlyjs=True))
    if best is not None:
        parts.append("<h2>Best trace</h2><pre>" + html.escape(best.trace or "(not recorded)") + "</pre>")
        parts.append("<h2>Best program</h2><pre>" + html.escape(best.script or "(not recorded)") + "</pre>")
    parts.append("</body></html>")
    _write_text(path, "\n".join(parts))
    return path
