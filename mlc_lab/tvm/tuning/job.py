"""meta_schedule glue. `run_job` runs inside the tuning job (the worker's "tune" request,
``python -m mlc_lab.core.worker_main --job tune WORK_DIR``);
the small helpers at the top (`prepare_workload`, `rewrite_session_space`, `tuning_target`) are
called by the kernel-side `mlc_lab.core.tuning` to write the job's files.

The work directory's files are declared in `mlc_lab.model.tuning` (their names, and what each holds).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mlc_lab._threads import ensure_tvm_threads, usable_cores

ensure_tvm_threads()

import tvm  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

from mlc_lab.tvm.measure import build as _build  # noqa: E402
from mlc_lab.tvm.tuning import shared_db  # noqa: E402
from mlc_lab.tvm.tuning import runner_process  # noqa: E402
from mlc_lab.tvm.tuning.live import LiveLog  # noqa: E402
from mlc_lab.tvm.tuning.build import BuiltCandidates, InProcessBuilder, install_fast_stack  # noqa: E402,F401  (benchmarks use both)
from mlc_lab import timeline  # noqa: E402
from mlc_lab.tvm.tuning.model import EarlyXGB, import_in_background, make_cost_model, warm_cost_model  # noqa: E402
from mlc_lab.tvm.tuning.runners import LiveRunner, make_runner, parse_runner  # noqa: E402  (the job's runners)
from mlc_lab.model.tuning import (  # noqa: E402,F401  (the job's files, declared once; LIVE_FILE and LOG_FILE re-exported)
    BEST_FILE,
    CONTENTION_FILE,
    JOB_FILE,
    LIVE_FILE,
    LOG_FILE,
    MODULE_FILE,
    RECORDS_FILE,
    SPACE_PICKLE,
    STATUS_FILE,
    TRIALS_FILE,
    WORKLOADS_FILE,
    BestSoFar,
    ConfirmedBest,
    JobStatus,
    TrialLine,
    median as _median,
)

TUNING_MIN_REPEAT_MS = 10.0
CONFIRM_TOP = 3  # candidates re-timed by measure's method at the end of a run
CONFIRM_WITHIN = 1.25  # ... those within this factor of the best tuner figure
POPULATION = 64  # evolutionary search's population for small kernels (meta_schedule's default: 512)
POPULATION_LARGE = 256  # ... for kernels above LARGE_FLOPS, where measuring dominates a round
GENETIC_ITERS = 2  # genetic steps per round for small kernels (meta_schedule's default: 4)
LARGE_FLOPS = 1e8  # above this, a kernel takes long enough to measure that the full search is cheap


# ----------------------------------------------------------------------------------------- kernel side


def prepare_workload(module: Any, func_name: str | None) -> tuple[str, str]:
    """(function name, save_json text of a module holding only that function)."""
    func_name, one = _build.single_function_module(module, func_name)
    return func_name, _build.module_to_text(one)


def tuning_target(spec: Any) -> dict:
    """A JSON target dict for meta_schedule: the native CPU with "num-cores", or CUDA with the limits
    VerifyGPUCode needs."""
    target = _build.resolve_target(spec)
    out = _build.target_to_json(target)
    if out.get("kind") == "llvm":
        out.setdefault("num-cores", usable_cores())
    elif out.get("kind") == "cuda":
        out.setdefault("max_threads_per_block", int(out.get("max_num_threads", 1024)))
        out.setdefault("max_shared_memory_per_block", _build.DEFAULT_MAX_SHARED_BYTES)
        out.setdefault("thread_warp_size", 32)
        out.setdefault("registers_per_block", 65536)
    return out


def rewrite_session_space(trace_json: Any, func_name: str = "main") -> list:
    """Turn a session's trace into a search space: every Split whose factors are all literals
    (or None) samples its factors instead, with `sample_perfect_tile` of the same loop and
    n = number of factors. Decisions are dropped, so every sampling instruction is re-sampled.

    `get_sblock` calls are pointed at `func_name`: meta_schedule names its one-function workload
    "main". Pure JSON manipulation; the result is replayed with `Trace.apply_json_to_schedule`,
    never exec'd.
    """
    if isinstance(trace_json, str):
        trace_json = json.loads(trace_json)
    if not isinstance(trace_json, list):
        raise ValueError("a trace in JSON form is a list [instructions, decisions]")
    insts = (
        trace_json[0]
        if len(trace_json) == 2
        and isinstance(trace_json[0], list)
        and (not trace_json[0] or isinstance(trace_json[0][0], list))
        else trace_json
    )
    used = set()
    for inst in insts:
        _check_inst(inst)
        used.update(x for x in inst[3] if isinstance(x, str))
    out: list = []
    n_new = 0
    for inst in insts:
        kind, inputs, attrs, outputs = inst
        if kind == "EnterPostproc":
            break  # meta_schedule adds its own postprocessing
        if kind == "GetSBlock" and len(attrs) == 2:
            attrs = [attrs[0], func_name]
        if kind == "Split" and len(inputs) >= 3:
            loop, factors = inputs[0], inputs[1:]
            if all(isinstance(f, int) or f in (None, "None") for f in factors):
                names = []
                for q in range(len(factors)):
                    name = f"v_mlc{n_new}_{q}"
                    while name in used:
                        name += "_"
                    used.add(name)
                    names.append(name)
                n_new += 1
                inner = factors[-1]
                max_inner = max(16, int(inner)) if isinstance(inner, int) else 64
                out.append(["SamplePerfectTile", [loop], [len(factors), max_inner], names])
                out.append(["Split", [loop, *names], attrs, outputs])
                continue
        out.append([kind, inputs, attrs, outputs])
    if n_new == 0:
        raise ValueError(
            "the session has no split with literal factors, so there is nothing to search over; "
            "use space='auto' or add a split"
        )
    return out


def _check_inst(inst: Any) -> None:
    if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)):
        raise ValueError(f"not a trace instruction: {inst!r}")


# ----------------------------------------------------------------------------------------- subprocess


class TraceSpace:
    """A space function that replays a rewritten session trace (JSON) with fresh samples."""

    def __init__(self, insts: list) -> None:
        self.insts = insts

    def __call__(self, sch: Any) -> Any:
        tvm.s_tir.schedule.Trace.apply_json_to_schedule([self.insts, []], sch)
        return sch


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def _workload_index(work_dir: str, workload: Any) -> int:
    """Position of `workload` in database_workload.json (the index its records carry)."""
    key = workload.as_json()[0]
    with open(os.path.join(work_dir, WORKLOADS_FILE)) as fh:
        for i, line in enumerate(x for x in fh if x.strip()):
            if json.loads(line)[0] == key:
                return i
    raise RuntimeError("the workload was committed but is not in database_workload.json")


def _records_of(work_dir: str, index: int) -> int:
    path = os.path.join(work_dir, RECORDS_FILE)
    if not os.path.exists(path):
        return 0
    n = 0
    with open(path) as fh:
        for line in fh:
            try:
                if json.loads(line)[0] == index:
                    n += 1
            except (ValueError, IndexError, TypeError):
                continue
    return n


def _make_progress_callback(
    work_dir: str,
    first_line: int,
    best_latency: float | None,
    t0: float,
    live: "LiveLog | None" = None,
    runner: "LiveRunner | None" = None,
) -> Any:
    @derived_object
    class ProgressCallback(ms.measure_callback.PyMeasureCallback):
        """Writes one line per candidate to mlc_lab_trials.jsonl (after AddToDatabase wrote the
        database line), and the best program so far to mlc_lab_best.json."""

        def __init__(self) -> None:
            super().__init__()
            self.line = first_line
            self.best = best_latency

        def apply(self, _task_scheduler, _task_id, measure_candidates, builder_results, runner_results) -> None:
            timeline.event("batch_measured", n=len(measure_candidates))
            lines = []
            for cand, br, rr in zip(measure_candidates, builder_results, runner_results):
                error = br.error_msg or rr.error_msg
                # a candidate that built was handed to the runner: its facts are kept by its artifact
                facts = runner.facts_of(br.artifact_path) if runner is not None and not br.error_msg else {}
                secs = [float(x) for x in rr.run_secs] if rr.run_secs is not None and not error else []
                latency = _median(secs) if secs else None
                trace = str(cand.sch.trace)
                line = TrialLine(
                    line=self.line,
                    latency_s=latency,
                    run_secs=secs,
                    error=str(error)[:4000] if error else None,
                    trace=trace,
                    others_cores=facts.get("others_cores"),
                    where=facts.get("where"),
                    waited_s=facts.get("waited_s"),
                    t=round(time.time() - t0, 3),
                )
                lines.append(json.dumps(line.to_json()))
                self.line += 1
                if latency is not None and (self.best is None or latency < self.best):
                    self.best = latency
                    best = BestSoFar(latency_s=latency, line=self.line - 1, trace=trace, script=cand.sch.mod.script())
                    _write_json(os.path.join(work_dir, BEST_FILE), best.to_json())
            if lines:
                with open(os.path.join(work_dir, TRIALS_FILE), "a") as fh:
                    fh.write("\n".join(lines) + "\n")
            if live is not None:
                live.phase("searching" if lines else "exhausted")

    return ProgressCallback()


def tune_request(req: dict) -> int:
    """The worker's "tune" job: the exit status of the tuning process."""
    return run_job(req["work_dir"])


@dataclass
class _Task:
    """One job's workload as meta_schedule tunes it, with the database that holds its records."""

    work_dir: str
    job: dict  # mlc_lab_job.json
    mod: Any  # the program, as tune_tir takes it
    target: Any
    cores: int
    db: Any
    task_mod: Any  # its function normalised as tune_tir commits it
    workload: Any
    index: int  # the workload's line in database_workload.json, which its records carry
    imported: dict  # the records taken from a shared database (see shared_db.import_shared)

    def measured(self) -> int:
        """This job's records in the database (those imported from a shared one are not its trials)."""
        return _records_of(self.work_dir, self.index) - int(self.imported.get("count", 0))


def run_job(work_dir: str) -> int:
    """Body of the tuning job: read mlc_lab_job.json, tune, keep the status file current."""
    work_dir = os.path.abspath(work_dir)
    status_path = os.path.join(work_dir, STATUS_FILE)
    t0 = time.time()
    timeline.event("job_main")
    status = JobStatus(state="starting", pid=os.getpid(), started_at=t0)
    built = BuiltCandidates()  # one job's libraries, across its stages
    _write_json(status_path, status.to_json())
    try:
        with open(os.path.join(work_dir, JOB_FILE)) as fh:
            job = json.load(fh)
        install_fast_stack()
        live = LiveLog(work_dir, t0)
        runner_future = _start_runner(work_dir, job, live)
        task = _open_task(work_dir, job)
        done, trials = task.measured(), int(job["trials"])
        _set(
            status, state="running", workload_index=task.index, done_before=done, trials=trials, imported=task.imported
        )
        _write_json(status_path, status.to_json())
        live.phase("starting")
        if done < trials:
            _search(task, LiveRunner(runner_future, live, os.path.join(work_dir, CONTENTION_FILE)), built, done, t0)
        _finish(task, status, live)
        _set(status, state="done", finished_at=time.time(), builds_reused=built.hits)
        _write_json(status_path, status.to_json())
        live.phase("done")
        timeline.event("done")
        return 0
    except BaseException as exc:  # noqa: BLE001 - recorded for the kernel, then re-raised as a status
        detail = traceback.format_exc()
        _set(status, state="failed", finished_at=time.time(), error=f"{type(exc).__name__}: {exc}", detail=detail)
        _write_json(status_path, status.to_json())
        print(detail, file=sys.stderr)
        return 1
    finally:
        built.close()


def _set(status: JobStatus, **changes: Any) -> None:
    for name, value in changes.items():
        setattr(status, name, value)


def _start_runner(work_dir: str, job: dict, live: LiveLog) -> Future:
    """The job's runner, started in a thread: LocalRunner waits for its measuring process to
    import TVM (1-4 s), while this process reads the database and searches its first batch."""
    # the runner's workers read the best latency so far from one file (early stop of slow
    # candidates) and report others' cores to another; set before the runner's process starts (if
    # runner_process.prestart has not started it already)
    os.environ.update(runner_process.runner_env(work_dir))
    starter = ThreadPoolExecutor(max_workers=1)
    runner_future = starter.submit(
        make_runner,
        {**parse_runner(job.get("runner", "local")), "servers": job.get("servers", 1)},
        job.get("min_repeat_ms", TUNING_MIN_REPEAT_MS),
        job.get("timeout_s", 30),
        work_dir=work_dir,
        job=job,
        live=live,
    )
    starter.shutdown(wait=False)
    runner_future.add_done_callback(lambda _f: timeline.event("runner_ready"))
    return runner_future


def _open_task(work_dir: str, job: dict) -> _Task:
    """The job's program committed to the work directory's database, with the records of a shared
    database imported first when the job names one."""
    with open(os.path.join(work_dir, MODULE_FILE)) as fh:
        mod = _build.module_from_text(fh.read())
    target = tvm.target.Target(job["target"])
    import_tensor_intrinsics(target)
    cores = int(job.get("num_tuning_cores") or usable_cores())
    db = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")
    # tune_tir adds tirx.noalias etc. to each task function; commit the same normalised form
    task_mod = ms.tune_context._normalize_mod(mod[job["func_name"]])  # noqa: SLF001  (what tune_tir commits)
    workload = db.commit_workload(task_mod)
    index = _workload_index(work_dir, workload)
    imported = dict(status_of(work_dir).imported)
    if job.get("shared_db"):
        imported = shared_db.import_shared(job["shared_db"], work_dir, db, task_mod, target, imported)
    return _Task(work_dir, job, mod, target, cores, db, task_mod, workload, index, imported)


def _search(task: _Task, runner: LiveRunner, built: BuiltCandidates, done: int, t0: float) -> None:
    """meta_schedule over the job's stages (`_stages`), with one cost model and one database across
    them, until the job has its trials or the space has no new candidate."""
    job, remaining = task.job, int(task.job["trials"]) - done
    per_iter = int(job.get("num_trials_per_iter", 16))
    first_batch = done == 0 and not task.imported.get("count")
    cost_model: Any = make_cost_model(job.get("cost_model", "xgb"), remaining, per_iter, task.cores)
    if isinstance(cost_model, EarlyXGB) and "xgboost" not in sys.modules:
        # XGBoost is first needed to train on the first batch's results, right after they
        # are measured, and its import takes 0.4-0.6 s on one core while the other waits:
        # import it now, beside the first search and builds, and be done before measuring
        runner.before_measuring.append(import_in_background("xgboost"))
    if not first_batch and isinstance(cost_model, EarlyXGB):
        cost_model = warm_cost_model(task.task_mod, task.target, task.db, task.workload, task.cores, cost_model)
    saved = read_best(os.path.join(task.work_dir, BEST_FILE))
    best = saved.latency_s if saved is not None else None
    # ours right after AddToDatabase (it names the database line), before the cost model's update
    default = list(ms.MeasureCallback.create("default"))
    first_line = shared_db.count_lines(os.path.join(task.work_dir, RECORDS_FILE))
    ours = _make_progress_callback(task.work_dir, first_line, best, t0, runner.live, runner)
    for space, stage_trials, strategy in _stages(
        job, task.work_dir, task.task_mod, task.target, remaining, per_iter, first_batch
    ):
        left = int(job["trials"]) - task.measured()
        if left <= 0:
            break
        runner.live.phase("searching")
        timeline.event("stage", trials=min(left, stage_trials))
        # the second stage starts from the first one's records (population seeds) and the model they trained
        ms.tune_tir(
            mod=task.mod,
            target=task.target,
            work_dir=task.work_dir,
            max_trials_global=min(left, stage_trials),
            num_trials_per_iter=per_iter,
            builder=InProcessBuilder(live=runner.live, built=built),
            runner=runner,
            database=task.db,
            cost_model=cost_model,
            measure_callbacks=[*default[:1], ours, *default[1:]],
            space=space,
            strategy=strategy,
            seed=job.get("seed"),
            num_tuning_cores=task.cores,
        )
    runner.close()


def _finish(task: _Task, status: JobStatus, live: LiveLog) -> None:
    """After the search: say why it stopped short if it did, re-time the best (local runner only),
    and add this job's records to the shared database."""
    job, measured = task.job, task.measured()
    if measured < int(job["trials"]):
        status.stopped_early = {
            "measured": measured,
            "requested": int(job["trials"]),
            "reason": f"the search space holds only {measured} distinct candidates, and all were measured",
        }
    if job.get("confirm", True) and parse_runner(job.get("runner", "local"))["kind"] == "local":
        live.phase("confirming", CONFIRM_TOP)
        with timeline.span("confirm"):
            speed_probe = float(job.get("flops") or 0) >= LARGE_FLOPS
            confirm_best(task.work_dir, task.db, task.workload, task.target, speed_probe=speed_probe)
    if job.get("shared_db"):
        live.phase("sharing")
        status.shared = shared_db.share(job["shared_db"], task.work_dir, task.index, task.imported)


def status_of(work_dir: str) -> JobStatus:
    """The job's status as written last (no state when there is none, or it is not a `JobStatus`)."""
    try:
        with open(os.path.join(work_dir, STATUS_FILE)) as fh:
            return JobStatus.from_json(json.load(fh))
    except (OSError, ValueError):  # WireError among them
        return JobStatus()


def _stages(
    job: dict, work_dir: str, task_mod: Any, target: Any, remaining: int, per_iter: int, first_run: bool
) -> list[tuple[Any, int, Any]]:
    """(space, trials, search strategy) in order.

    For the default space on a matrix product, the packed-panel sketch (`mlc_lab.tvm.tuning.cpu_space`)
    gets the first batches: one drawn at random on a fresh run (distinct samples, no genetic
    steps: before any measurement the cost model has nothing to say, and breeding guided by it
    would only cost time, 2.2 s of search at load 6 -> 0.4 s), then one bred from the best so far
    (a continued or warm-started run starts here, from the records it has). Only then is the
    union of both spaces searched, with those records seeding its population. Without this,
    meta_schedule's evolutionary search draws its candidates evenly from the union's design
    spaces (the sketch is one of four) and breeds from whatever it measured: a fresh 512^3 run
    measured 1 sketch candidate in 64 trials, and a warm-started one, whose cost model had seen
    only sketch candidates, spent its first batch on default-space ones it could not judge."""
    from mlc_lab.tvm.tuning.cpu_space import packed_panel_space

    space = _space(job, work_dir, task_mod, target)
    if job["space"]["kind"] == "auto" and remaining > per_iter:
        sketch = packed_panel_space(task_mod["main"], target)
        if sketch is not None:
            stages = []
            if first_run:
                stages.append(
                    (
                        sketch,
                        per_iter,
                        ms.search_strategy.EvolutionarySearch(
                            population_size=2 * per_iter, init_min_unmeasured=2 * per_iter, genetic_num_iters=0
                        ),
                    )
                )
            stages.append((sketch, per_iter, _strategy(job)))
            return [*stages, (space, remaining, _strategy(job))]
    return [(space, remaining, _strategy(job))]


def _space(job: dict, work_dir: str, task_mod: Any, target: Any) -> Any:
    """The search space: meta_schedule's default one plus, for a matrix product on a CPU, the
    packed-panel GEMM sketch of `mlc_lab.tvm.tuning.cpu_space` ("auto"); or the student's own."""
    from mlc_lab.tvm.tuning.cpu_space import auto_space

    space_spec = job["space"]
    kind = space_spec["kind"]
    if kind == "auto":
        return auto_space(task_mod["main"], target)
    if kind == "session":
        own = ms.space_generator.ScheduleFn(TraceSpace(space_spec["insts"]))
    elif kind == "callable":
        import cloudpickle

        with open(os.path.join(work_dir, SPACE_PICKLE), "rb") as fh:
            fn = cloudpickle.load(fh)
        own = ms.space_generator.ScheduleFn(fn)
    else:
        raise ValueError(f"unknown space {space_spec!r}")
    if space_spec.get("widen"):
        # the student's space and meta_schedule's own (multi-level tiling, parallel/vectorize/unroll)
        default = auto_space(task_mod["main"], target)
        extra = (
            list(default.space_generators) if isinstance(default, ms.space_generator.SpaceGeneratorUnion) else [default]
        )
        return ms.space_generator.SpaceGeneratorUnion([own, *extra])
    return own


def _strategy(job: dict) -> Any:
    name = job.get("strategy", "evolutionary")
    if name != "evolutionary":
        return name
    # Search effort in proportion to what a candidate costs to measure: for a small kernel the
    # search dominates a round (meta_schedule's 512 x 4 genetic steps take longer than measuring
    # 16 candidates), for a large one measuring does and the full search is cheap by comparison.
    # With the cost model predicting from the second batch (EarlyXGB), every genetic step extracts
    # features of the whole population: the search effort is what a round costs.
    small = float(job.get("flops") or 0) < LARGE_FLOPS
    # 128 -> 64 for small kernels cut a 64-trial 128^3 run's CPU time by a quarter (43.6 -> 33.0 s)
    population = int(job.get("population") or (POPULATION if small else POPULATION_LARGE))
    return ms.search_strategy.EvolutionarySearch(
        population_size=population,
        init_min_unmeasured=min(50, population // 2),
        genetic_num_iters=GENETIC_ITERS if small else GENETIC_ITERS + 1,
    )


# what mlc_lab_best.json's "confirmed" keeps of the winner's re-timing (measure's figures, the tuner's)
CONFIRMED_KEYS = tuple(f.name for f in dataclasses.fields(ConfirmedBest) if f.name != "candidates")


def read_best(path: str) -> BestSoFar | None:
    """The job's best so far (`BEST_FILE`), or None when there is none yet (or it is not a `BestSoFar`)."""
    try:
        with open(path) as fh:
            return BestSoFar.from_json(json.load(fh))
    except (OSError, ValueError):  # WireError among them
        return None


def confirm_best(work_dir: str, db: Any, workload: Any, target: Any, speed_probe: bool = False) -> None:
    """Re-time the best few candidates with `measure` itself (`build.measure_request`: the same
    build, the same correctness check against the workload, the same timing method
    `timing.MEASURE`) and record the fastest as "confirmed" in mlc_lab_best.json: the job's best,
    the figure `measure` of the same trace reproduces. `speed_probe` adds `parallel_speed` (see
    `mlc_lab.tvm.machine.parallel_speed`; about a second once, so only for kernels large enough
    that a shared core changes their figure, not for the small ones whose tuning must be quick). When several were re-timed, the fastest is
    timed once more and that fresh figure is recorded: the figure it was chosen by is the luckiest
    of several noisy medians (biased low, as the tuner's fastest of 64 was)."""
    best_path = os.path.join(work_dir, BEST_FILE)
    best = read_best(best_path)
    if best is None:
        return
    request = {
        "reference": _build.module_to_text(workload.mod),
        "func_name": "main",
        "target": _build.target_to_json(target),
        "speed_probe": speed_probe,
    }
    confirmed = [c for c in (_retimed(rec, request) for rec in _worth_confirming(db, workload)) if c is not None]
    if not confirmed:
        return
    winner = min(confirmed, key=lambda c: c["latency_s"])
    final = {**winner, "selection_latency_s": winner["latency_s"] if len(confirmed) > 1 else None}
    if len(confirmed) > 1:
        try:
            final.update(_build.measure_request({**request, "module": winner["module_text"]}))
        except Exception as exc:  # noqa: BLE001 - it ran a moment ago; keep the selection's figure
            print(f"mlc_lab: could not re-time the best candidate: {exc}", file=sys.stderr)
    best.confirmed = ConfirmedBest(**{k: final.get(k) for k in CONFIRMED_KEYS}, candidates=len(confirmed))
    best.trace, best.script = str(winner["sch"].trace), winner["sch"].mod.script()  # printed once, for the winner
    best.latency_s_confirmed = final["latency_s"]
    _write_json(best_path, best.to_json())


def _worth_confirming(db: Any, workload: Any) -> list:
    """The database's best CONFIRM_TOP records that ran, less those the tuner's figures can already
    tell from the best (beyond CONFIRM_WITHIN of it): each re-timing costs a build, a check and 10
    repeats of 20 ms or more."""
    top = [r for r in db.get_top_k(workload, CONFIRM_TOP) if r.run_secs and max(float(x) for x in r.run_secs) < 1e9]
    if not top:
        return top
    fastest = min(_median([float(x) for x in r.run_secs]) for r in top)
    return [r for r in top if _median([float(x) for x in r.run_secs]) <= CONFIRM_WITHIN * fastest]


def _retimed(rec: Any, request: dict) -> dict | None:
    """One record's program measured by `measure_request` (with its schedule, program text and the
    tuner's figures), or None, said on stderr, when it fails now or computes a wrong result."""
    try:
        sch = tvm.s_tir.Schedule(rec.workload.mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        text = _build.module_to_text(sch.mod)
        m = _build.measure_request({**request, "module": text})
    except Exception as exc:  # noqa: BLE001 - a candidate that fails now is skipped
        print(f"mlc_lab: could not re-time a candidate: {exc}", file=sys.stderr)
        return None
    if m.get("correct") is False:
        print(
            f"mlc_lab: a candidate computes a wrong result (max abs error {m.get('max_abs_error')}); skipped",
            file=sys.stderr,
        )
        return None
    secs = [float(x) for x in rec.run_secs]
    return {**m, "sch": sch, "module_text": text, "run_secs": secs, "tuner_latency_s": _median(secs)}


# ----------------------------------------------------------------------------------------- reading back


def trace_text_from_record(work_dir: str, record_line: str) -> str | None:
    """Trace text of one database line, replayed on its workload (for lines that have no entry in
    mlc_lab_trials.jsonl, e.g. a database written by plain tune_tir)."""
    try:
        index, (trace_json, *_rest) = json.loads(record_line)
        with open(os.path.join(work_dir, WORKLOADS_FILE)) as fh:
            lines = [x for x in fh if x.strip()]
        workload = ms.database.Workload.from_json(json.loads(lines[index]))
        sch = tvm.s_tir.Schedule(workload.mod)
        tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace_json, sch)
        return str(sch.trace)
    except Exception:  # noqa: BLE001 - a best effort for display
        return None


def scratch_dir() -> str:
    return tempfile.mkdtemp(prefix="mlc_lab_tune_")


def import_tensor_intrinsics(target: Any) -> None:
    """Register only the tensor intrinsics this target's schedule rules can ask for.

    TuneContext runs `import tvm.s_tir.tensor_intrin`, which parses ~250 TVMScript intrinsics for
    every backend (8-25 s on a small machine, mostly CUDA ones). We load the package without its
    __init__ and import the one submodule the target needs; TuneContext's import is then a no-op.
    """
    import importlib
    import importlib.util

    name = "tvm.s_tir.tensor_intrin"
    if name not in sys.modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        import tvm.s_tir as parent

        parent.tensor_intrin = package
    kind = target.kind.name
    subs = [kind] if kind in ("cuda", "rocm", "metal") else []  # each has a submodule of its own name
    if kind == "llvm":
        triple = str(target.attrs.get("mtriple", ""))
        subs = ["arm_cpu"] if ("aarch64" in triple or "arm" in triple) else ["x86"]
    for sub in subs:
        importlib.import_module(f"{name}.{sub}")
