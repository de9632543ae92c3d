"""What a trace may be before it is parsed, and what it may annotate once it is.

A trace comes from a student, so three things are checked by ``trace_io``'s parser:

- its size (``MAX_TRACE_BYTES``) and the nesting of its brackets (``MAX_NESTING``), *before*
  ``ast.parse`` or ``json.loads`` see it: both recurse, and a deep input ends the whole process with
  a ``RecursionError`` (or worse, inside TVM's JSON reader);
- the depth of the parsed tree (``MAX_AST_DEPTH``): the parser's own walks recurse too;
- every ``annotate`` key and value: annotations reach the code generator, and some of them splice
  code into the build (``pragma_import_llvm`` puts LLVM IR in the module, whose global constructors
  run in the process that loads it). Only the keys schedules use are allowed (``ANNOTATION_KEYS``,
  read from TVM's schedule rules, postprocessors and lowering passes), with small plain values.

Every refusal is a ``TraceParseError`` naming the line (or JSON instruction) and the limit.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from mlc_lab.errors import TraceParseError
from mlc_lab.text.trace_tables import Ref

MAX_TRACE_BYTES = 256 * 1024
MAX_NESTING = 48  # brackets inside brackets; TVM's printed index maps use 3 or 4
MAX_AST_DEPTH = 96  # nodes inside nodes, after parsing (a + b + c ... is a chain of them)

# Annotation keys a schedule legitimately writes. meta_schedule's rules write ``meta_schedule.*``
# (src/s_tir/meta_schedule/...: cooperative_fetch, parallel, vectorize, unroll_*, tiling_structure,
# thread_extent_*, auto_tensorize*, write_cache_level, ...); the lowering passes read the pragmas
# and pipeline keys below. Nothing here makes the build read a file or text as code.
ANNOTATION_KEYS = frozenset(
    {
        "pragma_auto_unroll_max_step",
        "pragma_unroll_explicit",
        "pragma_unroll",
        "pragma_loop_partition_hint",
        "software_pipeline_stage",
        "software_pipeline_order",
        "software_pipeline_async_stages",
        "double_buffer_scope",
        "warp_execution",
        "layout_free_buffers",
        "auto_copy",
        "local_stage",
        "vector_bytes",
        "meta_schedule.adaptive_pool_avg",
        "meta_schedule.adaptive_pool_max",
        "meta_schedule.auto_tensorize",
        "meta_schedule.auto_tensorize_init",
        "meta_schedule.cooperative_fetch",
        "meta_schedule.inline_rule",
        "meta_schedule.layout_rewrite_preproc",
        "meta_schedule.parallel",
        "meta_schedule.pool_avg",
        "meta_schedule.pool_max",
        "meta_schedule.random_compute_producer",
        "meta_schedule.thread_extent_high_inclusive",
        "meta_schedule.thread_extent_low_inclusive",
        "meta_schedule.tiling_structure",
        "meta_schedule.unroll_explicit",
        "meta_schedule.unroll_implicit",
        "meta_schedule.vectorize",
        "meta_schedule.write_cache_level",
    }
)
# Known back doors, named in the refusal so that a teacher reading it knows what was tried.
_CODE_KEYS = {
    "pragma_import_llvm": "puts LLVM IR into the build",
    "pragma_import_c": "puts C source into the build",
}
_MAX_STRING = 64
_MAX_LIST = 64
_STRING = re.compile(r"[A-Za-z0-9_.:\-]*")

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


def check_annotation(key: Any, value: Any, where: str) -> None:
    """Refuse an ``annotate`` whose key is not one schedules use, or whose value is not a small
    plain value (a number, a short name, a value the trace sampled, or a short flat list of these)."""
    if not isinstance(key, str):
        raise TraceParseError(f"{where}: an annotation key must be a string, not {type(key).__name__}")
    if key in _CODE_KEYS:
        raise TraceParseError(
            f"{where}: the annotation {key!r} is refused: it {_CODE_KEYS[key]}, and a trace never adds code"
        )
    if key not in ANNOTATION_KEYS:
        raise TraceParseError(
            f"{where}: the annotation {key[:80]!r} is not one a schedule uses; the allowed keys are "
            + ", ".join(sorted(ANNOTATION_KEYS))
        )
    if not _plain_value(value):
        raise TraceParseError(
            f"{where}: the value of annotation {key!r} is refused: an annotation holds a number, a name of at "
            f"most {_MAX_STRING} letters, digits or '_.:-', or a list of at most {_MAX_LIST} of these"
        )


def _plain_value(value: Any) -> bool:
    if isinstance(value, (bool, int, float, Ref)):
        return not isinstance(value, int) or abs(value) < 2**63
    if isinstance(value, str):
        return len(value) <= _MAX_STRING and _STRING.fullmatch(value) is not None
    if isinstance(value, (list, tuple)):
        return len(value) <= _MAX_LIST and all(not isinstance(v, (list, tuple)) and _plain_value(v) for v in value)
    return False


def check_calls(calls: list) -> None:
    """Every ``annotate`` of parsed calls (``TraceCall``) through ``check_annotation``."""
    for call in calls:
        if call.primitive != "annotate":
            continue
        args = list(call.args) + [None, None, None]
        key = call.kwargs.get("ann_key", args[1])
        value = call.kwargs.get("ann_val", args[2])
        check_annotation(key, value, call.where or f"line {call.line}")


def decode_text(raw: bytes, name: str) -> str:
    """A hand-in's bytes as UTF-8 text, or a refusal naming the first byte that is not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceParseError(f"{name}: not UTF-8 text at byte {exc.start}") from None
