"""Graders for the MLC course's TensorIR exercises (chapter 2), with reports a student can act on.

>>> from mlc_lab import exercises
>>> exercises.check_broadcast_add(MyAdd)          # numeric check against numpy
>>> exercises.check_conv(MyConv)
>>> exercises.check_bmm_relu(sch)                 # numbers, then how far the schedule is from the target
>>> exercises.compare_structure(mine, target)     # the structural part alone, for any two programs

Every grader returns a :class:`GradeReport`: ``passed``, one line per check, and for the schedule
exercise the way to the target (``Session.path_to``, the engine the explorer's hints use too): one
difference per step, where it acts, what of the target it makes, and the primitive itself. It renders as HTML in a notebook and as text with
``print``. Programs may be an IRModule, a PrimFunc, a ``tvm.s_tir.Schedule``, a
:class:`mlc_lab.Session` or TVMScript text (the course's legacy spelling too).

This module imports no TVM itself: the loop structure comes from :meth:`Session.loop_tree`, and
building, running and TVM's structural equality from :mod:`mlc_lab.tvm.exercises` (running in a
child process, so a broken program cannot take the kernel down).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlc_lab.model.grading import RunResult
from mlc_lab.model.worker_ops import WORKER_OPS

__all__ = [
    "Check",
    "Difference",
    "GradeReport",
    "check_add",
    "check_broadcast_add",
    "check_conv",
    "check_bmm_relu",
    "compare_structure",
    "numeric_check",
    "BMM_RELU",
    "BMM_RELU_TARGET",
]

# ----------------------------------------------------------------------------------------- programs

from mlc_lab.tvm.exercises.programs import BMM_RELU, BMM_RELU_TARGET  # noqa: E402

# ----------------------------------------------------------------------------------------- reports

from mlc_lab.exercises.report import Check, Difference, GradeReport  # noqa: E402  (see exercises/report.py)

# ----------------------------------------------------------------------------------------- programs in


def _tvm():
    from mlc_lab.tvm import exercises as exercises_tvm

    return exercises_tvm


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
            module=_tvm().module_json(module),
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


def _module(program: Any) -> Any:
    """An IRModule from whatever the student hands in."""
    if hasattr(program, "module") and hasattr(program, "original") and hasattr(program, "loop_tree"):
        return program.module  # a Session
    tv = _tvm()
    if tv.is_tvm_object(program):
        return tv.to_module(program)
    from mlc_lab.tvm.program import load

    return load(program)


def _pick_function(mod: Any, wanted: str, checks: list[Check]) -> str | None:
    names = _tvm().prim_func_names(mod)
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
        mod = _module(program)
    except Exception as exc:  # noqa: BLE001 - a LoadError or a stranger: say it in one line
        rep.checks.append(Check("loads", False, str(exc).strip().splitlines()[0]))
        return rep
    name = _pick_function(mod, func_name, rep.checks)
    if name is None:
        return rep
    signature = _signature_check(name, _tvm().signature(mod, name), inputs)
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


def check_add(program: Any) -> GradeReport:
    """The worked example: ``C[i, j] = A[i, j] + B[i, j]`` on 4x4 int64."""
    a = np.arange(16, dtype=np.int64).reshape(4, 4)
    b = np.arange(16, 0, -1, dtype=np.int64).reshape(4, 4)
    c = np.zeros((4, 4), dtype=np.int64)
    return numeric_check(program, "add", [a, b, c], a + b, exercise="Example: element-wise add")


def check_broadcast_add(program: Any) -> GradeReport:
    """Exercise 1: ``C[i, j] = A[i, j] + B[j]``, A (4, 4), B (4,), int64."""
    a = np.arange(16, dtype=np.int64).reshape(4, 4)
    b = np.arange(4, 0, -1, dtype=np.int64)
    c = np.zeros((4, 4), dtype=np.int64)
    return numeric_check(program, "add", [a, b, c], a + b, exercise="Exercise 1: broadcast add")


def conv2d_reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """NCHW convolution, stride 1, no padding, in numpy (what the course computes with torch)."""
    n, ci, h, w = data.shape
    co, _, kh, kw = weight.shape
    out = np.zeros((n, co, h - kh + 1, w - kw + 1), dtype=np.result_type(data, weight))
    for di in range(kh):
        for dj in range(kw):
            window = data[:, :, di : di + h - kh + 1, dj : dj + w - kw + 1]  # n, ci, oh, ow
            out += np.einsum("nchw,kc->nkhw", window, weight[:, :, di, dj])
    return out


def check_conv(program: Any) -> GradeReport:
    """Exercise 2: 2-D convolution, data (1, 1, 8, 8), weight (2, 1, 3, 3), output (1, 2, 6, 6), int64."""
    data = np.arange(64, dtype=np.int64).reshape(1, 1, 8, 8)
    weight = np.arange(18, dtype=np.int64).reshape(2, 1, 3, 3)
    out = np.zeros((1, 2, 6, 6), dtype=np.int64)
    return numeric_check(
        program, "conv", [data, weight, out], conv2d_reference(data, weight), exercise="Exercise 2: 2-D convolution"
    )


def check_bmm_relu(program: Any, target: Any = None, *, numeric: bool = True, seed: int = 0) -> GradeReport:
    """Exercise 3: the batched matmul + relu, scheduled towards the course's target.

    Checks the numbers against numpy (on seeded random inputs), then compares the loop structure
    with ``target`` (default: the course's ``TargetModule``) and lists every difference.
    """
    rep = GradeReport("Exercise 3: batched matmul + relu")
    if numeric:
        rng = np.random.default_rng(seed)
        # centred on 0, so that about half of Y is negative and the ReLU matters
        a = rng.random((16, 128, 128), dtype=np.float32) - np.float32(0.5)
        b = rng.random((16, 128, 128), dtype=np.float32) - np.float32(0.5)
        c = np.zeros((16, 128, 128), dtype=np.float32)
        expected = np.maximum(np.matmul(a, b), 0)
        numeric_check(program, "bmm_relu", [a, b, c], expected, rtol=1e-4, atol=1e-4, report=rep)
        if not rep.passed:
            return rep
    compare_structure(
        program, BMM_RELU_TARGET if target is None else target, func="bmm_relu", report=rep, start=BMM_RELU
    )
    return rep


# ----------------------------------------------------------------------------------------- structure


@dataclass
class _Loop:
    uid: int
    name: str
    extent: Any
    kind: str
    thread: str | None
    annotations: dict

    def text(self) -> str:
        kind = self.kind if self.kind != "thread_binding" else f"bound to {self.thread}"
        out = f"{self.name} ({self.extent}, {kind})"
        if self.annotations:
            out += " " + ", ".join(f"{k}={v}" for k, v in sorted(self.annotations.items()))
        return out


def _function_node(tree: dict, func: str | None) -> dict:
    funcs = tree.get("functions", [])
    for f in funcs:
        if func is None or f.get("name") == func:
            return f
    return funcs[0] if funcs else {"children": []}


def _outline(fnode: dict) -> str:
    """One line per loop and block, indented by nesting."""
    lines: list[str] = []

    def walk(node: dict, depth: int) -> None:
        for child in node.get("children", []):
            if child.get("kind") == "loop":
                lp = _Loop(
                    0,
                    child.get("name", "?"),
                    child.get("extent"),
                    child.get("loop_kind", "serial"),
                    child.get("thread"),
                    dict(child.get("annotations") or {}),
                )
                lines.append("  " * depth + "for " + lp.text())
                walk(child, depth + 1)
            elif child.get("kind") == "block":
                init = " (with T.init)" if child.get("has_init") else ""
                lines.append("  " * depth + f"block {child.get('name', '?')}{init}")
                walk(child, depth + 1)

    walk(fnode, 0)
    return "\n".join(lines)


def _session_of(program: Any, func: str | None, start: Any) -> Any:
    """The student's program as a Session: their own (its history is where the way may go back to),
    a TVM schedule replayed on the exercise's program ``start`` when given, else the program alone."""
    from mlc_lab.core.session import Session

    if hasattr(program, "loop_tree") and hasattr(program, "original"):
        return program
    trace = getattr(program, "trace", None)
    if start is not None and trace is not None and _tvm().is_tvm_object(program):
        try:
            return Session.from_trace(start, trace, func)
        except Exception:  # noqa: BLE001  (not a schedule of the exercise's program: read it alone)
            pass
    return Session(_module(program), func)


def compare_structure(
    program: Any, target: Any, *, func: str | None = None, report: GradeReport | None = None, start: Any = None
) -> GradeReport:
    """How far ``program`` is from ``target``, and the way there (``Session.path_to``: one engine for
    the grader, the hints and the explorer).

    Each difference is one step of the way, in an order TVM accepts: where it acts, why (what of the
    target it makes), and the primitive as a hint (``Difference.step`` is the step itself, for
    ``Session.apply``). A program that cannot reach the target from where it is gets the step to go
    back to first (``start``: the exercise's program, when ``program`` is a TVM schedule of it); one
    that cannot reach it at all gets the sentence that says why. TVM's structural equality decides
    whether it is the target (block names count; loop names never do)."""
    rep = report if report is not None else GradeReport("schedule against target")
    try:
        session = _session_of(program, func, start)
        answer = session.path_to(target)
    except Exception as exc:  # noqa: BLE001 - a LoadError or a stranger: one line
        rep.checks.append(Check("structure", False, "could not compare the structure: " + str(exc).splitlines()[0]))
        return rep
    tree = session.loop_tree()
    rep.outline_yours = _outline(_function_node(tree, session.func_name))
    try:
        from mlc_lab.core.session import Session as _S

        goal = _S(target.module if hasattr(target, "loop_tree") else target, func or session.func_name)
        rep.outline_target = _outline(_function_node(goal.loop_tree(), goal.func_name))
    except Exception:  # noqa: BLE001  (a target given as a trace has no outline of its own)
        rep.outline_target = None
    rep.way = answer
    rep.structurally_equal = answer.reached and not answer.steps
    if answer.undo_to is not None:
        rep.differences.append(
            Difference(
                f"your step {answer.start}",
                f"the target cannot be reached from here; it can from step {answer.undo_to}",
                hint=f"go back: session.goto({answer.undo_to}), or Undo in the explorer",
            )
        )
    # the steps are named (and their lines found) in the script of the step they start from
    start_tree = tree if answer.undo_to is None else session.loop_tree(answer.undo_to)
    rep.differences.extend(_difference(step, start_tree, session.func_name) for step in answer.steps)
    if answer.status != "reached":
        rep.differences.append(Difference("the program", answer.why))
    whole = answer if session.current.id == 0 else session.path_to(target, step=0)
    rep.structure_total = max(len(whole.steps), len(rep.differences))
    rep.checks.append(_structure_check(rep, answer))
    return rep


def _difference(step: Any, tree: dict, func: str) -> Difference:
    """One step of the way as a difference: where it acts (and that place's line), what of the target
    it makes, and the primitive."""
    args = step.arguments
    where, line = "the program", None
    for key in ("block", "loop", "block_or_loop", "ordered_loops", "loops", "target"):
        if key in args:
            value = args[key][0] if isinstance(args[key], list) and args[key] else args[key]
            if isinstance(value, str):
                nodes = _node(tree, value)
                kind = nodes[0]["kind"] if nodes else ("block" if key == "block" else "loop")
                where = f"{kind} {value}"
                line = nodes[0].get("line") if nodes else None
            break
    return Difference(where, step.reason, hint=f"sch.{step.label}", line=line, step=step)


def _node(tree: Any, name: str) -> list[dict]:
    from mlc_lab.model.steps import LoopTree

    try:
        return LoopTree(tree).match(name)
    except Exception:  # noqa: BLE001  (a name of the engine the tree does not know: no line then)
        return []


def _structure_check(rep: GradeReport, answer: Any) -> Check:
    """The report's one "structure" line: the target, or how far from it."""
    if rep.structurally_equal:
        return Check("structure", True, "the same program as the target (tvm.ir.structural_equal)")
    if answer.status == "unreached":
        return Check("structure", False, answer.why)
    sim = rep.similarity
    said = f"{len(rep.differences)} step(s) from the target"
    if answer.status == "names":
        said += f" ({answer.why})"
    return Check("structure", False, said + (f"; {sim:.0%} of the way done" if sim is not None else ""))
