"""Timing one program elsewhere, by the same method as ``measure`` (``mlc_lab.tvm.measure``): on a server
the class's RPC tracker hands out (``rpc://HOST:PORT/KEY``, `measure_remote`), or by the batch runner
(``batch:slurm[:PARTITION]``, ``batch:COMMAND``). Either way the program is built here for the target
(a CUDA program's kernels compiled here: `artifact`), its inputs are the seeded random ones of
``measure`` and its outputs are compared here with the original program's; the far side needs TVM's
runtime alone. `measure_elsewhere_request` is the worker's ``measure_elsewhere`` operation, what
``measure(..., runner=...)`` and ``mlc-lab bench --runner`` ask for; the class server's ``--tracker``
times submissions with `measure_remote`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np

from mlc_lab.model.measure import Measurement, RunMethod
from mlc_lab.tvm import measure
from mlc_lab.tvm.measure import batch, build, pool, stage
from mlc_lab.tvm.measure.build import MeasureFailure


def parse_runner(spec: str) -> tuple[str, int, str]:
    """``rpc://HOST:PORT/KEY`` as (host, port, key); a sentence naming the spelling otherwise."""
    text = spec[len("rpc://") :] if spec.startswith("rpc://") else spec
    where, _, key = text.partition("/")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit() or not key:
        raise ValueError(
            f"the measurement machines are given as rpc://HOST:PORT/KEY (the tracker and the "
            f"servers' key), not {spec!r}"
        )
    return host, int(port), key


def _staged(
    module_text: str, reference_text: str | None, func_name: str | None, target: Any, folder: str, seed: int
) -> dict:
    """The program built and exported into `folder` with its inputs (`stage.stage_kernel`); a CUDA
    program needs nvcc here (its kernels travel compiled)."""
    tgt = build.resolve_target(target)
    if tgt.kind.name == "cuda" and shutil.which("nvcc") is None:
        raise MeasureFailure(
            "build",
            "nvcc was not found on PATH: a CUDA program measured elsewhere is compiled here first "
            "(the machine that times it has only TVM's runtime); install the CUDA toolkit",
        )
    return stage.stage_kernel(module_text, reference_text, func_name, tgt, folder, seed=seed)


def measure_remote(
    module_text: str,
    reference_text: str,
    func_name: str | None,
    target: Any,
    runner: str,
    *,
    repeats: int = 10,
    seed: int = 0,
    timeout_s: float = 60.0,
    min_repeat_ms: float = 20.0,
    sandboxed_only: bool = False,
) -> dict:
    """``{"latency_s", "results_s", ..., "correct", "max_abs_error", "method", "target", "where"}`` of
    the module run on a server of ``runner`` (``rpc://HOST:PORT/KEY``), which may run TVM's runtime
    alone; a server that dies or hangs is replaced by another (`pool.TrackerPool`). `sandboxed_only`
    (a hand-in's program) sends it only to servers whose sessions say they run in mlc_lab's sandbox
    (`mlc_lab.core.server_sandbox`); the others are left out, and with none left it is not timed."""
    host, port, key = parse_runner(runner)
    with tempfile.TemporaryDirectory(prefix="mlc_lab_rpc_") as folder:
        staged = _staged(module_text, reference_text, func_name, target, folder, seed)
        method = measure.TimingMethod(repeats=max(1, int(repeats)), min_repeat_ms=min_repeat_ms, rounds=1)
        cand = pool.Candidate(
            "program",
            os.path.join(folder, staged["candidate"].artifact),
            staged["func_name"],
            staged["device"],
            staged["inputs"],
            staged["expected"],
            method=method,
        )
        the_pool = pool.TrackerPool(
            host, port, key, servers=1, session_timeout_s=timeout_s, wait_s=timeout_s, sandboxed_only=sandboxed_only
        )
        try:
            (out,) = the_pool.measure([cand])
        finally:
            the_pool.close()
    if out.error and out.error_kind != "check":
        kind = "run" if out.error_kind in ("run", "crash", "load", "lost") else "timeout"
        if out.error_kind == "no_server":
            kind = "elsewhere"
        raise MeasureFailure(kind, f"the program could not be timed on {runner}: {out.error}")
    return {
        **measure.summary(out.results_s),
        "correct": bool(out.correct) if out.correct is not None else None,
        "max_abs_error": out.max_abs_error,
        "target": staged["target"],
        "func_name": staged["func_name"],
        "flops": staged["flops"],
        "build_s": staged["build_s"],
        "where": out.where,
        "waited_s": out.waited_s,
        "method": method.describe(None).replace("? thread(s)", f"a server of {key!r} ({out.where})"),
    }


def measure_batch(
    module_text: str,
    reference_text: str | None,
    func_name: str | None,
    target: Any,
    runner: str,
    *,
    repeats: int = 10,
    seed: int = 0,
    timeout_s: float = 600.0,
    min_repeat_ms: float = 20.0,
    cache: str = "warm",
) -> dict:
    """The same by the batch runner (``batch:...``): one round of one candidate, its outputs sent back
    and compared here."""
    spec = batch.parse_batch(runner)
    folder = tempfile.mkdtemp(prefix="mlc_lab_batch_", dir=os.environ.get("MLC_LAB_BATCH_DIR"))
    try:
        staged = _staged(module_text, reference_text, func_name, target, folder, seed)
        method = RunMethod(repeats=max(1, int(repeats)), min_repeat_ms=min_repeat_ms, cache=cache)
        stage.write_manifest(folder, staged["device"], method, [staged["candidate"]])
        report = batch.run_round(spec, folder, limit_s=timeout_s, label="the measurement", device=staged["device"])
        if not report.ok or report.results is None:
            raise MeasureFailure("elsewhere", report.error or "the batch round said nothing")
        (one,) = report.results.candidates
        if one.error is not None and one.error.kind != "wrong":
            raise MeasureFailure("run", f"the program could not be timed by {spec.describe()}: {one.error.message}")
        names = [a.name for a in staged["candidate"].args]
        sent = all(n in one.outputs for n in names)
        got = [np.load(os.path.join(folder, one.outputs[n]), allow_pickle=False) for n in names] if sent else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    expected = staged["expected"]
    if got is not None and expected is not None:
        max_abs, max_rel, correct = build.output_errors(got, expected)
    else:  # the outputs did not come back: the far side's own comparison, when it made one
        max_abs, max_rel, correct = one.max_abs_error, None, one.correct
    return {
        **{k: getattr(one, k) for k in ("latency_s", "min_s", "max_s", "iqr_s", "std_s", "results_s", "repeats")},
        "others_cores": one.others_cores,
        "rounds": one.rounds,
        "threads": one.threads,
        "correct": correct,
        "max_abs_error": max_abs,
        "max_rel_error": max_rel,
        "target": staged["target"],
        "func_name": staged["func_name"],
        "flops": staged["flops"],
        "build_s": staged["build_s"],
        "where": report.where,
        "waited_s": report.waited_s,
        "method": f"{report.results.method}, by {spec.describe()} ({report.where})",
        "load": report.results.load,
    }


def measure_elsewhere_request(req: dict) -> dict:
    """The worker's ``measure_elsewhere``: `measure_remote` or `measure_batch` by ``req["runner"]``, as
    a `Measurement`'s JSON."""
    runner = str(req["runner"])
    common = {
        "repeats": int(req.get("repeats", measure.MEASURE.repeats)),
        "seed": int(req.get("seed", 0)),
        "timeout_s": float(req.get("timeout_s", 600.0)),
        "min_repeat_ms": float(req.get("min_repeat_ms", measure.MEASURE.min_repeat_ms)),
    }
    args = (req["module"], req.get("reference"), req.get("func_name"), req.get("target", "cpu"), runner)
    if runner.startswith("rpc://"):
        if str(req.get("cache", "warm")) != "warm":
            raise MeasureFailure(
                "usage", "cold-cache timing is offered here and by the batch runner, not on RPC servers"
            )
        if not req.get("reference"):
            raise MeasureFailure("usage", "measuring on RPC servers needs the original program to check against")
        out = measure_remote(*args, **common, sandboxed_only=bool(req.get("sandboxed_only", False)))
    elif runner.startswith("batch:"):
        try:
            out = measure_batch(*args, **common, cache=str(req.get("cache", "warm")))
        except ValueError as exc:
            raise MeasureFailure("usage", str(exc)) from None
    else:
        raise MeasureFailure("usage", f"runner must be 'local', 'rpc://HOST:PORT/KEY' or 'batch:...', not {runner!r}")
    flops, median = out.pop("flops", 0.0) or 0.0, out.get("latency_s")
    out.pop("waited_s", None)
    return Measurement.from_json(
        {
            **out,
            "flops": flops,
            "gflops": flops / median / 1e9 if median and flops else 0.0,
            "cache": req.get("cache", "warm"),
        }
    ).to_json()
