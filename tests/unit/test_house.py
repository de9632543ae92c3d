"""The house rules, counted from the code: module size, function size, no import circles.

- no module under mlc_lab/ or js/ over 800 lines (js/lib/model.ts is generated: exempt);
- no Python function over 80 lines, except those listed in LONG_FUNCTIONS with the reason;
- no TypeScript function (a function, method, constructor, accessor or arrow: js/, tests aside) over
  80 lines either, except those listed in LONG_TS_FUNCTIONS; read with TypeScript's own parser
  (scripts/ts_functions.mjs), nothing is run;
- no import circle among mlc_lab's modules, counting every import: inside functions and under
  ``if TYPE_CHECKING`` too (the graph is read with ``ast``, nothing is imported);
- no module reaches into another module's private names: a ``_name`` defined in a module is used
  there only (one that another module uses is public: it loses its underscore), and a private
  module ``pkg._mod`` is imported from inside ``pkg`` only; imports (``from m import _x``,
  ``import pkg._mod``) and attributes of an imported module (``m._x``) count, except those listed in
  PRIVATE_REACHES with the reason.

Every exemption must still be needed: a listed module or function that shrank, or vanished, fails
the test until it is taken off the list.
"""

from __future__ import annotations

import ast
import functools
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

# (importing module, the private name it reaches: "mlc_lab.pkg.mod._name") -> why it may.
PRIVATE_REACHES: dict[tuple[str, str], str] = {}


def _sources() -> list[Path]:
    found = list((ROOT / "mlc_lab").rglob("*.py"))
    for ext in ("*.ts", "*.tsx"):
        found += [p for p in (ROOT / "js").rglob(ext) if "node_modules" not in p.parts]
    return sorted(p for p in found if p.relative_to(ROOT).as_posix() not in GENERATED)


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A module's syntax tree, read once for all the tests here."""
    return ast.parse(path.read_text(encoding="utf-8"))


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
        _functions(_parsed(path), "", found)
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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _hidden_from(module: str, target: str, known: dict[str, Path]) -> bool:
    """Whether a dotted name (a module, or a name in one) holds a private part ``module`` may not see:
    a private module is seen from inside its package, a private name from its own module only."""
    parts = target.split(".")
    for i in range(1, len(parts)):
        if _is_private(parts[i]):
            owner = ".".join(parts[:i])
            if f"{owner}.{parts[i]}" in known:
                return not (module == owner or module.startswith(owner + "."))
            return module != owner
    return False


def private_reaches(module: str, path: Path, tree: ast.AST, known: dict[str, Path]) -> list[tuple[int, str]]:
    """The private names of other mlc_lab modules that one module reaches: (line, dotted name)."""
    found: list[tuple[int, str]] = []
    bound: dict[str, str] = {}  # a local name -> the mlc_lab module an import binds to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == module.split(".")[0]:
                    found += [(node.lineno, alias.name)] if _hidden_from(module, alias.name, known) else []
                    if alias.asname and alias.name in known:
                        bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != module.split(".")[0]:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found += [(node.lineno, full)] if _hidden_from(module, full, known) else []
                if full in known:
                    bound[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            full = f"{bound[node.value.id]}.{node.attr}"
            if _is_private(node.attr) and _hidden_from(module, full, known):
                found.append((node.lineno, full))
    return found


def import_graph() -> dict[str, set[str]]:
    known = _module_names()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for node in ast.walk(_parsed(path)):
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


def test_no_module_reaches_into_another_modules_private_names():
    known = _module_names()
    found = {}
    for module, path in sorted(known.items()):
        for line, name in private_reaches(module, path, _parsed(path), known):
            found.setdefault((module, name), f"{path.relative_to(ROOT).as_posix()}:{line}")
    unlisted = sorted(
        f"{where}: {name}" for (module, name), where in found.items() if (module, name) not in PRIVATE_REACHES
    )
    assert not unlisted, f"private names used outside their module (make them public): {unlisted}"
    stale = sorted(f"{m}: {n}" for m, n in set(PRIVATE_REACHES) - set(found))
    assert not stale, f"listed in PRIVATE_REACHES but no longer reached (take them off): {stale}"


def test_the_private_name_finder_catches_each_form_and_spares_what_is_allowed(tmp_path):
    """The finder on a planted package: private names of another module, imported or reached as an
    attribute, and a private module from outside its package, are caught; a module's own private
    names, a private module from inside its package and an alias to a private name are not."""
    names = ("pkg", "pkg.a", "pkg.b", "pkg._helpers", "pkg.sub", "pkg.sub._inner", "pkg.sub.c")
    known = {name: tmp_path / f"{name.replace('.', '_')}.py" for name in names}
    known["pkg"] = known["pkg.sub"] = tmp_path / "__init__.py"
    sources = {
        "pkg.a": (
            "from pkg.b import _secret, public\n"  # 1: caught
            "from pkg import b\n"
            "from pkg import _helpers\n"  # 3: spared: pkg._helpers from inside pkg
            "from pkg.b import public as _alias\n"  # 4: spared: an alias may be private
            "def f():\n"
            "    return b._hidden(_own())\n"  # 6: caught: an attribute of an imported module
            "def _own():\n"
            "    return _helpers.tool\n"
        ),
        "pkg.sub.c": "from .. import b\nfrom . import _inner\nfrom ._inner import x\nb.public\n",  # all spared
        "pkg.b": "import pkg.sub._inner as inner\nfrom pkg.sub._inner import y\n",  # 1, 2: caught
    }
    found = {module: private_reaches(module, known[module], ast.parse(text), known) for module, text in sources.items()}
    assert found == {
        "pkg.a": [(1, "pkg.b._secret"), (6, "pkg.b._hidden")],
        "pkg.sub.c": [],
        "pkg.b": [(1, "pkg.sub._inner"), (2, "pkg.sub._inner.y")],
    }
