"""Does a GPU schedule compute the right numbers? Checked without a GPU.

The schedule is compiled by TVM's OpenCL code generator (the same thread bindings, shared memory as
`__local`, barriers as `barrier()`) and run on the CPU by an OpenCL implementation from PyPI (pocl,
or the Oclgrind simulator where pocl's compiler does not know the CPU), in the worker process; the
unscheduled program, compiled for the CPU, gives the expected numbers on the same random inputs.

The course's GPU programs are 1024^3 or 2048^3: too large to run this way in seconds. So the check
replays the schedule's trace on the same program at a smaller size (every dimension divided by the
same factor; by default the largest becomes 128), as long as the trace's tiles still divide it.

    >>> r = numeric_check(session)                 # the session's original program and its trace
    >>> r.ok, r.wrong, r.total, r.message
    >>> numeric_check("mm.py", "trace.json", sizes={1024: 256})

Everything here is plain data; the TVM side is `mlc_lab.tvm.checks.opencl`. The verdict, `NumericResult`,
is the model's (``mlc_lab.model.grading``), as is the worker's answer it is read from (`NumericComparison`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from mlc_lab.errors import MeasureError, MlcLabError
from mlc_lab.model.grading import NumericComparison, NumericResult, RunResult
from mlc_lab.model.worker_ops import WORKER_OPS

DEFAULT_SIZE = 128  # the largest dimension after shrinking, when no size is given
DEFAULT_TIMEOUT_S = WORKER_OPS["numeric_gpu"].timeout_s
VERDICTS = ("match", "mismatch", "crash", "timeout", "does_not_build", "could_not_run")


class NumericCheckError(MlcLabError):
    """The check could not be set up from what was given: the program, the trace or the sizes."""


class _NoSizeFits(NumericCheckError):
    """No size the check chose by itself fits the schedule (the verdict is then could_not_run)."""


def numeric_check(
    program_or_session: Any,
    trace: Any = None,
    *,
    sizes: Any = None,
    shape_vars: dict | None = None,
    func: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    guards: bool = False,
    memory_mb: float | None = None,
) -> NumericResult:
    """Run a GPU schedule on the CPU and compare it with the unscheduled program on random inputs.

    ``program_or_session``: a `Session` (its original program and its current trace are used), or a
    program (TVMScript text, a path, an IRModule) with ``trace`` (text, JSON, a file's contents) to
    schedule it; a program without a trace is run as it is, at its own size.

    ``sizes``: the size to run at. An int N: every dimension is divided by one factor so that the
    largest becomes N (default 128, trying larger sizes when the trace's tiles do not divide it); a
    dict: ``{1024: 128}`` changes every dimension of 1024 to 128 (and ``{"n": 128}`` gives a
    symbolic shape variable a value, as ``shape_vars`` does). With a size given, a trace whose tiles
    no longer fit raises `NumericCheckError` saying so, unless ``guards``: the size is meant not to be a
    multiple of the tiles, and runs with the bounds checks TVM gives the loops there.

    A crash (an access far outside a buffer) or a hang costs the worker process and comes back as
    the verdict ``crash`` / ``timeout``. The kernel runs in the persistent worker: this is the
    explorer's check of a student's own schedule; a hand-in's runs in the sandbox
    (`numeric_check_sandboxed`).

    ``memory_mb``: the memory this process and everything it runs may hold while the check runs (an
    assignment's ``[numeric] memory_mb``, Gradescope's 768 MB by default): the kernel's CPU run gets
    what is left and fits itself into it (`mlc_lab.tvm.measure.opencl_fit`: pocl where it fits, fewer
    thread blocks at once on Oclgrind, without Oclgrind's race detection last), or says it could not
    run and what it needs; ``timeout_s`` is its time."""
    from mlc_lab.core.worker import worker

    setup = _setup(program_or_session, trace, sizes, shape_vars, func, guards)
    if isinstance(setup, NumericResult):
        return setup
    budget = {"total_mb": memory_mb, "pids": _budget_pids(), "seconds": timeout_s} if memory_mb else None
    try:
        raw: NumericComparison = worker().call(
            "numeric_gpu", timeout=timeout_s, **setup.request(seed, rtol, atol, budget)
        )
    except MeasureError as exc:
        return _failure(exc, setup.used, setup.shapes(), timeout_s)
    return _result(raw, setup.used, rtol, atol, setup.against)


def numeric_check_sandboxed(
    program_or_session: Any,
    trace: Any = None,
    *,
    sandbox: Any,
    sizes: Any = None,
    shape_vars: dict | None = None,
    func: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    seed: int = 0,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    guards: bool = False,
    memory_mb: float | None = None,
) -> NumericResult:
    """`numeric_check` of a hand-in: the same verdicts, but the kernel runs in the sandbox
    (`mlc_lab.core.kernel_sandbox.run_opencl`, a `KernelSandbox`'s memory, `timeout_s` of wall
    time): its OpenCL program is built here, the unscheduled program (the assignment's) runs here
    for the expected numbers, and the kernel's outputs are compared here once its run is gone.
    Raises `SandboxUnavailable` where the machine cannot sandbox (unless `sandbox.unsafe_same_user`).
    With ``memory_mb`` (the numeric check's budget for everything the grader holds), the sandbox gets
    what this process and ``MLC_LAB_BUDGET_PARENT`` leave of it, and the run fits itself into that."""
    from dataclasses import replace

    from mlc_lab.core import kernel_sandbox
    from mlc_lab.model.wire import RequestFailure
    from mlc_lab.tvm.checks import opencl

    setup = _setup(program_or_session, trace, sizes, shape_vars, func, guards)
    if isinstance(setup, NumericResult):
        return setup
    box = replace(sandbox, wall_s=timeout_s)

    def run(prog: dict, arrays: dict) -> dict:
        # what the grader holds once the kernel is built, just before it runs: the rest is the run's
        left, here, plan = _memory_left(memory_mb), box, prog
        if left is not None:
            here = replace(box, memory_mb=int(min(box.memory_mb, left)))
            # 32 MB of it for the sandbox's own init and what the watcher's 5 ms let pass
            plan = {**prog, "budget": {**(prog.get("budget") or {}), "memory_mb": here.memory_mb - 32}}
            plan["budget"]["seconds"] = timeout_s
        return fitting(lambda p: kernel_sandbox.run_opencl(p, arrays, here), plan, here.memory_mb)

    try:
        raw = opencl.numeric_gpu_compare(setup.request(seed, rtol, atol), run)
    except RequestFailure as exc:
        failed = MeasureError(exc.message, kind=exc.kind, detail=exc.detail)
        return _failure(failed, setup.used, setup.shapes(), timeout_s)
    except kernel_sandbox.SandboxUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001 - what the worker answers as "internal": the numbers are not judged
        failed = MeasureError(f"{type(exc).__name__}: {exc}".splitlines()[0][:500], kind="internal")
        return _failure(failed, setup.used, setup.shapes(), timeout_s)
    return _result(raw, setup.used, rtol, atol, setup.against)


def fitting(call: Any, prog: dict, memory_mb: float) -> dict:
    """``call(prog)`` (a sandboxed run of the kernel); a run stopped at its memory, by the sandbox or by
    its own budget, runs once more without Oclgrind's race detection (about half the memory), and past
    that too is ``could_not_run`` saying what it needs, never a crash."""
    from mlc_lab.model.wire import RequestFailure

    from mlc_lab.tvm.measure.opencl_fit import OVER

    def over(exc: RequestFailure) -> bool:
        return "memory limit" in exc.message or "the budget leaves" in exc.message or OVER in (exc.detail or "")

    def said(exc: RequestFailure) -> str:
        if OVER in (exc.detail or ""):
            return exc.detail.split(OVER, 1)[1].splitlines()[0]
        return exc.message if "the budget leaves" in exc.message else ""

    try:
        return call(prog)
    except RequestFailure as exc:
        if not over(exc):
            raise
    quiet = {**prog, "budget": {**(prog.get("budget") or {}), "races": False}}
    try:
        ran = call(quiet)
    except RequestFailure as exc:
        if not over(exc):
            raise
        why = said(exc) or f"running this kernel on the CPU needs more than the {memory_mb:.0f} MB the budget leaves"
        raise RequestFailure("could_not_run", why) from None
    ran.setdefault("fit", {})["note"] = "Oclgrind ran without its race detection, to fit the memory budget"
    return ran


@dataclass(frozen=True)
class _Setup:
    """What both runs are given: the programs at the size to run, and how they were sized."""

    small: Any
    scheduled: Any
    func_name: str
    used: dict
    against: str

    def request(self, seed: int, rtol: float, atol: float, budget: dict | None = None) -> dict:
        from mlc_lab.tvm.measure import build

        out = {
            "module": build.module_to_text(self.scheduled),
            "reference": build.module_to_text(self.small),
            "func_name": self.func_name,
            "seed": seed,
            "rtol": rtol,
            "atol": atol,
        }
        if budget:
            out["budget"] = budget
        return out

    def shapes(self) -> dict[str, list[int]]:
        return _shapes(self.small, self.func_name)


def _setup(
    program_or_session: Any, trace: Any, sizes: Any, shape_vars: dict | None, func: str | None, guards: bool = False
) -> Any:
    """The `_Setup` of a check, or the could_not_run verdict when no size fits the schedule."""
    original, trace, func_name = resolve_inputs(program_or_session, trace, func)
    given = dict(shape_vars or {})
    try:
        small, scheduled, used = _at_size(original, trace, func_name, sizes, given, guards)
    except _NoSizeFits as exc:
        return _not_run(f"the numbers were not checked: {exc}", {}, _shapes(original, func_name))
    used = {**{k: v for k, v in given.items() if isinstance(k, str)}, **used}
    against = "the unscheduled program" if trace is not None else "the program with its thread loops run in order"
    return _Setup(small, scheduled, func_name, used, against)


BUDGET_PARENT = "MLC_LAB_BUDGET_PARENT"  # the pid of a process that shares the budget (mlc-lab grade)


def _memory_left(memory_mb: float | None) -> float | None:
    """Of ``memory_mb``, what this process (with its children) and ``MLC_LAB_BUDGET_PARENT`` leave now
    for one more process (at least 64 MB); None without a budget."""
    if memory_mb is None:
        return None
    from mlc_lab.tvm.measure.opencl_fit import allowance

    pids = _budget_pids()
    return allowance(float(memory_mb), pids[0], tuple(pids[1:]))


def _budget_pids() -> list[int]:
    """Whose memory the budget covers: this process with its children (the worker), then the process
    ``MLC_LAB_BUDGET_PARENT`` names (the ``mlc-lab grade`` that started a judging child)."""
    parent = os.environ.get(BUDGET_PARENT, "")
    return [os.getpid()] + ([int(parent)] if parent.isdigit() and int(parent) != os.getpid() else [])


# ----------------------------------------------------------------------------------------- set-up


def resolve_inputs(program_or_session: Any, trace: Any, func: str | None) -> tuple[Any, Any, str]:
    from mlc_lab.tvm import program

    obj = program_or_session
    if hasattr(obj, "original") and hasattr(obj, "func_name") and hasattr(obj, "trace"):
        return obj.original, (_trace_text(trace) if trace is not None else obj.trace), func or obj.func_name
    try:
        mod = program.load(obj, func)
    except MlcLabError as exc:
        raise NumericCheckError(f"the program could not be loaded: {str(exc).splitlines()[0]}") from None
    names = program.prim_func_names(mod)
    name = func or ("main" if "main" in names else names[0])
    return mod, _trace_text(trace), name


def _trace_text(trace: Any) -> Any:
    """A trace as given, or the text of the file it names (a path)."""
    from pathlib import Path

    if isinstance(trace, Path) or (
        isinstance(trace, str)
        and "\n" not in trace
        and len(trace) < 1024
        and trace.strip().endswith((".json", ".trace", ".txt", ".py"))
    ):
        path = Path(trace)
        if not path.is_file():
            raise NumericCheckError(f"there is no trace file {str(trace)!r}")
        return path.read_text()
    return trace


def _at_size(
    original: Any, trace: Any, func_name: str, sizes: Any, shape_vars: dict, guards: bool = False
) -> tuple[Any, Any, dict]:
    """(the unscheduled program at the size to run, the scheduled one, the dimension map used)."""
    from mlc_lab.tvm.checks import opencl

    if isinstance(sizes, dict):
        shape_vars.update({k: v for k, v in sizes.items() if isinstance(k, str)})
        literal = {int(k): int(v) for k, v in sizes.items() if not isinstance(k, str)}
    else:
        literal = None
    if shape_vars:
        try:
            original = opencl.resize_program(original, func_name, shape_vars)
        except ValueError as exc:
            raise NumericCheckError(str(exc)) from None
        if sizes is None or (literal is not None and not literal):
            literal = {}  # the values given are the size to run at
    else:
        free = opencl.shape_var_names(original, func_name)
        if free:
            raise NumericCheckError(
                f"the program's shapes are symbolic ({', '.join(free)}): give their values, "
                f"e.g. shape_vars={{{free[0]!r}: 128}}"
            )
    if trace is None:
        if literal or (sizes is not None and not isinstance(sizes, dict)):
            raise NumericCheckError("sizes need the schedule's trace: without one the program runs at its own size")
        # The reference: the same program with its thread loops as plain loops (TensorIR's meaning).
        return opencl.serial_version(original, func_name), original, {}
    dims = opencl.buffer_dims(original, func_name)
    full = _replay(original, trace, func_name, None)
    full_predicates = opencl.predicate_count(full, func_name)
    if literal is not None:
        candidates = [literal]
        explicit = True
    else:
        target = int(sizes) if sizes is not None else DEFAULT_SIZE
        if target <= 0:
            raise NumericCheckError(f"the size must be a positive number, not {sizes!r}")
        candidates = _shrinkings(dims, target)
        explicit = sizes is not None
    last_problem = ""
    for mapping in candidates:
        if not mapping:
            return original, full, {}
        try:
            small = opencl.resize_program(original, func_name, mapping)
        except ValueError as exc:
            raise NumericCheckError(str(exc)) from None
        try:
            scheduled = _replay(small, trace, func_name, mapping)
        except NumericCheckError as exc:
            last_problem = str(exc)
            if explicit:
                raise
            continue
        extra = opencl.predicate_count(scheduled, func_name) - full_predicates
        if extra > 0 and not guards:
            last_problem = (
                f"at {sizes_text(mapping)} the schedule's tiles no longer divide the loops "
                f"({extra} block(s) get a bounds check they do not have at full size): "
                "give sizes that are multiples of the tile sizes"
            )
            if explicit:
                raise NumericCheckError(last_problem)
            continue
        return small, scheduled, mapping
    if explicit:
        raise NumericCheckError(last_problem or "no smaller size fits the schedule")
    raise _NoSizeFits(last_problem or "no smaller size fits the schedule")


def _shrinkings(dims: list[int], target: int) -> list[dict[int, int]]:
    """Dimension maps, smallest first: every dimension divided by 2^k so that the largest is
    `target`, then twice that, ... up to the program's own size (the empty map)."""
    if not dims or dims[0] <= target:
        return [{}]
    out = []
    factor = 1
    while dims[0] // factor > target:
        factor *= 2
    while factor > 1:
        mapping = {d: d // factor for d in dims if d % factor == 0 and d // factor >= 1}
        if len(mapping) == len(dims) or all(d < factor for d in dims if d not in mapping):
            out.append({d: v for d, v in mapping.items() if d != v})
        factor //= 2
    out.append({})
    return out


def _replay(mod: Any, trace: Any, func_name: str, mapping: dict | None) -> Any:
    from mlc_lab.tvm import state_trace

    try:
        return state_trace.replayed_module(mod, trace, func_name)
    except MlcLabError as exc:
        first = str(exc).strip().splitlines()[0]
        where = "the program" if not mapping else f"the program at {sizes_text(mapping)}"
        raise NumericCheckError(f"the trace does not replay on {where}: {first}") from None


def sizes_text(mapping: dict) -> str:
    items = sorted(
        mapping.items(), key=lambda kv: (isinstance(kv[0], str), -kv[0] if isinstance(kv[0], int) else 0, str(kv[0]))
    )
    return ", ".join(f"{k} = {v}" if isinstance(k, str) else f"{k} -> {v}" for k, v in items) or "its own size"


def _shapes(mod: Any, func_name: str) -> dict[str, list[int]]:
    from mlc_lab.tvm.measure import build

    try:
        return {name: list(shape) for name, shape, _ in build.param_specs(mod, func_name)}
    except Exception:  # noqa: BLE001 - symbolic shapes: no shape to show
        return {}


# ----------------------------------------------------------------------------------------- verdicts


def _where(used: dict) -> str:
    return f" (run at {sizes_text(used)})" if used else ""


# How a process that runs a kernel dies of an access outside its memory: a signal of one, or the C
# library's own check of its heap (or stack) finding it overwritten, which aborts it.
_FAULTS = {"SIGSEGV": "a segmentation fault", "SIGBUS": "a bus error"}
_CORRUPTED = re.compile(
    r"(double free or corruption[^\n]*|free\(\): [^\n]*|malloc\(\): [^\n]*|corrupted [^\n]*|"
    r"\*\*\* stack smashing detected[^\n]*)"
)


def _access_fault(exc: MeasureError) -> str | None:
    """How the process running the kernel (its own child, or the sandbox's) died of an access outside
    its memory, in words; None for any other end (a worker that died, a kill, an exit, an abort of
    another cause)."""
    if not exc.summary.startswith(("the process running the kernel", "the kernel was killed by")):
        return None
    found = re.search(r"\b(SIG[A-Z]+)\b", exc.summary)
    name = found.group(1) if found else ""
    if name in _FAULTS:
        return f"the process running it died of {name}, {_FAULTS[name]}"
    heap = _CORRUPTED.search(exc.detail or "")
    if name == "SIGABRT" and heap:
        return f'the process running it died of SIGABRT: the C library found its memory overwritten, "{heap.group(1).strip()}"'
    return None


def _failure(exc: MeasureError, used: dict, shape: dict, timeout_s: float) -> NumericResult:
    fault = _access_fault(exc) if exc.kind == "crash" else None
    if fault:
        # the same family as a guard band's: an access outside a buffer is an illegal address on a GPU
        verdict = "crash"
        message = (
            f"the kernel accesses memory outside a buffer ({fault}){_where(used)} on the CPU: on a GPU that "
            "is an illegal address; check the extents of the loops bound to threads against the buffers"
        )
    elif exc.kind == "crash":
        verdict = "crash"
        message = (
            "the kernel crashed (out-of-bounds access?): the process running it died"
            f"{_where(used)}; check the extents of the loops bound to threads against the buffers"
        )
    elif exc.kind == "timeout":
        verdict = "timeout"
        message = f"the kernel ran for more than {timeout_s:g} s and was stopped (an endless loop?){_where(used)}"
    elif exc.kind == "does_not_build":
        verdict = "does_not_build"
        message = exc.summary + _where(used)
    else:
        return _not_run(f"the numbers were not checked: {exc.summary}{_where(used)}", used, shape, exc.detail)
    return _unmatched(verdict, message, used, shape, exc.detail)


def _not_run(message: str, used: dict, shape: dict, detail: str = "") -> NumericResult:
    """The could_not_run verdict: the numbers were not judged (``message`` says why)."""
    return _unmatched("could_not_run", message, used, shape, detail)


def _unmatched(verdict: str, message: str, used: dict, shape: dict, detail: str) -> NumericResult:
    """A verdict with no numbers compared (a crash, a timeout, a build refused, a run not made)."""
    return NumericResult(
        ok=False,
        max_error=None,
        shape=shape,
        wrong=0,
        total=0,
        message=message,
        verdict=verdict,
        sizes=dict(used),
        diagnostics=[detail[-2000:]] if detail else [],
    )


def _result(raw: NumericComparison, used: dict, rtol: float, atol: float, against: str) -> NumericResult:
    wrong, total = raw.wrong, raw.total
    outputs = ", ".join(raw.outputs) or "the outputs"
    diagnostics = list(raw.diagnostics)
    for name, count in raw.guard_writes.items():
        diagnostics.insert(0, f"the kernel wrote {count} element(s) outside buffer {name}")
    max_error = raw.max_error
    engine = raw.engine
    outside = list(raw.out_of_bounds)
    if outside:
        # An access outside a buffer is an illegal address on a GPU: a crash, whatever the numbers.
        verdict = "crash"
        message = (
            f"the kernel accesses memory outside a buffer ({'; '.join(outside)}){_where(used)} on {engine}: "
            "on a GPU that is an illegal address; check the extents of the loops bound to threads "
            "against the buffers"
        )
    elif wrong == 0 and not diagnostics:
        message = (
            f"all {total} elements of {outputs} match {against} (max error {max_error:.3g}){_where(used)} on {engine}"
        )
        verdict = "match"
        note = (raw.fit or {}).get("note")
        if note:
            message += f" ({note})"
    else:
        verdict = "mismatch"
        if wrong:
            worst = raw.worst
            at = ", ".join(str(i) for i in worst["index"]) if worst else ""
            message = (
                f"{wrong} of {total} elements of {outputs} are wrong (tolerance {rtol:g} relative, {atol:g} "
                f"absolute); the worst is {worst['buffer'] if worst else '?'}[{at}]: "
                f"{_num(worst['got'] if worst else None)} instead of "
                f"{_num(worst['expected'] if worst else None)}{_where(used)} on {engine}"
            )
            if raw.nan_read:
                message += "; a NaN there means the kernel read outside a buffer or a value never written"
        else:
            message = f"the numbers match, but {diagnostics[0]}{_where(used)} on {engine}"
        if diagnostics and wrong:
            message += f"; {diagnostics[0]}"
    return NumericResult(
        ok=verdict == "match",
        max_error=float(max_error),
        shape={k: list(v) for k, v in raw.shape.items()},
        wrong=wrong,
        total=total,
        message=message,
        verdict=verdict,
        sizes=dict(used),
        engine=engine,
        worst=raw.worst,
        diagnostics=diagnostics,
        seconds=float(raw.seconds.get("total", 0.0)),
    )


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


# ----------------------------------------------------------------------------------------- given inputs


def is_gpu_program(module: Any, func_name: str) -> bool:
    """Whether any loop of the function is bound to blockIdx/threadIdx (it then builds only for a GPU)."""
    from mlc_lab.tvm.measure import build

    return bool(build.thread_bound_loops(module, func_name))


def run_gpu_function(
    module: Any, func_name: str, inputs: list, timeout_s: float = WORKER_OPS["run_opencl"].timeout_s
) -> RunResult:
    """Run a thread-bound function on given inputs (one array per parameter) as OpenCL on the CPU,
    in the worker: a `RunResult` (the arrays after the call, the engine and its diagnostics), or why
    not (its ``stage``: build, check, crash or timeout), as `exercises`' CPU runner answers."""
    import numpy as np

    from mlc_lab.core.worker import worker
    from mlc_lab.tvm.measure import build

    try:
        out: RunResult = worker().call(
            "run_opencl",
            timeout=timeout_s,
            module=build.module_to_text(module),
            func_name=func_name,
            inputs=[np.ascontiguousarray(a) for a in inputs],
        )
    except MeasureError as exc:
        if exc.kind == "crash":
            fault = _access_fault(exc)
            said = (
                f"the kernel accesses memory outside a buffer ({fault}) while running as OpenCL on the CPU: "
                "on a GPU that is an illegal address"
                if fault
                else "the kernel crashed (out-of-bounds access?) while running as OpenCL on the CPU"
            )
            return RunResult.failed("crash", said, exc.detail)
        if exc.kind == "timeout":
            return RunResult.failed(
                "timeout", f"the kernel ran for more than {timeout_s:g} s and was stopped (an endless loop?)"
            )
        return RunResult.failed(exc.kind, exc.summary, exc.detail)
    return out
