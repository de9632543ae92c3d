"""Graders for the MLC course's TensorIR exercises (chapter 2), with reports a student can act on.

>>> from mlc_lab import exercises
>>> exercises.check_broadcast_add(MyAdd)          # numeric check against numpy
>>> exercises.check_conv(MyConv)
>>> exercises.check_bmm_relu(sch)                 # numbers, then how far the schedule is from the target
>>> exercises.compare_structure(mine, target)     # the structural part alone, for any two programs

Every grader returns a :class:`GradeReport`: ``passed``, one line per check, and for the schedule
exercise the list of structural differences (which block, which loop, yours against the target's,
and the primitive that would close the gap). It renders as HTML in a notebook and as text with
``print``. Programs may be an IRModule, a PrimFunc, a ``tvm.s_tir.Schedule``, a
:class:`mlc_lab.Session` or TVMScript text (the course's legacy spelling too).

This module imports no TVM itself: the loop structure comes from :meth:`Session.loop_tree`, and
building, running and TVM's structural equality from :mod:`mlc_lab.tvm.exercises` (running in a
child process, so a broken program cannot take the kernel down).
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    compare_structure(program, BMM_RELU_TARGET if target is None else target, func="bmm_relu", report=rep)
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
    line: int | None

    def text(self) -> str:
        kind = self.kind if self.kind != "thread_binding" else f"bound to {self.thread}"
        out = f"{self.name} ({self.extent}, {kind})"
        if self.annotations:
            out += " " + ", ".join(f"{k}={v}" for k, v in sorted(self.annotations.items()))
        return out

    def shape(self) -> str:
        return f"extent {self.extent}, {self.kind if self.kind != 'thread_binding' else self.thread}"


@dataclass
class _Block:
    name: str
    loops: list[_Loop]
    has_init: bool
    iter_kinds: list[str]
    line: int | None
    order: int
    annotations: dict = field(default_factory=dict)
    shared: int = 0  # loops shared with the block before it (its placement)
    prev: str | None = None


_KIND_HINT = {
    "parallel": "sch.parallel({loop})",
    "vectorized": "sch.vectorize({loop})",
    "unrolled": "sch.unroll({loop})",
    "serial": "a plain loop here: no parallel/vectorize/unroll on {loop}",
    "thread_binding": "sch.bind({loop}, {thread!r})",
}


def _kind_hint(kind: str, loop: str, thread: str | None) -> str | None:
    text = _KIND_HINT.get(kind)
    return text.format(loop=loop, thread=thread) if text else None


def _function_node(tree: dict, func: str | None) -> dict:
    funcs = tree.get("functions", [])
    for f in funcs:
        if func is None or f.get("name") == func:
            return f
    return funcs[0] if funcs else {"children": []}


def _blocks(fnode: dict) -> list[_Block]:
    out: list[_Block] = []
    uid = [0]

    def walk(node: dict, chain: list[_Loop]) -> None:
        for child in node.get("children", []):
            if child.get("kind") == "loop":
                uid[0] += 1
                loop = _Loop(
                    uid[0],
                    child.get("name", "?"),
                    child.get("extent"),
                    child.get("loop_kind", "serial"),
                    child.get("thread"),
                    dict(child.get("annotations") or {}),
                    child.get("line"),
                )
                walk(child, chain + [loop])
            elif child.get("kind") == "block":
                out.append(
                    _Block(
                        child.get("name", "?"),
                        list(chain),
                        bool(child.get("has_init")),
                        [iv.get("kind", "?") for iv in child.get("iter_vars", [])],
                        child.get("line"),
                        len(out),
                        dict(child.get("annotations") or {}),
                    )
                )
                walk(child, chain)

    walk(fnode, [])
    for k in range(1, len(out)):
        a, b = out[k - 1].loops, out[k].loops
        n = 0
        while n < len(a) and n < len(b) and a[n].uid == b[n].uid:
            n += 1
        out[k].shared, out[k].prev = n, out[k - 1].name
    return out


def _outline(blocks: list[_Block]) -> str:
    """One line per loop/block, indented by nesting (shared loops printed once)."""
    lines: list[str] = []
    printed: set[int] = set()
    for b in blocks:
        for depth, lp in enumerate(b.loops):
            if lp.uid in printed:
                continue
            printed.add(lp.uid)
            lines.append("  " * depth + "for " + lp.text())
        init = " (with T.init)" if b.has_init else ""
        lines.append("  " * len(b.loops) + f"block {b.name}{init}")
    return "\n".join(lines)


def _tree_of(program: Any) -> tuple[dict, str | None]:
    from mlc_lab.core.session import Session

    if hasattr(program, "loop_tree") and hasattr(program, "original"):
        return program.loop_tree(), program.func_name
    session = Session(_module(program))
    return session.loop_tree(), session.func_name


def compare_structure(
    program: Any, target: Any, *, func: str | None = None, report: GradeReport | None = None
) -> GradeReport:
    """How far ``program``'s loop structure is from ``target``'s, and where.

    Compares, function ``func`` of both: the blocks (names, decomposed reduction init), their
    order, where each block sits (how many loops it shares with the block before it), and per block
    the loops around it from the outside in: count, extents, kinds (serial, parallel, vectorized,
    unrolled, thread binding) and annotations. Loop *names* never count (TVM ignores them too).
    """
    rep = report if report is not None else GradeReport("schedule against target")
    try:
        tree_y, fy = _tree_of(program)
        tree_t, ft = _tree_of(target)
    except Exception as exc:  # noqa: BLE001
        rep.checks.append(Check("structure", False, "could not read the loop structure: " + str(exc).splitlines()[0]))
        return rep
    mine = _blocks(_function_node(tree_y, func or fy))
    theirs = _blocks(_function_node(tree_t, func or ft))
    rep.outline_yours, rep.outline_target = _outline(mine), _outline(theirs)
    tally = _Tally()
    alias, decompose = _decompositions(tally, {b.name: b for b in mine}, {b.name: b for b in theirs})
    pairs = _pair_blocks(tally, mine, theirs, alias)
    _compare_order(tally, pairs)
    for yb, tb in pairs:
        _compare_block(tally, yb, tb)
    # Listed last: decompose_reduction is the step to take after the loops' kinds are right (TVM
    # refuses parallel on a loop once the init is its own block), so the report reads in that order.
    tally.diffs.extend(decompose)
    rep.differences.extend(tally.diffs)
    rep.structure_total = max(tally.compared, len(tally.diffs))
    try:
        equal = _tvm().functions_equal(_module(program), _module(target), func or fy or "", func or ft or "")
    except Exception:  # noqa: BLE001 - equality is the cherry on top; the comparison above stands
        equal = False
    rep.structurally_equal = equal
    rep.checks.append(_structure_check(equal, tally.diffs, rep.similarity))
    return rep


@dataclass
class _Tally:
    """The differences found so far, and how many features were compared (the report's total)."""

    diffs: list[Difference] = field(default_factory=list)
    compared: int = 0


def _decompositions(
    tally: _Tally, by_name_y: dict[str, _Block], by_name_t: dict[str, _Block]
) -> tuple[dict[str, str], list[Difference]]:
    """A reduction block decomposed on one side only (X_init + X_update against X with T.init):
    the target's name -> yours for each such block, and the differences to list last (the target
    decomposed it); a block you decomposed and the target did not is a difference now."""
    alias: dict[str, str] = {}
    decompose: list[Difference] = []
    for name, b in by_name_t.items():
        base = name[: -len("_update")]
        if name.endswith("_update") and name not in by_name_y and base in by_name_y:
            alias[name] = base
            tally.compared += 1
            decompose.append(
                Difference(
                    f"block {base}",
                    "the reduction's initialisation is still inside the block (T.init)",
                    yours=f"{base} with T.init",
                    target=f"{base}_init + {name}",
                    hint=_decompose_hint(base, by_name_y[base], b),
                    line=by_name_y[base].line,
                )
            )
    for name, b in by_name_y.items():
        base = name[: -len("_update")]
        if name.endswith("_update") and name not in by_name_t and base in by_name_t:
            alias[base] = name
            tally.compared += 1
            tally.diffs.append(
                Difference(
                    f"block {base}",
                    "the reduction is decomposed here but not in the target",
                    yours=f"{base}_init + {name}",
                    target=f"{base} with T.init",
                    hint="leave out decompose_reduction",
                    line=b.line,
                )
            )
    return alias, decompose


def _counterpart(tname: str, alias: dict[str, str], by_name_y: dict[str, _Block]) -> str | None:
    """The name of your block that the target's block ``tname`` is compared with."""
    if tname in alias and alias[tname] in by_name_y:
        return alias[tname]
    if tname in by_name_y:
        return tname
    for yname, tn in alias.items():
        if tn == tname:
            return yname
    return None


def _pair_blocks(
    tally: _Tally, mine: list[_Block], theirs: list[_Block], alias: dict[str, str]
) -> list[tuple[_Block, _Block]]:
    """(your block, the target's) for every block both have; a block only one side has is a
    difference (the init blocks of a one-sided decomposition aside)."""
    by_name_y = {b.name: b for b in mine}
    skip_y = {alias[n][: -len("_update")] + "_init" for n in alias if alias[n].endswith("_update")}
    skip_t = {n[: -len("_update")] + "_init" for n in alias if n.endswith("_update")}
    pairs: list[tuple[_Block, _Block]] = []
    for tb in theirs:
        if tb.name in skip_t:
            continue
        tally.compared += 1
        yname = _counterpart(tb.name, alias, by_name_y)
        if yname is None or yname not in by_name_y:
            tally.diffs.append(
                Difference(
                    f"block {tb.name}",
                    "the target has this block and your program does not",
                    target=tb.name,
                    hint=_missing_block_hint(tb.name),
                )
            )
            continue
        pairs.append((by_name_y[yname], tb))
    matched_y = {y.name for y, _ in pairs}
    for yb in mine:
        if yb.name not in matched_y and yb.name not in skip_y:
            tally.compared += 1
            tally.diffs.append(
                Difference(
                    f"block {yb.name}",
                    "your program has this block and the target does not",
                    yours=yb.name,
                    hint="undo the step that created it",
                    line=yb.line,
                )
            )
    return pairs


def _compare_order(tally: _Tally, pairs: list[tuple[_Block, _Block]]) -> None:
    """The order of the blocks both have."""
    order_y = [y.name for y, _ in sorted(pairs, key=lambda p: p[0].order)]
    order_t = [y.name for y, _ in sorted(pairs, key=lambda p: p[1].order)]
    tally.compared += 1
    if order_y != order_t:
        tally.diffs.append(
            Difference(
                "block order",
                "the blocks run in a different order",
                yours=" -> ".join(order_y),
                target=" -> ".join(order_t),
                hint="compute_at / reverse_compute_at move a block; reorder moves loops",
            )
        )


def _compare_block(tally: _Tally, yb: _Block, tb: _Block) -> None:
    """One pair of blocks: where each sits, its iteration axes, its annotations, its loops."""
    label = f"block {tb.name}" if yb.name == tb.name else f"your block {yb.name} (the target's {tb.name})"
    if tb.order > 0 and yb.order > 0:
        tally.compared += 1
        if yb.shared != tb.shared:
            tally.diffs.append(_placement_difference(label, yb, tb))
    if yb.iter_kinds and tb.iter_kinds and yb.iter_kinds != tb.iter_kinds:
        tally.compared += 1
        tally.diffs.append(
            Difference(
                label,
                "the block's iteration axes differ",
                yours=", ".join(yb.iter_kinds),
                target=", ".join(tb.iter_kinds),
                line=yb.line,
            )
        )
    if yb.annotations != tb.annotations:
        tally.compared += 1
        tally.diffs.append(_annotations_difference(label, "block", yb.annotations, tb.annotations, yb.line))
    _compare_loops(tally, label, yb, tb)


def _placement_difference(label: str, yb: _Block, tb: _Block) -> Difference:
    """How deep a block sits inside the loops of the block before it, against the target."""
    tloop = tb.loops[tb.shared - 1].name if tb.shared else None
    yloop = yb.loops[yb.shared - 1].name if yb.shared else None
    return Difference(
        label,
        f"it sits at a different place relative to block {tb.prev}",
        yours=f"under {yb.shared} loop(s) shared with {yb.prev}"
        + (f" (inside {yloop})" if yloop else " (its own loop nest)"),
        target=f"under {tb.shared} loop(s) shared with {tb.prev}"
        + (f" (inside {tloop})" if tloop else " (its own loop nest)"),
        hint=(
            f"sch.reverse_compute_at({tb.name!r}, <the loop matching {tloop}>) or compute_at"
            if tb.shared > yb.shared
            else "it is nested deeper than in the target"
        ),
        line=yb.line,
    )


def _annotations_difference(where: str, what: str, yours: dict, target: dict, line: int | None) -> Difference:
    return Difference(
        where,
        f"the {what}'s annotations differ",
        yours=str(yours or "none"),
        target=str(target or "none"),
        hint="sch.annotate / sch.unannotate",
        line=line,
    )


def _compare_loops(tally: _Tally, label: str, yb: _Block, tb: _Block) -> None:
    """The loops around a pair of blocks, outermost first: how many, and each one's extent, kind
    and annotations (a loop shared with the block before was compared there)."""
    tally.compared += 1
    if len(yb.loops) != len(tb.loops):
        tally.diffs.append(
            Difference(
                label,
                f"it is inside {len(yb.loops)} loop(s), the target {len(tb.loops)}",
                yours=" / ".join(lp.shape() for lp in yb.loops) or "none",
                target=" / ".join(lp.shape() for lp in tb.loops) or "none",
                hint="sch.split a loop into more pieces" if len(yb.loops) < len(tb.loops) else "fewer splits (or fuse)",
                line=yb.line,
            )
        )
    for depth in range(min(len(yb.loops), len(tb.loops))):
        ly, lt = yb.loops[depth], tb.loops[depth]
        if depth < yb.shared and depth < tb.shared and yb.order > 0 and tb.order > 0:
            continue
        where = f"{label}, loop {depth + 1} of {len(tb.loops)}"
        tally.compared += 2
        if str(ly.extent) != str(lt.extent):
            tally.diffs.append(
                Difference(
                    where,
                    "the loop has another extent",
                    yours=f"{ly.name}: {ly.extent}",
                    target=f"{lt.name}: {lt.extent}",
                    hint="change the split factors (or the loop order: reorder)",
                    line=ly.line,
                )
            )
        if ly.kind != lt.kind or (ly.thread or None) != (lt.thread or None):
            tally.diffs.append(
                Difference(
                    where,
                    "the loop has another kind",
                    yours=f"{ly.name}: {ly.kind if ly.kind != 'thread_binding' else ly.thread}",
                    target=f"{lt.name}: {lt.kind if lt.kind != 'thread_binding' else lt.thread}",
                    hint=_kind_hint(lt.kind, ly.name, lt.thread),
                    line=ly.line,
                )
            )
        if ly.annotations != lt.annotations:
            tally.compared += 1
            tally.diffs.append(_annotations_difference(where, "loop", ly.annotations, lt.annotations, ly.line))


def _structure_check(equal: bool, diffs: list[Difference], sim: float | None) -> Check:
    """The report's one "structure" line: equal to the target, or how far from it."""
    if equal:
        return Check("structure", True, "the same program as the target (tvm.ir.structural_equal)")
    if not diffs:
        return Check(
            "structure",
            False,
            "the loops and blocks match the target, but TVM still sees a difference "
            "(an index expression, a buffer, or an annotation): compare the scripts",
        )
    return Check(
        "structure",
        False,
        f"{len(diffs)} difference(s) from the target"
        + (f"; {sim:.0%} of the structure agrees" if sim is not None else ""),
    )


def _decompose_hint(base: str, yours: _Block, target_update: _Block) -> str:
    """``sch.decompose_reduction("Y", "Y/k_0")``: the loop the target's init sits above, named as the
    student's loop at the same depth; after the loops' kinds when the target has any."""
    depth = target_update.shared if target_update.prev == f"{base}_init" else None
    loop = f"{base}/{yours.loops[depth].name}" if depth is not None and depth < len(yours.loops) else None
    call = f"sch.decompose_reduction({base!r}, {loop!r})" if loop else f"sch.decompose_reduction({base!r}, loop)"
    text = f"{call}: the init goes above {'that loop' if not loop else repr(loop)}"
    if any(lp.kind != "serial" for lp in target_update.loops):
        text += "; do it after parallel / unroll / vectorize of the loops around it (TVM refuses parallel after it)"
    return text


def _missing_block_hint(name: str) -> str | None:
    if name.endswith("_init"):
        return "sch.decompose_reduction(block, loop)"
    if "_shared" in name or "_local" in name or "_global" in name:
        return "sch.cache_read / sch.cache_write"
    return None
