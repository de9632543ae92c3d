"""The measuring side: run kernels built elsewhere, by the one timing method, with TVM's runtime alone.

    python -m mlc_lab.tvm.measure.runside FOLDER [--fd N]

FOLDER holds ``manifest.json`` (`mlc_lab.model.measure.RunManifest`: the device, the timing method's
parameters, the candidates) and the files it names: each candidate's artifact (a library TVM
exported, or for ``opencl`` the OpenCL program as data) and its argument files (``.npy``, or one
``.npz``). Every candidate is loaded, called once on its arguments (its outputs compared with the
expected ones when the manifest gives them, and kept when it asks for them), then timed by
`mlc_lab.tvm.measure`'s method: threads (``TVM_NUM_THREADS``, set from the manifest before TVM
starts), warm-up, repeats, the median and spread, the cores other processes used meanwhile, and the
parallel-speed probe when the manifest brings one. The answer is ``FOLDER/results.json``
(`RunResults`, rewritten after each candidate, so that a run that dies says how far it got) and one
``.npy`` file per argument sent back; with ``--fd N`` the same files go out as one stream on
descriptor N (`pack_files`) and nothing is written into FOLDER (the sandbox's is read-only, and gone
after the run).

This process imports ``tvm.runtime`` (with ``TVM_USE_RUNTIME_LIB=1``: no compiler, nothing of TVM's
full registry), numpy and ``mlc_lab.model``; the OpenCL engine (pyopencl) only for an ``opencl`` run,
and TVM not at all then. It is where a kernel compiled from a hand-in runs: the grader starts it in the
sandbox (``mlc_lab.core.kernel_sandbox``) and compares the outputs itself, after the process is gone; a
remote GPU machine or a batch job runs the same module on a folder. Whatever a kernel does here
(crash, loop, allocate, write out of bounds) ends this process, never its caller.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

import numpy as np

from mlc_lab.model.measure import (
    RUN_FORMAT,
    CandidateResult,
    RunCandidate,
    RunError,
    RunFormatError,
    RunManifest,
    RunMethod,
    RunResults,
    pack_files,
)

STARTED_AT = time.time()  # as this process started: a batch round's wait in a queue ends here
MANIFEST = "manifest.json"
RESULTS = "results.json"
MAX_MANIFEST_BYTES = 4 << 20
USAGE = "usage: python -m mlc_lab.tvm.measure.runside FOLDER [--fd N]"


def read_manifest(folder: str) -> RunManifest:
    """The folder's manifest, read strictly; `RunFormatError` (or `OSError`) says what is wrong."""
    with open(os.path.join(folder, MANIFEST), "rb") as fh:
        raw = fh.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise RunFormatError(f"{MANIFEST} is over {MAX_MANIFEST_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RunFormatError(f"{MANIFEST} is not JSON: {exc}") from None
    return RunManifest.from_json(data)


class _Sink:
    """Where the answer goes: files in the folder (results.json rewritten after every candidate), or
    one stream on a descriptor at the end."""

    def __init__(self, folder: str, fd: int | None) -> None:
        self.folder, self.fd = folder, fd
        self.files: dict[str, bytes] = {}

    def put(self, name: str, data: bytes) -> None:
        if self.fd is not None:
            self.files[name] = data
            return
        part = os.path.join(self.folder, f".{name}.part")
        with open(part, "wb") as fh:
            fh.write(data)
        os.replace(part, os.path.join(self.folder, name))

    def results(self, results: RunResults, final: bool) -> None:
        data = json.dumps(results.to_json()).encode()
        if self.fd is None:
            self.put(RESULTS, data)
        elif final:
            self.files[RESULTS] = data
            stream = pack_files(self.files)
            with os.fdopen(self.fd, "wb", closefd=True) as out:
                out.write(stream)


def run(manifest: RunManifest, folder: str, sink: _Sink) -> RunResults:
    """Run every candidate of the manifest; the results (also given to `sink` as they grow)."""
    from mlc_lab.tvm import measure

    method = _method(manifest.method)
    device = manifest.device
    threads = measure.threads() if device == "cpu" else None
    results = RunResults(
        version=RUN_FORMAT,
        device=device,
        method=_described(method, device, threads),
        candidates=[],
        load=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        host=socket.gethostname(),
        started_at=STARTED_AT,
    )
    private = tempfile.mkdtemp(prefix="mlc_lab_runside_")
    try:
        context = _Context(manifest, folder, private)
        for index, cand in enumerate(manifest.candidates):
            try:
                one = context.run(index, cand, sink)
            except RunFormatError as exc:
                one = _failed(cand, "load", str(exc))
            results.candidates.append(one)
            results.runtime_only = _runtime_only()
            sink.results(results, final=False)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    results.runtime_only = _runtime_only()
    return results


def _described(method: Any, device: str, threads: int | None) -> str:
    """The timing method in one sentence, as `measure` words it (a GPU's figure has no CPU threads)."""
    if device == "opencl":
        return "run once (not timed)"
    text = method.describe(threads)
    return text.replace("? thread(s)", "GPU") if device == "cuda" else text


def _method(spec: RunMethod) -> Any:
    from mlc_lab.tvm import measure

    return measure.TimingMethod(
        cache=spec.cache,
        repeats=max(1, int(spec.repeats)),
        min_repeat_ms=float(spec.min_repeat_ms),
        warmup=max(0, int(spec.warmup)),
        rounds=max(1, int(spec.rounds)),
    )


def _runtime_only() -> bool:
    """Whether TVM's compiler is absent from this process (it is, unless TVM_USE_RUNTIME_LIB=0 was asked)."""
    base = sys.modules.get("tvm.base")
    return base is None or "tvm_compiler" not in getattr(base, "_LOADED_LIBS", {})


def _failed(cand: RunCandidate, kind: str, message: str, **known: Any) -> CandidateResult:
    return CandidateResult(id=cand.id, ok=False, error=RunError(kind, message), **known)


def _first_line(exc: BaseException) -> str:
    for line in str(exc).strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(exc).__name__


class _Context:
    """What the candidates of one run share: the device, the timing method, the speed probe."""

    def __init__(self, manifest: RunManifest, folder: str, private: str) -> None:
        self.manifest, self.folder, self.private = manifest, folder, private
        self.method = _method(manifest.method)
        self._dev: Any = None
        self._device_error: str | None = None
        self._probe: Any = None

    def run(self, index: int, cand: RunCandidate, sink: _Sink) -> CandidateResult:
        arrays = _arguments(self.folder, cand)
        if self.manifest.device == "opencl":
            return self._opencl(index, cand, arrays, sink)
        return self._tvm(index, cand, arrays, sink)

    # ------------------------------------------------------------------------------- TVM's runtime

    def device(self) -> Any:
        import tvm

        if self._dev is None and self._device_error is None:
            if self.manifest.device == "cuda":
                self._device_error = _enable_cuda()
            dev = tvm.cuda(0) if self.manifest.device == "cuda" else tvm.cpu()
            if self._device_error is None and not dev.exist:
                self._device_error = f"this machine has no {self.manifest.device} device for TVM's runtime"
            self._dev = dev
        return self._dev

    def speed_probe(self) -> Any:
        """The parallel-speed probe as a callable, when the manifest brings one (CPU, > 1 thread)."""
        probe = self.manifest.method.speed_probe
        if probe is None or self.manifest.device != "cpu":
            return None
        if self._probe is None:
            from mlc_lab.tvm import measure

            lib = _load_library(self.folder, probe.artifact, self.private)
            self._probe = lambda: measure.probe_speed(lib, probe.threads, probe.width)["parallel_speed"]
        return self._probe

    def _tvm(self, index: int, cand: RunCandidate, arrays: list[np.ndarray], sink: _Sink) -> CandidateResult:
        import tvm

        from mlc_lab.tvm import measure

        t0 = time.perf_counter()
        dev = self.device()
        if self._device_error:
            return _failed(cand, "device", self._device_error)
        try:
            lib = _load_library(self.folder, cand.artifact, self.private)
            lib.get_function(cand.function)
        except Exception as exc:  # noqa: BLE001 - a library that does not load is this candidate's row
            return _failed(cand, "load", f"{cand.artifact} does not load: {_first_line(exc)}")
        t_load = time.perf_counter()
        try:
            tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
            lib.get_function(cand.function)(*tensors)
            dev.sync()
            after = [t.numpy() for t in tensors]
        except Exception as exc:  # noqa: BLE001 - the kernel's own failure (a TVM assertion, a bad argument)
            return _failed(cand, "run", f"{cand.function} failed while running: {_first_line(exc)}")
        t_run = time.perf_counter()
        out = self._checked(index, cand, after, sink)
        out.threads = measure.threads() if self.manifest.device == "cpu" else None
        if cand.time:
            fresh = [tvm.runtime.tensor(a, dev) for a in arrays]
            try:
                stats = measure.timed(lib, cand.function, dev, fresh, self.method, speed_probe=self.speed_probe())
            except Exception as exc:  # noqa: BLE001
                return _failed(cand, "run", f"{cand.function} failed while being timed: {_first_line(exc)}")
            for key in ("latency_s", "min_s", "max_s", "iqr_s", "std_s", "results_s", "repeats", "others_cores"):
                setattr(out, key, stats[key])
            out.parallel_speed, out.rounds = stats.get("parallel_speed"), stats.get("rounds")
        out.seconds = {"load": t_load - t0, "first_call": t_run - t_load, "timing": time.perf_counter() - t_run}
        return out

    def _checked(self, index: int, cand: RunCandidate, after: list[np.ndarray], sink: _Sink) -> CandidateResult:
        """The result of the first call: its comparison with the expected outputs, its arrays sent."""
        out = CandidateResult(id=cand.id, ok=True)
        by_name = {a.name: arr for a, arr in zip(cand.args, after)}
        if cand.expected is not None:
            wrong, max_abs = _compare(by_name, _npz(self.folder, cand.expected), cand)
            out.correct, out.wrong, out.max_abs_error = wrong == 0, wrong, max_abs
            if wrong:
                out.ok = False
                out.error = RunError(
                    "wrong", f"{wrong} element(s) of {', '.join(cand.outputs)} differ from the expected"
                )
        if cand.send_outputs:
            for k, arg in enumerate(cand.args):
                name = f"out_{index}_{k}.npy"
                buf = io.BytesIO()
                np.save(buf, np.ascontiguousarray(by_name[arg.name]), allow_pickle=False)
                sink.put(name, buf.getvalue())
                out.outputs[arg.name] = name
        return out

    # ------------------------------------------------------------------------------- OpenCL on the CPU

    def _opencl(self, index: int, cand: RunCandidate, arrays: list[np.ndarray], sink: _Sink) -> CandidateResult:
        from mlc_lab.tvm.measure.opencl_run import OpenCLProgramError, run_opencl

        t0 = time.perf_counter()
        log = os.environ.setdefault("OCLGRIND_LOG", os.path.join(self.private, "oclgrind.log"))
        # Oclgrind reads its settings when the process makes its first OpenCL context
        os.environ.setdefault("OCLGRIND_DATA_RACES", os.environ.get("MLC_LAB_OCLGRIND_RACES", "1"))
        try:
            with open(os.path.join(self.folder, cand.artifact), encoding="utf-8") as fh:
                prog = json.load(fh)
        except (OSError, ValueError, RecursionError) as exc:
            return _failed(cand, "load", f"{cand.artifact} is not an OpenCL program's JSON: {_first_line(exc)}")
        try:
            ran = run_opencl(prog, {a.name: arr for a, arr in zip(cand.args, arrays)}, log)
        except OpenCLProgramError as exc:
            kind = "load" if exc.verdict == "does_not_build" else "device"
            return _failed(cand, kind, str(exc))
        except (KeyError, TypeError, ValueError) as exc:
            return _failed(cand, "load", f"{cand.artifact} is not an OpenCL program of mlc_lab: {_first_line(exc)}")
        out = self._checked(index, cand, [ran["outputs"][a.name] for a in cand.args], sink)
        out.engine, out.diagnostics = str(ran["engine"]), list(ran["diagnostics"])
        out.out_of_bounds, out.guard_writes = list(ran["out_of_bounds"]), dict(ran["guard_writes"])
        out.seconds = {**ran["seconds"], "total": time.perf_counter() - t0}
        return out


def _enable_cuda() -> str | None:
    """Load TVM's CUDA runtime into this runtime-only process (it is not loaded by itself); None when
    CUDA is on, else why not. A CUDA module built where there is no GPU holds CUDA source that NVRTC
    compiles as it loads, through a callback that asks for the current target: none, here (the
    device's own architecture is used)."""
    import ctypes

    import tvm

    if not tvm.runtime.enabled("cuda"):
        lib = os.path.join(os.path.dirname(tvm.__file__), "lib", "libtvm_runtime_cuda.so")
        if not os.path.exists(lib):
            return "TVM's CUDA runtime (libtvm_runtime_cuda.so) is not installed here"
        try:
            ctypes.CDLL(lib, ctypes.RTLD_GLOBAL)
        except OSError as exc:
            return f"TVM's CUDA runtime does not load here: {_first_line(exc)}"
    tvm.target.Target.current = staticmethod(lambda allow_none=True: None)
    return None if tvm.runtime.enabled("cuda") else "TVM's runtime has no CUDA here"


def _load_library(folder: str, name: str, private: str) -> Any:
    """Load an exported library from a private copy: the folder may be mounted without execution
    (the sandbox's inputs are), and the copy is this process's own."""
    import tvm

    copy = os.path.join(private, f"{len(os.listdir(private))}_{name}")
    shutil.copyfile(os.path.join(folder, name), copy)
    return tvm.runtime.load_module(copy)


def _arguments(folder: str, cand: RunCandidate) -> list[np.ndarray]:
    """The candidate's arguments in call order, read without pickles."""
    out = []
    npz: dict[str, Any] = {}
    for arg in cand.args:
        path = os.path.join(folder, arg.file)
        try:
            if arg.file.endswith(".npz"):
                if arg.file not in npz:
                    npz[arg.file] = _npz(folder, arg.file)
                if arg.name not in npz[arg.file]:
                    raise RunFormatError(f"{arg.file} holds no array {arg.name!r}")
                out.append(npz[arg.file][arg.name])
            else:
                out.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            if isinstance(exc, RunFormatError):
                raise
            raise RunFormatError(
                f"the argument {arg.name!r} cannot be read from {arg.file}: {_first_line(exc)}"
            ) from None
    return out


def _npz(folder: str, name: str) -> dict[str, np.ndarray]:
    try:
        with np.load(os.path.join(folder, name), allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise RunFormatError(f"{name} cannot be read: {_first_line(exc)}") from None


def _compare(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], cand: RunCandidate) -> tuple[int, float]:
    """(elements outside the tolerance, the largest absolute difference) over the outputs."""
    wrong, max_abs = 0, 0.0
    for name in cand.outputs:
        want = expected.get(name)
        have = got[name]
        if want is None or want.shape != have.shape:
            raise RunFormatError(f"{cand.expected} holds no output {name!r} of shape {list(have.shape)}")
        g64, w64 = have.astype(np.float64), want.astype(np.float64)
        wrong += int(np.count_nonzero(~np.isclose(g64, w64, rtol=cand.rtol, atol=cand.atol, equal_nan=False)))
        diff = np.abs(g64 - w64)
        if diff.size:
            max_abs = float("inf") if np.isnan(diff).any() else max(max_abs, float(diff.max()))
    return wrong, max_abs


def _threads_before_tvm(threads: int | None) -> None:
    """TVM reads its thread count once, as its pool starts: set it (and the runtime-only mode) first."""
    if threads:
        os.environ["TVM_NUM_THREADS"] = str(int(threads))
    os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # numpy's own pool stays out of the timing
        os.environ.setdefault(name, "1")


def main(argv: list[str]) -> int:
    folder, fd = _parse(argv)
    if folder is None:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        manifest = read_manifest(folder)
    except (OSError, RunFormatError) as exc:
        print(f"runside: {folder}: {exc}", file=sys.stderr)
        return 2
    _threads_before_tvm(manifest.method.threads)
    sink = _Sink(folder, fd)
    results = run(manifest, folder, sink)
    sink.results(results, final=True)
    return 0


def _parse(argv: list[str]) -> tuple[str | None, int | None]:
    if len(argv) == 1:
        return argv[0], None
    if len(argv) == 3 and argv[1] == "--fd" and argv[2].isdigit():
        return argv[0], int(argv[2])
    return None, None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
