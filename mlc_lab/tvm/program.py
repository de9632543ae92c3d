"""Turning what a user hands us (module, function, TVMScript text, a .py file) into an IRModule.

Legacy spellings of the MLC course are rewritten first (see ``compat``); a text that still does not
parse raises ``LoadError`` carrying TVM's caret-annotated diagnostic and the line in the user's text.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tvm
import tvm.s_tir  # noqa: F401  (registers the s_tir schedule and its node types)
from tvm import tirx

from mlc_lab.errors import LoadError

IRModule = tvm.IRModule
PrimFunc = tirx.PrimFunc

# Where TVM's diagnostic renderer puts the line: `--> <file>:LINE:COL`.
_DIAG_LINE = re.compile(r"-->\s*\S*?:(\d+):(\d+)")
_NOT_DEFINED = re.compile(r"name '(\w+)' is not defined")


def load(src: object, func: str | None = None) -> tvm.IRModule:
    """Return an IRModule for ``src``; ``func`` must name one of its PrimFuncs when given."""
    if isinstance(src, tvm.IRModule):
        mod = src
    elif isinstance(src, tirx.PrimFunc):
        mod = _module_from_primfunc(src)
    elif isinstance(src, Path) or (isinstance(src, str) and _looks_like_path(src)):
        mod = load_file(Path(src))
    elif isinstance(src, str):
        mod = parse_text(src)
    else:
        raise LoadError(
            f"cannot load a {type(src).__name__}: give an IRModule, a PrimFunc, TVMScript text or a path to a .py file"
        )
    if func is not None:
        mod = select_function(mod, func)
    if not prim_func_names(mod):
        raise LoadError("the module has no TensorIR function (PrimFunc) to schedule")
    return mod


def course_program(name: str) -> tvm.IRModule:
    """The course catalog's program called ``name`` (``mlc_lab/tvm/course_programs.py``) parsed."""
    from mlc_lab.tvm.course_programs import program

    return parse_text(program(name).text, filename=f"<course program {name}>")


_DECORATED = re.compile(r"@\s*(?:\w+\.)*(?:ir_module|prim_func)\b")


def looks_like_program(src: object) -> bool:
    """Whether ``src`` is a program (a module, a function, TVMScript text or a .py file holding one)
    rather than a trace: a trace holds no ``@I.ir_module`` class or ``@T.prim_func`` function."""
    if isinstance(src, (tvm.IRModule, tirx.PrimFunc)):
        return True
    if isinstance(src, (str, Path)) and (isinstance(src, Path) or _looks_like_path(src)):
        try:
            src = Path(src).read_text()
        except (OSError, UnicodeDecodeError):
            return True  # load() says what is wrong with the file
    return isinstance(src, str) and bool(_DECORATED.search(src))


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and len(text) < 4096 and text.strip().endswith(".py")


def _module_from_primfunc(f: tirx.PrimFunc) -> tvm.IRModule:
    """A lone PrimFunc as TVM's ``Schedule(prim_func)`` holds it: a module whose one function is
    called "main" (its ``global_symbol`` stays), so that a trace written here says
    ``func_name="main"`` and replays unchanged on ``tvm.s_tir.Schedule(prim_func)``."""
    return tvm.IRModule({"main": f})


def select_function(mod: tvm.IRModule, func: str) -> tvm.IRModule:
    names = prim_func_names(mod)
    if func not in names:
        raise LoadError(f"no TensorIR function named {func!r}; the module has: {', '.join(names) or 'none'}")
    return mod


def prim_func_names(mod: tvm.IRModule) -> list[str]:
    return [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]


def load_file(path: Path) -> tvm.IRModule:
    if not path.exists():
        raise LoadError(f"{path}: no such file")
    text = path.read_text()
    try:
        return parse_text(text, filename=str(path))
    except LoadError as exc:
        message = str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}"
        raise LoadError(message, line=exc.line, source=text) from None


def parse_text(text: str, filename: str = "<script>") -> tvm.IRModule:
    """Parse TVMScript (a module class, a prim_func, or a .py file holding them), legacy spelling included."""
    from mlc_lab.text.compat import convert, looks_legacy

    original = text
    if looks_legacy(text):
        text = convert(text)
    snippet, offset, node = _tvmscript_part(text, filename)
    extra = _names_for_snippet(text, node, offset, filename)
    try:
        parsed = (
            tvm.script.from_source(snippet, extra_vars=_script_globals(extra))
            if extra
            else (tvm.script.from_source(snippet))
        )
    except Exception as exc:  # noqa: BLE001  (TVM raises DiagnosticError, or plain errors from the evaluator)
        raise _load_error(exc, snippet, offset, original, filename) from None
    if isinstance(parsed, tirx.PrimFunc):
        parsed = _module_from_primfunc(parsed)
    if not isinstance(parsed, tvm.IRModule):
        raise LoadError(f"{filename}: the text is not a TVMScript module or prim_func", source=original)
    return parsed


def _tvmscript_part(text: str, filename: str = "<script>") -> tuple[str, int, ast.stmt]:
    """Cut the first ``@...ir_module`` class or ``@...prim_func`` def out of a Python file.

    ``from_source`` evaluates only the decorated definition, so imports and other code in a notebook
    file are never run. Returns the snippet, the number of lines before it and its syntax tree.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise LoadError(
            f"{_where(filename, exc.lineno)}: Python syntax error: {exc.msg}\n    {(exc.text or '').rstrip()}",
            line=exc.lineno,
            source=text,
        ) from None
    lines = text.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and any(
            _decorator_name(d) in {"ir_module", "prim_func"} for d in node.decorator_list
        ):
            start = min(d.lineno for d in node.decorator_list) - 1
            end = node.end_lineno or len(lines)
            return "\n".join(lines[start:end]) + "\n", start, node
    raise LoadError("found no @I.ir_module class or @T.prim_func function in the text", source=text)


def _names_for_snippet(text: str, node: ast.stmt, offset: int, filename: str) -> dict:
    """The values of the module-level names the TVMScript definition uses: symbolic shape variables
    as TVM prints them, and constants read from the file (never run). A name it uses whose value
    cannot be read is refused here, naming both lines and the way out."""
    from mlc_lab.text.constants import Unreadable, read_constants

    symbolic = _symbolic_vars_above(text)
    used, bound = _free_names(node)
    wanted = set(used) - bound - _default_names()
    if not wanted:
        return {}
    constants = read_constants(ast.parse(text), text, before_line=offset + 1)
    out: dict = {}
    for name in sorted(wanted, key=lambda n: used[n]):
        if name in symbolic:
            out[name] = symbolic[name]
        elif name in constants and not isinstance(constants[name], Unreadable):
            out[name] = constants[name]
        elif name in constants:
            raise _unreadable_error(constants[name], used[name], node, filename, text)
    return out


def _free_names(node: ast.stmt) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Names the definition reads (with where it first reads each) and names it binds itself."""
    used: dict[str, tuple[int, int]] = {}
    bound: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            if isinstance(sub.ctx, ast.Load):
                here = (sub.lineno, sub.col_offset)
                used[sub.id] = min(used.get(sub.id, here), here)
            else:
                bound.add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)) and sub is not node:
            bound.add(sub.name)
    return used, bound


_DEFAULT_NAMES: frozenset[str] | None = None


def _default_names() -> frozenset[str]:
    """Names the TVMScript parser knows without help (``T``, ``I``, ``tvm`` ...) and Python's builtins."""
    global _DEFAULT_NAMES
    if _DEFAULT_NAMES is None:
        import builtins

        from tvm.script.parser.core.entry import _default_globals

        _DEFAULT_NAMES = frozenset(_default_globals()) | frozenset(dir(builtins))
    return _DEFAULT_NAMES


def _where(filename: str, line: int | None) -> str:
    """``prog.py, line 4``; text given directly counts its own lines: ``line 4 of the program text``
    (one wording for every error of a load, whatever found it)."""
    if filename == "<script>":
        return f"line {line} of the program text" if line else "the program text"
    return f"{filename}, line {line}" if line else filename


def _unreadable_error(u, use_line: tuple[int, int], node: ast.stmt, filename: str, text: str) -> LoadError:
    func = node.name
    return LoadError(
        f"{_where(filename, u.line)}: `{u.name}` cannot be read without running the file ({u.why}): "
        f"`{u.text}`, used by {func} on line {use_line[0]}. mlc_lab reads module constants only as literals or arithmetic on "
        f"them (M = N = K = 2048); write it that way, or pass the object itself: import it and call "
        f"mlc_lab.load({func}) or Session({func})",
        line=u.line,
        source=text,
    )


# What TVM prints above a module for a symbolic shape variable: ``n = T.int32()``, ``n = T.int64()``,
# and, for an int64 variable in a signature, ``n = TypeVar("n")``.
_SYMBOLIC_DTYPES = {f"T.{t}": t for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}


def _script_globals(extra: dict) -> dict:
    from tvm.script.parser.core.entry import _default_globals

    return {**_default_globals(), **extra}


def _symbolic_vars_above(text: str) -> dict[str, tirx.Var]:
    """Symbolic variables declared at the top level of a printed module, as TIR variables.

    Only the declaration forms above are read (never evaluated); ``TypeVar`` carries no dtype, and
    TVM prints it for 64-bit shape variables, so it becomes an int64 variable.
    """
    out: dict[str, tirx.Var] = {}
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if not isinstance(value, ast.Call):
            continue
        callee = ast.unparse(value.func)
        if callee in _SYMBOLIC_DTYPES and not value.args and not value.keywords:
            out[name] = tirx.Var(name, _SYMBOLIC_DTYPES[callee])
        elif (
            callee in {"TypeVar", "typing.TypeVar"}
            and len(value.args) == 1
            and not value.keywords
            and isinstance(value.args[0], ast.Constant)
            and value.args[0].value == name
        ):
            out[name] = tirx.Var(name, "int64")
    return out


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _load_error(exc: Exception, snippet: str, offset: int, original: str, filename: str) -> LoadError:
    rendered = str(exc).strip() or type(exc).__name__
    match = _DIAG_LINE.search(rendered)
    line = int(match.group(1)) + offset if match else None
    where = _where(filename, line)
    rendered = _renumbered(rendered, offset)
    first = _first_error_line(rendered)
    message = f"{where}: TVMScript does not parse: {first}"
    missing = _NOT_DEFINED.search(rendered)
    if missing:
        name = missing.group(1)
        message += (
            f"; define `{name}` above the function as a constant ({name} = 128), or pass the "
            f"function object itself (mlc_lab.load(func) after importing it)"
        )
    message += f"\n\n{rendered}"
    if line is not None:
        user_lines = original.splitlines()
        if 0 < line <= len(user_lines) and user_lines[line - 1].strip() not in rendered:
            message += f"\n\nline {line} of your text: {user_lines[line - 1].strip()}"
    return LoadError(message, line=line, source=original)


def _renumbered(rendered: str, offset: int) -> str:
    """TVM's diagnostic counts lines of the snippet it parsed; count those of the user's text instead."""
    if not offset:
        return rendered
    rendered = re.sub(
        r"(-->\s*)\S*?:(\d+):(\d+)",
        lambda m: f"{m.group(1)}line {int(m.group(2)) + offset}, column {m.group(3)}",
        rendered,
    )
    return re.sub(r"(?m)^(\s*)(\d+)( \|)", lambda m: f"{m.group(1)}{int(m.group(2)) + offset}{m.group(3)}", rendered)


def _first_error_line(rendered: str) -> str:
    for raw in rendered.splitlines():
        text = raw.strip()
        if text.lower().startswith("error:"):
            return text[len("error:") :].strip()
    return rendered.splitlines()[0] if rendered else "unknown error"


_PRINTER_CONFIG = None


def script(mod: tvm.IRModule) -> str:
    """``mod.script()`` with TVM's default settings, without building a new printer config per call
    (a fifth of the printer's cost on a small module, and a schedule step prints once)."""
    global _PRINTER_CONFIG
    from tvm.runtime import script_printer

    if _PRINTER_CONFIG is None:
        _PRINTER_CONFIG = script_printer.PrinterConfig()
    return script_printer._script(mod, _PRINTER_CONFIG)  # noqa: SLF001  (TVM's printer without its per-call config)


def function_script(mod: tvm.IRModule, name: str) -> str:
    select_function(mod, name)
    return mod[name].script()


def structural_equal(a: object, b: object) -> bool:
    return bool(tvm.ir.structural_equal(a, b)) if hasattr(tvm.ir, "structural_equal") else _ffi_equal(a, b)


def _ffi_equal(a: object, b: object) -> bool:
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b))


def structural_hash(mod: object) -> str:
    """A fingerprint of a module: structurally equal modules have equal hashes. Free variables are
    matched by position, not identity (some primitives, cache_inplace, leave one in the module)."""
    import tvm_ffi

    return str(tvm_ffi.structural_hash(mod, map_free_vars=True))
