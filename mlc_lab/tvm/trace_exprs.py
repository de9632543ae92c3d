"""The expressions a trace carries, read as data: index-map lambdas of a printed trace (an ``ast``
whitelist that builds TVM expressions, never Python's ``eval``) and index maps of a JSON trace (TVM's
object graph, judged before TVM reads it). Both are judged by ``trace_effects.refuse_effects``: when
read, and again on what TVM is handed at replay.
"""

from __future__ import annotations

import ast
import inspect
import json
import operator
from typing import Any, Callable

from mlc_lab.errors import TraceParseError
from mlc_lab.tvm import trace_effects

# Typed literals as TVM prints them inside index maps: ``T.int64(8)``, ``T.float32(0.0)``.
_DTYPES = "int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 bfloat16 bool".split()
_CASTS = {f"T.{t}" for t in _DTYPES}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
# ``T.<name>(...)`` as TVM's printer writes an expression: the name of the tvm.tirx function that builds it.
_BUILDERS = {
    "Select": "Select",
    "if_then_else": "if_then_else",
    "likely": "likely",
    "min": "min",
    "max": "max",
    "Min": "Min",
    "Max": "Max",
    "Div": "truncdiv",
    "Mod": "truncmod",
    "truncdiv": "truncdiv",
    "truncmod": "truncmod",
    "floordiv": "floordiv",
    "floormod": "floormod",
    "FloorDiv": "floordiv",
    "FloorMod": "floormod",
    "Not": "Not",
    "And": "And",
    "Or": "Or",
}
# Calls an expression can spell out; built only to be judged (and refused) by ``refuse_effects``.
_CALLS = {
    "call_extern",
    "call_pure_extern",
    "call_packed",
    "call_cpacked",
    "call_packed_lowered",
    "call_cpacked_lowered",
    "call_intrin",
    "call_llvm_intrin",
    "call_llvm_pure_intrin",
}
_ALLOWED_TEXT = (
    "use arithmetic (+ - * // % & | ^ << >> ~), comparisons, and/or/not on its arguments, literals, typed "
    "literals such as T.int64(8), T.Cast, T.Select, T.if_then_else, T.min, T.max, T.floordiv and the like, "
    "and values the trace defined"
)


class IndexLambda:
    """``lambda i, j: (j // 32, i, j % 32)`` as data; called by TVM with its variables.

    Allowed inside (checked on the ``ast``, before anything is built): the lambda's arguments, names the
    trace defined before (sampled values such as ``v27``, bound when the step runs), literals and typed
    literals, arithmetic, comparisons and logic, and ``T.<name>(...)`` expressions as TVM prints them.
    What it builds is judged by ``trace_effects.refuse_effects`` (``expressions()`` when the trace is
    read, the result of each call when TVM calls it).
    """

    what = "index map"  # the slot it fills (``pad value``), set by ``trace_effects.check_calls``

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
        _Grammar(set(params), set(defined) - set(params), free, line).check(node.body)
        return cls(params, node.body, ast.unparse(node), line, tuple(dict.fromkeys(free)))

    def bind(self, resolve: Callable[[str], Any]) -> "IndexLambda":
        """A copy whose trace variables are the replay's values (``resolve(name)``)."""
        if not self.free:
            return self
        copy = IndexLambda(
            self.params, self.body, self.source, self.line, self.free, {name: resolve(name) for name in self.free}
        )
        copy.what = self.what
        return copy

    def __call__(self, *args: Any) -> Any:
        env = dict(self.bound)
        env.update(zip(self.params, args))
        dtype = _index_dtype(args)
        result = _Builder(self.line).build(self.body, env)
        if isinstance(result, tuple):
            # A bare literal in the result (dlight's ``(0, i0, i1)``) is an index of the maps's type.
            result = tuple(_as_expr(v, dtype) for v in result)
        else:
            result = _as_expr(result, dtype)
        trace_effects.refuse_effects(result, what=self.what, where=self.line)
        return result

    def expressions(self) -> Any:
        """What the lambda builds on placeholder variables (``int32`` arguments and trace values), for
        ``refuse_effects`` to judge when the trace is read; None when TVM cannot build it so (the call
        at replay, on the real variables, is judged then)."""
        from tvm import tirx

        env = {name: tirx.Var(name, "int32") for name in (*self.params, *self.free)}
        try:
            return _Builder(self.line).build(self.body, env)
        except TraceParseError:
            raise
        except Exception:  # noqa: BLE001  (TVM refused to build it on placeholders: judged at replay)
            return None

    def __repr__(self) -> str:
        return self.source


def literal_expression(node: ast.expr, line: int, defined: set[str] | frozenset[str] = frozenset()) -> Any:
    """An expression written where a trace holds a literal (an annotation value, a split factor), built
    (the trace's values as placeholder variables) for ``refuse_effects`` to name what it holds; None
    when it is not an expression of an index map's grammar (the caller refuses it as it stands)."""
    from tvm import tirx

    free: list[str] = []
    try:
        _Grammar(set(), set(defined), free, line).check(node)
        return _Builder(line).build(node, {name: tirx.Var(name, "int32") for name in free})
    except _NamedNode:
        raise
    except TraceParseError:
        return None
    except Exception:  # noqa: BLE001  (TVM refused to build it: nothing built, nothing to judge)
        return None


class _NamedNode(TraceParseError):
    """A refusal that names what the expression holds (a buffer it reads, a string in a computation)."""


def _string_in_computation(node: ast.expr, text: str, line: int) -> _NamedNode:
    return _NamedNode(
        f"`{ast.unparse(node)[:80]}` holds the string {json.dumps(text[:40])} inside a computation, "
        "where no string belongs",
        line=line,
    )


class _Grammar:
    """The ``ast`` whitelist of an index-map lambda's body (names, literals, operators, ``T.`` calls)."""

    def __init__(self, params: set[str], defined: set[str], free: list[str], line: int):
        self.params, self.defined, self.free, self.line = params, defined, free, line

    def check(self, node: ast.expr, bound: frozenset[str] = frozenset()) -> None:
        stack: list[tuple[ast.expr, frozenset[str]]] = [(node, bound)]
        while stack:
            item, names = stack.pop()
            stack.extend(self.children(item, names))

    def children(self, node: ast.expr, names: frozenset[str]) -> list[tuple[ast.expr, frozenset[str]]]:
        if isinstance(node, (ast.Tuple, ast.List)):
            return [(e, names) for e in node.elts]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return [(node.left, names), (node.right, names)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not, ast.Invert)):
            return [(node.operand, names)]
        if isinstance(node, ast.BoolOp):
            return [(v, names) for v in node.values]
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return [(node.left, names), (node.comparators[0], names)]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            raise _string_in_computation(node, node.value, self.line)
        if isinstance(node, ast.Name):
            if node.id in self.params or node.id in names:
                return []
            if node.id in self.defined:
                self.free.append(node.id)
                return []
        if isinstance(node, ast.Subscript):
            raise _NamedNode(
                f"`{ast.unparse(node)[:80]}` reads buffer {ast.unparse(node.value)[:40]}, which the index map "
                "does not own",
                line=self.line,
            )
        if isinstance(node, ast.Call) and _is_cast(node):
            return []
        if isinstance(node, ast.Call) and _t_name(node) is not None:
            return self.call(node, names)
        raise TraceParseError(
            f"`{ast.unparse(node)[:80]}` is not allowed in an index map: {_ALLOWED_TEXT}", line=self.line
        )

    def call(self, node: ast.Call, names: frozenset[str]) -> list[tuple[ast.expr, frozenset[str]]]:
        name = _t_name(node)
        assert name is not None
        if name == "Let":
            where = _let_bindings(node, self.line)
            inner = names | {k for k, _ in where}
            return [(node.args[0], inner)] + [(v, names) for _, v in where]
        if node.keywords:
            raise TraceParseError(f"`T.{name}` takes no keyword arguments in an index map", line=self.line)
        if name not in _BUILDERS and name != "Cast" and name not in _CALLS and not _is_operator(name):
            raise TraceParseError(f"`T.{name}` is not allowed in an index map: {_ALLOWED_TEXT}", line=self.line)
        strings = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if name in _BUILDERS and strings or name == "Cast" and strings[1:]:
            raise _string_in_computation(node, strings[-1].value, self.line)
        # a string is an argument of a call (a Cast's type, the name a call calls), judged once built
        return [(a, names) for a in node.args if a not in strings]


class _Builder:
    """Builds the TVM expression of a checked lambda body for given variables (``env``)."""

    def __init__(self, line: int):
        self.line = line

    def build(self, node: ast.expr, env: dict) -> Any:
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.build(e, env) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return _binary(node.op, self.build(node.left, env), self.build(node.right, env), self.line)
        if isinstance(node, ast.UnaryOp):
            return _unary(node.op, self.build(node.operand, env))
        if isinstance(node, ast.BoolOp):
            return _logic(node.op, [self.build(v, env) for v in node.values])
        if isinstance(node, ast.Compare):
            return _COMPARE[type(node.ops[0])](self.build(node.left, env), self.build(node.comparators[0], env))
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Call):
            return _typed_literal(node) if _is_cast(node) else self.call(node, env)
        if node.id not in env:  # type: ignore[attr-defined]
            raise TraceParseError(f"`{node.id}` has no value here", line=self.line)  # type: ignore[attr-defined]
        return env[node.id]  # type: ignore[attr-defined]

    def call(self, node: ast.Call, env: dict) -> Any:
        import tvm
        from tvm import tirx

        name = _t_name(node)
        if name == "Let":
            env = dict(env)
            lets = []
            for key, value_node in _let_bindings(node, self.line):
                value = _as_expr(self.build(value_node, env), "int32")
                var = env[key] = tirx.Var(key, value.ty if hasattr(value, "ty") else "int32")
                lets.append((var, value))
            body = _as_expr(self.build(node.args[0], env), "int32")
            for var, value in reversed(lets):
                body = tirx.Let(var, value, body)
            return body
        args = [a.value if isinstance(a, ast.Constant) else self.build(a, env) for a in node.args]
        if name == "Cast":
            return tirx.Cast(str(args[0]), args[1])
        if name in _BUILDERS:
            return getattr(tirx, _BUILDERS[name])(*args)
        if name in _CALLS:
            return getattr(tirx, name)(*args)
        op = _operator_name(name)
        strings = [tvm.ir.StringImm(a) if isinstance(a, str) else a for a in args]
        return tirx.call_intrin("int32", op, *strings)


def _binary(op: ast.operator, left: Any, right: Any, line: int) -> Any:
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        if isinstance(op, (ast.FloorDiv, ast.Mod)) and right == 0:
            raise TraceParseError("division by zero in an index map", line=line)
        if isinstance(op, (ast.LShift, ast.RShift)) and not 0 <= right <= 64:
            raise TraceParseError("a shift in an index map is by 0 to 64 bits", line=line)
    return _BINARY[type(op)](left, right)


def _unary(op: ast.unaryop, value: Any) -> Any:
    from tvm import tirx

    if isinstance(op, ast.USub):
        return -value
    if isinstance(op, ast.Invert):
        return ~value if isinstance(value, int) else tirx.bitwise_not(value)
    return (not value) if isinstance(value, (bool, int, float)) else tirx.Not(value)


def _logic(op: ast.boolop, values: list) -> Any:
    from tvm import tirx

    result = values[0]
    for value in values[1:]:
        if all(isinstance(v, (bool, int, float)) for v in (result, value)):
            result = (result and value) if isinstance(op, ast.And) else (result or value)
        else:
            result = tirx.And(result, value) if isinstance(op, ast.And) else tirx.Or(result, value)
    return result


def _let_bindings(node: ast.Call, line: int) -> list[tuple[str, ast.expr]]:
    """``T.Let(body, where={t: value})`` as TVM prints a ``Let``: its bindings."""
    where = node.keywords[0].value if len(node.keywords) == 1 and node.keywords[0].arg == "where" else None
    if len(node.args) != 1 or not isinstance(where, ast.Dict) or not all(isinstance(k, ast.Name) for k in where.keys):
        raise TraceParseError("`T.Let` in an index map is written T.Let(body, where={name: value})", line=line)
    return [(k.id, v) for k, v in zip(where.keys, where.values)]  # type: ignore[union-attr]


def _t_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "T":
        return func.attr
    return None


def _operator_name(name: str) -> str:
    for prefix in ("tirx.", "prim."):
        if prefix + name in trace_effects.op_names():
            return prefix + name
    return "tirx." + name


def _is_operator(name: str) -> bool:
    """``T.tvm_storage_sync``, ``T.exp``: a TVM operator by its printed name (judged once built)."""
    return any(prefix + name in trace_effects.op_names() for prefix in ("tirx.", "prim."))


def _is_cast(node: ast.expr) -> bool:
    if not (isinstance(node, ast.Call) and dotted(node.func) in _CASTS and len(node.args) == 1 and not node.keywords):
        return False
    arg = node.args[0]
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        arg = arg.operand
    return isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float, bool))


def dotted(node: ast.AST) -> str:
    """`T.int64` for the attribute chain T.int64 (a name alone is itself; anything else is "?")."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return "?"


def typed_literal(node: ast.Call) -> Any:
    """``T.int64(8)``, ``T.float32(0.0)``, ``T.bool(True)`` as TVM's literal (``is_cast`` first)."""
    return _typed_literal(node)


def is_cast(node: ast.expr) -> bool:
    return _is_cast(node)


def _typed_literal(node: ast.Call) -> Any:
    from tvm import tirx

    arg = node.args[0]
    negative = isinstance(arg, ast.UnaryOp)
    value = (arg.operand if negative else arg).value  # type: ignore[union-attr]
    value = -value if negative else value
    dtype = dotted(node.func)[2:]
    if dtype == "bool":
        return tirx.IntImm("bool", int(bool(value)))
    if dtype.startswith(("float", "bfloat")):
        return tirx.FloatImm(dtype, float(value))
    return tirx.IntImm(dtype, int(value))


def _index_dtype(args: tuple) -> str:
    for a in args:
        ty = getattr(a, "ty", None)
        dtype = getattr(ty, "dtype", None)
        if dtype is not None:
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


# --- JSON -------------------------------------------------------------------------------------


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

    def expressions(self) -> Any:
        return self.index_map

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
        bound = tirx.IndexMap(initial, list(final), None)
        trace_effects.refuse_effects(bound, what="index map")
        return bound

    def expressions(self) -> Any:
        return self.index_map

    def __repr__(self) -> str:
        return _lambda_text(self.index_map)


def load_index_map(text: str, defined: set[str], what: str = "index map") -> JsonIndexMap:
    """An index map of a JSON trace (TVM's object graph as text): judged by ``refuse_effects`` before
    TVM reads it and again on what TVM built; its free variables must be values the trace defined."""
    import tvm
    from tvm import tirx

    trace_effects.refuse_effects(trace_effects.ObjectGraph(text), what=what)
    try:
        obj = tvm.ir.load_json(text)
    except Exception as exc:  # noqa: BLE001  (TVM's JSON reader: any failure means a bad index map)
        raise TraceParseError(f"the {what} in the JSON cannot be read: {_last_line(exc)}") from None
    trace_effects.refuse_effects(obj, what=what)
    if not isinstance(obj, tirx.IndexMap):
        raise TraceParseError(f"expected an index map as the {what}, found a {type(obj).__name__}")
    free = tuple(v.name for v in _free_vars(obj))
    unknown = [name for name in free if name not in defined]
    if unknown:
        raise TraceParseError(f"the {what} uses {', '.join(unknown)}, which the trace does not define")
    return JsonIndexMap(obj, free)


def _last_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[-1] if lines else type(exc).__name__


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
