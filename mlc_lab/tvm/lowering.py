"""What `tvm.compile` does with a schedule: every pass it runs, the TVMScript after each, the code.

`lower_script` runs the real `tvm.compile` under a pass instrument, so the pass list is whatever
TVM's pipeline for the target runs (nothing here names a pass). The module is re-parsed from the
step's TVMScript first: the parser gives every statement a span on its line of that script, the
spans survive lowering, and LLVM turns them into debug locations (`.loc 1 LINE` in the assembly,
`!DILocation(line: LINE)` in the IR). That is what ties each machine instruction back to a line,
hence a loop, of the script the student sees.

Everything returned is plain data (text, numbers, dicts). Compiling can crash or hang on odd
programs: call this in the worker process (`mlc_lab.core.worker_main`, request "lower"), not in a kernel.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from mlc_lab.model.lowering import GpuBuffer, LowerResult, PassStep, PtxasReport, VectorLoop
from mlc_lab.tvm.measure import build

import tvm  # noqa: E402  (after build: it sets the thread count before TVM starts)
import tvm_ffi  # noqa: E402

# Passes that only wrap others: their children are listed instead.
_WRAPPERS = {"sequential", "_pipeline"}


@tvm.instrument.pass_instrument
class _PassRecorder:
    """A pass instrument that keeps, per pass, whether it changed the module and the script after it."""

    def __init__(self, keep_scripts: bool = True, input_script: str = ""):
        self.records: list[dict] = []
        self.input_script = input_script
        self.keep_scripts = keep_scripts
        self._stack: list[tuple[int | None, Any, int, float]] = []  # (record index, mod before, hash before, t0)
        # The module a pass receives is the output of the last pass that changed it *in its line*:
        # after SplitHostDevice's two Filters, host and device passes work on different modules.
        self._last_changed = {"pipeline": -1, "host": -1, "device": -1}
        self.before_vectorize: Any = None
        self.after_compact: Any = None
        self.phase = "pipeline"
        self._filters = 0

    # TVM calls these by name (tvm.instrument.pass_instrument).
    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def _line(self) -> str:
        return self.phase if self.phase in ("host", "device") else "pipeline"

    def run_before_pass(self, mod: Any, info: Any) -> None:
        name = str(info.name)
        depth = sum(1 for idx, *_ in self._stack if idx is not None)
        if name in _WRAPPERS:
            if name == "sequential" and not self._stack and self._filters:
                # tvm.tirx.build: finalize_host_passes first, then finalize_device_passes per device.
                self.phase = "host" if self.phase == "split" else "device"
            self._stack.append((None, None, 0, time.perf_counter()))
            return
        note = ""
        if name == "tirx.Filter":
            # split_host_device_mods: the first Filter keeps the host functions, the second the device ones.
            self._filters += 1
            self.phase = "split"
            note = "host functions" if self._filters == 1 else "device functions"
            base = self._last_changed["pipeline"]
        else:
            base = self._last_changed[self._line()]
        if name == "tirx.VectorizeLoop":
            self.before_vectorize = mod
        index = len(self.records)
        self.records.append(
            {
                "index": index,
                "name": name,
                "note": note,
                "phase": "bind" if name == "tirx.BindTarget" else self.phase,
                "depth": depth,
                "status": "running",
                "base": base,
                "script": None,
                "error": None,
                "seconds": 0.0,
            }
        )
        self._stack.append((index, mod, _hash(mod), time.perf_counter()))

    def run_after_pass(self, mod: Any, _info: Any) -> None:
        index, before, before_hash, t0 = self._stack.pop()
        if index is None:
            return
        rec = self.records[index]
        if rec["name"] == "s_tir.CompactBufferAllocation":
            self.after_compact = mod  # the shared/local buffers at the size each block/thread keeps
        rec["seconds"] = time.perf_counter() - t0
        # Not `mod.same_as(before)`: some passes (AnnotateEntryFunc) change the module in place.
        if _hash(mod) == before_hash:
            rec["status"] = "no-op"
            if rec["name"] == "tirx.Filter":
                self._last_changed["host" if rec["note"].startswith("host") else "device"] = rec["base"]
            return
        rec["status"] = "changed"
        if rec["name"] == "tirx.Filter":
            self._last_changed["host" if rec["note"].startswith("host") else "device"] = index
        else:
            self._last_changed[self._line()] = index
        if self.keep_scripts:
            rec["script"] = _module_script(mod)
            if rec["script"] == self._script_of(rec["base"]):
                # e.g. FP8StorageLegalize: the IR differs in what the printer does not show
                rec["note"] = (rec["note"] + "; " if rec["note"] else "") + "the printed TVMScript is the same"

    def steps(self) -> list[PassStep]:
        """The passes as recorded so far (each one's record is kept as a dict while it runs)."""
        return [PassStep(**r) for r in self.records]

    def _script_of(self, index: int) -> str:
        while index >= 0 and self.records[index]["script"] is None:
            index = self.records[index]["base"]
        return self.input_script if index < 0 else self.records[index]["script"]

    def should_run(self, _mod: Any, _info: Any) -> bool:
        return True

    def fail(self, exc: BaseException, stage: str) -> None:
        """Mark the innermost running pass as failed (TVM does not call run_after_pass then)."""
        text = _error_text(exc)
        for index, *_ in reversed(self._stack):
            if index is not None:
                self.records[index]["status"] = "failed"
                self.records[index]["error"] = text
                for other, *_ in self._stack:
                    if other is not None and self.records[other]["status"] == "running":
                        self.records[other]["status"] = "failed"
                        self.records[other]["error"] = "a pass inside it failed"
                self._stack.clear()
                return
        self.records.append(
            {
                "index": len(self.records),
                "name": stage,
                "note": "",
                "phase": "codegen",
                "depth": 0,
                "status": "failed",
                "base": -1,
                "script": None,
                "error": text,
                "seconds": 0.0,
            }
        )


def _hash(mod: Any) -> int:
    return int(tvm_ffi.structural_hash(mod))


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not text.startswith(type(exc).__name__) else text


def _module_script(mod: Any) -> str:
    try:
        return mod.script()
    except Exception as exc:  # noqa: BLE001 - a module TVM cannot print is still shown as a fact
        return f"# TVM could not print this module: {exc}\n{mod}"


def _parse(script: str, func_name: str | None) -> tuple[str, Any]:
    mod = tvm.script.from_source(script)
    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({func_name or "main": mod})
    return build.single_function_module(mod, func_name)


_CUDA_ARCH = re.compile(r"^sm_\d+[a-z]?$")


def lower_target(spec: Any) -> Any:
    """The TVM target `lower` compiles for: "cpu" (this machine), "cuda" (this GPU's architecture,
    sm_90 without one), a CUDA architecture ("sm_75"), a target dict ({"kind": "cuda", "arch":
    "sm_75"}), a TVM target string or tag ("nvidia/geforce-rtx-3080"). Raises ValueError, in
    one sentence, for anything else or for a kind other than the CPU or CUDA."""
    if isinstance(spec, str) and _CUDA_ARCH.match(spec.strip()):
        spec = {"kind": "cuda", "arch": spec.strip()}
    try:
        tgt = build.resolve_target(spec)
    except Exception as exc:  # noqa: BLE001 - TVM's parser: its first line says which part
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(
            f"{spec!r} is not a target lower() knows: give 'cpu', 'cuda', a CUDA architecture "
            f"such as 'sm_75', a target dict or a TVM target tag ({first[:200]})"
        ) from None
    if tgt.kind.name not in ("llvm", "cuda"):
        raise ValueError(f"lower() compiles for the CPU or for CUDA, not for {tgt.kind.name!r} ({spec!r})")
    return tgt


def describe_target(spec: Any) -> dict:
    """{"key": the target as TVM prints it (one per distinct target), "kind": "cpu"|"cuda",
    "arch": the CUDA architecture or ""}: what a caller needs to cache and label a lowering."""
    tgt = lower_target(spec)
    kind = "cuda" if tgt.kind.name == "cuda" else "cpu"
    arch = str(tgt.attrs.get("arch", build.DEFAULT_CUDA_ARCH)) if kind == "cuda" else ""
    return {"key": str(tgt), "kind": kind, "arch": arch}


def lower_script(
    script: str, func_name: str | None = None, target: Any = "cpu", *, ptx: bool = True, keep_scripts: bool = True
) -> LowerResult:
    """Compile the TVMScript `script` (one function of it) for `target` the way `tvm.compile`
    does, recording every pass: the passes (each "changed", "no-op" or "failed", with the script
    after it and its input's index), whether it compiled, the LLVM IR and assembly (CPU) or CUDA
    source, PTX and ptxas's report (CUDA), the CPU's features and the vectorized loops' strides."""
    t0 = time.perf_counter()
    func_name, mod = _parse(script, func_name)
    t_parsed = time.perf_counter()
    tgt = lower_target(target)
    kind: Literal["cpu", "cuda"] = "cuda" if tgt.kind.name == "cuda" else "cpu"
    rec = _PassRecorder(keep_scripts=keep_scripts, input_script=script)
    out = LowerResult(
        target=str(tgt),
        kind=kind,
        func_name=func_name,
        passes=[],
        target_cpu=_target_cpu(tgt),
        cpu_features=_cpu_features(tgt),
    )
    if kind == "cuda":
        out.problems, _kernels = build.gpu_problems(mod, func_name, tgt)
    try:
        with tvm.transform.PassContext(instruments=[rec]):
            ex = tvm.compile(mod, target=tgt)
    except Exception as exc:  # noqa: BLE001 - a failing pass is a fact to show, not a crash
        rec.fail(exc, f"codegen (target.build.{tgt.kind.name})")
        out.passes = rec.steps()
        out.error = _error_text(exc)
        out.vector_strides = _vector_strides(rec.before_vectorize)
        out.seconds = time.perf_counter() - t0
        return out
    out.passes = rec.steps()
    out.ok = True
    t_compiled = time.perf_counter()
    out.vector_strides = _vector_strides(rec.before_vectorize)
    if kind == "cuda":
        out.gpu_buffers = gpu_buffers(rec.after_compact)
        out.arch = str(tgt.attrs.get("arch", build.DEFAULT_CUDA_ARCH))
    host = ex.mod
    if kind == "cpu":
        out.llvm_ir = host.inspect_source("ll")
        out.asm = host.inspect_source("asm")
    else:
        cuda_mods = [m for m in host.imports if m.kind == "cuda"]
        if not cuda_mods:
            out.problems = out.problems or [
                "the program compiled to host code only (no CUDA kernel): are its loops bound?"
            ]
        else:
            full = cuda_mods[0].inspect_source()
            out.cuda_source = build.strip_cuda_preamble(full)
            if ptx:
                try:
                    out.ptx = build.nvcc_ptx(full, tgt)
                    out.ptxas = ptxas_info(out.ptx, str(tgt.attrs.get("arch", build.DEFAULT_CUDA_ARCH)))
                except Exception as exc:  # noqa: BLE001 - nvcc problems are reported, not raised
                    out.ptx_error = _error_text(exc)
    out.seconds = time.perf_counter() - t0
    out.timings = {
        "parse": t_parsed - t0,
        "compile": t_compiled - t_parsed,
        "code_text": time.perf_counter() - t_compiled,
    }
    return out


def _target_cpu(tgt: Any) -> str:
    host = tgt.host if tgt.kind.name == "cuda" and tgt.host is not None else tgt
    return str(host.attrs.get("mcpu", "")) if "mcpu" in host.attrs else ""


# The LLVM features that explain vector widths: 512-bit registers exist (avx512f), LLVM's x86
# backend prefers 256-bit vectors on this CPU anyway (prefer-256-bit, set for Intel AVX-512 parts).
_EXPLAINING_FEATURES = ("avx512f", "avx2", "avx", "fma", "sse4.2", "prefer-256-bit")


def _cpu_features(tgt: Any) -> list[str]:
    host = tgt.host if tgt.kind.name == "cuda" and tgt.host is not None else tgt
    if host.kind.name != "llvm":
        return []
    try:
        features = set(str(f) for f in tvm.target.codegen.llvm_get_cpu_features(host))
    except Exception:  # noqa: BLE001 - an LLVM without this query: no explanation, same facts
        return []
    return [f for f in _EXPLAINING_FEATURES if f in features]


# ----------------------------------------------------------------------------------------- GPU buffers


_GPU_SCOPES = ("local", "shared", "shared.dyn", "warp")


def gpu_buffers(mod: Any) -> list[GpuBuffer]:
    """The shared and local buffers of the module as `CompactBufferAllocation` leaves them: what one
    thread block (shared) or one thread (local) really keeps. [{"name", "scope", "shape", "dtype",
    "bytes"}], in the order of the code."""
    if mod is None:
        return []
    found: list[GpuBuffer] = []
    seen: set[str] = set()

    def add(buf: Any) -> None:
        scope = buf.scope() if callable(getattr(buf, "scope", None)) else getattr(buf, "scope", "")
        scope, name = str(scope), str(buf.name)
        if scope not in _GPU_SCOPES or name in seen:
            return
        shape = [_int_or_none(d) for d in buf.shape]
        dtype = tvm.DataType(str(buf.dtype))
        size = None if any(d is None for d in shape) else (dtype.bits * dtype.lanes // 8) * _product(shape)
        seen.add(name)
        found.append({"name": name, "scope": scope, "shape": shape, "dtype": str(buf.dtype), "bytes": size})

    def visit(node: Any) -> None:
        for buf in getattr(node, "alloc_buffers", None) or []:
            add(buf)
        if isinstance(node, tvm.tirx.AllocBuffer):
            add(node.buffer)

    for _, func in mod.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, visit, order="pre")
    return found


def _product(values: list) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


# ----------------------------------------------------------------------------------------- strides


def _vector_strides(mod: Any) -> list[VectorLoop]:
    """For every loop marked vectorized in the module as VectorizeLoop received it (buffers already
    flattened): the stride, in elements, of each buffer access along the loop (None = not affine).
    A stride other than 0 or 1 is why a vectorized loop turns into scalar loads (a gather)."""
    if mod is None:
        return []
    from tvm.sym.pattern import detect_linear_equation

    found: list[VectorLoop] = []

    def accesses(body: Any) -> list[tuple[str, str, Any]]:
        got: list[tuple[str, str, Any]] = []

        def visit(node: Any) -> None:
            if isinstance(node, tvm.ir.TensorLoad):  # what a BufferLoad is in 0.27 (buffer in .source)
                got.append(("load", node.source.name, node.indices))
            elif isinstance(node, tvm.tirx.BufferStore):
                got.append(("store", node.buffer.name, node.indices))

        tvm_ffi.structural_walk(body, visit, order="pre")
        return got

    def visit_for(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.kind == tvm.tirx.ForKind.VECTORIZED:
            var = node.loop_var
            entry: VectorLoop = {
                "loop": str(var.name),
                "line": _span_line(node),
                "extent": _int_or_none(node.extent),
                "accesses": [],
            }
            seen = set()
            for kind, buf, indices in accesses(node.body):
                if len(indices) != 1:
                    continue
                coeffs = detect_linear_equation(indices[0], [var])
                stride = _int_or_none(coeffs[0]) if len(coeffs) == 2 else None
                key = (kind, buf, stride)
                if key not in seen:
                    seen.add(key)
                    entry["accesses"].append({"kind": kind, "buffer": buf, "stride": stride})
            found.append(entry)

    for _, func in mod.functions_items():
        if isinstance(func, tvm.tirx.PrimFunc):
            tvm_ffi.structural_walk(func.body, visit_for, order="pre")
    return found


def _span_line(node: Any) -> int | None:
    span = getattr(node, "span", None)
    try:
        return int(span.line) if span is not None else None
    except Exception:  # noqa: BLE001
        return None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value.value) if hasattr(value, "value") else int(value)
    except Exception:  # noqa: BLE001
        return None


# ----------------------------------------------------------------------------------------- ptxas


def ptxas_path() -> str | None:
    import shutil

    return shutil.which("ptxas")


def ptxas_info(ptx: str, arch: str) -> PtxasReport:
    """`ptxas -v` on the PTX: its report text (registers, shared memory, spills per kernel)."""
    exe = ptxas_path()
    if exe is None:
        return {"report": "", "error": "ptxas was not found on PATH"}
    with tempfile.TemporaryDirectory(prefix="mlc_lab_ptxas_") as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        proc = subprocess.run(
            [exe, "-v", f"-arch={arch}", str(src), "-o", str(Path(tmp) / "kernel.cubin")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    report = (proc.stderr or "") + (proc.stdout or "")
    return {"report": report.strip(), "error": None if proc.returncode == 0 else f"ptxas exited with {proc.returncode}"}


def lower_request(req: dict) -> LowerResult:
    """The worker's "lower" request: {"script", "func_name", "target", "ptx"}."""
    from mlc_lab.tvm.tuning.build import install_fast_stack

    # Re-parsing the step costs ~0.3 s of inspect.stack() in T.prim_func otherwise (worker only:
    # it patches TVM internals).
    install_fast_stack()
    return lower_script(req["script"], req.get("func_name"), req.get("target", "cpu"), ptx=bool(req.get("ptx", True)))
