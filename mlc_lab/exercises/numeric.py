"""An exercise's numeric check: the student's function built and run once on the exercise's inputs, in the
worker process (a GPU-bound one as OpenCL on the CPU), and compared with numpy's answer; and the program a
student hands in, read as an IRModule (``module_of``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlc_lab.exercises.report import Check, GradeReport
from mlc_lab.model.grading import RunResult
from mlc_lab.model.worker_ops import WORKER_OPS


def exercises_tvm() -> Any:
    """TVM's side of the exercises (``mlc_lab.tvm.exercises``), imported when first used."""
    from mlc_lab.tvm import exercises

    return exercises


RUN_TIMEOUT_S = WORKER_OPS["run_function"].timeout_s


def run_function(module: Any, func_name: str, inputs: list[np.ndarray], timeout: float = RUN_TIMEOUT_S) -> RunResult:
    """Build ``func_name`` for the native CPU and call it on ``inputs`` (one array per parameter), in
    the worker process (an out-of-bounds store costs the worker, never the kernel). A `RunResult`: the
    arrays after the call, or why not (its ``stage``: build, run, crash or timeout; its ``message``)."""
    from mlc_lab.core.worker import worker
    from mlc_lab.errors import MeasureError

    try:
        result: RunResult = worker().call(
            "run_function",
            timeout=timeout,
            module=exercises_tvm().module_json(module),
            func_name=func_name,
            inputs=[np.ascontiguousarray(a) for a in inputs],
        )
    except MeasureError as exc:
        if exc.kind == "timeout":
            return RunResult.failed(
                "timeout", f"the program ran for more than {timeout:g} s and was stopped (an endless loop?)"
            )
        if exc.kind == "crash":
            said = "the program crashed while running (" + _signal_of(exc.summary) + "); an index outside a buffer?"
            return RunResult.failed("crash", said, exc.detail)
        return RunResult.failed(exc.kind, exc.summary, exc.detail)
    return result


def _signal_of(text: str) -> str:
    import re

    match = re.search(r"\((SIG\w+|signal \d+)\)", text)
    return match.group(1) if match else "the worker died"


def module_of(program: Any) -> Any:
    """An IRModule from whatever the student hands in."""
    if hasattr(program, "module") and hasattr(program, "original") and hasattr(program, "loop_tree"):
        return program.module  # a Session
    tv = exercises_tvm()
    if tv.is_tvm_object(program):
        return tv.to_module(program)
    from mlc_lab.tvm.program import load

    return load(program)


def _pick_function(mod: Any, wanted: str, checks: list[Check]) -> str | None:
    names = exercises_tvm().prim_func_names(mod)
    if wanted in names:
        return wanted
    if len(names) == 1:
        checks.append(Check("function", True, f"no function called {wanted!r}; grading the only one, {names[0]!r}"))
        return names[0]
    checks.append(
        Check("function", False, f"the module has no function called {wanted!r} (it has: {', '.join(names) or 'none'})")
    )
    return None


def _shape_text(shape: Any, dtype: str) -> str:
    if shape is None:
        return f"a handle ({dtype})"
    return f"({', '.join(str(s) for s in shape)}{',' if len(shape) == 1 else ''}) {dtype}"


# ----------------------------------------------------------------------------------------- numeric


def numeric_check(
    program: Any,
    func_name: str,
    inputs: list[np.ndarray],
    expected: np.ndarray,
    *,
    output: int = -1,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    exercise: str = "numeric check",
    report: GradeReport | None = None,
) -> GradeReport:
    """Build ``func_name`` of ``program``, call it on ``inputs`` (one array per parameter, the output
    buffers included) and compare parameter ``output`` with ``expected`` (numpy's answer)."""
    rep = report if report is not None else GradeReport(exercise)
    try:
        mod = module_of(program)
    except Exception as exc:  # noqa: BLE001 - a LoadError or a stranger: say it in one line
        rep.checks.append(Check("loads", False, str(exc).strip().splitlines()[0]))
        return rep
    name = _pick_function(mod, func_name, rep.checks)
    if name is None:
        return rep
    signature = _signature_check(name, exercises_tvm().signature(mod, name), inputs)
    rep.checks.append(signature)
    if not signature.ok:
        return rep
    result = _run_for_grading(mod, name, inputs, rep.checks)
    if not result.ok:
        rep.checks.append(Check(result.stage, False, result.message or "failed"))
        return rep
    _compare_with_numpy(rep, result.outputs[output], expected, rtol, atol)
    return rep


def _signature_check(name: str, sig: list[dict], inputs: list[np.ndarray]) -> Check:
    """Whether function ``name``'s parameters (``sig``) take the exercise's ``inputs``: as many, each
    of the same shape and dtype."""
    if len(sig) != len(inputs):
        given = ", ".join(_shape_text(list(a.shape), str(a.dtype)) for a in inputs)
        declared = ", ".join(f"{p['name']}: {_shape_text(p['shape'], p['dtype'])}" for p in sig) or "none"
        return Check(
            "signature",
            False,
            f"{name} takes {len(sig)} parameter(s) ({declared}); the exercise passes {len(inputs)}: {given}",
        )
    bad = [
        f"{p['name']} is declared {_shape_text(p['shape'], p['dtype'])} but the exercise passes "
        f"{_shape_text(list(a.shape), str(a.dtype))}"
        for p, a in zip(sig, inputs)
        if p["shape"] is None or list(p["shape"]) != list(a.shape) or p["dtype"] != str(a.dtype)
    ]
    if bad:
        return Check("signature", False, "; ".join(bad))
    return Check("signature", True, ", ".join(f"{p['name']} {_shape_text(p['shape'], p['dtype'])}" for p in sig))


def _run_for_grading(mod: Any, name: str, inputs: list[np.ndarray], checks: list[Check]) -> RunResult:
    """``run_function``'s answer; a program bound to GPU threads builds only for a GPU, so it runs
    as OpenCL on the CPU, and a check says how it ran."""
    from mlc_lab.core.checks import numeric_gpu

    if not numeric_gpu.is_gpu_program(mod, name):
        return run_function(mod, name, inputs)
    result = numeric_gpu.run_gpu_function(mod, name, inputs)
    if result.ok:
        checks.append(
            Check(
                "runs as a GPU kernel",
                not result.diagnostics,
                "; ".join(result.diagnostics) or f"bound to GPU threads: run as OpenCL on the CPU ({result.engine})",
            )
        )
    return result


def _compare_with_numpy(rep: GradeReport, got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> None:
    """The "matches numpy" check: the largest error, and when it fails how many elements differ
    and the worst of them."""
    rep.output, rep.expected = got, expected
    diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    nan = np.isnan(diff)
    max_err = float("inf") if nan.any() else float(diff.max()) if diff.size else 0.0
    rep.max_abs_error = max_err
    if not nan.any() and np.allclose(got, expected, rtol=rtol, atol=atol):
        rep.checks.append(Check("matches numpy", True, f"max abs error {max_err:.3g}"))
        return
    wrong = int(np.count_nonzero(~np.isclose(got, expected, rtol=rtol, atol=atol)))
    worst = np.argmax(nan) if nan.any() else np.argmax(diff)  # the first NaN is the worst there is
    first = tuple(int(i) for i in np.unravel_index(int(worst), diff.shape))
    rep.checks.append(
        Check(
            "matches numpy",
            False,
            f"max abs error {max_err:.6g}; {wrong} of {got.size} elements differ; the worst at index {first}: "
            f"yours {got[first].item()!r}, numpy {expected[first].item()!r}",
        )
    )
