"""How far a program is from a target, and the way there (``compare_structure``): the engine the explorer's
hints use (``Session.path_to``), its steps as a report's differences, and both loop nests in outline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlc_lab.exercises.numeric import exercises_tvm, module_of
from mlc_lab.exercises.report import Check, Difference, GradeReport


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
    if start is not None and trace is not None and exercises_tvm().is_tvm_object(program):
        try:
            return Session.from_trace(start, trace, func)
        except Exception:  # noqa: BLE001  (not a schedule of the exercise's program: read it alone)
            pass
    return Session(module_of(program), func)


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
