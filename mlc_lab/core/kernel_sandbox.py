"""A kernel compiled from a hand-in runs only in the sandbox: build here, run there, judge here.

The grader (`mlc-lab grade`, its batch, a Gradescope run), the class server and `mlc-lab bench` /
`check --numeric` on a trace file never call a hand-in's kernel in their own processes, nor in the
persistent worker. They call this module, which

1. builds the scheduled program with TVM's compiler here (the trace reader keeps code out of the
   build), exports it and its seeded random inputs into a private folder, and runs the assignment's
   own program on the same inputs for the expected outputs (`mlc_lab.tvm.measure.stage`);
2. runs the measuring side (``python -m mlc_lab.tvm.measure.runside /input/ --fd 3``) in the sandbox
   (`mlc_lab.core.worker.sandboxed`, the ``run_kernel`` row of `WORKER_OPS`): as an unprivileged
   user in its own namespaces, with TVM's runtime alone, under the assignment's time and memory,
   timed there by the one method (threads stated, warm-up, repeats, the median, contention);
3. reads what it wrote on fd 3 once every process of it is gone, and compares the kernel's outputs
   with the expected ones itself: a kernel never grades itself.

A kernel that crashes, never ends, takes 20 GB or writes out of bounds ends that run, and its
measurement says so in one sentence ("the kernel ran for more than the wall-clock limit of 10 s and
was stopped"); the caller's process, the batch and the host go on. `measure` answers with a
`Measurement` like `mlc_lab.core.measure.measure`; `run_opencl` runs a GPU kernel's OpenCL program for
the numeric check (`mlc_lab.core.checks.numeric_gpu.numeric_check_sandboxed`).

Where the machine cannot sandbox, `SandboxUnavailable` is raised (grading stops, as for a hand-in's
Python), unless ``unsafe_same_user`` asks to run as the caller's own user, under the same limits.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlc_lab.core.sandbox import Outcome, SandboxUnavailable
from mlc_lab.errors import MeasureError, MlcLabError
from mlc_lab.model.measure import (
    CandidateResult,
    Measurement,
    RunCandidate,
    RunFormatError,
    RunMethod,
    RunResults,
    unpack_files,
)
from mlc_lab.model.wire import RequestFailure
from mlc_lab.model.worker_ops import WORKER_OPS

__all__ = ["KernelSandbox", "SandboxUnavailable", "measure", "run_opencl"]

OP = "run_kernel"
NO_GPU = "a CUDA kernel from a hand-in is not run on this machine: the sandbox holds no GPU device"


@dataclass(frozen=True)
class KernelSandbox:
    """How a hand-in's kernel is confined: the wall-clock time and memory of its run (the
    assignment's ``[limits]``), and ``unsafe_same_user`` (the teacher's explicit choice on a machine
    that refuses namespaces: the run is then the caller's own user, with only the limits)."""

    wall_s: float = WORKER_OPS[OP].limits["wall_s"]  # type: ignore[index]
    memory_mb: int = WORKER_OPS[OP].limits["memory_mb"]  # type: ignore[index]
    unsafe_same_user: bool = False


class KernelRunFailed(MlcLabError):
    """The sandboxed run ended without a result for the kernel; ``kind`` is an ``ErrorInfo`` kind."""

    def __init__(self, message: str, kind: str = "crash", detail: str = "") -> None:
        super().__init__(message)
        self.kind, self.detail = kind, detail


# ----------------------------------------------------------------------------------------- timing


def measure(
    module: Any,
    reference: Any,
    func_name: str | None,
    target: Any = "cpu",
    repeats: int = 10,
    *,
    sandbox: KernelSandbox,
    cache: str = "warm",
    min_repeat_ms: float = 20.0,
    seed: int = 0,
    roofline: bool = False,
) -> Measurement:
    """Build `module` here, check it against `reference` (the original program) on random inputs and
    time it by the one method, its kernel running in the sandbox. Every failure of the program (it
    does not build, crashes, hangs, computes wrong numbers) is the `Measurement`'s ``error``;
    `SandboxUnavailable` is raised when this machine cannot sandbox and ``unsafe_same_user`` is off.
    `roofline` places it on `mlc_lab.machine()`'s roofline (the machine's own kernels, not the
    hand-in's, measure it)."""
    from mlc_lab.tvm.measure import stage, threads

    module_text, reference_text = _text(module), (_text(reference) if reference is not None else None)
    failed = Measurement(target=str(target), func_name=func_name, cache=cache)
    folder = tempfile.mkdtemp(prefix="mlc_lab_kernel_")
    try:
        try:
            if stage.device_of(module_text, func_name, target) == "cuda":
                return _failed(failed, NO_GPU, "no_gpu")
            staged = stage.stage_kernel(module_text, reference_text, func_name, target, folder, seed=seed)
        except RequestFailure as exc:
            return _failed(failed, exc.message, exc.kind, exc.detail)
        staged["module_text"] = module_text
        failed.func_name, failed.target = staged["func_name"], staged["target"]
        n = threads()
        method = RunMethod(
            repeats=max(1, int(repeats)),
            min_repeat_ms=float(min_repeat_ms),
            cache=cache,
            threads=n,
            speed_probe=stage.stage_speed_probe(folder, n) if n > 1 else None,
        )
        stage.write_manifest(folder, "cpu", method, [staged["candidate"]])
        try:
            results, files = run_folder(folder, sandbox, bytes_back(staged["inputs"]), n)
        except KernelRunFailed as exc:
            return _failed(failed, str(exc), exc.kind, exc.detail)
        m = _measurement(staged, results, files, method, failed)
        if roofline and m.error is None:
            from mlc_lab.core.measure import place_on_roofline

            place_on_roofline(m)
        return m
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _text(module: Any) -> str:
    if isinstance(module, str):
        return module
    from mlc_lab.tvm.measure.build import module_to_text

    return module_to_text(module)


def _failed(base: Measurement, message: str, kind: str, detail: str = "") -> Measurement:
    base.error = message + (f"\n{detail}" if detail else "")
    base.error_kind = kind if kind in _KINDS else "internal"
    return base


_KINDS = ("build", "run", "check", "crash", "timeout", "no_gpu", "does_not_build", "could_not_run", "gpu_check")


def bytes_back(arrays: list[np.ndarray]) -> int:
    """What the run may send back: every argument once, its .npy header, the results."""
    return int(sum(a.nbytes for a in arrays)) + 4096 * len(arrays) + (1 << 20)


def _measurement(
    staged: dict, results: RunResults, files: dict[str, bytes], method: RunMethod, m: Measurement
) -> Measurement:
    cand = _the_candidate(results, staged["candidate"])
    if cand.error is not None:
        kind = {"load": "build", "wrong": "check", "device": "no_gpu"}.get(cand.error.kind, "run")
        return _failed(m, f"the kernel {cand.error.message}" if cand.error.kind == "run" else cand.error.message, kind)
    try:
        got = [_array(files, cand, name, like) for name, like in zip(staged["names"], staged["inputs"])]
        _check_figures(cand, method)
    except KernelRunFailed as exc:
        return _failed(m, str(exc), exc.kind)
    from mlc_lab.tvm.measure import stage

    if staged["expected"] is not None:
        m.max_abs_error, m.max_rel_error, m.correct = stage.errors(got, staged["expected"])
    median = float(cand.latency_s or 0.0)
    flops = float(staged["flops"])
    nbytes, source, by_buffer = _traffic(staged)
    m.latency_s, m.std_s, m.repeats = median, cand.std_s, cand.repeats
    m.min_s, m.max_s, m.iqr_s, m.results_s = cand.min_s, cand.max_s, cand.iqr_s, list(cand.results_s)
    m.flops, m.gflops = flops, (flops / median / 1e9 if median > 0 and flops else 0.0)
    m.bytes, m.bytes_source, m.bytes_by_buffer = nbytes, source, by_buffer
    m.intensity = flops / nbytes if nbytes and flops else None
    m.build_s, m.threads, m.method, m.load = staged["build_s"], cand.threads, results.method, results.load
    m.others_cores, m.parallel_speed, m.rounds = cand.others_cores, cand.parallel_speed, cand.rounds
    m.method += "; run in the sandbox"
    return m


def _traffic(staged: dict) -> tuple[float, str, dict]:
    from mlc_lab.core.access.traffic import function_traffic
    from mlc_lab.tvm.measure.build import module_from_text

    try:
        return function_traffic(module_from_text(staged["module_text"]), staged["func_name"], staged["inputs"])
    except Exception:  # noqa: BLE001 - the byte count is a nicety of the roofline
        from mlc_lab.tvm.measure.build import compulsory_traffic

        return compulsory_traffic(staged["inputs"])


def _the_candidate(results: RunResults, wanted: RunCandidate) -> CandidateResult:
    found = [c for c in results.candidates if c.id == wanted.id]
    if len(found) != 1 or len(results.candidates) != 1:
        raise KernelRunFailed("the kernel's run sent back results for other kernels than the one it was given")
    return found[0]


def _array(files: dict[str, bytes], cand: CandidateResult, name: str, like: np.ndarray) -> np.ndarray:
    """An argument as the run sent it back, read without pickles, of the shape and type it was sent."""
    where = cand.outputs.get(name)
    if where is None or where not in files:
        raise KernelRunFailed(f"the kernel's run sent no value back for {name}", "check")
    try:
        arr = np.load(io.BytesIO(files[where]), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        raise KernelRunFailed(
            f"the kernel's run sent back something that is not an array for {name}", "check"
        ) from None
    if not isinstance(arr, np.ndarray) or arr.shape != like.shape or arr.dtype != like.dtype:
        raise KernelRunFailed(
            f"the kernel's run sent back {name} as {getattr(arr, 'dtype', '?')}{list(getattr(arr, 'shape', []))}, "
            f"not {like.dtype}{list(like.shape)}",
            "check",
        )
    return arr


def _check_figures(cand: CandidateResult, method: RunMethod) -> None:
    """The timing figures must be figures: as many repeats as asked, each finite and positive, the
    median among them (a result stream forged from inside the run fails here, or in the outputs)."""
    times = list(cand.results_s)
    ok = (
        cand.repeats == method.repeats == len(times)
        and all(isinstance(t, float) and math.isfinite(t) and t > 0 for t in times)
        and cand.latency_s is not None
        and min(times) <= cand.latency_s <= max(times)
    )
    if not ok:
        raise KernelRunFailed("the kernel's run sent back timing figures that are not the measuring side's", "check")


# ----------------------------------------------------------------------------------------- the run


def run_folder(folder: str, sandbox: KernelSandbox, bytes_back: int, threads: int = 1) -> tuple[RunResults, dict]:
    """Run the measuring side on `folder` (its manifest and the files it names) in the sandbox; its
    results and the files it sent, once every process of the run is gone. `KernelRunFailed` when
    the run ended without a readable result (its sentence says how it ended)."""
    from mlc_lab.core.worker import sandboxed

    inputs: dict[str, bytes | Path] = {p.name: p for p in sorted(Path(folder).iterdir()) if p.is_file()}
    argv = [sys.executable, "-m", WORKER_OPS[OP].entry, "/input/", "--fd", "3"]
    out = sandboxed(
        OP,
        argv,
        inputs=inputs,
        env=run_env(threads),
        unsafe_same_user=sandbox.unsafe_same_user,
        wall_s=sandbox.wall_s,
        cpu_s=sandbox.wall_s * max(1, threads),  # the whole tree's CPU time: every thread counts
        memory_mb=sandbox.memory_mb,
        output_bytes=max(bytes_back, WORKER_OPS[OP].limits["output_bytes"]),  # type: ignore[index]
    )
    return _read(out)


def run_env(threads: int) -> dict[str, str]:
    """The measuring side's environment (on top of the sandbox's clean one): this copy of mlc_lab, TVM's
    runtime alone, its thread pool as the caller's (threads, spin), numpy's pools out of the way."""
    from mlc_lab.core.worker import package_root

    env = {
        "PYTHONPATH": package_root(),
        "TVM_NUM_THREADS": str(max(1, threads)),
        "TVM_THREAD_POOL_SPIN_COUNT": os.environ.get("TVM_THREAD_POOL_SPIN_COUNT", "10000"),
        "TVM_USE_RUNTIME_LIB": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    for name in ("MLC_LAB_OPENCL_ENGINE", "MLC_LAB_OCLGRIND_RACES"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def _read(out: Outcome) -> tuple[RunResults, dict]:
    if out.status != "ok":
        kind = {"timeout": "timeout", "cpu": "timeout"}.get(out.status, "crash")
        raise KernelRunFailed(f"the kernel {out.message}", kind, _tail(out))
    from mlc_lab.core.worker import decode_result

    try:
        files = unpack_files(out.result)
        results = decode_result(OP, json.loads(files["results.json"]))
    except (RunFormatError, MeasureError, KeyError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise KernelRunFailed(
            f"the kernel's run gave no result the grader can read ({exc})", "crash", _tail(out)
        ) from None
    return results, files


def _tail(out: Outcome) -> str:
    return (out.stderr or b"").decode("utf-8", errors="replace")[-2000:]


# ----------------------------------------------------------------------------------------- OpenCL


def run_opencl(prog: dict, arrays: dict[str, np.ndarray], sandbox: KernelSandbox) -> dict:
    """Run a GPU kernel's OpenCL program (`mlc_lab.tvm.checks.opencl.opencl_program`) on the CPU in the
    sandbox, on `arrays` (one per parameter, by name). The run's answer as `run_in_child` gives it
    (``outputs`` by name, ``guard_writes``, ``engine``, ``diagnostics``, ``out_of_bounds``,
    ``seconds``); its failures raise `RequestFailure` with the verdict's kind (``crash``,
    ``timeout``, ``does_not_build``, ``could_not_run``)."""
    from mlc_lab.model.measure import RunArg

    folder = tempfile.mkdtemp(prefix="mlc_lab_opencl_")
    try:
        names = [p["name"] for p in prog["params"]]
        (Path(folder) / "program.json").write_text(json.dumps(prog))
        args: dict[str, Any] = {n: np.ascontiguousarray(arrays[n]) for n in names}
        np.savez(Path(folder) / "args.npz", **args)
        cand = RunCandidate(
            id="kernel",
            artifact="program.json",
            function=str(prog["launches"][0]["kernel"]) if prog.get("launches") else "kernel",
            args=[RunArg(n, "args.npz") for n in names],
            send_outputs=True,
            time=False,
        )
        from mlc_lab.tvm.measure import stage

        stage.write_manifest(folder, "opencl", RunMethod(), [cand])
        try:
            results, files = run_folder(folder, sandbox, bytes_back([arrays[n] for n in names]))
        except KernelRunFailed as exc:
            raise RequestFailure(exc.kind, str(exc), exc.detail) from None
        one = results.candidates[0] if len(results.candidates) == 1 else None
        if one is None:
            raise RequestFailure(
                "crash", "the kernel's run sent back results for other kernels than the one it was given"
            )
        if one.error is not None:
            kind = {"load": "does_not_build", "device": "could_not_run"}.get(one.error.kind, "crash")
            raise RequestFailure(kind, one.error.message)
        try:
            outputs = {n: _array(files, one, n, np.asarray(arrays[n], dtype=_dtype(prog, n))) for n in names}
        except KernelRunFailed as exc:
            raise RequestFailure("crash", str(exc)) from None
        return {
            "outputs": outputs,
            "guard_writes": dict(one.guard_writes),
            "engine": one.engine,
            "diagnostics": list(one.diagnostics),
            "out_of_bounds": list(one.out_of_bounds),
            "seconds": dict(one.seconds),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _dtype(prog: dict, name: str) -> str:
    return next(str(p["dtype"]) for p in prog["params"] if p["name"] == name)
