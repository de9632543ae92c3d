"""Index expressions as numbers: numeric evaluation over numpy arrays and affine decomposition.

Affine decomposition writes an index as ``const + sum(coef * digit)`` where a *digit* is
``floormod(floordiv(v - min, place), size)`` of one loop variable ``v``: splits and fuses produce
exactly these, so most indices TVM writes decompose, and a digit that no index uses can be
collapsed instead of enumerated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlc_lab.model.access.program import Const, Op, Opaque, Var
from mlc_lab.errors import AccessAnalysisError

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "floordiv": np.floor_divide,
    "floormod": np.mod,
    "min": np.minimum,
    "max": np.maximum,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.logical_and,
    "or": np.logical_or,
}


# float functions an index may use (a resize's source pixel); numpy keeps the argument's type
_FLOAT_UNARY = {
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "round": np.rint,
    "nearbyint": np.rint,
    "fabs": np.abs,
}


def evaluate(e, env: dict):
    """Value of ``e`` with variables from ``env`` (id -> int or numpy array, broadcasting)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        try:
            return env[e.id]
        except KeyError:
            raise AccessAnalysisError(f"variable {e.name} has no value here") from None
    if isinstance(e, Op):
        fn = BINARY.get(e.op)
        if fn is not None:
            return fn(evaluate(e.args[0], env), evaluate(e.args[1], env))
        if e.op == "not":
            return np.logical_not(evaluate(e.args[0], env))
        if e.op == "select":
            c, a, b = (evaluate(x, env) for x in e.args)
            return np.where(c, a, b)
        if e.op == "div":
            a, b = evaluate(e.args[0], env), evaluate(e.args[1], env)
            return np.trunc(np.true_divide(a, b)).astype(np.int64)
        if e.op == "mod":
            return np.fmod(evaluate(e.args[0], env), evaluate(e.args[1], env))
        if e.op.startswith("cast:"):  # to a float type (rounds) or to int64 (truncates)
            x = np.asarray(evaluate(e.args[0], env))
            return np.trunc(x).astype(np.int64) if e.op == "cast:int64" else x.astype(e.op[5:])
        if e.op == "fdiv":
            return np.true_divide(evaluate(e.args[0], env), evaluate(e.args[1], env))
        unary = _FLOAT_UNARY.get(e.op)
        if unary is not None:
            return unary(evaluate(e.args[0], env))
    if isinstance(e, Opaque):
        raise AccessAnalysisError(f"an index or condition uses {e.text}, which the analysis cannot evaluate")
    raise AccessAnalysisError(f"cannot evaluate the expression {e}")


# --- affine decomposition -------------------------------------------------------------------------


class NonAffine(Exception):
    """The expression is not a sum of digits (the numeric path takes over)."""


@dataclass(frozen=True)
class Digit:
    loop: int  # id of the iterating loop
    place: int
    size: int | None  # None: the top digit (no modulus)


class Affine:
    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms = terms or {}
        self.const = const

    def add(self, other: "Affine", sign: int = 1) -> "Affine":
        t = dict(self.terms)
        for d, c in other.terms.items():
            t[d] = t.get(d, 0) + sign * c
            if t[d] == 0:
                del t[d]
        return Affine(t, self.const + sign * other.const)

    def scale(self, c: int) -> "Affine":
        if c == 0:
            return Affine()
        return Affine({d: v * c for d, v in self.terms.items()}, self.const * c)


def digit_range(d: Digit, extents: dict) -> int:
    """Number of values a digit takes (``extents``: loop id -> extent)."""
    if d.size is not None:
        return d.size
    return -(-extents[d.loop] // d.place)


class Decomposer:
    """Affine forms of expressions; ``value_of(var_id)`` gives each variable's form."""

    def __init__(self, value_of, extents: dict):
        self.value_of = value_of
        self.extents = extents
        self.memo: dict[int, Affine] = {}

    def var(self, v: Var) -> Affine:
        r = self.memo.get(v.id)
        if r is None:
            r = self.memo[v.id] = self.value_of(v)
        return r

    def lin(self, e) -> Affine:
        if isinstance(e, Const):
            return Affine(const=e.value)
        if isinstance(e, Var):
            return self.var(e)
        if not isinstance(e, Op):
            raise NonAffine
        if e.op == "add":
            return self.lin(e.args[0]).add(self.lin(e.args[1]))
        if e.op == "sub":
            return self.lin(e.args[0]).add(self.lin(e.args[1]), -1)
        if e.op == "mul":
            a, b = self.lin(e.args[0]), self.lin(e.args[1])
            if not a.terms:
                return b.scale(a.const)
            if not b.terms:
                return a.scale(b.const)
            raise NonAffine
        if e.op in ("floordiv", "floormod"):
            b = self.lin(e.args[1])
            if b.terms or b.const <= 0:
                raise NonAffine
            q, r = self.divmod(self.lin(e.args[0]), b.const)
            return q if e.op == "floordiv" else r
        raise NonAffine

    def divmod(self, a: Affine, c: int):
        """a = c*q + r with 0 <= r < c, q and r sums of digits."""
        if c == 1:
            return a, Affine()
        q, r = Affine(const=a.const // c), Affine(const=a.const % c)
        for d, coef in a.terms.items():
            if coef < 0:
                raise NonAffine
            if coef % c == 0:
                q.terms[d] = q.terms.get(d, 0) + coef // c
            elif c % coef == 0:
                self._split_digit(d, coef, c // coef, q, r)
            else:
                r.terms[d] = r.terms.get(d, 0) + coef
        top = r.const + sum(coef * (digit_range(d, self.extents) - 1) for d, coef in r.terms.items())
        if top >= c:
            raise NonAffine
        return q, r

    def _split_digit(self, d: Digit, coef: int, f: int, q: Affine, r: Affine) -> None:
        if digit_range(d, self.extents) <= f:
            r.terms[d] = r.terms.get(d, 0) + coef
            return
        if d.size is not None and d.size % f:
            raise NonAffine
        hi = Digit(d.loop, d.place * f, None if d.size is None else d.size // f)
        lo = Digit(d.loop, d.place, f)
        q.terms[hi] = q.terms.get(hi, 0) + 1
        r.terms[lo] = r.terms.get(lo, 0) + coef
