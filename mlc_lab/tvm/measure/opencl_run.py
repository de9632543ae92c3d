"""A GPU kernel's OpenCL code run on the CPU by pocl or the Oclgrind simulator, in a process of its own.

`mlc_lab.tvm.checks.opencl` turns a schedule into plain data (the OpenCL source, the buffers, the launches);
this module runs that data with pyopencl and imports no TVM, so that `run_in_child` can run it in a
fresh Python process for every check: Oclgrind counts its error reports per process (after its
limit it reports nothing, and a kernel that writes out of bounds would read as right the second
time), and a kernel that crashes pocl costs that process only. ``python -m mlc_lab.tvm.measure.opencl_run
DIR`` is that process: it reads ``DIR/prog.json`` and ``DIR/inputs.npz`` and writes ``DIR/out.npz``
and ``DIR/result.json``. The measuring side (`runside`, an ``opencl`` run) calls `run_opencl` too:
that is how a kernel compiled from a hand-in runs, in the sandbox. It lives beside the measuring
side, which must start without TVM's compiler.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# On each side of every buffer: at least this, and at least the buffer's own size rounded up to it (a
# thread that indexes a whole tile or row past the end lands in the guard, not in other memory), a
# multiple of every device's base-address alignment.
GUARD_BYTES = 4096


class OpenCLProgramError(Exception):
    """The schedule cannot be run as OpenCL on the CPU. ``verdict``: ``could_not_run`` (what the CPU
    run does not handle: a launch parameter, host code besides launches, the engine) or
    ``does_not_build`` (no GPU could run it either: a block outside every kernel, a global buffer
    allocated inside a kernel)."""

    def __init__(self, message: str, verdict: str = "could_not_run", memory: bool = False) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.memory = memory  # the run passed its memory budget (Oclgrind may fit without race detection)


# ----------------------------------------------------------------------------------------- run


_PROBE = "__kernel void probe(__global float* x) { x[get_global_id(0)] += 1.0f; }"
ENGINES = ("pocl", "oclgrind")
ENGINE_VARIABLE = "MLC_LAB_OPENCL_ENGINE"  # pocl or oclgrind: run on that engine only
_DEVICE: dict[tuple, tuple[Any, str]] = {}  # the device chosen per (forced engine, engines skipped)


def forced_engine() -> str:
    """The engine ``MLC_LAB_OPENCL_ENGINE`` names ("" when unset); another value is refused."""
    name = os.environ.get(ENGINE_VARIABLE, "").strip().lower()
    if name and name not in ENGINES:
        raise OpenCLProgramError(
            f"{ENGINE_VARIABLE}={name!r} names no OpenCL engine: use {' or '.join(ENGINES)}, or leave it unset"
        )
    return name


def opencl_device(skip: tuple[str, ...] = ()) -> tuple[Any, str]:
    """The OpenCL device to run on and its engine's name: pocl's CPU device when its compiler
    works on this CPU, else the Oclgrind simulator (both are pyopencl extras from PyPI);
    ``MLC_LAB_OPENCL_ENGINE=pocl|oclgrind`` allows that one only.

    pocl 3.0's LLVM 14 does not know the newest CPUs (AMD family 1Ah, Zen 5): it asks clang for
    `-target-cpu generic` and every build fails ("unknown target CPU 'generic'"). Oclgrind
    interprets the kernel instead (about 10x slower) and reports out-of-bounds accesses itself.
    ``skip``: engines that cannot run this program (pocl, when a block's private arrays exceed its
    thread's stack)."""
    forced = forced_engine()
    key_of = (forced, skip)
    if key_of in _DEVICE:
        return _DEVICE[key_of]
    import pyopencl as cl

    found: dict[str, Any] = {}
    for platform in cl.get_platforms():
        name = platform.name.lower()
        key = (
            "pocl"
            if ("portable computing language" in name or "pocl" in name)
            else ("oclgrind" if "oclgrind" in name else name)
        )
        devices = platform.get_devices()
        if devices:
            found.setdefault(key, devices[0])
    reasons = []
    order = [forced] if forced else ["pocl", "oclgrind", *[k for k in found if k not in ENGINES]]
    for key in order:
        if key in skip:
            continue
        dev = found.get(key)
        if dev is None:
            reasons.append(f"{key}: not installed")
            continue
        try:
            cl.Program(cl.Context([dev]), _PROBE).build()
        except Exception as exc:  # noqa: BLE001 - this engine cannot compile here: try the next
            why = _compile_failure(str(exc))
            if "unknown target CPU" in why:
                why += " (pocl 3.0's LLVM 14 does not know this CPU model, e.g. AMD Zen 5)"
            reasons.append(f"{key}: {why}")
            continue
        _DEVICE[key_of] = (dev, key)
        return _DEVICE[key_of]
    if forced:
        raise OpenCLProgramError(
            f"the OpenCL engine {forced} ({ENGINE_VARIABLE}) cannot run kernels on this machine: " + "; ".join(reasons)
        )
    raise OpenCLProgramError(
        "no OpenCL engine that works on this machine (install pyopencl[pocl,oclgrind]); "
        + ("; ".join(reasons) or "no OpenCL platform found")
    )


def _compile_failure(text: str) -> str:
    """The line of an OpenCL build log that says why (``error: ...``), else its last line."""
    errors = _CL_ERROR.findall(text)
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    return (errors[0].strip() if errors else (lines[-1] if lines else "unknown error"))[:200]


def run_opencl(prog: dict, arrays: dict[str, np.ndarray], oclgrind_log: str = "") -> dict:
    """Run the launches of `prog` (from `opencl_program`) on copies of `arrays` (one per parameter,
    by name), in this process (`run_in_child` runs it in a fresh one). ``oclgrind_log``: the file
    ``OCLGRIND_LOG`` named when this process made its first OpenCL context (Oclgrind's reports). Returns {"outputs": {name: array}, "guard_writes": {name: count}, "engine",
    "diagnostics": [sentence], "out_of_bounds": [sentence], "seconds": {...}}: ``out_of_bounds``
    says where the kernel wrote past a buffer (a guard band changed) or Oclgrind saw an access
    outside one, which on a GPU is an illegal address.

    On pocl every buffer lives in a larger one, between guard bands filled with a NaN of its own (or
    a pattern for integers): a kernel that writes outside a buffer changes a guard, and one that reads outside
    it reads NaN, which shows in the result; a far-out access may still crash the process. Oclgrind
    checks every access itself and, with its data-race plugin, two threads writing one element
    (or one reading what another writes) without a barrier between: its reports come back as
    diagnostics."""
    import pyopencl as cl

    from mlc_lab.tvm.measure import opencl_fit as fit

    t0 = time.perf_counter()
    budget = fit.Budget.of(prog)
    if (prog.get("budget") or {}).get("races") is False:  # read by Oclgrind at this process's first context
        os.environ["OCLGRIND_DATA_RACES"] = "0"
    too_big = fit.pocl_problem(prog)
    if too_big and forced_engine() == "pocl":
        raise OpenCLProgramError(f"pocl cannot run this kernel here: {too_big}")
    dev, engine = opencl_device(("pocl",) if too_big else ())
    watch = fit.watch(budget, f"running this kernel on {engine}")
    log_start = os.path.getsize(oclgrind_log) if oclgrind_log and os.path.exists(oclgrind_log) else 0
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    chunks = fit.Chunks(budget, engine, os.cpu_count() or 1) if engine == "oclgrind" else None
    source = fit.chunkable(prog["source"]) if chunks else prog["source"]
    try:
        program = cl.Program(ctx, source).build()
    except cl.RuntimeError as exc:
        raise OpenCLProgramError(_build_error(engine, str(exc))) from None
    t_build = time.perf_counter()
    try:
        outputs, guard_writes = _launch_all(
            cl,
            ctx,
            queue,
            program,
            prog,
            arrays,
            engine,
            guard_bytes=0 if engine == "oclgrind" else GUARD_BYTES,
            max_group=int(dev.max_work_group_size),
            chunks=chunks,
        )
    except fit.BudgetError as exc:
        raise OpenCLProgramError(str(exc), memory=exc.memory) from None
    finally:
        if watch is not None:
            watch.stop()
    t_run = time.perf_counter()
    diagnostics = _oclgrind_diagnostics(oclgrind_log, log_start) if engine == "oclgrind" and oclgrind_log else []
    out_of_bounds = [f"the kernel wrote {n} element(s) outside buffer {b}" for b, n in guard_writes.items()]
    out_of_bounds += [d for d in diagnostics if d.startswith(_OUTSIDE)]
    return {
        "outputs": outputs,
        "guard_writes": guard_writes,
        "engine": engine,
        "diagnostics": diagnostics,
        "out_of_bounds": out_of_bounds,
        "seconds": {"opencl_build": t_build - t0, "run": t_run - t_build},
        "fit": {
            "pocl_problem": too_big,
            "blocks_at_once": chunks.at_once if chunks else None,
            "races": engine == "oclgrind" and os.environ.get("OCLGRIND_DATA_RACES", "0") == "1",
            "peak_mb": round(fit.rss_bytes() / (1 << 20)),
        },
    }


_CL_ERROR = re.compile(r"error: (.+)")


def _build_error(engine: str, text: str) -> str:
    """The OpenCL compiler's first error in one sentence."""
    return f"{engine} could not compile TVM's OpenCL code: {_compile_failure(text)}"


def _launch_all(
    cl: Any,
    ctx: Any,
    queue: Any,
    program: Any,
    prog: dict,
    arrays: dict[str, np.ndarray],
    engine: str,
    *,
    guard_bytes: int,
    max_group: int,
    chunks: Any = None,
) -> tuple[dict, dict]:
    host: dict[str, np.ndarray] = {}
    for p in prog["params"]:
        host[p["name"]] = np.ascontiguousarray(arrays[p["name"]], dtype=p["dtype"]).copy()
    for a in prog["allocs"]:
        host[a["name"]] = _fill(np.empty(a["shape"], dtype=a["dtype"]))
    bufs = {}
    mf = cl.mem_flags
    for key, (name, arr) in enumerate(host.items(), start=1):
        band = max(guard_bytes, -(-arr.nbytes // GUARD_BYTES) * GUARD_BYTES) if guard_bytes else 0
        g = band // arr.itemsize
        # each buffer's guards a value of their own: a kernel that copies one guard into another changes it
        padded = _fill(np.empty(arr.size + 2 * g, dtype=arr.dtype), key)
        padded[g : g + arr.size] = arr.ravel()
        whole = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=padded)
        inner = whole.get_sub_region(band, max(arr.nbytes, arr.itemsize)) if g else whole
        bufs[name] = (whole, inner, padded, g)
    kernels: dict[str, Any] = {}
    for launch in prog["launches"]:
        threads = int(np.prod(launch["block"]))
        if threads > max_group:
            raise OpenCLProgramError(
                f"kernel {launch['kernel']} uses {threads} threads per block; {engine} runs at most {max_group}"
            )
        kern = kernels.get(launch["kernel"]) or getattr(program, launch["kernel"])
        kernels[launch["kernel"]] = kern
        args = []
        for arg in launch["args"]:
            if "buffer" in arg:
                args.append(bufs[arg["buffer"]][1])
            else:
                args.append(np.dtype(arg["dtype"]).type(arg["scalar"]))
        if chunks is None:
            global_size = tuple(g * b for g, b in zip(launch["grid"], launch["block"]))
            kern(queue, global_size, tuple(launch["block"]), *args)
            continue
        block = [int(b) for b in launch["block"]] + [1] * (3 - len(launch["block"]))

        def part(grid: list, offset: list, kern: Any = kern, args: list = args, block: list = block) -> None:
            first = [np.int32(o) for o in offset]
            kern(queue, tuple(g * b for g, b in zip(grid, block)), tuple(block), *args, *first)

        chunks.launch(part, queue.finish, launch)
    queue.finish()
    outputs, guard_writes = {}, {}
    for name, (whole, _inner, padded, g) in bufs.items():
        back = np.empty_like(padded)
        cl.enqueue_copy(queue, back, whole)
        size = host[name].size
        if g:
            unsigned = _uint_of(back)
            band = np.concatenate([back[:g], back[g + size :]]).view(unsigned)
            band_before = np.concatenate([padded[:g], padded[g + size :]]).view(unsigned)
            changed = int(np.count_nonzero(band != band_before))
            if changed:
                guard_writes[name] = changed
        outputs[name] = back[g : g + size].reshape(host[name].shape)
    queue.finish()
    return outputs, guard_writes


# Oclgrind's report headlines, in a student's words; the first two are accesses outside a buffer.
_OUTSIDE = ("the kernel writes outside a buffer", "the kernel reads outside a buffer")
_OCLGRIND_KINDS = (
    ("Invalid write", "the kernel writes outside a buffer", ""),
    ("Invalid read", "the kernel reads outside a buffer", ""),
    ("Write-write data race", "two threads write the same element with no barrier between", "a race"),
    ("Read-write data race", "a thread reads an element that another thread writes with no barrier between", "a race"),
    ("Work-group divergence", "the threads of a block reach different barriers", "a barrier inside a branch?"),
    ("Uninitialized value", "the kernel uses a value that was never written", ""),
)


def _oclgrind_diagnostics(path: str, start: int = 0) -> list[str]:
    """One sentence per kind of problem Oclgrind reported after byte `start` of its log: how many,
    in which memory, which kernel."""
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            text = fh.read(4_000_000).decode(errors="replace")
    except OSError:
        return []
    counts: dict[str, list] = {}
    kernel = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Kernel:"):
            kernel = stripped.split(":", 1)[1].strip()
            continue
        if not line or line[0].isspace():
            continue
        for head, words, note in _OCLGRIND_KINDS:
            if line.startswith(head):
                memory = next((m for m in ("global", "local", "private") if f" {m} memory" in line), "")
                entry = counts.setdefault((words, note), [0, set(), kernel])
                entry[0] += 1
                if memory:
                    entry[1].add(memory)
                break
    out = []
    capped = "at least " if "suppressing further errors" in text else ""
    for (words, note), (count, memories, _kernel) in counts.items():
        where = f" in {' and '.join(sorted(memories))} memory" if memories else ""
        notes = ", ".join(n for n in (note, f"{capped}{count} report(s) from Oclgrind") if n)
        out.append(f"{words}{where} ({notes})")
    return out


def _fill(arr: np.ndarray, key: int = 0) -> np.ndarray:
    """Fill ``arr`` with a value no kernel computes, one of its own for each ``key``: for floats a quiet
    NaN whose payload is ``key`` (key 0: the usual NaN; x86 keeps a NaN's payload through a copy and
    through arithmetic), for integers a third of the largest unsigned value less ``key``."""
    unsigned = _uint_of(arr)
    if arr.dtype.kind == "f":
        nmant, bits = np.finfo(arr.dtype).nmant, arr.itemsize * 8
        quiet = ((1 << (bits - 1 - nmant)) - 1) << nmant | 1 << (nmant - 1)
        arr.view(unsigned).fill(quiet | key % (1 << (nmant - 1)))
    else:
        arr.view(unsigned).fill(np.iinfo(unsigned).max // 3 - key)
    return arr


def _uint_of(arr: np.ndarray) -> Any:
    return {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.itemsize]


# ----------------------------------------------------------------------------------------- child


def run_in_child(prog: dict, arrays: dict[str, np.ndarray]) -> dict:
    """`run_opencl` in a fresh Python process (``python -m mlc_lab.tvm.measure.opencl_run DIR``): the same
    result, or `OpenCLProgramError` with the child's reason. A child that dies (a kernel that
    crashed the engine) raises ``RequestFailure("crash", ...)``: the verdict is a crash, and the
    caller's process goes on. The caller's time limit covers the child (the worker's process group).
    A run on Oclgrind past its memory budget runs once more without Oclgrind's race detection (about
    half the memory; the static race hazards still hold), and its diagnostics say so."""
    try:
        return _run_child(prog, arrays, races=True)
    except OpenCLProgramError as exc:
        if not exc.memory or os.environ.get("MLC_LAB_OCLGRIND_RACES", "1") != "1":
            raise
    ran = _run_child(prog, arrays, races=False)
    ran.setdefault("fit", {})["note"] = "Oclgrind ran without its race detection, to fit the memory budget"
    return ran


def _run_child(prog: dict, arrays: dict[str, np.ndarray], races: bool) -> dict:
    import tempfile

    from mlc_lab.model.wire import RequestFailure

    with tempfile.TemporaryDirectory(prefix="mlc_lab_opencl_") as tmp:
        work = Path(tmp)
        (work / "prog.json").write_text(json.dumps(prog))
        np.savez(work / "inputs.npz", **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
        env = {**os.environ, "OCLGRIND_LOG": str(work / "oclgrind.log")}
        if not races:
            env["MLC_LAB_OCLGRIND_RACES"] = "0"
        proc = subprocess.run(
            [sys.executable, "-m", "mlc_lab.tvm.measure.opencl_run", str(work), str(os.getpid())],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        result_path = work / "result.json"
        if proc.returncode != 0 or not result_path.exists():
            tail = (proc.stderr or "")[-3000:]
            how = _signal_name(-proc.returncode) if proc.returncode < 0 else f"exit status {proc.returncode}"
            raise RequestFailure("crash", f"the process running the kernel on the CPU died ({how})", tail)
        result = json.loads(result_path.read_text())
        if "error" in result:
            raise OpenCLProgramError(
                result["error"], result.get("verdict", "could_not_run"), bool(result.get("memory"))
            )
        with np.load(work / "out.npz") as out:
            result["outputs"] = {name: out[name] for name in out.files}
    return result


def _signal_name(num: int) -> str:
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _die_with_parent(parent: int) -> None:
    """A kernel that spins must not outlive the process that asked for it (a worker killed for its
    time limit, or by hand): Linux sends this process SIGKILL when its parent dies."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the caller's process group still ends it
        pass
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)


def _child(work: Path) -> None:
    from mlc_lab.tvm.measure import opencl_fit

    prog = json.loads((work / "prog.json").read_text())

    def over(sentence: str) -> None:  # past the memory budget while a kernel runs: say so, end at once
        error = {"error": sentence, "verdict": "could_not_run", "memory": True}
        (work / "result.json").write_text(json.dumps(error))
        os._exit(0)

    opencl_fit.ON_OVER = over
    with np.load(work / "inputs.npz") as data:
        arrays = {name: data[name] for name in data.files}
    try:
        ran = run_opencl(prog, arrays, os.environ.get("OCLGRIND_LOG", ""))
    except OpenCLProgramError as exc:
        error = {"error": str(exc), "verdict": exc.verdict, "memory": exc.memory}
        (work / "result.json").write_text(json.dumps(error))
        return
    np.savez(work / "out.npz", **ran.pop("outputs"))
    (work / "result.json").write_text(json.dumps(ran))


if __name__ == "__main__":
    # Oclgrind reads its settings when this process makes its first OpenCL context.
    os.environ.setdefault("OCLGRIND_DATA_RACES", os.environ.get("MLC_LAB_OCLGRIND_RACES", "1"))
    _die_with_parent(int(sys.argv[2]))
    _child(Path(sys.argv[1]))
