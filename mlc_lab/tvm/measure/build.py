"""Build, check and time TensorIR modules; static GPU checks; CUDA source and PTX.

Everything here takes and returns plain data (text, dicts, numpy arrays) except the few helpers that
accept an IRModule from the caller. The functions that *run* generated code (`measure_request`) are
meant to be called inside the measure worker (`mlc_lab.core.worker_main`), never in a Jupyter kernel.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from mlc_lab._threads import ensure_tvm_threads
from mlc_lab.model.lowering import CudaBuild, GpuKernel
from mlc_lab.model.measure import Measurement
from mlc_lab.model.worker_ops import WorkerEnv
from mlc_lab.tvm import measure
from mlc_lab.tvm.targets import (  # noqa: F401  (re-exported: callers use build.resolve_target and friends)
    DEFAULT_CUDA_ARCH,
    cpu_target,
    gpu_present,
    resolve_target,
    target_to_json,
)
from mlc_lab.model.wire import RequestFailure

ensure_tvm_threads()

import tvm  # noqa: E402
from tvm.s_tir.meta_schedule.arg_info import ArgInfo  # noqa: E402

DEFAULT_MAX_THREADS_PER_BLOCK = 1024
DEFAULT_MAX_SHARED_BYTES = 48 * 1024


# ----------------------------------------------------------------------------------------- modules


def module_to_text(mod: Any) -> str:
    """An IRModule (or PrimFunc) as JSON text, the form that travels to worker processes."""
    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    return tvm.ir.save_json(mod)


def module_from_text(text: str) -> Any:
    """Inverse of `module_to_text`; TVMScript text is accepted too."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return tvm.ir.load_json(text)
    mod = tvm.script.from_source(text)
    if isinstance(mod, tvm.tirx.PrimFunc):
        mod = tvm.IRModule({"main": mod})
    return mod


def prim_func_names(mod: Any) -> list[str]:
    return sorted(gv.name_hint for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc))


def get_prim_func(mod: Any, func_name: str | None) -> tuple[str, Any]:
    names = prim_func_names(mod)
    if not names:
        raise ValueError("the module has no TensorIR function")
    if func_name is None:
        if len(names) > 1:
            raise ValueError(f"the module has several functions ({', '.join(names)}); say which one")
        func_name = names[0]
    if func_name not in names:
        raise ValueError(f"no function named {func_name!r} in the module (it has: {', '.join(names)})")
    return func_name, mod[func_name]


def single_function_module(mod: Any, func_name: str | None) -> tuple[str, Any]:
    """The one function `func_name` as a module of its own (what meta_schedule tunes as one task)."""
    func_name, func = get_prim_func(mod, func_name)
    return func_name, tvm.IRModule({func_name: func})


def estimate_flops(mod: Any, func_name: str | None = None) -> float:
    """TVM's own estimate (s_tir.analysis.estimate_tir_flops): multiply-adds count as 2."""
    _, one = single_function_module(mod, func_name)
    return float(tvm.s_tir.analysis.estimate_tir_flops(one))


# ----------------------------------------------------------------------------------------- targets
# (in mlc_lab.tvm.targets, which the machine probe imports too; re-exported here for the callers)


def compile_module(mod: Any, target: Any) -> Any:
    return tvm.compile(mod, target=resolve_target(target))


# ----------------------------------------------------------------------------------------- inputs


def param_specs(mod: Any, func_name: str | None) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of each buffer parameter of the function."""
    func_name, func = get_prim_func(mod, func_name)
    specs = []
    for param, info in zip(func.params, ArgInfo.from_prim_func(func)):
        shape = tuple(int(x) for x in info.shape)
        specs.append((param.name, shape, str(info.dtype)))
    return specs


def random_inputs(specs: list[tuple[str, tuple[int, ...], str]], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for _, shape, dtype in specs:
        dt = np.dtype(dtype)
        # Centred on zero: a missing max(x, 0) or a sign error must change the output.
        if dt.kind == "f":
            arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(dt))
        elif dt.kind == "i":
            arrays.append(rng.integers(-4, 8, size=shape).astype(dt))
        elif dt.kind == "u":
            arrays.append(rng.integers(0, 8, size=shape).astype(dt))
        elif dt.kind == "b":
            arrays.append(rng.integers(0, 2, size=shape).astype(dt))
        else:
            raise ValueError(f"cannot make random inputs of dtype {dtype}")
    return arrays


# ----------------------------------------------------------------------------------------- GPU checks


def _children(node: Any) -> list[Any]:
    out = []
    for attr in ("block", "init", "body", "then_case", "else_case"):
        child = getattr(node, attr, None) if hasattr(type(node), attr) else None
        if child is not None:
            out.append(child)
    if isinstance(node, tvm.tirx.SeqStmt):
        out.extend(node.seq)
    return out


def unbound_blocks(mod: Any, func_name: str | None) -> list[dict]:
    """Blocks not nested in any blockIdx/threadIdx loop: on a CUDA target they silently become host
    code. Each entry: {"block": name, "loops": [names of the loops above it]}."""
    _, func = get_prim_func(mod, func_name)
    found: list[dict] = []

    def visit(node: Any, loops: list[str], bound: bool) -> None:
        if isinstance(node, tvm.tirx.For):
            is_bound = node.kind == tvm.tirx.ForKind.THREAD_BINDING
            for child in _children(node):
                visit(child, loops + [node.loop_var.name], bound or is_bound)
            return
        if isinstance(node, tvm.s_tir.SBlockRealize):
            block = node.block
            name = block.name_hint
            if name != "root" and not bound and not _has_child_block(block):
                found.append({"block": name, "loops": list(loops)})
            visit(block, loops, bound)
            return
        for child in _children(node):
            visit(child, loops, bound)

    visit(func.body, [], False)
    return found


def thread_bound_loops(mod: Any, func_name: str | None) -> list[str]:
    """Names of the loops bound to GPU thread axes, as "loop->threadIdx.x"."""
    _, func = get_prim_func(mod, func_name)
    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.For) and node.kind == tvm.tirx.ForKind.THREAD_BINDING:
            tag = node.thread_binding.thread_tag if node.thread_binding is not None else "?"
            found.append(f"{node.loop_var.name}->{tag}")
        for child in _children(node):
            visit(child)

    visit(func.body)
    return found


def _has_child_block(block: Any) -> bool:
    def any_block(node: Any) -> bool:
        if isinstance(node, tvm.s_tir.SBlockRealize):
            return True
        return any(any_block(c) for c in _children(node))

    return any_block(block.body)


def _lower_for(mod: Any, target: Any) -> Any:
    target = resolve_target(target)
    mod = tvm.tirx.transform.BindTarget(target.with_host(target.host or cpu_target()))(mod)
    pipeline, _, _ = tvm.tirx.get_default_tir_pipeline(target)
    with target:
        return pipeline(mod)


def gpu_kernels(mod: Any, func_name: str | None, target: Any) -> list[GpuKernel]:
    """Per CUDA kernel after lowering: name, threads per block (and per axis), grid, shared bytes."""
    _, one = single_function_module(mod, func_name)
    lowered = _lower_for(one, target)
    kernels: list[GpuKernel] = []
    for gv, func in lowered.functions_items():
        ftarget = func.attrs.get("target") if func.attrs is not None else None
        if ftarget is None or ftarget.kind.name != "cuda":
            continue
        extents: dict[str, int] = {}

        def visit(node: Any) -> None:
            if isinstance(node, tvm.tirx.AttrStmt) and node.attr_key == "thread_extent":
                tag = node.node.thread_tag
                value = node.value
                if isinstance(value, tvm.tirx.IntImm):
                    extents[tag] = max(extents.get(tag, 1), int(value.value))  # noqa: B023  (called below, in this pass)
            for child in _children(node):
                visit(child)

        visit(func.body)
        threads = 1
        grid = 1
        for tag, ext in extents.items():
            if tag.startswith("threadIdx"):
                threads *= ext
            elif tag.startswith("blockIdx"):
                grid *= ext
        alloc = tvm.s_tir.analysis.calculate_allocated_bytes(func)
        per_scope = {str(k): int(v) for k, v in dict(alloc.get("main", {})).items()} if alloc else {}
        shared = sum(v for k, v in per_scope.items() if k.startswith("shared"))
        kernels.append(
            {
                "name": gv.name_hint,
                "threads_per_block": threads,
                "thread_extents": dict(sorted(extents.items())),
                "blocks": grid,
                "shared_bytes": shared,
                "local_bytes": per_scope.get("local", 0),
            }
        )
    kernels.sort(key=lambda k: k["name"])
    return kernels


def gpu_limits(target: Any) -> dict:
    target = resolve_target(target)
    attrs = target.attrs
    threads = int(attrs["max_num_threads"]) if "max_num_threads" in attrs else DEFAULT_MAX_THREADS_PER_BLOCK
    shared = (
        int(attrs["max_shared_memory_per_block"])
        if "max_shared_memory_per_block" in attrs
        else DEFAULT_MAX_SHARED_BYTES
    )
    return {"max_threads_per_block": threads, "max_shared_bytes": shared}


def gpu_problems(mod: Any, func_name: str | None, target: Any) -> tuple[list[str], list[GpuKernel]]:
    """Static reasons the program cannot run as a CUDA kernel, in plain sentences, and kernel facts."""
    unbound = unbound_blocks(mod, func_name)
    if unbound:
        lines = []
        for entry in unbound:
            loops = ", ".join(entry["loops"]) or "no loops"
            lines.append(f"block {entry['block']!r} is not inside a blockIdx/threadIdx loop (loops above it: {loops})")
        return (
            [
                "the program has unbound loops: on a CUDA target they would silently run on the host. "
                "Bind the outer loops with sch.bind(loop, 'blockIdx.x') and the inner ones with 'threadIdx.x'.\n  "
                + "\n  ".join(lines)
            ],
            [],
        )
    limits = gpu_limits(target)
    kernels = gpu_kernels(mod, func_name, target)
    problems = []
    for k in kernels:
        if k["threads_per_block"] > limits["max_threads_per_block"]:
            axes = " x ".join(f"{tag}={ext}" for tag, ext in k["thread_extents"].items() if tag.startswith("threadIdx"))
            problems.append(
                f"kernel {k['name']} uses {k['threads_per_block']} threads per block ({axes}); "
                f"the limit is {limits['max_threads_per_block']}"
            )
        if k["shared_bytes"] > limits["max_shared_bytes"]:
            problems.append(
                f"kernel {k['name']} uses {k['shared_bytes']} bytes of shared memory per block; "
                f"the limit is {limits['max_shared_bytes']} (set max_shared_memory_per_block in the target to change it)"
            )
    return problems, kernels


# ----------------------------------------------------------------------------------------- CUDA source


_KERNEL_START = re.compile(r'^extern "C" __global__', re.M)


def strip_cuda_preamble(source: str) -> str:
    """The kernels only: drop the NVRTC/nvcc compatibility header and the forward declarations."""
    match = _KERNEL_START.search(source)
    if match is None:
        return source.strip() + "\n"
    body = source[match.start() :]
    kept = [
        line
        for line in body.splitlines()
        if not (line.startswith('extern "C" __global__') and line.rstrip().endswith(");"))
    ]
    return "\n".join(kept).strip() + "\n"


def cuda_build(mod: Any, func_name: str | None, target: Any, ptx: bool = False) -> CudaBuild:
    """Compile for CUDA (no GPU needed): the kernels' source and facts, and PTX when asked for;
    `problems` non-empty means nothing was built."""
    target = resolve_target(target)
    if target.kind.name != "cuda":
        raise ValueError(f"not a CUDA target: {target}")
    func_name, one = single_function_module(mod, func_name)
    problems, kernels = gpu_problems(one, func_name, target)
    out = CudaBuild(source="", full_source="", kernels=kernels, problems=problems)
    if problems:
        return out
    ex = tvm.compile(one, target=target)
    cuda_mods = [m for m in ex.mod.imports if m.kind == "cuda"]
    if not cuda_mods:
        out.problems = ["the program compiled to host code only (no CUDA kernel): are its loops bound?"]
        return out
    full = cuda_mods[0].inspect_source()
    out.full_source = full
    out.source = strip_cuda_preamble(full)
    if ptx:
        try:
            out.ptx = nvcc_ptx(full, target)
        except Exception as exc:  # noqa: BLE001 - nvcc failures are reported, not raised
            out.ptx_error = str(exc)
    return out


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


def nvcc_ptx(full_source: str, target: Any) -> str:
    if nvcc_path() is None:
        raise RuntimeError("nvcc was not found on PATH: install the CUDA toolkit to produce PTX")
    from tvm.support import nvcc

    target = resolve_target(target)
    arch = str(target.attrs.get("arch", DEFAULT_CUDA_ARCH))
    with target:  # get_target_compute_version() reads the current target even when arch is given
        ptx = nvcc.compile_cuda(full_source, target_format="ptx", arch=arch, compiler="nvcc")
    return bytes(ptx).decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------------------- measuring


# Raised inside the worker; `kind` is one of build, run, check, no_gpu, gpu_check.
MeasureFailure = RequestFailure


_REFERENCE_CACHE: OrderedDict[str, tuple[list[np.ndarray], list[np.ndarray]]] = OrderedDict()


def _run_once(ex: Any, func_name: str, arrays: list[np.ndarray], dev: Any) -> list[np.ndarray]:
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    ex.mod.get_function(func_name)(*tensors)
    dev.sync()
    return [t.numpy() for t in tensors]


def reference_outputs(ref_text: str, func_name: str, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    key = hashlib.sha1(f"{func_name}\0{seed}\0{ref_text}".encode()).hexdigest()
    hit = _REFERENCE_CACHE.get(key)
    if hit is not None:
        _REFERENCE_CACHE.move_to_end(key)
        return hit
    ref = module_from_text(ref_text)
    specs = param_specs(ref, func_name)
    inputs = random_inputs(specs, seed)
    _, one = single_function_module(ref, func_name)
    try:
        ex = tvm.compile(one, target=cpu_target())
    except Exception as exc:  # noqa: BLE001
        raise MeasureFailure("build", "the reference program does not build", str(exc)) from exc
    outputs = _run_once(ex, func_name, inputs, tvm.cpu())
    _REFERENCE_CACHE[key] = (inputs, outputs)
    while len(_REFERENCE_CACHE) > 4:
        _REFERENCE_CACHE.popitem(last=False)
    return inputs, outputs


def _device(kind: str) -> Any:
    """The device to run on (a seam for tests that stand in for a GPU)."""
    return tvm.cuda(0) if kind == "cuda" else tvm.cpu()


def _compile(mod: Any, target: Any) -> Any:
    return tvm.compile(mod, target=target)


COMPULSORY = "compulsory: every element of every argument once"
FOOTPRINT = "footprint: every element of every global buffer the function touches, once"


def compulsory_traffic(inputs: list[np.ndarray]) -> tuple[float, str, dict]:
    return float(sum(a.nbytes for a in inputs)), COMPULSORY, {}


def measure_request(req: dict, traffic: Callable[[Any, str, list], tuple[float, str, dict]] | None = None) -> dict:
    """Build `req["module"]`, check it against `req["reference"]`, time it. Runs generated code:
    call it only in the worker process. `traffic(module, func_name, inputs)` counts the bytes for
    the roofline on CPU (default: the arguments' sizes; the worker's "measure" request passes the
    footprint count of `mlc_lab.core.access.traffic`)."""
    func_name, one = single_function_module(module_from_text(req["module"]), req.get("func_name"))
    target = resolve_target(req.get("target", "cpu"))
    kind = target.kind.name
    repeats, seed = max(1, int(req.get("repeats", measure.MEASURE.repeats))), int(req.get("seed", 0))
    dev = _measurable_device(one, func_name, target)
    ref_text = req.get("reference")
    try:
        flops = estimate_flops(module_from_text(ref_text) if ref_text else one, func_name)
    except Exception:  # noqa: BLE001 - the estimate is a nicety
        flops = 0.0
    ex, build_s = timed_build(one, target)
    inputs, expected = inputs_and_expected(one, func_name, ref_text, seed)
    try:
        got = _run_once(ex, func_name, inputs, dev)
    except Exception as exc:  # noqa: BLE001
        raise MeasureFailure("run", "the program failed while running", str(exc)) from exc
    max_abs, max_rel, correct = output_errors(got, expected) if expected is not None else (None, None, None)
    method = _timing_method(req, kind, repeats)
    tensors = [tvm.runtime.tensor(a, dev) for a in inputs]
    try:
        stats = measure.timed(
            ex.mod,
            func_name,
            dev,
            tensors,
            method,
            speed_probe=_speed_probe(kind == "llvm" and req.get("speed_probe", True)),
        )
    except Exception as exc:  # noqa: BLE001
        raise MeasureFailure("run", "the program failed while being timed", str(exc)) from exc
    median = stats["latency_s"]
    nbytes, bytes_source, bytes_by_buffer = (
        traffic(one, func_name, inputs) if traffic is not None and kind == "llvm" else compulsory_traffic(inputs)
    )
    threads = measure.threads() if kind == "llvm" else None
    return Measurement(  # its one encoding: core.measure reads it back with Measurement.from_json
        **stats,
        flops=flops,
        gflops=flops / median / 1e9 if median > 0 and flops else 0.0,
        bytes=nbytes,
        bytes_source=bytes_source,
        bytes_by_buffer=bytes_by_buffer,
        intensity=flops / nbytes if nbytes and flops else None,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        correct=correct,
        target=str(target),
        build_s=build_s,
        func_name=func_name,
        threads=threads,
        cache=method.cache,
        method=method.describe(threads) if kind == "llvm" else method.describe(None).replace("? thread(s)", "GPU"),
        load=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    ).to_json()


def check_runnable(one: Any, func_name: str, target: Any) -> None:
    """A MeasureFailure, before anything is built, when `func_name` cannot run on `target` whatever
    the machine (a GPU program that fails its checks, a CPU program with loops bound to GPU
    threads, a target kind other than CPU or CUDA)."""
    kind = target.kind.name
    if kind == "cuda":
        problems, _ = gpu_problems(one, func_name, target)
        if problems:
            raise MeasureFailure("gpu_check", problems[0], "\n".join(problems[1:]))
    elif kind in ("llvm", "c"):
        bound = thread_bound_loops(one, func_name)
        if bound:
            raise MeasureFailure(
                "build",
                "the program binds loops to GPU threads, so it runs only on a GPU: measure it with "
                "target='cuda', or look at its CUDA code with cuda_source()",
                "bound loops: " + ", ".join(bound),
            )
    else:
        raise MeasureFailure("build", f"measuring on target kind {kind!r} is not supported (use cpu or cuda)")


def _speed_probe(wanted: bool) -> Callable[[], float] | None:
    """`mlc_lab.tvm.measure.probe.parallel_speed` as the timing's probe, when wanted (it compiles a kernel
    the first time in a process)."""
    if not wanted:
        return None
    from mlc_lab.tvm.measure.probe import parallel_speed

    return lambda: parallel_speed(measure.threads())["parallel_speed"]


def _measurable_device(one: Any, func_name: str, target: Any) -> Any:
    """The device to run `func_name` on for `target`; a MeasureFailure, before anything is built,
    when it cannot run there (`check_runnable`, or a GPU program on a machine without a GPU)."""
    check_runnable(one, func_name, target)
    kind = target.kind.name
    if kind == "cuda":
        if not gpu_present():
            raise MeasureFailure(
                "no_gpu",
                "no CUDA GPU found; you can still build, inspect and visualise the CUDA program "
                "(cuda_source(...)), but not run or time it",
            )
        return _device("cuda")
    return _device("cpu")


def timed_build(one: Any, target: Any) -> tuple[Any, float]:
    """The program built for `target`, and the seconds the build took."""
    t0 = time.perf_counter()
    try:
        ex = _compile(one, target)
    except Exception as exc:  # noqa: BLE001
        raise MeasureFailure("build", "the program does not build", str(exc)) from exc
    build_s = time.perf_counter() - t0
    if target.kind.name == "cuda" and not any(m.kind == "cuda" for m in ex.mod.imports):
        raise MeasureFailure(
            "gpu_check", "the program compiled to host code only (no CUDA kernel): are its loops bound?"
        )
    return ex, build_s


def inputs_and_expected(
    one: Any, func_name: str, ref_text: str | None, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Seeded random inputs, and the reference's outputs on them (None without a reference); the
    program's parameters must be the reference's."""
    if not ref_text:
        return random_inputs(param_specs(one, func_name), seed), None
    inputs, expected = reference_outputs(ref_text, func_name, seed)
    shapes_now = [(s, d) for _, s, d in param_specs(one, func_name)]
    shapes_ref = [(a.shape, str(a.dtype)) for a in inputs]
    if shapes_now != shapes_ref:
        raise MeasureFailure(
            "check",
            "the program's parameters differ from the reference's",
            f"program: {shapes_now}\nreference: {shapes_ref}",
        )
    return inputs, expected


def output_errors(got: list[np.ndarray], expected: list[np.ndarray]) -> tuple[float, float, bool]:
    """(max absolute error, that relative to the largest expected value, correct): a NaN is an
    infinite error; correct is within 1e-3 of the largest expected value (or of 1)."""
    max_abs = 0.0
    scale = 0.0
    for a, b in zip(got, expected):
        if a.size == 0:
            continue
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        max_abs = max(max_abs, float(np.nanmax(diff)) if not np.isnan(diff).all() else float("inf"))
        if np.isnan(diff).any():
            max_abs = float("inf")
        scale = max(scale, float(np.max(np.abs(b.astype(np.float64)))))
    max_rel = max_abs / scale if scale > 0 else max_abs
    return max_abs, max_rel, bool(max_abs <= 1e-3 * max(1.0, scale))


def _timing_method(req: dict, kind: str, repeats: int) -> measure.TimingMethod:
    """How the request asks to be timed; a cold cache only on the CPU."""
    method = measure.TimingMethod(
        cache=str(req.get("cache", "warm")),
        repeats=repeats,
        min_repeat_ms=float(req.get("min_repeat_ms", measure.MEASURE.min_repeat_ms)),
    )
    if method.cache not in ("warm", "cold"):
        raise MeasureFailure("usage", f"cache must be 'warm' or 'cold', not {method.cache!r}")
    if method.cache == "cold" and kind != "llvm":
        raise MeasureFailure("usage", "cold-cache timing flushes CPU caches: it is offered for CPU targets only")
    return method


def cuda_request(req: dict) -> CudaBuild:
    mod = module_from_text(req["module"])
    return cuda_build(mod, req.get("func_name"), req.get("target", "cuda"), ptx=bool(req.get("ptx", False)))


def environment_request(_req: dict) -> WorkerEnv:
    return environment()


def environment() -> WorkerEnv:
    return WorkerEnv(
        tvm=tvm.__version__,
        threads=os.environ.get("TVM_NUM_THREADS"),
        cpu_target=str(cpu_target()),
        gpu=gpu_present(),
        nvcc=nvcc_path(),
    )
