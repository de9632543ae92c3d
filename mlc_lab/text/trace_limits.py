"""What a trace may be before it is parsed, and what it may annotate once it is.

A trace comes from a student, so three things are checked by ``trace_io``'s parser:

- its size (``MAX_TRACE_BYTES``) and the nesting of its brackets (``MAX_NESTING``), *before*
  ``ast.parse`` or ``json.loads`` see it: both recurse, and a deep input ends the whole process with
  a ``RecursionError`` (or worse, inside TVM's JSON reader);
- the depth of the parsed tree (``MAX_AST_DEPTH``): the parser's own walks recurse too;
- every ``annotate``, by what it does to the build. An annotation whose key starts with ``pragma_``
  becomes an ``AttrStmt`` of that key when the schedule is lowered (``HandleAnnotations`` in
  src/s_tir/transform/lower_opaque_block.cc and src/tirx/transform/lower_tirx_opaque.cc), and two
  such keys are read by TVM's code generators as code or as a file to put into the build
  (``CODE_KEYS``; found by reading every ``attr_key`` and annotation the code generators and lowering
  passes of TVM 0.27 compare against, src/target/, src/backend/, src/tirx/transform/,
  src/s_tir/transform/):

  - ``pragma_import_llvm``: read by ``CodeGenCPU::VisitStmt_(const AttrStmtNode*)`` in
    src/target/llvm/codegen_cpu.cc, which hands the value to ``CodeGenLLVM::HandleImport``
    (src/target/llvm/codegen_llvm.cc): the value is parsed as LLVM IR, or, when it ends in ``.ll`` or
    ``.bc``, read from that file (``LLVMInstance::LoadIR``), and linked into the kernel's module, whose
    global constructors run in the process that loads it.
  - ``pragma_import_c``: read by ``CodeGenC::VisitStmt_(const AttrStmtNode*)`` in
    src/target/source/codegen_c.cc, which writes the value verbatim into the generated source's
    declarations; the C host, CUDA, OpenCL and Metal generators all inherit it.

  These are refused whatever their value. Every other key is accepted with a plain value of
  reasonable size (``check_annotation``): the other keys TVM reads (``pragma_unroll``,
  ``pragma_auto_unroll_max_step``, ``pragma_parallel_*``, ``pragma_debug_skip_region``,
  ``software_pipeline_*``, ``meta_schedule.*`` ...) steer loops, pipelines and postprocessing, or
  tensorize with an intrinsic TVM registered, and read numbers or names, never code; an unknown key is
  kept on the loop or dropped. A value that is an expression is judged by
  ``mlc_lab.tvm.trace_effects.refuse_effects`` like every expression of a trace.

Every refusal is a ``TraceParseError`` naming the line (or JSON instruction) and the limit.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

from mlc_lab.errors import TraceParseError
from mlc_lab.text.trace_tables import Ref

MAX_TRACE_BYTES = 256 * 1024
MAX_NESTING = 48  # brackets inside brackets; TVM's printed index maps use 3 or 4
MAX_AST_DEPTH = 96  # nodes inside nodes, after parsing (a + b + c ... is a chain of them)

# Annotation keys TVM's code generators read as code or as a file put into the build (see above).
CODE_KEYS = {
    "pragma_import_llvm": "puts LLVM IR into the build",
    "pragma_import_c": "puts C source into the build",
}
MAX_KEY = 128  # characters of an annotation key
MAX_STRING = 4096  # characters of a string in an annotation value
MAX_ITEMS = 1024  # numbers and strings in one annotation value
MAX_VALUE_DEPTH = 4  # lists and dicts inside one another in an annotation value
_KEY = re.compile(r"[\x21-\x7e]+")  # printable, no spaces

_PY_TOKEN = re.compile(
    r"""\#[^\n]*|'''(?:[^'\\]|\\.|'(?!''))*'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\""""
    r"""|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|[\[\](){}]|\n""",
    re.S,
)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|\n', re.S)


def check_text(text: str, *, json_text: bool = False) -> None:
    """Refuse a trace over ``MAX_TRACE_BYTES`` or nested past ``MAX_NESTING``, before any parser
    sees it; the scan is one regular-expression pass, linear in the text."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TRACE_BYTES:
        line = text.count("\n", 0, MAX_TRACE_BYTES) + 1
        raise TraceParseError(
            f"the trace is {size} bytes, and a trace may hold at most {MAX_TRACE_BYTES} bytes (this line crosses it)",
            line=line,
        )
    depth, line = 0, 1
    for m in (_JSON_TOKEN if json_text else _PY_TOKEN).finditer(text):
        tok = m.group()
        if tok == "\n":
            line += 1
        elif tok in "([{":
            depth += 1
            if depth > MAX_NESTING:
                raise TraceParseError(
                    f"brackets are nested more than {MAX_NESTING} deep; a trace is refused past that depth", line=line
                )
        elif tok in ")]}":
            depth = max(0, depth - 1)
        else:
            line += tok.count("\n")


def parse_python(text: str) -> ast.Module:
    """``ast.parse`` after ``check_text``, its tree no deeper than ``MAX_AST_DEPTH``."""
    check_text(text)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise TraceParseError(f"not valid Python: {exc.msg}", line=exc.lineno) from None
    except (RecursionError, MemoryError):  # a chain the bracket scan cannot see (a + a + ... + a)
        raise TraceParseError(
            f"the trace is nested too deeply to parse (at most {MAX_AST_DEPTH} levels are allowed)"
        ) from None
    _check_depth(tree)
    return tree


def _check_depth(tree: ast.AST) -> None:
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_AST_DEPTH:
            raise TraceParseError(
                f"an expression is nested more than {MAX_AST_DEPTH} levels deep; a trace is refused past that depth",
                line=getattr(node, "lineno", None),
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def check_data_depth(data: Any) -> None:
    """A JSON trace already decoded (lists from ``sch.trace``): no deeper than ``MAX_NESTING``."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise TraceParseError(f"the JSON trace is nested more than {MAX_NESTING} deep")
        if isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())


def check_annotation(key: Any, value: Any, where: str, is_expression: Callable[[Any], bool] = lambda v: False) -> None:
    """Refuse an ``annotate`` whose key puts code or a file into the build (``CODE_KEYS``), whose key is
    not a short printable name, or whose value is not a plain value of reasonable size: numbers, strings,
    values the trace sampled, expressions (``is_expression``: judged by ``refuse_effects`` beforehand),
    and lists and string-keyed dicts of these."""
    if not isinstance(key, str):
        raise TraceParseError(f"{where}: an annotation key must be a string, not {type(key).__name__}")
    if key in CODE_KEYS:
        raise TraceParseError(
            f"{where}: the annotation {key!r} is refused: it {CODE_KEYS[key]}, and a trace never adds code"
        )
    if not (len(key) <= MAX_KEY and _KEY.fullmatch(key)):
        raise TraceParseError(
            f"{where}: the annotation key {key[:80]!r} is refused: a key is a name of at most {MAX_KEY} "
            "printable characters without spaces"
        )
    problem = _value_problem(value, is_expression)
    if problem:
        raise TraceParseError(f"{where}: the value of annotation {key!r} is refused: {problem}")


def _value_problem(value: Any, is_expression: Callable[[Any], bool]) -> str | None:
    items = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            return f"lists and dicts nest at most {MAX_VALUE_DEPTH} deep in an annotation"
        items += 1
        if items > MAX_ITEMS:
            return f"an annotation holds at most {MAX_ITEMS} values"
        if isinstance(item, bool) or item is None or isinstance(item, Ref) or is_expression(item):
            continue
        if isinstance(item, int):
            if not -(2**63) <= item < 2**64:
                return "an integer in an annotation fits in 64 bits"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return "a number in an annotation is finite"
        elif isinstance(item, str):
            if len(item) > MAX_STRING:
                return f"a string in an annotation holds at most {MAX_STRING} characters"
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return "the keys of a dict in an annotation are strings"
            stack.extend((v, depth + 1) for v in item.values())
        else:
            return f"an annotation holds numbers, strings, lists and dicts, not a {type(item).__name__}"
    return None


def decode_text(raw: bytes, name: str) -> str:
    """A hand-in's bytes as UTF-8 text, or a refusal naming the first byte that is not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceParseError(f"{name}: not UTF-8 text at byte {exc.start}") from None
