"""Timing one program on a machine behind TVM's RPC tracker (the class's measurement machines), by
the same method as ``measure`` (``mlc_lab.tvm.measure``): built here for the assignment's target,
sent to a server the tracker hands out under KEY, checked against the original program on random
inputs there, then timed there (warm-up, repeats, median)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from mlc_lab.tvm import measure as timing
from mlc_lab.tvm.measure.build import (
    _reference_outputs,
    module_from_text,
    resolve_target,
    single_function_module,
)

import tvm  # noqa: E402
from tvm import rpc  # noqa: E402


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
) -> dict:
    """``{"latency_s", "results_s", ..., "correct", "max_abs_error", "method", "target"}`` of the
    module run on a server of ``runner`` (``rpc://HOST:PORT/KEY``)."""
    host, port, key = parse_runner(runner)
    func_name, one = single_function_module(module_from_text(module_text), func_name)
    tgt = resolve_target(target)
    kind = tgt.kind.name
    ex = tvm.compile(one, target=tgt)
    inputs, expected = _reference_outputs(reference_text, func_name, seed)
    remote = rpc.connect_tracker(host, port).request(key, priority=1, session_timeout=int(timeout_s))
    with tempfile.TemporaryDirectory(prefix="mlc_lab_rpc_") as work:
        lib = os.path.join(work, "submission.so")
        ex.export_library(lib)
        remote.upload(lib)
    rmod = remote.load_module("submission.so")
    dev = remote.cuda(0) if kind == "cuda" else remote.cpu(0)
    tensors = [tvm.runtime.tensor(a, dev) for a in inputs]
    rmod.get_function(func_name)(*tensors)
    dev.sync()
    got = [t.numpy() for t in tensors]
    max_abs, scale = 0.0, 0.0
    for a, b in zip(got, expected):
        if a.size == 0:
            continue
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        max_abs = float("inf") if np.isnan(diff).any() else max(max_abs, float(diff.max()))
        scale = max(scale, float(np.max(np.abs(b.astype(np.float64)))))
    correct = bool(max_abs <= 1e-3 * max(1.0, scale))
    tensors = [tvm.runtime.tensor(a, dev) for a in inputs]
    method = timing.TimingMethod(repeats=max(1, int(repeats)), rounds=1)  # the quiet probes watch this machine only
    results = timing.time_function(rmod, func_name, dev, tensors, method)
    return {
        **timing.summary(results),
        "correct": correct,
        "max_abs_error": max_abs,
        "target": str(tgt),
        "func_name": func_name,
        "method": method.describe(None).replace("? thread(s)", f"a server of {key!r}"),
    }
