"""Following a built module through a legacy program, for ``compat.convert``.

On TVM 0.27 ``tvm.build`` still returns a runtime.Module, while ``tvm.compile`` returns an Executable
that keeps it in ``.mod``. A ``tvm.build`` call can become ``tvm.compile`` only when every use of its
module can follow: ``built_flows`` traces each built module through assignments, aliases and helper
functions that return it, and collects what is asked of it. Text work on ``ast`` only; no TVM.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["MODULE_ATTRS", "RUNTIME_RENAMES", "Flow", "built_flows", "dotted_name", "is_imported_module"]


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# What a built module is asked for. On 0.27 ``tvm.build`` still returns a runtime.Module (these work
# on it, but for the two old names below); ``tvm.compile`` returns an Executable, which keeps that
# module in ``.mod``. ``None``: the same on both.
MODULE_ATTRS = {
    "time_evaluator": "mod.time_evaluator",
    "imported_modules": "mod.imports",
    "imports": "mod.imports",
    "get_source": "mod.inspect_source",
    "inspect_source": "mod.inspect_source",
    "entry_name": "mod.entry_name",
    "get_function": "mod.get_function",
    "export_library": None,
}
# runtime.Module's old names, wrong on 0.27 whichever way the module was built.
RUNTIME_RENAMES = {"imported_modules": "imports", "get_source": "inspect_source"}


@dataclass
class Flow:
    """One built module: the ``tvm.build``/``tvm.compile`` calls that make it, the names it is bound
    to (through assignments, aliases and helper functions that return it) and what is asked of it.
    ``tvm.build`` becomes ``tvm.compile`` only when every use can follow (all or nothing)."""

    kind: str  # "build" | "compile"
    calls: list
    names: set
    helpers: set
    uses: list  # the ast.Attribute nodes read off the module
    opaque: bool = False  # it goes somewhere we cannot follow (an argument, a container ...)
    modernize: bool = False

    @property
    def is_executable(self) -> bool:
        return self.kind == "compile" or self.modernize

    def can_modernize(self) -> bool:
        return not self.opaque and all(use.attr in MODULE_ATTRS for use in self.uses)


def built_flows(tree: ast.Module, build: set[str], compile_: set[str]) -> list[Flow]:
    parents: dict[int, ast.AST] = {}
    enclosing: dict[int, ast.AST] = {}  # node -> the function it is in

    def index(node: ast.AST, func: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
            if func is not None:
                enclosing[id(child)] = func
            index(child, child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func)

    index(tree, None)
    loads: dict[str, list[ast.Name]] = {}
    calls_of: dict[str, list[ast.Call]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls_of.setdefault(node.func.id, []).append(node)

    flows: list[Flow] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = dotted_name(node.func)
        if name not in build and name not in compile_:
            continue
        flow = Flow("build" if name in build else "compile", [node], set(), set(), [])
        work: list[ast.AST] = [node]
        while work:
            expr = work.pop()
            parent = parents.get(id(expr))
            if isinstance(parent, ast.Assign) and parent.value is expr:
                for target in parent.targets:
                    if isinstance(target, ast.Name):
                        if target.id not in flow.names:
                            flow.names.add(target.id)
                            work.extend(loads.get(target.id, []))
                    else:
                        flow.opaque = True
            elif isinstance(parent, ast.Return):
                func = enclosing.get(id(parent))
                if func is None:
                    flow.opaque = True
                elif func.name not in flow.helpers:
                    flow.helpers.add(func.name)
                    work.extend(calls_of.get(func.name, []))
            elif isinstance(parent, ast.Attribute) and parent.value is expr:
                flow.uses.append(parent)
            elif isinstance(parent, ast.Subscript) and parent.value is expr:
                pass  # lib["main"]: the same on a runtime.Module and an Executable
            elif isinstance(parent, ast.Call) and parent.func is expr:
                pass
            elif isinstance(parent, ast.Expr):
                pass
            else:
                flow.opaque = True
        flows.append(flow)
    return merge_flows(flows)


def merge_flows(flows: list[Flow]) -> list[Flow]:
    """Calls whose modules meet in one name or helper are one object: they change together."""
    merged: list[Flow] = []
    for flow in flows:
        for other in [m for m in merged if m.names & flow.names or m.helpers & flow.helpers]:
            merged.remove(other)
            flow = Flow(
                "compile" if "compile" in (flow.kind, other.kind) else "build",
                other.calls + flow.calls,
                other.names | flow.names,
                other.helpers | flow.helpers,
                other.uses + flow.uses,
                other.opaque or flow.opaque,
            )
        merged.append(flow)
    return merged


def is_imported_module(node: ast.AST) -> bool:
    """``x.imported_modules[i]`` / ``x.imports[i]``: a device module of a built library."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr in ("imported_modules", "imports")
    )
