"""The tuning job's runners: meta_schedule's LocalRunner here (wrapped by `LiveRunner`, which writes
each candidate to the live log as it is measured), and for machines elsewhere the servers of a TVM
RPC tracker (`PoolRunner`) and rounds sent as folders to a batch scheduler or any command
(`BatchRunner`). `make_runner` makes the one a job's ``runner`` names.

meta_schedule's own RPC runner makes each candidate's inputs on the server with functions only the
full TVM registers (``tvm.contrib.random.random_fill``), so a server that runs TVM's runtime alone
measures nothing. These runners make the inputs here, once per job (the reference program's
seeded random inputs, `measure`'s), send them with each candidate, bring the outputs back and check
them against the reference's, and time by mlc_lab's one method (`mlc_lab.tvm.measure`): the same
as the local runner, on another machine. Each candidate's result says where it ran and how long it
waited for a machine (`Placed`), which the job writes to its trial lines.

`BatchRunner` writes each of meta_schedule's batches into a folder (the candidates' libraries, the
job's arguments, the reference's outputs, a manifest: `mlc_lab.tvm.measure.stage`'s format) and has
`mlc_lab.tvm.measure.batch` run the measuring side on it (``COMMAND FOLDER``, or a Slurm job); the
outputs are compared there with the reference's (the manifest's expected outputs), and a round that
fails is every one of its candidates failed, with the round's sentence: the job goes on.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import RunnerResult

from mlc_lab import timeline
from mlc_lab.model.measure import CandidateResult, RunArg, RunCandidate, RunMethod
from mlc_lab.model.tuning import MODULE_FILE, PENDING_FILE, BestSoFar, median
from mlc_lab.tvm import measure
from mlc_lab.tvm.measure import batch
from mlc_lab.tvm.measure import pool as rpc_pool
from mlc_lab.tvm.measure.build import reference_outputs, module_from_text, param_specs
from mlc_lab.tvm.measure.stage import unique_names, write_manifest
from mlc_lab.tvm.tuning import runner_process
from mlc_lab.tvm.tuning.live import LiveLog

TUNING_MIN_REPEAT_MS = 10.0

QUEUE_S = 3600.0  # how long a round may wait in a batch queue, beyond its candidates' own time


def parse_runner(spec: str) -> dict:
    """ "local", "rpc://HOST:PORT/KEY" (also HOST:PORT:KEY), "batch:slurm[:PARTITION]" or
    "batch:COMMAND" as a dict; a ValueError (one sentence) otherwise."""
    if spec in (None, "", "local"):
        return {"kind": "local"}
    if spec.startswith("batch:"):
        from mlc_lab.tvm.measure import batch

        batch.parse_batch(spec)  # its own sentence when it is wrong
        return {"kind": "batch", "spec": spec}
    wrong = f"runner must be 'local', 'rpc://HOST:PORT/KEY', 'batch:slurm[:PARTITION]' or 'batch:COMMAND', not {spec!r}"
    text = spec[len("rpc://") :] if spec.startswith("rpc://") else spec
    if "/" in text:
        hostport, key = text.split("/", 1)
        host, _, port = hostport.rpartition(":")
    else:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(wrong)
        host, port, key = parts
    if not host or not port.isdigit() or not key:
        raise ValueError(wrong)
    return {"kind": "rpc", "host": host, "port": int(port), "key": key}


def make_runner(
    spec: dict,
    min_repeat_ms: float = TUNING_MIN_REPEAT_MS,
    timeout_s: float = 30.0,
    *,
    work_dir: str | None = None,
    job: dict | None = None,
    live: LiveLog | None = None,
) -> Any:
    """The job's runner, timing every candidate by mlc_lab's one method (`measure.TUNING`: warm-up,
    3 repeats, early stop for clearly slow candidates): meta_schedule's LocalRunner here, or
    `PoolRunner` on a tracker's servers (which may run TVM's runtime alone: the inputs are
    made and the outputs checked here, against the job's program in `work_dir`)."""
    if spec["kind"] in ("rpc", "batch"):
        if work_dir is None or job is None:
            raise ValueError("a runner elsewhere needs the job's work directory and its job file")
        with open(os.path.join(work_dir, MODULE_FILE)) as fh:
            inputs = JobInputs(fh.read(), job["func_name"])
        if spec["kind"] == "batch":
            return BatchRunner(
                batch.parse_batch(spec["spec"]),
                inputs,
                work_dir,
                device="cuda" if (job.get("target") or {}).get("kind") == "cuda" else "cpu",
                timeout_s=timeout_s,
                min_repeat_ms=min_repeat_ms,
                on_event=live.event if live is not None else None,
            )
        return PoolRunner(
            spec,
            inputs,
            servers=int(spec.get("servers", 1)),
            timeout_s=timeout_s,
            min_repeat_ms=min_repeat_ms,
            on_event=live.event if live is not None else None,
        )
    evaluator = ms.runner.EvaluatorConfig(
        number=1, repeat=measure.TUNING.repeats, min_repeat_ms=int(min_repeat_ms), enable_cpu_cache_flush=False
    )
    with runner_process.adopting():  # its process may have been started already (runner_process.prestart)
        return ms.runner.LocalRunner(
            timeout_sec=timeout_s, evaluator_config=evaluator, f_run_evaluator=measure.run_evaluator
        )


@derived_object
class LiveRunner(ms.runner.PyRunner):
    """Wraps a runner so that each candidate is written to mlc_lab_live.jsonl the moment its
    result is known (meta_schedule itself reports a whole batch at once), with the phase. A
    watcher thread follows the futures in order; meta_schedule still collects them itself."""

    def __init__(self, inner: Any, live: LiveLog, contention_file: str | None = None) -> None:
        super().__init__()
        self._inner = inner  # a runner, or a Future of one (started while the job does other things)
        self.live = live
        # the local runner's process appends the cores other processes used while it timed each
        # candidate (measure.run_evaluator); with where it ran and how long it waited for a machine
        # (remote runners), kept per candidate (its artifact's path) for the trial lines
        self.contention_file = contention_file
        self.facts: dict[str, dict] = {}
        self.before_measuring: list[threading.Thread] = []  # work that must be over before any timing

    @property
    def inner(self) -> Any:
        if isinstance(self._inner, Future):
            self._inner = self._inner.result()
        return self._inner

    def run(self, runner_inputs: list) -> list:
        while self.before_measuring:  # nothing of ours competes for the cores while candidates are timed
            self.before_measuring.pop().join()
        self.live.phase("measuring", len(runner_inputs))
        if isinstance(self.inner, ms.runner.LocalRunner):
            # LocalRunner.run measures the whole batch before returning: hand it one at a time
            futures = []
            for one in runner_inputs:
                start = _file_size(self.contention_file)
                with timeline.span("measure"):
                    fut = self.inner.run([one])[0]
                self._log(one.artifact_path, fut, _new_value(self.contention_file, start))
                futures.append(fut)
            return futures
        futures = list(self.inner.run(runner_inputs))  # elsewhere: asynchronous, several machines at once
        paths = [one.artifact_path for one in runner_inputs]
        threading.Thread(target=self._watch, args=(list(zip(paths, futures)),), daemon=True).start()
        return futures

    def facts_of(self, artifact_path: str) -> dict:
        """What the trial line keeps of a candidate's measurement besides its times: the cores others
        used meanwhile (local), where it ran and how long it waited (elsewhere)."""
        found = self.facts.pop(artifact_path, None)
        return found if found is not None else self._placement(artifact_path)

    def _placement(self, artifact_path: str) -> dict:
        """Where a remote runner's candidate ran and how long it waited (nothing for the local runner)."""
        placement = getattr(self.inner, "placement", None)
        placed = placement(artifact_path) if placement is not None else None
        return {} if placed is None else {"where": placed.where, "waited_s": placed.waited_s}

    def close(self) -> None:
        """Stop the local runner's measuring process now that the search is over: 0.07 s here,
        against 0.3 s when the pool is torn down with the interpreter at the job's exit."""
        inner = self._inner
        if isinstance(inner, Future):
            if not inner.done() or inner.exception() is not None:
                return  # still starting (nothing was measured), or never started: it goes with the job
            inner = inner.result()
        pool = getattr(inner, "pool", None)
        if isinstance(inner, ms.runner.LocalRunner) and pool is not None:
            pool.shutdown()
        elif hasattr(inner, "close"):  # a runner elsewhere: its threads stop taking candidates
            inner.close()

    def _log(self, path: str, fut: Any, others: float | None = None) -> None:
        result = fut.result()
        error = result.error_msg
        secs = [float(x) for x in result.run_secs] if result.run_secs is not None and not error else []
        facts = {"others_cores": others, **self._placement(path)}
        self.facts[path] = facts
        self.live.trial(median(secs) if secs else None, error, others, facts.get("where"), facts.get("waited_s"))

    def _watch(self, futures: list) -> None:
        for path, fut in futures:
            try:
                while not fut.done():
                    time.sleep(0.02)
                self._log(path, fut)
            except Exception as exc:  # noqa: BLE001 - the live view is a nicety; the batch result stands
                self.live.trial(None, f"{type(exc).__name__}: {exc}")


def _file_size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _new_value(path: str | None, start: int) -> float | None:
    """The number the runner's process appended to `path` after byte `start` (None if none)."""
    if not path:
        return None
    try:
        with open(path) as fh:
            fh.seek(start)
            text = fh.read().strip().splitlines()
        return float(text[-1]) if text and text[-1] != "None" else None
    except (OSError, ValueError):
        return None


@dataclass
class Placed:
    """Where a candidate ran and how long it waited for a machine (seconds)."""

    where: str | None
    waited_s: float | None


class JobInputs:
    """The job's arguments (the reference's seeded random inputs) and what they must hold after one
    run (the reference program's outputs, computed here once); None when the reference cannot be
    run here (then nothing is checked, and the job's log says why)."""

    def __init__(self, reference_text: str, func_name: str, seed: int = 0, check: bool = True) -> None:
        self.reference_text, self.func_name, self.seed, self.check = reference_text, func_name, seed, check
        self._made: tuple[list[np.ndarray], list[np.ndarray] | None] | None = None

    def get(self) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        if self._made is None:
            try:
                inputs, expected = reference_outputs(self.reference_text, self.func_name, self.seed)
            except Exception as exc:  # noqa: BLE001 - measuring goes on, unchecked
                print(
                    f"mlc_lab: the reference program could not be run here, so results are not checked: {exc}",
                    file=sys.stderr,
                )
                from mlc_lab.tvm.measure.build import module_from_text, param_specs, random_inputs

                inputs = random_inputs(param_specs(module_from_text(self.reference_text), self.func_name), self.seed)
                expected = None
            self._made = (inputs, expected if self.check else None)
        return self._made


def placement(outcomes: dict[str, Future], artifact_path: str) -> Placed | None:
    """Where the candidate of `artifact_path` ran and how long it waited (it waits for the result), from
    a runner's futures by artifact: meta_schedule hands the job its futures as its own type, not ours."""
    fut = outcomes.pop(artifact_path, None)
    if fut is None:
        return None
    out = fut.result()
    return Placed(out.where, out.waited_s)


def tuning_method(min_repeat_ms: float) -> measure.TimingMethod:
    """How the tuner times a candidate anywhere (`measure.TUNING`, with the job's repeat length)."""
    return measure.TimingMethod(
        repeats=measure.TUNING.repeats,
        min_repeat_ms=float(min_repeat_ms),
        early_stop_factor=measure.TUNING.early_stop_factor,
        rounds=1,
    )


def best_so_far() -> float | None:
    """The job's best latency so far ($MLC_LAB_BEST_FILE), for the early stop of slow candidates."""
    path = os.environ.get("MLC_LAB_BEST_FILE")
    if not path:
        return None
    try:
        with open(path) as fh:
            return BestSoFar.from_json(json.load(fh)).latency_s
    except (OSError, ValueError):  # none yet, or not a BestSoFar (WireError)
        return None


@derived_object
class OutcomeFuture(ms.runner.PyRunnerFuture):
    """A candidate's result as meta_schedule reads it, from an `rpc_pool.Outcome` to come."""

    def __init__(self, future: Future) -> None:
        super().__init__()
        self.future = future

    def done(self) -> bool:
        return self.future.done()

    def result(self) -> RunnerResult:
        out = self.future.result()
        if out.ok and out.results_s:
            return RunnerResult([float(x) for x in out.results_s], None)
        return RunnerResult(None, str(out.error))


@derived_object
class PoolRunner(ms.runner.PyRunner):
    """Candidates measured on a tracker's servers (`rpc_pool.TrackerPool`): servers that die or hang
    are worked around, and said through `on_event`."""

    def __init__(
        self,
        spec: dict,
        inputs: JobInputs,
        *,
        servers: int = 1,
        timeout_s: float = 30.0,
        min_repeat_ms: float = 10.0,
        on_event: Callable[..., None] | None = None,
    ) -> None:
        super().__init__()
        self.inputs = inputs
        self.method = tuning_method(min_repeat_ms)
        self.pool = rpc_pool.TrackerPool(
            spec["host"], spec["port"], spec["key"], servers=servers, session_timeout_s=timeout_s, on_event=on_event
        )
        self.count = 0
        self._outcomes: dict[str, Future] = {}  # artifact path -> the candidate's outcome to come

    def placement(self, artifact_path: str) -> Placed | None:
        return placement(self._outcomes, artifact_path)

    def run(self, runner_inputs: list) -> list:
        args, expected = self.inputs.get()
        best = best_so_far()
        futures = []
        for ri in runner_inputs:
            self.count += 1
            cand = rpc_pool.Candidate(
                id=f"c{self.count}",
                artifact=ri.artifact_path,
                func_name="main",
                device="cuda" if str(ri.device_type) == "cuda" else "cpu",
                inputs=args,
                expected=expected,
                method=self.method,
                best_s=best,
            )
            fut = self.pool.submit(cand)
            self._outcomes[ri.artifact_path] = fut
            futures.append(OutcomeFuture(fut))
        return futures

    def close(self) -> None:
        self.pool.close()


# ----------------------------------------------------------------------------------------- batches


@derived_object
class BatchRunner(ms.runner.PyRunner):
    """Each batch of candidates a round: a folder run by `batch.run_round` (``COMMAND FOLDER`` or a
    Slurm job), one round at a time; said through `on_event` ("round" as it is sent, "round_done" or
    "round_failed" with where it ran and how long it waited)."""

    def __init__(
        self,
        spec: batch.BatchSpec,
        inputs: JobInputs,
        work_dir: str,
        *,
        device: str = "cpu",
        timeout_s: float = 30.0,
        min_repeat_ms: float = 10.0,
        on_event: Callable[..., None] | None = None,
    ) -> None:
        super().__init__()
        self.spec, self.inputs, self.device = spec, inputs, device
        self.timeout_s, self.min_repeat_ms = float(timeout_s), float(min_repeat_ms)
        self.on_event = on_event or (lambda kind, **facts: None)
        self.folder = os.environ.get("MLC_LAB_BATCH_DIR") or os.path.join(work_dir, "rounds")
        self.pending_file = os.path.join(work_dir, PENDING_FILE)
        self.rounds = 0
        self._outcomes: dict[str, Future] = {}
        self._names = unique_names(
            [n for n, _, _ in param_specs(module_from_text(inputs.reference_text), inputs.func_name)]
        )
        self._lock = threading.Lock()  # one round at a time, in order

    def placement(self, artifact_path: str) -> Placed | None:
        return placement(self._outcomes, artifact_path)

    def run(self, runner_inputs: list) -> list:
        self.rounds += 1
        label = f"round {self.rounds}"
        folder = os.path.join(self.folder, f"{self.rounds:04d}")
        futures = [Future() for _ in runner_inputs]
        try:
            ids = self._write_round(folder, runner_inputs)
        except Exception as exc:  # noqa: BLE001 - a round that cannot be written fails as a round
            for fut in futures:
                fut.set_result(rpc_pool.Outcome("?", error=f"{label} could not be written: {exc}", error_kind="load"))
            return [OutcomeFuture(f) for f in futures]
        for ri, fut in zip(runner_inputs, futures):
            self._outcomes[ri.artifact_path] = fut
        self.on_event("round", round=label, candidates=len(ids), via=self.spec.describe())
        limit = QUEUE_S + len(ids) * self.timeout_s
        threading.Thread(
            target=self._run_round, args=(label, folder, ids, futures, limit), daemon=True, name="mlc_lab-round"
        ).start()
        return [OutcomeFuture(f) for f in futures]

    def _write_round(self, folder: str, runner_inputs: list) -> list[str]:
        """The round's folder: each candidate's library, the job's arguments and expected outputs, the manifest."""
        os.makedirs(folder, exist_ok=True)
        args, expected = self.inputs.get()
        np.savez(os.path.join(folder, "args.npz"), **dict(zip(self._names, args)))
        outputs = [n for n, a, e in zip(self._names, args, expected or args) if not np.array_equal(a, e)]
        outputs = outputs or list(self._names)
        extra: dict = {}
        if expected is not None:
            want = dict(zip(self._names, expected))
            np.savez(os.path.join(folder, "expected.npz"), **{n: want[n] for n in outputs})
            scale = max(float(np.max(np.abs(want[n].astype(np.float64)))) if want[n].size else 0.0 for n in outputs)
            # measure's rule (within 1e-3 of the largest expected value, or of 1) as isclose's tolerances
            extra = {"expected": "expected.npz", "rtol": 1e-3, "atol": 1e-3 * max(1.0, scale)}
        cands, ids = [], []
        for k, ri in enumerate(runner_inputs):
            cid = f"c{k}"
            _link(ri.artifact_path, os.path.join(folder, f"{cid}.so"))
            args_of = [RunArg(n, "args.npz") for n in self._names]
            cands.append(
                RunCandidate(id=cid, artifact=f"{cid}.so", function="main", args=args_of, outputs=outputs, **extra)
            )
            ids.append(cid)
        method = RunMethod(repeats=measure.TUNING.repeats, min_repeat_ms=self.min_repeat_ms, rounds=1)
        write_manifest(folder, self.device, method, cands)
        return ids

    def _run_round(self, label: str, folder: str, ids: list[str], futures: list[Future], limit: float) -> None:
        with self._lock:
            report = batch.run_round(
                self.spec,
                folder,
                limit_s=limit,
                label=label,
                device=self.device,
                on_event=self.on_event,
                pending_file=self.pending_file,
            )
        got = {c.id: c for c in report.results.candidates} if report.results is not None else {}
        for cid, fut in zip(ids, futures):
            fut.set_result(_outcome(cid, got.get(cid), report))
        facts = {"round": label, "where": report.where, "waited_s": report.waited_s, "ran_s": report.ran_s}
        if report.error:
            self.on_event("round_failed", **facts, error=report.error, measured=len(got))
        else:
            self.on_event("round_done", **facts, measured=len(got))
        _drop_bulk(folder)


def _outcome(cid: str, result: CandidateResult | None, report: batch.RoundReport) -> rpc_pool.Outcome:
    """One candidate's outcome from its round: its result, or the round's failure."""
    out = rpc_pool.Outcome(cid, where=report.where, waited_s=report.waited_s or 0.0, attempts=1)
    if result is None:
        out.error = report.error or f"the measuring side said nothing of candidate {cid}"
        out.error_kind = "round"
        return out
    out.correct, out.max_abs_error = result.correct, result.max_abs_error
    if not result.ok:
        err = result.error
        out.error = err.message if err is not None else "the candidate failed there"
        out.error_kind = err.kind if err is not None else "run"
        return out
    out.results_s = [float(x) for x in result.results_s]
    return out


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        import shutil

        shutil.copyfile(src, dst)


def _drop_bulk(folder: str) -> None:
    """A measured round keeps its manifest, results and logs; its libraries and arrays go."""
    if os.environ.get("MLC_LAB_KEEP_ROUNDS"):
        return
    for name in os.listdir(folder):
        if name.endswith((".so", ".npz", ".npy")):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:
                pass
