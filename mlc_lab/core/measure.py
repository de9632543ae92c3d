"""Build, verify and time a schedule, out of the kernel's process.

Generated code runs in one persistent worker process (`python -m mlc_lab.tvm.worker_main`), in its
own process group. A segfault there, or a kernel that runs past the time limit (30 s by default),
costs the worker, never the Jupyter kernel: the caller gets a `MeasureError` and the next call
starts a fresh worker. Modules travel to the worker as `tvm.ir.save_json` text.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from mlc_lab._threads import usable_cores
from mlc_lab.errors import MeasureError, NoGPUError

DEFAULT_TIMEOUT_S = 30.0
START_TIMEOUT_S = 120.0


@dataclass
class Measurement:
    """One timing of one program. Times are seconds; `error` is set (and the numbers are empty)
    when the program could not be built, checked or run."""

    latency_s: float | None = None  # median of the repeats
    std_s: float | None = None
    repeats: int = 0
    flops: float = 0.0
    gflops: float | None = None
    max_abs_error: float | None = None  # against the reference program on random inputs
    target: str = ""
    error: str | None = None
    error_kind: str | None = None
    min_s: float | None = None
    max_s: float | None = None
    results_s: list[float] = field(default_factory=list)
    max_rel_error: float | None = None
    correct: bool | None = None  # max_abs_error within 1e-3 of the output's magnitude
    build_s: float | None = None
    func_name: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CudaBuild:
    """The CUDA program of a schedule: kernel source without the compatibility preamble, kernel
    facts (threads per block, shared bytes), and PTX when asked for and nvcc is present."""

    source: str
    full_source: str
    kernels: list[dict]
    ptx: str | None = None
    ptx_error: str | None = None


# ----------------------------------------------------------------------------------------- worker


class MeasureWorker:
    """One persistent worker process; `request` sends one job and waits for its answer."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._log_path: str | None = None
        self.env: dict = {}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        with self._lock:
            if self.alive():
                return
            self.close()
            env = dict(os.environ)
            env.setdefault("TVM_NUM_THREADS", str(usable_cores()))
            fd, self._log_path = tempfile.mkstemp(prefix="mlc_lab_worker_", suffix=".log")
            log = os.fdopen(fd, "wb")
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "mlc_lab.tvm.worker_main"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
            )
            log.close()
            self._buf = b""
            hello = self._read_message(time.monotonic() + START_TIMEOUT_S, what="starting")
            self.env = hello.get("env", {})

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is not None:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                for stream in (proc.stdin, proc.stdout):
                    try:
                        if stream:
                            stream.close()
                    except OSError:
                        pass
            if self._log_path and os.path.exists(self._log_path):
                try:
                    os.unlink(self._log_path)
                except OSError:
                    pass
            self._log_path = None

    def _log_tail(self, limit: int = 2000) -> str:
        if not self._log_path:
            return ""
        try:
            with open(self._log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - limit))
                return fh.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""

    def _died(self, what: str) -> MeasureError:
        proc = self._proc
        code = proc.wait(timeout=5) if proc is not None else None
        tail = self._log_tail()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            msg = f"the generated code crashed the measure worker ({name}) while {what}; the kernel is fine, the next measurement starts a fresh worker"
        else:
            msg = f"the measure worker exited (status {code}) while {what}; the next measurement starts a fresh worker"
        self.close()
        return MeasureError(msg, kind="crash", detail=tail)

    def _read_message(self, deadline: float, what: str) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if not sel.select(timeout=min(left, 1.0)):
                    if self._proc.poll() is not None:
                        raise self._died(what)
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise self._died(what)
                self._buf += chunk
        finally:
            sel.close()
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, op: str, payload: dict, timeout: float = DEFAULT_TIMEOUT_S) -> dict:
        with self._lock:
            self.start()
            assert self._proc is not None and self._proc.stdin is not None
            rid = next(self._ids)
            data = json.dumps({"id": rid, "op": op, **payload}).encode() + b"\n"
            try:
                self._proc.stdin.write(data)
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._died("receiving a request") from None
            deadline = time.monotonic() + timeout
            while True:
                try:
                    msg = self._read_message(deadline, what=_doing(op))
                except TimeoutError:
                    self.close()
                    raise MeasureError(
                        f"the program ran for more than {timeout:g} s, so the measure worker was stopped "
                        "(an endless or very long loop?); the kernel is fine, the next measurement starts a fresh worker",
                        kind="timeout",
                    ) from None
                if msg.get("id") == rid:
                    return msg


def _doing(op: str) -> str:
    return {"measure": "building and running the program", "cuda": "compiling for CUDA",
            "lower": "lowering and compiling the program"}.get(op, op)


_WORKER = MeasureWorker()
atexit.register(_WORKER.close)


def worker() -> MeasureWorker:
    """The process-wide measure worker (started on first use)."""
    return _WORKER


def shutdown_worker() -> None:
    _WORKER.close()


# ----------------------------------------------------------------------------------------- API


def _module_text(module: Any) -> str:
    if isinstance(module, str):
        return module
    from mlc_lab.tvm.build import module_to_text

    return module_to_text(module)


def _raise_for(msg: dict) -> None:
    kind = msg.get("kind", "internal")
    cls = NoGPUError if kind == "no_gpu" else MeasureError
    raise cls(msg.get("error", "measurement failed"), kind=kind, detail=msg.get("detail", ""))


def measure(
    module: Any,
    reference: Any = None,
    func_name: str | None = None,
    target: Any = "cpu",
    repeats: int = 5,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    min_repeat_ms: float = 20.0,
    seed: int = 0,
    raise_errors: bool = True,
) -> Measurement:
    """Build `module` for `target` ("cpu" = native CPU with all cores, "cuda", or a TVM target dict),
    check its output against `reference` (the original program) on random inputs, and time it:
    the median of `repeats` runs, each at least `min_repeat_ms` long.

    Failures raise `MeasureError` (`NoGPUError` for CUDA without a GPU), or, with
    `raise_errors=False`, come back as a `Measurement` whose `error` says what went wrong.
    """
    payload = {
        "module": _module_text(module),
        "reference": _module_text(reference) if reference is not None else None,
        "func_name": func_name,
        "target": target,
        "repeats": int(repeats),
        "min_repeat_ms": float(min_repeat_ms),
        "seed": int(seed),
    }
    try:
        msg = _WORKER.request("measure", payload, timeout=timeout)
        if not msg.get("ok"):
            _raise_for(msg)
    except MeasureError as exc:
        if raise_errors:
            raise
        return Measurement(target=str(target), error=str(exc), error_kind=exc.kind, func_name=func_name)
    r = msg["result"]
    return Measurement(
        latency_s=r["latency_s"],
        std_s=r["std_s"],
        repeats=r["repeats"],
        flops=r["flops"],
        gflops=r["gflops"],
        max_abs_error=r["max_abs_error"],
        target=r["target"],
        min_s=r["min_s"],
        max_s=r["max_s"],
        results_s=r["results_s"],
        max_rel_error=r["max_rel_error"],
        correct=r["correct"],
        build_s=r["build_s"],
        func_name=r["func_name"],
    )


def cuda_source(
    module: Any,
    func_name: str | None = None,
    target: Any = "cuda",
    *,
    ptx: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> CudaBuild:
    """Compile a GPU schedule for CUDA (no GPU needed) and return its kernels' source.

    Raises `MeasureError(kind="gpu_check")` naming the unbound blocks and loops, or the kernel that
    exceeds the GPU's threads-per-block or shared-memory limit, before anything is built.
    `ptx=True` also runs nvcc when it is installed (`ptx_error` says why not otherwise).
    """
    msg = _WORKER.request(
        "cuda", {"module": _module_text(module), "func_name": func_name, "target": target, "ptx": ptx}, timeout=timeout
    )
    if not msg.get("ok"):
        _raise_for(msg)
    r = msg["result"]
    if r["problems"]:
        raise MeasureError(r["problems"][0], kind="gpu_check", detail="\n".join(r["problems"][1:]))
    return CudaBuild(
        source=r["source"], full_source=r["full_source"], kernels=r["kernels"], ptx=r["ptx"], ptx_error=r["ptx_error"]
    )


def _session_parts(obj: Any) -> tuple[Any, Any, str | None]:
    """(module, reference, func_name) from a Session-like object, or (module, None, None)."""
    if hasattr(obj, "module") and hasattr(obj, "original"):
        return obj.module, obj.original, getattr(obj, "func_name", None)
    return obj, None, None


def sweep(
    make_session: Callable[[Any], Any],
    values: Iterable[Any],
    target: Any = "cpu",
    repeats: int = 5,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    on_result: Callable[[Any, Measurement], None] | None = None,
) -> list[tuple[Any, Measurement]]:
    """Measure a family of schedules: `make_session(value)` returns a Session (or an IRModule) for
    each value. A value whose schedule fails, or whose program fails, gets a Measurement with
    `error` set; the sweep goes on."""
    out: list[tuple[Any, Measurement]] = []
    for value in values:
        try:
            made = make_session(value)
        except Exception as exc:  # noqa: BLE001 - a failing schedule is one point of the sweep
            m = Measurement(target=str(target), error=f"the schedule failed for {value!r}: {exc}", error_kind="schedule")
        else:
            module, reference, func_name = _session_parts(made)
            m = measure(module, reference, func_name, target, repeats, timeout=timeout, raise_errors=False)
        out.append((value, m))
        if on_result is not None:
            on_result(value, m)
    return out
