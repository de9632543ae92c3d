"""Reading traces without running them.

A trace from a file, a notebook cell or a classmate is parsed by a whitelist: calls of schedule
primitives on ``sch`` whose arguments are literals, names the trace itself defined, or a
``lambda`` index map (``trace_exprs``). Nothing is ``exec``'d or ``eval``'d; anything else is
refused with its line number. TVM's JSON trace is read into the same calls. Every expression either
form carries, and every value of every call, then passes ``trace_effects.check_calls`` (expressions
by their node types, annotations by what they put into the build).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tvm.s_tir.schedule import Trace

from mlc_lab.errors import TraceParseError
from mlc_lab.model.steps import LIST_RESULTS
from mlc_lab.text import trace_limits
from mlc_lab.text.trace_tables import BOOL_ATTRS, KINDS, NAME, Kind, statement_kind
from mlc_lab.text.trace_tables import Ref
from mlc_lab.tvm import trace_effects
from mlc_lab.tvm.primitives import ALIASES, PRIMITIVES, parameter_names
from mlc_lab.tvm.trace_exprs import IndexLambda, JsonIndexMap, RangesLambda, dotted, is_cast, load_index_map
from mlc_lab.tvm.trace_exprs import literal_expression, typed_literal

_ALLOWED_IMPORTS = {("tvm", "s_tir"), ("tvm", "tir"), ("tvm", "tirx")}
_SCHEDULE_ANNOTATIONS = {"Schedule", "s_tir.Schedule", "tir.Schedule", "tvm.s_tir.Schedule", "tvm.tir.Schedule"}


@dataclass
class TraceCall:
    line: int
    primitive: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    text: str = ""
    label: str = ""  # the call with names from the program, filled in when it is replayed
    where: str = ""  # "line 3" in a printed trace, "instruction 7 (Split)" in a JSON one


def parse_trace_text(text: str) -> list[TraceCall]:
    """Parse TVM's printed trace (or plain schedule statements) into calls, refusing anything else
    (and anything too large, too deep or annotated with a key schedules do not use: ``trace_limits``)."""
    tree = trace_limits.parse_python(text)
    lines = text.splitlines()
    body = list(tree.body)
    sch_name = "sch"
    statements: list[ast.stmt] = []
    for node in body:
        if _is_docstring(node):
            continue
        if _allowed_import(node):
            continue  # never run: a hand-in file may import what its annotation names
        if isinstance(node, ast.FunctionDef):
            if statements:
                raise TraceParseError("a trace holds one function, or plain statements, not both", line=node.lineno)
            sch_name = _check_trace_def(node)
            statements.extend(node.body)
            continue
        statements.append(node)
    parser = _CallParser(sch_name, lines)
    calls = []
    for stmt in statements:
        call = parser.statement(stmt)
        if call is not None:
            calls.append(call)
    trace_effects.check_calls(calls)
    return calls


def _allowed_import(node: ast.stmt) -> bool:
    """``from tvm import s_tir``, ``import tvm``, ``from tvm.script import tirx as T``: what a trace
    file imports for its annotation or typed literals. Only these; nothing is imported here."""
    if isinstance(node, ast.ImportFrom) and len(node.names) == 1:
        if (node.module, node.names[0].name) in _ALLOWED_IMPORTS:
            return True
        return node.module == "tvm.script" and node.names[0].name in {"tir", "tirx"} and node.names[0].asname == "T"
    if isinstance(node, ast.Import):
        return all(alias.name == "tvm" and alias.asname is None for alias in node.names)
    return False


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _check_trace_def(node: ast.FunctionDef) -> str:
    if node.decorator_list:
        raise TraceParseError("decorators are not allowed in a trace", line=node.lineno)
    args = node.args
    if len(args.args) != 1 or args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        raise TraceParseError("the trace function takes exactly one argument, the schedule", line=node.lineno)
    ann = args.args[0].annotation
    if ann is not None and dotted(ann) not in _SCHEDULE_ANNOTATIONS:
        raise TraceParseError("the schedule argument's annotation must be a Schedule", line=node.lineno)
    return args.args[0].arg


# TVM's printer names some arguments after its instruction, not after the Python API's parameter.
_PRINTED_NAMES = {"get_output_blocks": {"block": "scope_block"}}


class _CallParser:
    def __init__(self, sch_name: str, lines: list[str]):
        self.sch = sch_name
        self.lines = lines
        self.defined: set[str] = set()

    def statement(self, stmt: ast.stmt) -> TraceCall | None:
        line = stmt.lineno
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Return):
            if stmt.value is None or (isinstance(stmt.value, ast.Name) and stmt.value.id == self.sch):
                return None
            raise TraceParseError("a trace may only `return` the schedule", line=line)
        targets: list[str] = []
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                raise TraceParseError("chained assignment is not allowed in a trace", line=line)
            targets = self.targets(stmt.targets[0], line)
            value = stmt.value
        elif isinstance(stmt, ast.Expr):
            value = stmt.value
        else:
            raise TraceParseError(f"only schedule calls are allowed in a trace, not {statement_kind(stmt)}", line=line)
        call = self.call(value, line)
        call.targets = targets
        call.text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        call.where = f"line {line}"
        self.defined.update(targets)
        return call

    def targets(self, node: ast.expr, line: int) -> list[str]:
        if isinstance(node, ast.Name):
            return [node.id]
        if isinstance(node, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in node.elts):
            return [e.id for e in node.elts]  # type: ignore[attr-defined]
        raise TraceParseError("a trace may only assign to plain names", line=line)

    def call(self, node: ast.expr, line: int) -> TraceCall:
        if not isinstance(node, ast.Call):
            raise TraceParseError("each statement of a trace must be a call of a schedule primitive", line=line)
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.sch):
            shown = ast.unparse(func)
            raise TraceParseError(
                f"only methods of `{self.sch}` may be called in a trace, not `{shown[:80]}`", line=line
            )
        name = ALIASES.get(func.attr, func.attr)
        if name not in PRIMITIVES:
            raise TraceParseError(f"`{func.attr}` is not a schedule primitive", line=line)
        renamed = _PRINTED_NAMES.get(name, {})
        params = parameter_names(name)
        args = []
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred):
                raise TraceParseError("`*args` is not allowed in a trace", line=line)
            args.append(self.value(a, line, params[min(i, len(params) - 1)] if params else f"argument {i + 1}"))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise TraceParseError("`**kwargs` is not allowed in a trace", line=line)
            kwargs[renamed.get(kw.arg, kw.arg)] = self.value(kw.value, line, renamed.get(kw.arg, kw.arg))
        return TraceCall(line=line, primitive=name, args=args, kwargs=kwargs)

    def value(self, node: ast.expr, line: int, param: str = "") -> Any:
        """A literal, a name the trace defined or an index map; ``param`` names the slot in a refusal."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, line, param)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, ast.List):
            return [self.value(e, line, param) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e, line, param) for e in node.elts)
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise TraceParseError("dictionary keys in a trace must be strings", line=line)
                out[k.value] = self.value(v, line, param)
            return out
        if isinstance(node, ast.Name):
            if node.id in self.defined:
                return Ref(node.id)
            if node.id in {"True", "False", "None"}:
                return {"True": True, "False": False, "None": None}[node.id]
            raise TraceParseError(f"`{node.id}` is not defined earlier in the trace", line=line)
        if isinstance(node, ast.Lambda):
            return IndexLambda.from_ast(node, line, self.defined)
        if isinstance(node, ast.Call) and dotted(node.func) in {"T.int32", "T.int64"} and len(node.args) == 1:
            inner = self.value(node.args[0], line, param)
            if isinstance(inner, int):
                return inner
        if is_cast(node):
            return typed_literal(node)  # type: ignore[arg-type]
        if isinstance(node, ast.Call) and dotted(node.func) in {"T.index_map", "tvm.tirx.IndexMap.from_func"}:
            if len(node.args) == 1 and isinstance(node.args[0], ast.Lambda):
                return IndexLambda.from_ast(node.args[0], line, self.defined)
        # An expression outside an index map: what it would do is said first (the node it holds), then
        # that a trace writes literals there.
        trace_effects.refuse_effects(literal_expression(node, line, self.defined), what=_slot(param), where=line)
        raise TraceParseError(
            f"`{ast.unparse(node)[:120]}` is not allowed in a trace: use literals or names the trace defined", line=line
        )


# --- JSON -------------------------------------------------------------------------------------


def parse_trace_json(data: Any) -> list:
    """Check the shape of a trace in TVM's JSON form: ``[instructions, decisions]``."""
    if isinstance(data, str):
        data = _load_json(data)
    trace_limits.check_data_depth(data)
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], list) and isinstance(data[1], list)):
        raise TraceParseError("a JSON trace is a list of two lists: [instructions, decisions]")
    for i, inst in enumerate(data[0]):
        if not (
            isinstance(inst, list)
            and len(inst) == 4
            and isinstance(inst[0], str)
            and all(isinstance(part, list) for part in inst[1:])
            and all(isinstance(o, str) for o in inst[3])
        ):
            raise TraceParseError(f"instruction {i} is not [kind, inputs, attrs, outputs]")
        if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", inst[0]):
            raise TraceParseError(f"instruction {i} has a bad kind {inst[0]!r}")
    for d in data[1]:
        if not (isinstance(d, list) and len(d) == 2 and isinstance(d[0], int) and 0 <= d[0] < len(data[0])):
            raise TraceParseError(f"bad decision entry {d!r}: expected [instruction index, value]")
    return data


def _load_json(text: str) -> Any:
    """``json.loads`` of a trace after ``trace_limits.check_text`` (size and depth first)."""
    trace_limits.check_text(text, json_text=True)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceParseError(f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    except RecursionError:
        raise TraceParseError(f"the JSON trace is nested more than {trace_limits.MAX_NESTING} deep") from None


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")


def trace_data(trace: Any) -> list | str:
    """What a user holds, as TVM's JSON trace (plain lists) or as the text of a printed trace.

    Accepts: the printed trace (text), its JSON (text or lists), a ``Trace`` (``sch.trace``), the TVM
    objects of ``sch.trace.as_json()``, and a record of meta_schedule's JSON database (a line of
    ``database_tuning_record.json`` or ``TuningRecord.as_json()``).
    """
    from mlc_lab.tvm.schedule import to_plain

    if isinstance(trace, Trace):
        return to_plain(trace.as_json(remove_postproc=False))
    if isinstance(trace, str):
        if not looks_like_json(trace):
            return trace
        try:
            data = _load_json(trace)
        except TraceParseError:
            lines = [ln for ln in trace.splitlines() if ln.strip()]
            if len(lines) > 1 and all(looks_like_json(ln) for ln in lines):
                raise TraceParseError(
                    f"this looks like a whole tuning database ({len(lines)} records): pass one record (one line)"
                ) from None
            raise
        return _unwrap_record(data)
    if isinstance(trace, (list, tuple)) or type(trace).__name__ == "Array":
        try:
            plain = to_plain(trace)
            json.dumps(plain)
        except (TypeError, ValueError) as exc:
            raise TraceParseError(f"the JSON trace holds something that is not JSON: {exc}") from None
        return _unwrap_record(plain)
    raise TraceParseError(
        f"a trace is its printed text, its JSON, a Trace (sch.trace) or a tuning record, not {type(trace).__name__}"
    )


def _is_trace_shape(data: Any) -> bool:
    return (
        isinstance(data, list)
        and len(data) == 2
        and all(isinstance(part, list) for part in data)
        and all(isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str) for inst in data[0])
    )


def _unwrap_record(data: Any) -> Any:
    """A tuning record is ``[workload index, [trace, run_secs, target, args_info]]`` in the database file
    and ``[trace, run_secs, target, args_info]`` from ``TuningRecord.as_json()``: take its trace."""
    if _is_trace_shape(data):
        return data
    if isinstance(data, list) and len(data) == 2 and isinstance(data[0], int) and isinstance(data[1], list):
        data = data[1]
    if isinstance(data, list) and 1 <= len(data) <= 4 and _is_trace_shape(data[0]):
        return data[0]
    return data  # parse_trace_json says what is wrong with it


def calls_from_json(data: Any) -> list[TraceCall]:
    """TVM's JSON trace as calls of the Python API: read as data, never replayed by TVM to be read."""
    data = parse_trace_json(data)
    insts, decision_list = data
    decisions = {int(i): value for i, value in decision_list}
    defined: set[str] = set()
    calls = []
    for pos, (kind, inputs, attrs, outputs) in enumerate(insts):
        where = f"instruction {pos} ({kind})"
        spec = KINDS.get(kind)
        if spec is None:
            raise TraceParseError(
                f"{where}: the JSON trace does not replay: `{kind}` is not an instruction of TVM's schedule"
            )
        try:
            args, kwargs = _json_arguments(spec, inputs, attrs, defined)
        except TraceParseError as exc:
            raise TraceParseError(f"{where}: {exc}") from None
        if spec.decision and pos in decisions:
            kwargs["decision"] = decisions[pos]
        for name in outputs:
            if not NAME.fullmatch(name):
                raise TraceParseError(f"{where}: bad output name {name!r}")
        targets = list(outputs)
        call = TraceCall(line=pos + 1, primitive=spec.primitive, args=args, kwargs=kwargs, targets=targets, where=where)
        call.text = _call_text(call)
        calls.append(call)
        defined.update(targets)
    trace_effects.check_calls(calls)
    return calls


def _json_arguments(spec: Kind, inputs: list, attrs: list, defined: set[str]) -> tuple[list, dict]:
    if len(attrs) != len(spec.attrs):
        raise TraceParseError(f"expected {len(spec.attrs)} attribute(s), got {len(attrs)}")
    fixed = [p for p in spec.inputs if not p.startswith("*")]
    rest = spec.inputs[len(fixed) :]
    if len(inputs) < len(fixed) or (not rest and len(inputs) != len(fixed)):
        raise TraceParseError(f"expected {len(fixed)} input(s), got {len(inputs)}")
    args: list = []
    kwargs: dict = {}
    for pname, raw in zip(fixed, inputs):
        kwargs[pname] = _json_input(raw, defined, _slot(pname))
    extra = [_json_input(raw, defined, _slot(rest[0] if rest else "")) for raw in inputs[len(fixed) :]]
    if rest == ("*",):
        args.extend(extra)
    elif rest:
        kwargs[rest[0][1:]] = extra
    for pname, raw in zip(spec.attrs, attrs):
        kwargs[pname] = bool(raw) if pname in BOOL_ATTRS and isinstance(raw, int) else raw
    _python_form(spec.primitive, kwargs, defined)
    return args, kwargs


def _slot(pname: str) -> str:
    name = pname.lstrip("*")
    return trace_effects.SLOT_NAMES.get(name, f"argument {name}" if name else "argument")


def _json_input(raw: Any, defined: set[str], what: str) -> Any:
    """One input slot: a trace variable, ``"None"``, a quoted string, a number, a list, a dict or an
    index map (TVM's object graph as JSON text, judged by ``refuse_effects`` before TVM reads it) - see
    TranslateInputRVs in src/s_tir/schedule/trace.cc."""
    if isinstance(raw, bool) or isinstance(raw, (int, float)) or raw is None:
        return raw
    if isinstance(raw, list):
        return [_json_input(r, defined, what) for r in raw]
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    if not isinstance(raw, str) or not raw:
        raise TraceParseError(f"bad input {raw!r}")
    if raw.startswith("{") and raw.endswith("}"):
        return load_index_map(raw, defined, what)
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return raw[1:-1]
    if raw == "None":
        return None
    if raw in defined:
        return Ref(raw)
    raise TraceParseError(f"`{raw}` is not defined earlier in the trace")


_BUFFER_TYPE = {0: "read", 1: "write"}


def _python_form(primitive: str, kwargs: dict, defined: set[str]) -> None:
    """Where TVM's instruction and its Python API spell an argument differently."""
    if primitive in {"transform_layout", "reindex"}:
        kind = _BUFFER_TYPE.get(kwargs.pop("buffer_index_type"))
        if kind is None:
            raise TraceParseError("buffer_index_type must be 0 (read) or 1 (write)")
        kwargs["buffer"] = (kind, kwargs.pop("buffer_index"))
    if primitive == "transform_layout":
        pad = kwargs.get("pad_value")
        if isinstance(pad, str):
            kwargs["pad_value"] = load_index_map(pad, defined, "pad value")
    if primitive == "transform_block_layout" and isinstance(kwargs.get("index_map"), str):
        kwargs["index_map"] = load_index_map(kwargs["index_map"], defined, "index map")
    if primitive == "annotate_buffer_access":
        kind = _BUFFER_TYPE.get(kwargs["buf_type"])
        if kind is None:
            raise TraceParseError("the buffer type must be 0 (read) or 1 (write)")
        kwargs["buf_type"] = kind
        ranges = kwargs["gen_new_ranges"]
        if not isinstance(ranges, JsonIndexMap):
            raise TraceParseError("gen_new_ranges must be an index map")
        kwargs["gen_new_ranges"] = RangesLambda(ranges.index_map)
    if primitive in {"cache_read", "cache_write"} and kwargs.get("consumer_blocks") == []:
        kwargs.pop("consumer_blocks")  # TVM's Python API: None means every consumer


def _call_text(call: TraceCall) -> str:
    """The call as TVM's printer writes it: ``l4, l5 = sch.split(loop=l1, factors=[None, 8], ...)``."""
    parts = [_value_text(a) for a in call.args] + [f"{k}={_value_text(v)}" for k, v in call.kwargs.items()]
    head = ", ".join(call.targets)
    if len(call.targets) == 1 and call.primitive in LIST_RESULTS:
        head += ","
    return (f"{head} = " if head else "") + f"sch.{call.primitive}({', '.join(parts)})"


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_value_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def printed_trace(trace: Trace) -> str:
    """TVM's printed trace; where its printer fails (decompose_padding in 0.27 prints
    ``Trace(<address>)``), the same text written from the trace's JSON."""
    from mlc_lab.tvm.schedule import to_plain

    try:
        trace.as_python(remove_postproc=False)
    except Exception:  # noqa: BLE001  (TVM's printer raises TypeError on some instructions)
        return trace_text_from_json(to_plain(trace.as_json(remove_postproc=False)))
    return str(trace)


def trace_text_from_json(data: Any) -> str:
    """A printed trace written from the JSON (for traces TVM's own printer cannot print)."""
    lines = ["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"]
    lines += [f"  {call.text}" for call in calls_from_json(data)] or ["  pass"]
    return "\n".join(lines)


# --- hand-in form ------------------------------------------------------------------------------

SUBMISSION_HEADER = "from tvm import s_tir\n\n\ndef apply_trace(sch: s_tir.Schedule) -> None:\n"


def apply_trace_source(trace: Trace) -> str:
    """The schedule as the function a course asks students to hand in: TVM's own printed trace
    (``def apply_trace(sch: s_tir.Schedule) -> None:``) with its import made real and four-space
    indentation, so the file runs as it is on ``tvm.s_tir.Schedule(prim_func)`` and reads back
    here through the whitelist parser."""
    from mlc_lab.tvm.schedule import to_plain

    try:
        body = [str(stmt) for stmt in trace.as_python(remove_postproc=False)]
    except Exception:  # noqa: BLE001  (TVM 0.27's printer fails on decompose_padding)
        body = [call.text for call in calls_from_json(to_plain(trace.as_json(remove_postproc=False)))]
    body = _bool_annotations(trace, body)
    lines = [f"    {_typed_map_literals(ln)}" for stmt in body for ln in stmt.splitlines()] or ["    pass"]
    header = SUBMISSION_HEADER
    if any(re.search(r"\bT\.\w", ln) for ln in lines):  # typed literals (T.int64(8)) need their module
        header = "from tvm.script import tirx as T\n" + header
    return header + "\n".join(lines) + "\n"


def _bool_annotations(trace: Trace, body: list[str]) -> list[str]:
    """An annotation value True or False written as such again (TVM prints it as 1 or 0, which
    replays to another annotation); the annotate statements pair with the Annotate instructions in
    order."""
    values = [inst.inputs[1] for inst in trace.insts if inst.kind.name == "Annotate" and len(inst.inputs) > 1]
    if not any(isinstance(v, bool) for v in values):
        return body
    out, n = [], 0
    for stmt in body:
        if "sch.annotate(" in stmt and n < len(values):
            value = values[n]
            n += 1
            if isinstance(value, bool):
                stmt = re.sub(r"ann_val=[01]\)$", f"ann_val={value})", stmt.rstrip())
        out.append(stmt)
    return out


def _typed_map_literals(line: str) -> str:
    """An index map's bare integer result (TVM prints ``T.int32(0)`` as ``0``) typed again: TVM's
    own ``IndexMap.from_func`` refuses a plain int, so the printed trace would not replay on TVM."""
    match = re.search(r"index_map=lambda [^:]*: \(", line)
    if match is None:
        return line
    start = match.end()
    depth, items, item_start, end = 0, [], start, len(line)
    for n in range(start, len(line)):
        c = line[n]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                items.append((item_start, n))
                end = n
                break
            depth -= 1
        elif c == "," and depth == 0:
            items.append((item_start, n))
            item_start = n + 1
    out, last = [], 0
    for a, b in items:
        text = line[a:b]
        if re.fullmatch(r"\s*-?\d+\s*", text):
            out.append(line[last:a] + text.replace(text.strip(), f"T.int32({text.strip()})"))
            last = b
    return "".join(out) + line[last:] if out and end < len(line) else line


_TRACE_FILE_SUFFIXES = (".py", ".json", ".jsonl", ".txt", ".trace")


def read_trace_source(trace: Any) -> tuple[Any, str | None]:
    """A trace given as a path (``pathlib.Path``, or a one-line string naming a file) as its text,
    with the file's name for messages; anything else unchanged. The file is read, never run."""
    import os
    from pathlib import Path

    if isinstance(trace, Path):
        path = str(trace)
    elif (
        isinstance(trace, str)
        and "\n" not in trace
        and len(trace) < 4096
        and (os.path.isfile(trace) or trace.strip().endswith(_TRACE_FILE_SUFFIXES))
    ):
        path = trace.strip()
    else:
        return trace, None
    if not os.path.isfile(path):
        raise TraceParseError(f"{path}: no such file")
    with open(path, "rb") as fh:
        raw = fh.read(trace_limits.MAX_TRACE_BYTES + 1)
    if len(raw) > trace_limits.MAX_TRACE_BYTES:
        raise TraceParseError(f"{path}: the file is over the limit of {trace_limits.MAX_TRACE_BYTES} bytes for a trace")
    return trace_limits.decode_text(raw, path), path
