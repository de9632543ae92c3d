"""The house rules, counted from the code: module size, function size, no import circles.

- no module under mlc_lab/ or js/ over 800 lines (js/lib/model.ts is generated: exempt);
- no Python function over 80 lines, except those listed in LONG_FUNCTIONS with the reason;
- no TypeScript function (a function, method, constructor, accessor or arrow: js/, tests aside) over
  80 lines either, except those listed in LONG_TS_FUNCTIONS; read with TypeScript's own parser
  (scripts/ts_functions.mjs), nothing is run;
- no import circle among mlc_lab's modules, counting every import: inside functions and under
  ``if TYPE_CHECKING`` too (the graph is read with ``ast``, nothing is imported).

Every exemption must still be needed: a listed module or function that shrank, or vanished, fails
the test until it is taken off the list.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
GENERATED = {"js/lib/model.ts"}  # mlc_lab.core.model_ts writes it from mlc_lab/model

# Modules still over the limit, each with why it is not split yet.
LONG_MODULES: dict[str, str] = {}

# (module, qualified function) -> why it may be over MAX_FUNCTION_LINES.
LONG_FUNCTIONS: dict[tuple[str, str], str] = {
    ("mlc_lab/_cli/classroom.py", "add_parser"): "a table: one add_argument call per subcommand option",
}


# (module, qualified function: Class.method, outer.inner, <anonymous>) -> why it may be over the limit.
LONG_TS_FUNCTIONS: dict[tuple[str, str], str] = {}


def _sources() -> list[Path]:
    found = list((ROOT / "mlc_lab").rglob("*.py"))
    for ext in ("*.ts", "*.tsx"):
        found += [p for p in (ROOT / "js").rglob(ext) if "node_modules" not in p.parts]
    return sorted(p for p in found if p.relative_to(ROOT).as_posix() not in GENERATED)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _functions(node: ast.AST, prefix: str, found: dict[str, int]) -> None:
    """Each function's qualified name (Class.method, outer.inner) and its length in lines."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                found[name] = (child.end_lineno or child.lineno) - child.lineno + 1
            _functions(child, name + ".", found)
        else:
            _functions(child, prefix, found)


def _long_functions() -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for path in sorted((ROOT / "mlc_lab").rglob("*.py")):
        found: dict[str, int] = {}
        _functions(ast.parse(path.read_text(encoding="utf-8")), "", found)
        rel = path.relative_to(ROOT).as_posix()
        out.update({(rel, name): n for name, n in found.items() if n > MAX_FUNCTION_LINES})
    return out


def _ts_modules() -> list[Path]:
    """The TypeScript modules of the product: js/, its tests, declarations and build output aside."""
    return [
        p
        for p in _sources()
        if p.suffix in (".ts", ".tsx") and "__tests__" not in p.parts and not p.name.endswith(".d.ts")
    ]


def ts_function_lines(paths: list[Path]) -> dict[tuple[str, str], int]:
    """Each TypeScript function's length in lines, by (module, qualified name)."""
    node = shutil.which("node")
    assert node, "node is not on PATH: run.sh installs it with the front end's other tools"
    rels = [p.relative_to(ROOT).as_posix() for p in paths]
    out = subprocess.run(
        [node, "scripts/ts_functions.mjs", *rels], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return {(module, name): n for module, found in json.loads(out.stdout).items() for name, n in found.items()}


def _module_names() -> dict[str, Path]:
    names = {}
    for path in (ROOT / "mlc_lab").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    """The mlc_lab modules one import statement names (the deepest known module of each name)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = set()
    for name in wanted:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _module_names()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _imported(module, path, node, known)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_over_the_limit():
    over = {p.relative_to(ROOT).as_posix(): _lines(p) for p in _sources() if _lines(p) > MAX_MODULE_LINES}
    unlisted = {m: n for m, n in over.items() if m not in LONG_MODULES}
    assert not unlisted, f"modules over {MAX_MODULE_LINES} lines: {unlisted}"
    stale = sorted(set(LONG_MODULES) - set(over))
    assert not stale, f"listed as long but {MAX_MODULE_LINES} lines or under (take them off LONG_MODULES): {stale}"


def test_no_function_over_the_limit():
    over = _long_functions()
    unlisted = {f"{m}:{f}": n for (m, f), n in over.items() if (m, f) not in LONG_FUNCTIONS}
    assert not unlisted, f"functions over {MAX_FUNCTION_LINES} lines: {unlisted}"
    stale = sorted(f"{m}:{f}" for m, f in set(LONG_FUNCTIONS) - set(over))
    assert not stale, f"listed as long but short now or gone (take them off LONG_FUNCTIONS): {stale}"


def test_no_typescript_function_over_the_limit():
    found = ts_function_lines(_ts_modules())
    assert ("js/explorer/view.ts", "ExplorerView.onStep") in found  # the reader names methods as we list them
    over = {key: n for key, n in found.items() if n > MAX_FUNCTION_LINES}
    unlisted = {f"{m}:{f}": n for (m, f), n in over.items() if (m, f) not in LONG_TS_FUNCTIONS}
    assert not unlisted, f"TypeScript functions over {MAX_FUNCTION_LINES} lines: {unlisted}"
    stale = sorted(f"{m}:{f}" for m, f in set(LONG_TS_FUNCTIONS) - set(over))
    assert not stale, f"listed as long but short now or gone (take them off LONG_TS_FUNCTIONS): {stale}"


def test_the_typescript_reader_names_and_measures_each_kind_of_function(tmp_path):
    """The counter on a planted module: every kind of function, named as a person would look for it,
    each counted from its first line to its last (nested ones inside their outer one's lines)."""
    planted = tmp_path / "planted.ts"
    planted.write_text(
        "export function top(a: number): number {\n"  # 1
        "  const inner = (b: number) => {\n"  # 2
        "    return b + 1;\n"  # 3
        "  };\n"  # 4
        "  return inner(a);\n"  # 5
        "}\n"  # 6
        "export class Box<T> {\n"  # 7
        "  constructor(private v: T) {}\n"  # 8
        "  get value(): T {\n"  # 9
        "    return this.v;\n"  # 10
        "  }\n"  # 11
        "  map(f: (v: T) => T): Box<T> { return new Box(f(this.v)); }\n"  # 12
        "}\n"  # 13
        "const table = { go() {\n  return [1].map(function (x) { return x; });\n} };\n",  # 14-16
        encoding="utf-8",
    )
    node = shutil.which("node")
    assert node
    out = subprocess.run([node, "scripts/ts_functions.mjs", str(planted)], cwd=ROOT, capture_output=True, text=True)
    assert json.loads(out.stdout)[str(planted)] == {
        "top": 6,
        "top.inner": 3,
        "Box.constructor": 1,
        "Box.value": 3,
        "Box.map": 1,
        "go": 3,  # a method of an object literal, by its own name (the literal is no function)
        "go.<anonymous>": 1,
    }


def test_no_import_circle_even_inside_functions():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle_made_inside_a_function_and_by_type_checking(tmp_path):
    """The finder on a planted graph, and on import statements of each form read by _imported."""
    known = {name: tmp_path / f"{name.rpartition('.')[2]}.py" for name in ("pkg", "pkg.a", "pkg.b", "pkg.c")}
    known["pkg"] = tmp_path / "__init__.py"
    sources = {
        "pkg.a": "def f():\n    from pkg import b\n",
        "pkg.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import X\n",
        "pkg.c": "import pkg.a as a\n",
        "pkg": "",
    }
    graph: dict[str, set[str]] = {}
    for module, text in sources.items():
        graph[module] = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[module] |= _imported(module, known[module], node, known)
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}, "pkg": set()}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    graph["pkg.c"] = set()
    assert circles(graph) == []


def test_the_graph_holds_real_edges():
    """A graph with no edges would have no circles too: a few known imports must be in it."""
    graph = import_graph()
    assert "mlc_lab.tvm.tuning.live" in graph["mlc_lab.tvm.tuning.build"]
    assert "mlc_lab.text.step_errors" in graph["mlc_lab.tvm.schedule"]
    assert "mlc_lab.core.access" in graph["mlc_lab.core.session"]  # imported inside a method
