"""Reading traces without running them.

A trace from a file, a notebook cell or a classmate is parsed by a whitelist: calls of schedule
primitives on ``sch`` whose arguments are literals, names the trace itself defined, or a
``lambda`` index map made of arithmetic. Nothing is ``exec``'d or ``eval``'d; anything else is
refused with its line number.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import tvm
from tvm.s_tir.schedule import Trace

from mlc_lab.errors import TraceParseError
from mlc_lab.model.steps import LIST_RESULTS
from mlc_lab.text import trace_limits
from mlc_lab.text.trace_tables import _BOOL_ATTRS, _KINDS, _NAME, _Kind, _statement_kind
from mlc_lab.text.trace_tables import Ref
from mlc_lab.tvm.primitives import ALIASES, PRIMITIVES

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
    trace_limits.check_calls(calls)
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
    if ann is not None and _dotted(ann) not in _SCHEDULE_ANNOTATIONS:
        raise TraceParseError("the schedule argument's annotation must be a Schedule", line=node.lineno)
    return args.args[0].arg


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


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
            raise TraceParseError(f"only schedule calls are allowed in a trace, not {_statement_kind(stmt)}", line=line)
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
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise TraceParseError("`*args` is not allowed in a trace", line=line)
            args.append(self.value(a, line))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise TraceParseError("`**kwargs` is not allowed in a trace", line=line)
            kwargs[renamed.get(kw.arg, kw.arg)] = self.value(kw.value, line)
        return TraceCall(line=line, primitive=name, args=args, kwargs=kwargs)

    def value(self, node: ast.expr, line: int) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.value(node.operand, line)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
        if isinstance(node, ast.List):
            return [self.value(e, line) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e, line) for e in node.elts)
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                    raise TraceParseError("dictionary keys in a trace must be strings", line=line)
                out[k.value] = self.value(v, line)
            return out
        if isinstance(node, ast.Name):
            if node.id in self.defined:
                return Ref(node.id)
            if node.id in {"True", "False", "None"}:
                return {"True": True, "False": False, "None": None}[node.id]
            raise TraceParseError(f"`{node.id}` is not defined earlier in the trace", line=line)
        if isinstance(node, ast.Lambda):
            return IndexLambda.from_ast(node, line, self.defined)
        if isinstance(node, ast.Call) and _dotted(node.func) in {"T.int32", "T.int64"} and len(node.args) == 1:
            inner = self.value(node.args[0], line)
            if isinstance(inner, int):
                return inner
        if _is_cast(node):
            return _typed_literal(node)  # type: ignore[arg-type]
        if isinstance(node, ast.Call) and _dotted(node.func) in {"T.index_map", "tvm.tirx.IndexMap.from_func"}:
            if len(node.args) == 1 and isinstance(node.args[0], ast.Lambda):
                return IndexLambda.from_ast(node.args[0], line, self.defined)
        raise TraceParseError(
            f"`{ast.unparse(node)}` is not allowed in a trace: use literals or names the trace defined", line=line
        )


_ARITH = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__"}
# Typed literals as TVM prints them inside index maps: ``T.int64(8)``, ``T.float32(0.0)``.
_CASTS = {
    f"T.{t}"
    for t in (
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "bool",
    )
}


class IndexLambda:
    """``lambda i, j: (j // 32, i, j % 32)`` as data; called by TVM with its variables.

    Allowed inside: the lambda's arguments, names the trace defined before (sampled values such as
    ``v27``, bound when the step runs), integer/float literals, typed literals (``T.int64(8)``), and
    ``+ - * // %`` and unary minus. Nothing else; nothing is evaluated by Python.
    """

    def __init__(
        self,
        params: list[str],
        body: ast.expr,
        source: str,
        line: int,
        free: tuple[str, ...] = (),
        bound: dict[str, Any] | None = None,
    ):
        self.params = params
        self.body = body
        self.source = source
        self.line = line
        self.free = free  # trace variables the body uses
        self.bound = dict(bound or {})
        # TVM reads the number of indices from the callable's signature.
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
        )

    @classmethod
    def from_ast(cls, node: ast.Lambda, line: int, defined: set[str] | frozenset[str] = frozenset()) -> "IndexLambda":
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise TraceParseError("an index map lambda takes plain arguments only", line=line)
        params = [p.arg for p in a.args]
        free: list[str] = []
        cls._check(node.body, set(params), set(defined) - set(params), free, line)
        return cls(params, node.body, ast.unparse(node), line, tuple(dict.fromkeys(free)))

    @classmethod
    def _check(cls, node: ast.expr, params: set[str], defined: set[str], free: list[str], line: int) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                cls._check(e, params, defined, free, line)
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            cls._check(node.left, params, defined, free, line)
            cls._check(node.right, params, defined, free, line)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            cls._check(node.operand, params, defined, free, line)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        ):
            pass
        elif _is_cast(node):
            pass
        elif isinstance(node, ast.Name) and node.id in params:
            pass
        elif isinstance(node, ast.Name) and node.id in defined:
            free.append(node.id)
        else:
            raise TraceParseError(
                f"`{ast.unparse(node)}` is not allowed in an index map: use + - * // % on its arguments, "
                "literals, typed literals such as T.int64(8) and values the trace defined",
                line=line,
            )

    def bind(self, resolve: Callable[[str], Any]) -> "IndexLambda":
        """A copy whose trace variables are the replay's values (``resolve(name)``)."""
        if not self.free:
            return self
        return IndexLambda(
            self.params, self.body, self.source, self.line, self.free, {name: resolve(name) for name in self.free}
        )

    def __call__(self, *args: Any) -> Any:
        env = dict(self.bound)
        env.update(zip(self.params, args))
        dtype = _index_dtype(args)
        result = self._eval(self.body, env)
        if isinstance(result, tuple):
            # A bare literal in the result (dlight's ``(0, i0, i1)``) is an index of the maps's type.
            return tuple(_as_expr(v, dtype) for v in result)
        return _as_expr(result, dtype)

    def _eval(self, node: ast.expr, env: dict) -> Any:
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._eval(e, env) for e in node.elts)
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            if isinstance(left, (int, float)):
                return _number_op(node.op, left, right)
            return getattr(left, _ARITH[type(node.op)])(right)
        if isinstance(node, ast.UnaryOp):
            return -self._eval(node.operand, env)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Call):  # a typed literal, checked by _is_cast
            return _typed_literal(node)
        if node.id not in env:  # type: ignore[attr-defined]
            raise TraceParseError(f"`{node.id}` has no value here", line=self.line)  # type: ignore[attr-defined]
        return env[node.id]  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return self.source


def _is_cast(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Call) and _dotted(node.func) in _CASTS and len(node.args) == 1 and not node.keywords):
        return False
    arg = node.args[0]
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        arg = arg.operand
    return isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float, bool))


def _typed_literal(node: ast.Call) -> Any:
    from tvm import tirx

    arg = node.args[0]
    negative = isinstance(arg, ast.UnaryOp)
    value = (arg.operand if negative else arg).value  # type: ignore[union-attr]
    value = -value if negative else value
    dtype = _dotted(node.func)[2:]
    if dtype == "bool":
        return tirx.IntImm("bool", int(bool(value)))
    if dtype.startswith(("float", "bfloat")):
        return tirx.FloatImm(dtype, float(value))
    return tirx.IntImm(dtype, int(value))


def _index_dtype(args: tuple) -> str:
    for a in args:
        dtype = getattr(a, "dtype", None)
        if isinstance(dtype, str) or dtype is not None:
            return str(dtype)
    return "int32"


def _as_expr(value: Any, dtype: str) -> Any:
    from tvm import tirx

    if isinstance(value, bool):
        return tirx.IntImm("bool", int(value))
    if isinstance(value, int):
        return tirx.IntImm(dtype, value)
    if isinstance(value, float):
        return tirx.FloatImm("float32", value)
    return value


def _number_op(op: ast.operator, left: Any, right: Any) -> Any:
    # A number on the left: plain arithmetic, or the right operand's (a TVM expression's) reflected op.
    if isinstance(right, (int, float)):
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and right == 0:
            raise TraceParseError("division by zero in an index map")
        return {
            ast.Add: lambda: left + right,
            ast.Sub: lambda: left - right,
            ast.Mult: lambda: left * right,
            ast.FloorDiv: lambda: left // right,
            ast.Mod: lambda: left % right,
        }[type(op)]()
    name = {
        ast.Add: "__radd__",
        ast.Sub: "__rsub__",
        ast.Mult: "__rmul__",
        ast.FloorDiv: "__rfloordiv__",
        ast.Mod: "__rmod__",
    }[type(op)]
    return getattr(right, name)(left)


class RangesLambda:
    """``annotate_buffer_access``'s ``gen_new_ranges`` read from a JSON trace: the flat index map
    ``(b0, e0, b1, e1, ...)`` TVM stores, given back as the ``[(b0, e0), ...]`` its Python API takes."""

    def __init__(self, index_map: Any):
        self.index_map = index_map
        self.__signature__ = inspect.Signature(
            [
                inspect.Parameter(f"v{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
                for i in range(len(index_map.initial_indices))
            ]
        )

    def __call__(self, *args: Any) -> list:
        flat = list(self.index_map.map_indices(list(args)))
        return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    def __repr__(self) -> str:
        return _lambda_text(self.index_map, ranges=True)


class JsonIndexMap:
    """An index map read from a JSON trace (TVM's object graph: data, not code), whose variables named
    like trace values (``v27``) are bound to the replay's values when the step runs."""

    def __init__(self, index_map: Any, free: tuple[str, ...]):
        self.index_map = index_map
        self.free = free

    def bind(self, resolve: Callable[[str], Any]) -> Any:
        if not self.free:
            return self.index_map
        from tvm import tirx

        initial = list(self.index_map.initial_indices)
        free = _free_vars(self.index_map)
        # Substitute the trace values by mapping them as if they were extra arguments of the map.
        widened = tirx.IndexMap(initial + free, list(self.index_map.final_indices), None)
        final = widened.map_indices(initial + [resolve(str(v.name)) for v in free])
        return tirx.IndexMap(initial, list(final), None)

    def __repr__(self) -> str:
        return _lambda_text(self.index_map)


def _free_vars(index_map: Any) -> list:
    """Variables of the map's result that are not its arguments (trace values such as ``v27``)."""
    from tvm.tirx.analysis import undefined_vars

    params = list(index_map.initial_indices)
    found: dict[str, Any] = {}
    for e in index_map.final_indices:
        for var in undefined_vars(e, params):
            found.setdefault(str(var.name), var)
    return list(found.values())


def _lambda_text(index_map: Any, ranges: bool = False) -> str:
    params = ", ".join(v.name for v in index_map.initial_indices)
    items = [str(e) for e in index_map.final_indices]
    if ranges:
        body = "[" + ", ".join(f"({items[i]}, {items[i + 1]})" for i in range(0, len(items), 2)) + "]"
    else:
        body = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return f"lambda {params}: {body}"


def bind_value(value: Any, resolve: Callable[[str], Any]) -> Any:
    """Index maps that use trace variables, with those variables' values from the replay."""
    if isinstance(value, (IndexLambda, JsonIndexMap)):
        return value.bind(resolve)
    return value


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
        spec = _KINDS.get(kind)
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
            if not _NAME.fullmatch(name):
                raise TraceParseError(f"{where}: bad output name {name!r}")
        targets = list(outputs)
        call = TraceCall(line=pos + 1, primitive=spec.primitive, args=args, kwargs=kwargs, targets=targets, where=where)
        call.text = _call_text(call)
        calls.append(call)
        defined.update(targets)
    trace_limits.check_calls(calls)
    return calls


def _json_arguments(spec: _Kind, inputs: list, attrs: list, defined: set[str]) -> tuple[list, dict]:
    if len(attrs) != len(spec.attrs):
        raise TraceParseError(f"expected {len(spec.attrs)} attribute(s), got {len(attrs)}")
    fixed = [p for p in spec.inputs if not p.startswith("*")]
    rest = spec.inputs[len(fixed) :]
    if len(inputs) < len(fixed) or (not rest and len(inputs) != len(fixed)):
        raise TraceParseError(f"expected {len(fixed)} input(s), got {len(inputs)}")
    args: list = []
    kwargs: dict = {}
    for pname, raw in zip(fixed, inputs):
        kwargs[pname] = _json_input(raw, defined)
    extra = [_json_input(raw, defined) for raw in inputs[len(fixed) :]]
    if rest == ("*",):
        args.extend(extra)
    elif rest:
        kwargs[rest[0][1:]] = extra
    for pname, raw in zip(spec.attrs, attrs):
        kwargs[pname] = bool(raw) if pname in _BOOL_ATTRS and isinstance(raw, int) else raw
    _python_form(spec.primitive, kwargs, defined)
    return args, kwargs


def _json_input(raw: Any, defined: set[str]) -> Any:
    """One input slot: a trace variable, ``"None"``, a quoted string, a number, a list, a dict or an
    index map (TVM's object graph as JSON text) - see TranslateInputRVs in src/s_tir/schedule/trace.cc."""
    if isinstance(raw, bool) or isinstance(raw, (int, float)) or raw is None:
        return raw
    if isinstance(raw, list):
        return [_json_input(r, defined) for r in raw]
    if isinstance(raw, dict):
        return {str(k): v for k, v in raw.items()}
    if not isinstance(raw, str) or not raw:
        raise TraceParseError(f"bad input {raw!r}")
    if raw.startswith("{") and raw.endswith("}"):
        return _index_map_from_json(raw, defined)
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return raw[1:-1]
    if raw == "None":
        return None
    if raw in defined:
        return Ref(raw)
    raise TraceParseError(f"`{raw}` is not defined earlier in the trace")


def _index_map_from_json(text: str, defined: set[str]) -> JsonIndexMap:
    from tvm import tirx

    trace_limits.check_text(text, json_text=True)  # TVM's reader recurses in C++
    try:
        obj = tvm.ir.load_json(text)
    except Exception as exc:  # noqa: BLE001  (TVM's JSON reader: any failure means a bad index map)
        raise TraceParseError(f"an index map in the JSON cannot be read: {_last_line(exc)}") from None
    if not isinstance(obj, tirx.IndexMap):
        raise TraceParseError(f"expected an index map, found a {type(obj).__name__}")
    free = tuple(v.name for v in _free_vars(obj))
    unknown = [name for name in free if name not in defined]
    if unknown:
        raise TraceParseError(f"the index map uses {', '.join(unknown)}, which the trace does not define")
    return JsonIndexMap(obj, free)


def _last_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1] if lines else type(exc).__name__


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
            kwargs["pad_value"] = _index_map_from_json(pad, defined)
    if primitive == "transform_block_layout" and isinstance(kwargs.get("index_map"), str):
        kwargs["index_map"] = _index_map_from_json(kwargs["index_map"], defined)
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
    lines = [f"    {ln}" for stmt in body for ln in stmt.splitlines()] or ["    pass"]
    return SUBMISSION_HEADER + "\n".join(lines) + "\n"


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
