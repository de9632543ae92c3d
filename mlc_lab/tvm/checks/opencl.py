"""A GPU schedule run on the CPU: TVM's OpenCL code for the same schedule, run by pocl or Oclgrind.

TVM 0.27's wheel has no OpenCL runtime, but it has the OpenCL code generator
(`target.build.opencl`): a thread-bound PrimFunc compiles to OpenCL C with `__local` for shared
memory and `barrier()` for `__syncthreads()`. pocl's CPU device (PyPI's `pocl-binary-distribution`,
through `pyopencl`), or the Oclgrind simulator where pocl cannot compile, runs that code with the
semantics of a thread block: work-groups, barriers, local memory. This module does what TVM does not:

- `opencl_program`: the OpenCL source plus the host side that TVM would otherwise compile for us,
  read from the host function that `SplitHostDevice` leaves and run symbolically (`_HostRun`):
  which kernels to launch in which order (host loops over launches unrolled), with which grid,
  block and arguments (those the host computes evaluated), and the workspaces to allocate;
- `resize_program`: the same program at other sizes (a 1024^3 matmul as 128^3), so that a
  schedule's trace can be replayed on it and checked in a second.

`mlc_lab.tvm.measure.opencl_run` runs the program (in a fresh process per run). `numeric_gpu_request` is
the worker's "numeric_gpu" request: build, run the kernels, run the unscheduled program on the CPU
with LLVM as the reference, compare. A failure comes back as a `RequestFailure` whose kind is the
verdict: ``does_not_build``, ``could_not_run`` or ``crash``.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

import numpy as np

from mlc_lab.model.grading import NumericComparison, NumericWorst, RunResult
from mlc_lab.tvm.measure import build
from mlc_lab.tvm.measure.opencl_run import OpenCLProgramError, run_in_child

import tvm  # noqa: E402  (after build: it sets the thread count before TVM starts)
import tvm_ffi  # noqa: E402

# Limits for the OpenCL build: those of a CUDA GPU, not TVM's OpenCL defaults (256 threads, 16 KB of
# local memory), so that a CUDA schedule builds as it is. `thread_warp_size` 1: a cross-thread
# reduction is lowered through local memory, which pocl runs, not through warp shuffles.
OPENCL_TARGET = {
    "kind": "opencl",
    "max_num_threads": 1024,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 228 * 1024,
    "thread_warp_size": 1,
}
_THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


# ----------------------------------------------------------------------------------------- build


def opencl_target() -> Any:
    return tvm.target.Target(OPENCL_TARGET, host=build.cpu_target())


@tvm.instrument.pass_instrument
class _KeepSplit:
    """Keeps the module right after SplitHostDevice: the host function still says, in TIR, which
    kernels it launches with which arguments and extents."""

    def __init__(self) -> None:
        self.split: Any = None

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if str(info.name) == "tirx.SplitHostDevice":
            self.split = mod


def opencl_program(mod: Any, func_name: str | None) -> dict:
    """Compile `func_name` of `mod` (thread-bound) for OpenCL. Returns plain data:
    {"source", "params": [{"name", "shape", "dtype"}], "allocs": [{"name", "shape", "dtype"}],
    "launches": [{"kernel", "args": [{"buffer": name} | {"scalar": value, "dtype"}],
    "grid": [x, y, z], "block": [x, y, z]}]}."""
    func_name, one = build.single_function_module(mod, func_name)
    unbound = build.unbound_blocks(one, func_name)
    if unbound:
        raise OpenCLProgramError(
            "not every block runs in a GPU kernel yet: "
            + "; ".join(
                f"block {u['block']!r} is not inside a blockIdx/threadIdx loop (loops above it: "
                f"{', '.join(u['loops']) or 'none'})"
                for u in unbound
            )
            + "; bind its loops with bind(loop, 'blockIdx.x') "
            "and bind(loop, 'threadIdx.x')",
            verdict="does_not_build",
        )
    keep = _KeepSplit()
    with tvm.transform.PassContext(instruments=[keep]):
        ex = tvm.compile(one, target=opencl_target())
    device = [m for m in ex.mod.imports if m.kind == "opencl"]
    if not device or keep.split is None:
        raise OpenCLProgramError(
            "the program compiled to host code only (no kernel): are its loops bound to blockIdx/threadIdx?"
        )
    source = device[0].inspect_source()
    params = [{"name": n, "shape": list(s), "dtype": d} for n, s, d in build.param_specs(one, func_name)]
    kernels = {
        gv.name_hint: f
        for gv, f in keep.split.functions_items()
        if gv.name_hint != func_name and isinstance(f, tvm.tirx.PrimFunc)
    }
    _refuse_global_allocations(kernels)
    host = _HostRun({name: f.params for name, f in kernels.items()})
    host.run(keep.split[func_name].body)
    names = [p["name"] for p in params] + [a["name"] for a in host.allocs]
    if len(set(names)) != len(names):
        raise OpenCLProgramError(f"two buffers share a name ({', '.join(names)}); rename one")
    races = _one_copy_for_all_threads(kernels, host)
    return {"source": source, "params": params, "allocs": host.allocs, "launches": host.launches, "races": races}


def _one_copy_for_all_threads(kernels: dict, host: Any) -> list[str]:
    """The races no engine needs to see: a buffer each thread should have its own of (scope 'local',
    such as the per-thread partial ``in_thread_X`` of a cross-thread reduction) that TVM allocates
    on the host, outside every kernel, where every thread of a block shares its one copy in global
    memory, and that a kernel of more than one thread writes at an index no thread index enters.
    pocl runs such a kernel as if each thread kept its own copy (its compiler forwards each thread's
    store to its load); Oclgrind reports the race; a GPU may give any thread's value."""
    local = {name for name, scope in host.scopes.items() if scope.startswith("local")}
    out: dict[tuple, str] = {}
    for launch in host.launches:
        threads = int(np.prod(launch["block"]))
        func = kernels.get(launch["kernel"])
        if threads < 2 or func is None or not local:
            continue
        thread_vars: set = set()
        stores: list = []

        def visit(node: Any, thread_vars: set = thread_vars, stores: list = stores) -> None:
            if isinstance(node, tvm.tirx.AttrStmt) and str(node.attr_key) == "thread_extent":
                if str(node.node.thread_tag).startswith("threadIdx"):
                    thread_vars.add(node.node.var)
            elif isinstance(node, tvm.tirx.BufferStore) and str(node.buffer.name) in local:
                stores.append(node)

        tvm_ffi.structural_walk(func.body, visit, order="pre")
        for store in stores:
            if any(_uses(index, thread_vars) for index in store.indices):
                continue
            name = str(store.buffer.name)
            at = ", ".join(str(i) for i in store.indices)
            out.setdefault(
                (launch["kernel"], name),
                f"all {threads} threads of a block of kernel {launch['kernel']} write {name}[{at}] with no "
                f"barrier between (a race): {name} is each thread's own ('local') in the schedule, but TVM "
                "allocates it outside the kernel, one copy in global memory for every thread; bind a loop "
                "above its block to blockIdx so that it is allocated inside the kernel",
            )
    return list(out.values())


def _uses(expr: Any, variables: set) -> bool:
    found: list = []

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.Var) and node in variables:
            found.append(node)

    tvm_ffi.structural_walk(expr, visit, order="pre")
    return bool(found)


def _refuse_global_allocations(kernels: dict) -> None:
    """A buffer in global memory allocated inside a kernel: no GPU can do that (TVM's CUDA build
    refuses it; OpenCL compilers each word it their own way), so it is named here, on any engine."""
    for name, func in kernels.items():
        found: list[str] = []

        def visit(node: Any, found: list[str] = found) -> None:
            if isinstance(node, tvm.tirx.AllocBuffer) and str(node.buffer.scope()) == "global":
                found.append(str(node.buffer.name))

        tvm_ffi.structural_walk(func.body, visit, order="pre")
        if found:
            listed = ", ".join(dict.fromkeys(found))
            raise OpenCLProgramError(
                f"kernel {name} allocates {listed} in global memory, which a GPU kernel cannot do: inline it "
                "(reverse_compute_inline of its consumer, or compute_inline), compute it in a kernel of its "
                "own, or give it a 'local' or 'shared' scope",
                verdict="does_not_build",
            )


MAX_LAUNCHES = 4096  # kernel launches one run may make (a host loop over launches)


class _HostRun:
    """The host function after SplitHostDevice, run symbolically: its loops over kernel launches
    unrolled, the arguments it computes (a loop variable, arithmetic on it) evaluated with TVM's
    simplifier, its workspaces (buffers it allocates for the kernels) listed. What the host code
    does besides launching kernels and allocating (a store to a buffer, a call) is refused."""

    def __init__(self, kernel_params: dict) -> None:
        self.kernel_params = kernel_params
        self.allocs: list[dict] = []
        self.scopes: dict[str, str] = {}  # each workspace's storage scope in the schedule
        self.launches: list[dict] = []
        self.analyzer = tvm.sym.Analyzer()

    def value(self, expr: Any, what: str) -> Any:
        out = self.analyzer.simplify(expr)
        if not isinstance(out, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
            raise OpenCLProgramError(
                f"{what} is computed on the host from something the CPU run cannot evaluate ({out})"
            )
        return out

    def run(self, node: Any) -> None:
        if isinstance(node, tvm.tirx.SeqStmt):
            for stmt in node.seq:
                self.run(stmt)
        elif isinstance(node, tvm.tirx.For):
            self.loop(node)
        elif isinstance(node, tvm.tirx.IfThenElse):
            cond = self.value(node.condition, "a condition of the host code")
            branch = node.then_case if int(cond.value) else node.else_case
            if branch is not None:
                self.run(branch)
        elif isinstance(node, tvm.tirx.Bind):
            self.analyzer.bind(node.var, self.value(node.value, f"host variable {node.var.name}"), allow_override=True)
        elif isinstance(node, tvm.tirx.AllocBuffer):
            self.alloc(node.buffer)
            if getattr(node, "body", None) is not None:
                self.run(node.body)
        elif isinstance(node, (tvm.tirx.DeclBuffer, tvm.tirx.AttrStmt, tvm.tirx.AssertStmt)):
            if getattr(node, "body", None) is not None:
                self.run(node.body)
        elif isinstance(node, tvm.tirx.Evaluate) and _is_call(node.value, "tirx.call_ffi_kernel"):
            if len(self.launches) >= MAX_LAUNCHES:
                raise OpenCLProgramError(f"the host code launches more than {MAX_LAUNCHES} kernels")
            self.launches.append(self.launch(node.value))
        elif isinstance(node, tvm.tirx.Evaluate) and isinstance(node.value, (tvm.tirx.IntImm, tvm.tirx.FloatImm)):
            pass
        elif isinstance(node, tvm.tirx.BufferStore):
            raise OpenCLProgramError(
                f"part of the program runs on the host, outside any kernel (it writes {node.buffer.name}): "
                "bind its loops to blockIdx/threadIdx"
            )
        else:
            raise OpenCLProgramError(
                f"the host code does something the CPU run does not handle ({type(node).__name__})"
            )

    def loop(self, node: Any) -> None:
        lo = self.value(node.min, f"the start of host loop {node.loop_var.name}")
        extent = int(self.value(node.extent, f"the extent of host loop {node.loop_var.name}").value)
        for i in range(int(lo.value), int(lo.value) + extent):
            self.analyzer.bind(node.loop_var, tvm.tirx.IntImm(str(lo.ty), i), allow_override=True)
            self.run(node.body)

    def alloc(self, buf: Any) -> None:
        name = str(buf.name)
        if any(a["name"] == name for a in self.allocs):
            return
        shape = [int(self.value(x, f"the shape of {name}").value) for x in buf.shape]
        self.allocs.append({"name": name, "shape": shape, "dtype": str(buf.dtype)})
        self.scopes[name] = str(buf.scope())

    def launch(self, call: Any) -> dict:
        name = str(call.args[0].value)
        tags = [str(t) for t in call.attrs.launch_params]
        if "tirx.use_dyn_shared_memory" in tags:
            # TVM's OpenCL code declares it as a private array and drops its barriers
            # (tvm_storage_sync("shared.dyn") prints nothing): run as it is, it would race.
            raise OpenCLProgramError(
                f"kernel {name} uses dynamic shared memory ('shared.dyn'), which TVM's OpenCL code "
                "does not handle (no __local array, no barriers): the CPU run cannot run it"
            )
        unknown = [t for t in tags if t not in _THREAD_TAGS]
        if unknown:
            raise OpenCLProgramError(
                f"kernel {name} needs launch parameter {unknown[0]}, which the CPU run does not provide"
            )
        values = list(call.args[1:])
        extents = values[len(values) - len(tags) :]
        params = self.kernel_params.get(name)
        args = []
        for i, value in enumerate(values[: len(values) - len(tags)]):
            if _is_call(value, "tirx.buffer_data"):
                args.append({"buffer": str(value.args[0].name)})
                continue
            got = self.value(value, f"argument {i} of kernel {name}")
            args.append({"scalar": got.value, "dtype": str(got.ty)})
        grid, block = [1, 1, 1], [1, 1, 1]
        for tag, ext in zip(tags, extents):
            n = int(self.value(ext, f"the extent of {tag} of kernel {name}").value)
            (grid if tag.startswith("blockIdx") else block)["xyz".index(tag[-1])] = n
        if params is not None and len(params) != len(args):
            raise OpenCLProgramError(f"kernel {name} takes {len(params)} arguments, the launch passes {len(args)}")
        return {"kernel": name, "args": args, "grid": grid, "block": block}


def _is_call(node: Any, op: str) -> bool:
    return isinstance(node, tvm.ir.Call) and getattr(node.op, "name", "") == op


# ----------------------------------------------------------------------------------------- sizes


_INT_LITERAL = r"(?<![\w.]){}(?![\w.])"


def buffer_dims(mod: Any, func_name: str | None) -> list[int]:
    """The distinct constant dimensions of the function's parameters, largest first."""
    dims = set()
    for _, shape, _ in build.param_specs(mod, func_name):
        dims.update(int(d) for d in shape)
    return sorted(dims, reverse=True)


def shape_var_names(mod: Any, func_name: str | None) -> list[str]:
    """The symbolic shape variables the function declares (`n = T.int32()`)."""
    _, one = build.single_function_module(mod, func_name)
    return re.findall(r"^\s*(\w+) = T\.(?:int32|int64)\(\)\s*$", one.script(), re.M)


def resize_program(mod: Any, func_name: str | None, sizes: dict) -> Any:
    """The program with other sizes. `sizes` maps a dimension (an int: every integer literal of that
    value in the function's TVMScript, its shapes, loop extents and index arithmetic, becomes the
    new value) or a symbolic shape variable (a str) to its new size."""
    func_name, one = build.single_function_module(mod, func_name)
    literal = {int(k): int(v) for k, v in sizes.items() if not isinstance(k, str)}
    symbolic = {str(k): int(v) for k, v in sizes.items() if isinstance(k, str)}
    if symbolic:
        # The shape variables are declared in the script (`n = T.int32()`): the declaration goes,
        # every use of the name becomes the value.
        text = one.script()
        declared = re.findall(r"^\s*(\w+) = T\.(?:int32|int64)\(\)\s*$", text, re.M)
        missing = [k for k in symbolic if k not in declared]
        if missing:
            raise ValueError(
                f"the function has no shape variable {missing[0]!r} (it has: {', '.join(declared) or 'none'})"
            )
        for name, value in symbolic.items():
            text = re.sub(rf"^\s*{name} = T\.(?:int32|int64)\(\)\s*\n", "", text, flags=re.M)
            text = re.sub(rf"(?<![\w.])\"?{name}\"?(?![\w])", str(value), text)
        one = build.module_from_text(text)
    if literal:
        dims = set()
        for _, shape, _ in build.param_specs(one, func_name):
            dims.update(int(d) for d in shape)
        missing = [k for k in literal if k not in dims]
        if missing:
            raise ValueError(
                f"no parameter of {func_name} has a dimension of {missing[0]} "
                f"(its dimensions are {', '.join(str(d) for d in sorted(dims))})"
            )
        text = one.script()
        pattern = re.compile("|".join(_INT_LITERAL.format(k) for k in sorted(literal, key=lambda k: -len(str(k)))))
        text = pattern.sub(lambda m: str(literal[int(m.group(0))]), text)
        one = build.module_from_text(text)
    return one


_THREAD_LOOP = re.compile(r"T\.thread_binding\(([^()]*?),\s*thread=\"[^\"]+\"\)")
_SCOPE = re.compile(r",\s*scope=\"(shared|shared\.dyn|local|warp)\"")


def serial_version(mod: Any, func_name: str | None) -> Any:
    """The function with its thread-bound loops as plain loops and shared/local buffers as
    ordinary ones: the same computation in TensorIR's sequential meaning, which builds for the CPU.
    The reference for a bound program that comes without the trace that made it."""
    func_name, one = build.single_function_module(mod, func_name)
    text = _SCOPE.sub("", _THREAD_LOOP.sub(lambda m: f"range({m.group(1)})", one.script()))
    return build.module_from_text(text)


def predicate_count(mod: Any, func_name: str | None) -> int:
    """How many blocks carry a predicate (`T.where`): a split whose factors do not divide its loop."""
    _, func = build.get_prim_func(mod, func_name)
    count = 0

    def visit(node: Any) -> None:
        nonlocal count
        pred = getattr(node, "predicate", None)
        if pred is not None and type(node).__name__.endswith("BlockRealize"):
            if not (isinstance(pred, tvm.tirx.IntImm) and int(pred.value) == 1):
                count += 1

    tvm_ffi.structural_walk(func.body, visit, order="pre")
    return count


# ----------------------------------------------------------------------------------------- request


def numeric_gpu_request(req: dict) -> NumericComparison:
    """The worker's "numeric_gpu" request: {"module", "reference", "func_name", "seed", "rtol",
    "atol"} (modules as `build.module_to_text`). Runs the scheduled module on pocl and the
    reference on the CPU with LLVM, on the same random inputs; returns the comparison. The kernel
    runs in a child of this process (`run_in_child`): the worker's, for a student's own schedule."""
    return numeric_gpu_compare(req, run_in_child)


def numeric_gpu_compare(req: dict, run: Callable[[dict, dict], dict]) -> NumericComparison:
    """`numeric_gpu_request` with the kernel run by `run(program, arrays)` (a hand-in's:
    `mlc_lab.core.kernel_sandbox.run_opencl`, in the sandbox); the OpenCL build, the reference and
    the comparison happen in this process."""
    from mlc_lab.model.wire import RequestFailure

    t0 = time.perf_counter()
    func_name = req["func_name"]
    mod = build.module_from_text(req["module"])
    ref = build.module_from_text(req["reference"])
    prog = _program_or_failure(mod, func_name)
    if req.get("budget"):  # the caller's total, less what its processes hold now (this worker loaded)
        from mlc_lab.tvm.measure.opencl_fit import allowance

        budget = dict(req["budget"])
        if budget.get("total_mb") is not None:
            pids = [int(p) for p in budget.get("pids", [])]
            budget["memory_mb"] = allowance(float(budget["total_mb"]), pids[0], tuple(pids[1:])) if pids else None
        prog["budget"] = budget
    t_built = time.perf_counter()
    specs = build.param_specs(ref, func_name)
    inputs = build.random_inputs(specs, int(req.get("seed", 0)))
    # The kernel first: a crash or a hang is then the kernel's, never the reference's.
    try:
        ran = run(prog, {name: a for (name, _, _), a in zip(specs, inputs)})
    except OpenCLProgramError as exc:
        raise RequestFailure(exc.verdict, str(exc)) from None
    t_ran = time.perf_counter()
    _, one = build.single_function_module(ref, func_name)
    ex = tvm.compile(one, target=build.cpu_target())
    tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in inputs]
    ex.mod.get_function(func_name)(*tensors)
    expected = [t.numpy() for t in tensors]
    t_ref = time.perf_counter()
    rtol, atol = float(req.get("rtol", 1e-3)), float(req.get("atol", 1e-3))
    wrong = total = 0
    max_error = 0.0
    worst: NumericWorst | None = None
    outputs = []
    for (name, _shape, _), before, want in zip(specs, inputs, expected):
        got = ran["outputs"][name]
        is_output = not np.array_equal(before, want, equal_nan=True)
        if not is_output and np.array_equal(got, want, equal_nan=True):
            continue
        outputs.append(name)
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        bad = ~np.isclose(g64, w64, rtol=rtol, atol=atol)
        diff = np.abs(g64 - w64)
        diff[np.isnan(diff)] = np.inf
        wrong += int(np.count_nonzero(bad))
        total += int(got.size)
        if diff.size and float(diff.max()) > max_error:
            max_error = float(diff.max())
            at = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
            worst = {"buffer": name, "index": list(at), "got": got[at].item(), "expected": want[at].item()}
    return NumericComparison(
        wrong=wrong,
        total=total,
        max_error=max_error,
        worst=worst,
        outputs=outputs,
        shape={name: list(shape) for name, shape, _ in specs},
        guard_writes=ran["guard_writes"],
        engine=ran["engine"],
        diagnostics=list(prog.get("races") or []) + list(ran["diagnostics"]),
        nan_read=bool(worst is not None and isinstance(worst["got"], float) and np.isnan(worst["got"])),
        launches=[{"kernel": x["kernel"], "grid": x["grid"], "block": x["block"]} for x in prog["launches"]],
        out_of_bounds=ran["out_of_bounds"],
        fit=ran.get("fit"),
        seconds={
            "build": t_built - t0,
            "reference": t_ref - t_ran,
            **ran["seconds"],
            "total": time.perf_counter() - t0,
        },
    )


def _program_or_failure(mod: Any, func_name: str) -> dict:
    """`opencl_program`, or the request's failure: its kind is the verdict (``does_not_build``:
    TVM refuses the schedule, as its CUDA build would; ``could_not_run``: the CPU run cannot)."""
    from mlc_lab.model.wire import RequestFailure

    try:
        return opencl_program(mod, func_name)
    except OpenCLProgramError as exc:
        raise RequestFailure(exc.verdict, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - TVM refused to build it: say so in one line
        text = str(exc).strip()
        raise RequestFailure(
            "does_not_build", "the schedule does not build for OpenCL: " + _first_line(text), text[-3000:]
        ) from None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "unknown error"


def run_function_request(req: dict) -> RunResult:
    """The worker's "run_opencl" request: {"module", "func_name", "inputs"} -> the arrays after the
    call (one per parameter), the engine and its diagnostics: a thread-bound function run on given
    inputs (what `exercises.numeric_check` does with a GPU schedule)."""
    from mlc_lab.model.wire import RequestFailure

    mod = build.module_from_text(req["module"])
    func_name = req["func_name"]
    prog = _program_or_failure(mod, func_name)
    names = [p["name"] for p in prog["params"]]
    try:
        ran = run_in_child(prog, dict(zip(names, req["inputs"])))
    except OpenCLProgramError as exc:
        raise RequestFailure(exc.verdict, str(exc)) from None
    diagnostics = [f"the kernel wrote {n} element(s) outside buffer {b}" for b, n in ran["guard_writes"].items()]
    return RunResult(
        ok=True,
        outputs=[ran["outputs"][n] for n in names],
        engine=ran["engine"],
        diagnostics=diagnostics + ran["diagnostics"],
    )
