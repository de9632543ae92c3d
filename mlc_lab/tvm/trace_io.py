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
from typing import Any

import tvm
from tvm import s_tir
from tvm.s_tir.schedule import Trace

from mlc_lab.errors import TraceParseError
from mlc_lab.tvm.schedule import ALIASES, PRIMITIVES, Ref

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


def parse_trace_text(text: str) -> list[TraceCall]:
    """Parse TVM's printed trace (or plain schedule statements) into calls, refusing anything else."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise TraceParseError(f"not valid Python: {exc.msg}", line=exc.lineno) from None
    lines = text.splitlines()
    body = list(tree.body)
    sch_name = "sch"
    statements: list[ast.stmt] = []
    for node in body:
        if _is_docstring(node):
            continue
        if isinstance(node, ast.ImportFrom) and (node.module, node.names[0].name) in {
            (m, n) for m, n in _ALLOWED_IMPORTS
        } and len(node.names) == 1:
            continue
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
    return calls


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
            raise TraceParseError(
                f"only schedule calls are allowed in a trace, not a {type(stmt).__name__} statement", line=line
            )
        call = self.call(value, line)
        call.targets = targets
        call.text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
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
            raise TraceParseError(
                f"only methods of `{self.sch}` may be called in a trace, not `{_dotted(func)}`", line=line
            )
        name = ALIASES.get(func.attr, func.attr)
        if name not in PRIMITIVES:
            raise TraceParseError(f"`{func.attr}` is not a schedule primitive", line=line)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise TraceParseError("`*args` is not allowed in a trace", line=line)
            args.append(self.value(a, line))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise TraceParseError("`**kwargs` is not allowed in a trace", line=line)
            kwargs[kw.arg] = self.value(kw.value, line)
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
            return IndexLambda.from_ast(node, line)
        if isinstance(node, ast.Call) and _dotted(node.func) in {"T.int32", "T.int64"} and len(node.args) == 1:
            inner = self.value(node.args[0], line)
            if isinstance(inner, int):
                return inner
        if isinstance(node, ast.Call) and _dotted(node.func) in {"T.index_map", "tvm.tirx.IndexMap.from_func"}:
            if len(node.args) == 1 and isinstance(node.args[0], ast.Lambda):
                return IndexLambda.from_ast(node.args[0], line)
        raise TraceParseError(
            f"`{ast.unparse(node)}` is not allowed in a trace: use literals or names the trace defined", line=line
        )


_ARITH = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__"}


class IndexLambda:
    """``lambda i, j: (j // 32, i, j % 32)`` as data; called by TVM with its variables."""

    def __init__(self, params: list[str], body: ast.expr, source: str, line: int):
        self.params = params
        self.body = body
        self.source = source
        self.line = line
        # TVM reads the number of indices from the callable's signature.
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
        )

    @classmethod
    def from_ast(cls, node: ast.Lambda, line: int) -> "IndexLambda":
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise TraceParseError("an index map lambda takes plain arguments only", line=line)
        params = [p.arg for p in a.args]
        cls._check(node.body, set(params), line)
        return cls(params, node.body, ast.unparse(node), line)

    @classmethod
    def _check(cls, node: ast.expr, params: set[str], line: int) -> None:
        if isinstance(node, (ast.Tuple, ast.List)):
            for e in node.elts:
                cls._check(e, params, line)
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            cls._check(node.left, params, line)
            cls._check(node.right, params, line)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            cls._check(node.operand, params, line)
        elif isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            pass
        elif isinstance(node, ast.Name) and node.id in params:
            pass
        else:
            raise TraceParseError(
                f"`{ast.unparse(node)}` is not allowed in an index map: use + - * // % on its arguments", line=line
            )

    def __call__(self, *args: Any) -> Any:
        env = dict(zip(self.params, args))
        return self._eval(self.body, env)

    def _eval(self, node: ast.expr, env: dict) -> Any:
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._eval(e, env) for e in node.elts)
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            return getattr(left, _ARITH[type(node.op)])(right) if not isinstance(left, int) else _int_op(
                node.op, left, right
            )
        if isinstance(node, ast.UnaryOp):
            return -self._eval(node.operand, env)
        if isinstance(node, ast.Constant):
            return node.value
        return env[node.id]  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return self.source


def _int_op(op: ast.operator, left: int, right: Any) -> Any:
    # An int on the left: let the right operand (maybe a TVM expression) handle the reflected op.
    name = {ast.Add: "__radd__", ast.Sub: "__rsub__", ast.Mult: "__rmul__", ast.FloorDiv: "__rfloordiv__",
            ast.Mod: "__rmod__"}[type(op)]
    if isinstance(right, int):
        return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right,
                ast.FloorDiv: left // right if right else 0, ast.Mod: left % right if right else 0}[type(op)]
    return getattr(right, name)(left)


# --- JSON -------------------------------------------------------------------------------------


def parse_trace_json(data: Any) -> list:
    """Check the shape of a trace in TVM's JSON form: ``[instructions, decisions]``."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise TraceParseError(f"not valid JSON: {exc.msg}", line=exc.lineno) from None
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


def json_to_text(data: list, mod: tvm.IRModule) -> str:
    """Replay a JSON trace with TVM's own JSON reader (data, never code) and print it as text."""
    sch = s_tir.Schedule(mod, debug_mask="none")
    try:
        Trace.apply_json_to_schedule(data, sch)
    except Exception as exc:  # noqa: BLE001  (TVM raises many kinds; the message is what matters)
        raise TraceParseError(f"the JSON trace does not replay on this program: {str(exc).strip().splitlines()[-1]}")
    return str(sch.trace)


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("[", "{")
