"""Module-level constants of a lab file, read without running the file.

Lab files write their sizes once, above the TVMScript function (``M = N = K = 2048``), and use them
in its signature. ``from_source`` parses only the decorated function, so those names must be given
to it. They are read here from the file's syntax tree: literals, tuples of them, and arithmetic on
numbers already read; chained assignment, tuple unpacking, annotated and augmented assignment.
Nothing is evaluated by Python. A name bound any other way (an import, a call, a loop) is kept as
``Unreadable`` so that the loader can say which line it is and how to get past it.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unreadable:
    """A module-level name whose value cannot be read without running the file."""

    name: str
    line: int
    text: str  # the statement, as written
    why: str  # "it is imported", "`int(...)` is a call", ...


class _NotLiteral(Exception):
    pass


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_MAX_BITS = 4096  # no constant of a lab is larger; ``2 ** 10 ** 9`` is refused, not computed


def read_constants(tree: ast.Module, source: str, before_line: int | None = None) -> dict[str, Any]:
    """Every name the module's top level binds before ``before_line`` (1-based; all when None): its
    value when it is a readable constant, else an ``Unreadable`` saying why. Later bindings win."""
    lines = source.splitlines()
    env: dict[str, Any] = {}
    for stmt in tree.body:
        if before_line is not None and stmt.lineno >= before_line:
            break
        text = _statement_text(stmt, lines)
        if isinstance(stmt, ast.Assign):
            try:
                value = _value(stmt.value, env)
            except _NotLiteral as exc:
                for target in stmt.targets:
                    _mark(target, env, stmt.lineno, text, str(exc))
                continue
            for target in stmt.targets:
                _bind(target, value, env, stmt.lineno, text)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is None:
                continue  # ``M: int`` binds nothing
            try:
                _bind(stmt.target, _value(stmt.value, env), env, stmt.lineno, text)
            except _NotLiteral as exc:
                _mark(stmt.target, env, stmt.lineno, text, str(exc))
        elif isinstance(stmt, ast.AugAssign):
            target = stmt.target
            if not isinstance(target, ast.Name):
                continue
            try:
                old = _lookup(target.id, env)
                env[target.id] = _arith(stmt.op, old, _value(stmt.value, env))
            except _NotLiteral as exc:
                env[target.id] = Unreadable(target.id, stmt.lineno, text, str(exc))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                name = (alias.asname or alias.name).split(".")[0]
                env[name] = Unreadable(name, stmt.lineno, text, "it is imported")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[stmt.name] = Unreadable(stmt.name, stmt.lineno, text, f"it is a {_kind(stmt)}")
        else:  # if / for / while / with / try ...: whatever they bind depends on running them
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    env[node.id] = Unreadable(
                        node.id,
                        node.lineno,
                        _line(lines, node.lineno),
                        f"it is assigned inside a `{_keyword(stmt)}` statement",
                    )
    return env


def _statement_text(stmt: ast.stmt, lines: list[str]) -> str:
    return _line(lines, stmt.lineno)


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""


def _kind(stmt: ast.stmt) -> str:
    return "class" if isinstance(stmt, ast.ClassDef) else "function"


def _keyword(stmt: ast.stmt) -> str:
    return type(stmt).__name__.lower().replace("async", "async ")


def _bind(target: ast.expr, value: Any, env: dict, line: int, text: str) -> None:
    if isinstance(target, ast.Name):
        env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in target.elts):
            _mark(target, env, line, text, "starred unpacking is not read")
            return
        if not isinstance(value, tuple) or len(value) != len(target.elts):
            _mark(target, env, line, text, "the values do not unpack into the names")
            return
        for elt, item in zip(target.elts, value):
            _bind(elt, item, env, line, text)
    # ``x.attr = ...`` / ``x[0] = ...`` bind no module-level name


def _mark(target: ast.expr, env: dict, line: int, text: str, why: str) -> None:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            env[node.id] = Unreadable(node.id, line, text, why)


def _lookup(name: str, env: dict) -> Any:
    if name not in env:
        raise _NotLiteral(f"`{name}` is not defined above it")
    value = env[name]
    if isinstance(value, Unreadable):
        raise _NotLiteral(f"it uses `{name}`, which is not a constant (line {value.line})")
    return value


def _value(node: ast.expr, env: dict) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        return _lookup(node.id, env)
    if isinstance(node, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _NotLiteral("starred items are not read")
        return tuple(_value(e, env) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _value(node.operand, env)
        _number(operand)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _arith(node.op, _value(node.left, env), _value(node.right, env))
    raise _NotLiteral(f"`{ast.unparse(node)}` is not a literal or arithmetic on constants")


def _number(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _NotLiteral(f"arithmetic is read on numbers only, not on {value!r}")


def _arith(op: ast.operator, left: Any, right: Any) -> Any:
    if type(op) not in _OPS:
        raise _NotLiteral(f"the operator `{type(op).__name__}` is not read")
    _number(left)
    _number(right)
    if isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int):
        if right < 0 or (abs(left) > 1 and right * math.log2(abs(left)) > _MAX_BITS):
            raise _NotLiteral(f"{left} ** {right} is not a size")
    if (
        isinstance(op, ast.Mult)
        and isinstance(left, int)
        and isinstance(right, int)
        and (left.bit_length() + right.bit_length() > _MAX_BITS)
    ):
        raise _NotLiteral("the product is not a size")
    try:
        return _OPS[type(op)](left, right)
    except (ZeroDivisionError, OverflowError) as exc:
        raise _NotLiteral(f"the arithmetic fails: {exc}") from None
