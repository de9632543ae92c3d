"""Every path from a hand-in to a run of its kernel, read from the code (``ast`` only; nothing is imported).

A call graph of mlc_lab's functions: a name is resolved through the module's imports (function-local
ones too) and re-exports; ``self.f()`` to the class's own method; ``obj.f()`` on any other object to
every method ``f`` of a public class (a private class is used only in its module); a function named
but not called (a callback, a default argument) counts as called. A function *runs a kernel outside
the sandbox* when it holds a SINK or calls one that does; `paths` lists, from each entry (the grader,
the class server, the trace-file CLI paths), one chain of calls to such a function.

Not seen: a call through ``getattr`` or ``importlib``, a module run with ``python -m`` (the sandbox's own
door: `mlc_lab.core.worker.sandboxed`), code outside functions.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mlc_lab"

# The persistent worker's operations that run generated code (a hand-in's kernel must not reach them).
WORKER_RUNS = {"measure", "run_function", "numeric_gpu", "run_opencl"}
# Functions that call a kernel in their own process or a plain child of it, whoever calls them.
RUNS_KERNELS = {
    "tvm/measure/opencl_run.py:run_opencl": "the OpenCL engine, in this process",
    "tvm/measure/opencl_run.py:run_in_child": "the OpenCL engine, in a plain child of this process",
}

# Where a hand-in's kernel could be started from: every function of these modules, or the named ones.
ENTRIES = {
    "grading/": None,
    "classroom/": None,
    "_cli/grade.py": None,
    "_cli/classroom.py": None,
    "_cli/bench.py": {"_measure_trace"},  # bench with --trace: a hand-in
    "_cli/check.py": {"_numeric_of_trace"},  # check --numeric with --trace: a hand-in
}


# A path to a run elsewhere that is allowed only while a keyword guards it: the function the path passes
# through -> the keyword every call of it from an entry must pass (never False). `unguarded` reads both ends:
# each entry's call, and the keyword's way from the function to the check in the session.
GUARDED = {"tvm/measure/rpc.py:measure_remote": "sandboxed_only"}


@dataclass
class _Module:
    rel: str
    dotted: str
    tree: ast.Module
    functions: dict[str, ast.AST] = field(default_factory=dict)  # "f", "Class.m"
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> "dotted.module" or "dotted.module:name"


def _dotted(rel: str) -> str:
    parts = ["mlc_lab", *rel[: -len(".py")].split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _parsed(rel: str, text: str) -> ast.Module:
    return ast.parse(text, rel)


def _module(rel: str, text: str) -> _Module:
    tree = _parsed(rel, text)
    mod = _Module(rel, _dotted(rel), tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    mod.functions[f"{node.name}.{item.name}"] = item
    return mod


def _aliases(mod: _Module, modules: dict[str, _Module]) -> None:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("mlc_lab"):
                    mod.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "mlc_lab"
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mlc_lab"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                mod.aliases[a.asname or a.name] = full if full in modules else f"{node.module}:{a.name}"


def load() -> dict[str, _Module]:
    """The package's modules with their functions and imports."""
    modules = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        mod = _module(str(p.relative_to(PACKAGE)), p.read_text())
        modules[mod.dotted] = mod
    for mod in modules.values():
        _aliases(mod, modules)
    return modules


class Graph:
    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules
        self.by_method: dict[str, list[str]] = {}
        for mod in modules.values():
            for name in mod.functions:
                cls, _, meth = name.rpartition(".")
                if cls and not cls.startswith("_"):
                    self.by_method.setdefault(meth, []).append(f"{mod.dotted}:{name}")
        self.edges: dict[str, set[str]] = {}
        self.sinks: dict[str, str] = {}
        for mod in modules.values():
            for name, node in mod.functions.items():
                key = f"{mod.dotted}:{name}"
                self.edges[key] = self._calls(mod, name, node)
                sink = _sink(node) or RUNS_KERNELS.get(f"{mod.rel}:{name}")
                if sink:
                    self.sinks[key] = sink

    def replaced(self, rel: str, text: str) -> Graph:
        """This graph with one module's text replaced (a planted violation): its functions' calls
        are read again, the rest is kept."""
        new = Graph.__new__(Graph)
        new.modules = dict(self.modules)
        mod = _module(rel, text)
        new.modules[mod.dotted] = mod
        _aliases(mod, new.modules)
        mine = f"{mod.dotted}:"
        new.edges = {k: v for k, v in self.edges.items() if not k.startswith(mine)}
        new.sinks = {k: v for k, v in self.sinks.items() if not k.startswith(mine)}
        new.by_method = {m: [k for k in keys if not k.startswith(mine)] for m, keys in self.by_method.items()}
        for name in mod.functions:
            new.edges[f"{mine}{name}"] = set()
            cls, _, meth = name.rpartition(".")
            if cls and not cls.startswith("_"):
                new.by_method.setdefault(meth, []).append(f"{mine}{name}")
        for name, node in mod.functions.items():
            new.edges[f"{mine}{name}"] = new._calls(mod, name, node)
            sink = _sink(node) or RUNS_KERNELS.get(f"{rel}:{name}")
            if sink:
                new.sinks[f"{mine}{name}"] = sink
        return new

    def resolve(self, target: str, depth: int = 0) -> str | None:
        """``module:name`` to the function it is (following re-exports), or None outside mlc_lab."""
        module, _, name = target.partition(":")
        mod = self.modules.get(module)
        if mod is None or depth > 5:
            return None
        if name in mod.functions or any(f.startswith(f"{name}.") for f in mod.functions):
            return f"{module}:{name}.__init__" if f"{name}.__init__" in mod.functions else f"{module}:{name}"
        alias = mod.aliases.get(name)
        return self.resolve(alias, depth + 1) if alias and ":" in alias else None

    def _calls(self, mod: _Module, name: str, node: ast.AST) -> set[str]:
        cls = name.rpartition(".")[0]
        out: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                found = self._bare(mod, sub.id)
            elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                found = self._attribute(mod, cls, sub)
            else:
                continue
            out.update(f for f in found if f in self.edges or f.partition(":")[0] in self.modules)
        return out

    def _bare(self, mod: _Module, name: str) -> list[str]:
        if name in mod.functions or f"{name}.__init__" in mod.functions:
            return [self.resolve(f"{mod.dotted}:{name}") or ""]
        alias = mod.aliases.get(name)
        if alias and ":" in alias:
            found = self.resolve(alias)
            return [found] if found else []
        return []

    def _attribute(self, mod: _Module, cls: str, node: ast.Attribute) -> list[str]:
        base = node.value
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            return self._inherited(mod, cls, node.attr)
        if isinstance(base, ast.Name):
            if base.id in ("self", "cls") and cls:
                return [f"{mod.dotted}:{cls}.{node.attr}"] if f"{cls}.{node.attr}" in mod.functions else []
            alias = mod.aliases.get(base.id)
            if alias and ":" not in alias:  # a module
                found = self.resolve(f"{alias}:{node.attr}")
                return [found] if found else []
            if alias or base.id in mod.functions:
                return []
        return list(self.by_method.get(node.attr, []))

    def _inherited(self, mod: _Module, cls: str, attr: str) -> list[str]:
        """``super().attr`` in a method of `cls`: that method of its bases found in mlc_lab (a base from
        outside mlc_lab, an exception's ``__init__`` say, runs nothing of ours)."""
        node = next((n for n in mod.tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        out = []
        for base in node.bases if node is not None else []:
            name = base.id if isinstance(base, ast.Name) else None
            found = self._bare(mod, name) if name else []
            for f in found:
                module = f.partition(":")[0]
                key = f"{module}:{name}.{attr}" if f.endswith(".__init__") or ":" in f else f
                if module in self.modules and f"{name}.{attr}" in self.modules[module].functions:
                    out.append(key)
        return out

    def paths(self, entries: dict[str, set[str] | None] = ENTRIES) -> list[str]:
        """One chain of calls from each entry function to a function that runs a kernel, as text."""
        starts = [
            f"{mod.dotted}:{name}"
            for mod in self.modules.values()
            for prefix, only in entries.items()
            if mod.rel.startswith(prefix) or mod.rel == prefix
            for name in mod.functions
            if only is None or name in only
        ]
        found = []
        for start in sorted(set(starts)):
            chain = self._chain(start)
            if chain:
                found.append(" -> ".join(self._short(c) for c in chain) + f": {self.sinks[chain[-1]]}")
        return found

    def _chain(self, start: str) -> list[str] | None:
        seen, todo = {start: None}, [start]
        while todo:
            here = todo.pop(0)
            if here in self.sinks:
                chain = [here]
                while seen[chain[-1]] is not None:
                    chain.append(seen[chain[-1]])
                return chain[::-1]
            for nxt in sorted(self.edges.get(here, ())):
                if nxt not in seen:
                    seen[nxt] = here
                    todo.append(nxt)
        return None

    def _short(self, key: str) -> str:
        module, _, name = key.partition(":")
        return f"{self.modules[module].rel}:{name}"


def _sink(node: ast.AST) -> str | None:
    """What in this function runs generated code outside the sandbox, in words, or None."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call) or not isinstance(sub.func, ast.Attribute):
            continue
        if sub.func.attr == "time_evaluator":
            return "calls time_evaluator (a kernel timed in this process)"
        first = sub.args[0] if sub.args else None
        if sub.func.attr in ("call", "request") and isinstance(first, ast.Constant) and first.value in WORKER_RUNS:
            return f"asks the persistent worker to {first.value!r} (a kernel run outside the sandbox)"
    return None


def _is_false(node: ast.AST | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and not node.value)


def unguarded(modules: dict[str, _Module], entries: dict[str, set[str] | None] = ENTRIES) -> list[str]:
    """Each call of a GUARDED function from an entry's module that does not pass its keyword (or passes
    it False), and each step of the keyword's way to the session that is missing: `measure_remote`
    hands it to `TrackerPool`, the pool to `measure_in_session`, which asks `require_sandbox` before
    anything is uploaded. Empty when the guard holds."""
    problems = []
    for guarded, keyword in GUARDED.items():
        name = guarded.rpartition(":")[2]
        for mod in modules.values():
            if not any(mod.rel.startswith(prefix) for prefix in entries):
                continue
            for node in ast.walk(mod.tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
                    given = next((k.value for k in node.keywords if k.arg == keyword), None)
                    if _is_false(given):
                        problems.append(f"{mod.rel}:{node.lineno} calls {name} without {keyword}")
    by_rel = {m.rel: m for m in modules.values()}
    remote = by_rel["tvm/measure/rpc.py"].functions["measure_remote"]
    if not any(
        isinstance(n, ast.Call)
        and getattr(n.func, "attr", None) == "TrackerPool"
        and any(k.arg == "sandboxed_only" and getattr(k.value, "id", None) == "sandboxed_only" for k in n.keywords)
        for n in ast.walk(remote)
    ):
        problems.append("tvm/measure/rpc.py:measure_remote does not hand sandboxed_only to its TrackerPool")
    pool = by_rel["tvm/measure/pool.py"]
    if "self.sandboxed_only" not in ast.unparse(pool.functions["TrackerPool._measure_one"]):
        problems.append("tvm/measure/pool.py:TrackerPool._measure_one does not hand sandboxed_only to its sessions")
    first = pool.functions["measure_in_session"].body  # type: ignore[attr-defined]
    guard = next((st for st in first if isinstance(st, ast.If)), None)
    if guard is None or ast.unparse(guard) != "if sandboxed_only:\n    require_sandbox(session)":
        problems.append("tvm/measure/pool.py:measure_in_session does not ask require_sandbox before anything else")
    elif any("upload" in ast.unparse(st) for st in first[: first.index(guard)]):
        problems.append("tvm/measure/pool.py:measure_in_session uploads before it asks require_sandbox")
    return problems
