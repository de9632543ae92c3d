"""The tuning job's runners for machines elsewhere: the servers of a TVM RPC tracker (`PoolRunner`).

meta_schedule's own RPC runner makes each candidate's inputs on the server with functions only the
full TVM registers (``tvm.contrib.random.random_fill``), so a server that runs TVM's runtime alone
measures nothing. These runners make the inputs here, once per job (the reference program's
seeded random inputs, `measure`'s), send them with each candidate, bring the outputs back and check
them against the reference's, and time by mlc_lab's one method (`mlc_lab.tvm.measure`): the same
as the local runner, on another machine. Each candidate's result says where it ran and how long it
waited for a machine (`Placed`), which the job writes to its trial lines.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.runner import RunnerResult

from mlc_lab.tvm import measure as timing
from mlc_lab.tvm.measure import pool as rpc_pool
from mlc_lab.tvm.measure.build import _reference_outputs


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
                inputs, expected = _reference_outputs(self.reference_text, self.func_name, self.seed)
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


def tuning_method(min_repeat_ms: float) -> timing.TimingMethod:
    """How the tuner times a candidate anywhere (`timing.TUNING`, with the job's repeat length)."""
    return timing.TimingMethod(
        repeats=timing.TUNING.repeats,
        min_repeat_ms=float(min_repeat_ms),
        early_stop_factor=timing.TUNING.early_stop_factor,
        rounds=1,
    )


def best_so_far() -> float | None:
    """The job's best latency so far ($MLC_LAB_BEST_FILE), for the early stop of slow candidates."""
    path = os.environ.get("MLC_LAB_BEST_FILE")
    if not path:
        return None
    try:
        with open(path) as fh:
            value = json.load(fh).get("latency_s")
    except (OSError, ValueError):
        return None
    return float(value) if value is not None else None


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
        return RunnerResult(None, f"{out.error} [{out.error_kind}]" if out.error_kind else str(out.error))


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
        """Where the candidate of `artifact_path` ran and how long it waited (it waits for the
        result). meta_schedule hands the job its futures as its own type, without ours."""
        fut = self._outcomes.pop(artifact_path, None)
        if fut is None:
            return None
        out = fut.result()
        return Placed(out.where, out.waited_s)

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
