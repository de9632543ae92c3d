"""Symbolic shapes: a program whose extents or buffer shapes name variables (``n = T.int32()``)
is analysed once those variables are given values (``shape_vars={"n": 128}``)."""

from __future__ import annotations

from dataclasses import replace

from mlc_lab.core.access.expr import evaluate
from mlc_lab.model.access.program import AccessProgram, Const, Leaf, Loop, Op, Seq, Var
from mlc_lab.errors import AccessAnalysisError


def bind_shapes(program: AccessProgram, shape_vars: dict | None) -> AccessProgram:
    """The program with every symbolic shape replaced by its value (itself when it has none)."""
    names = dict(program.shape_vars)
    given = dict(shape_vars or {})
    unknown = sorted(set(given) - set(names))
    if unknown:
        have = ", ".join(sorted(names)) or "none"
        raise AccessAnalysisError(
            f"shape_vars names {', '.join(unknown)}, which function {program.name} does not have "
            f"(its symbolic shapes: {have})"
        )
    if not names:
        return program
    missing = sorted(set(names) - set(given))
    if missing:
        example = ", ".join(f"{n!r}: 128" for n in missing)
        raise AccessAnalysisError(
            f"function {program.name} has symbolic shapes {', '.join(missing)}: give their values, "
            f"for example shape_vars={{{example}}}",
            shape_vars=missing,
        )
    values = {}
    for n, v in given.items():
        try:
            values[names[n].id] = int(v)
        except (TypeError, ValueError):
            raise AccessAnalysisError(f"shape_vars[{n!r}] must be an integer, not {v!r}") from None
    key = tuple(sorted(values.items()))
    cache = program.__dict__.setdefault("_bound", {})
    if key not in cache:
        if len(cache) > 8:
            cache.clear()
        cache[key] = _Binder(values).program(program)
    return cache[key]


class _Binder:
    def __init__(self, values: dict):
        self.values = values
        self.loops: dict[int, Loop] = {}

    def expr(self, e):
        if isinstance(e, Var) and e.id in self.values:
            return Const(self.values[e.id])
        if isinstance(e, Op):
            return Op(e.op, tuple(self.expr(a) for a in e.args))
        return e

    def int(self, e, what: str) -> int:
        if isinstance(e, int):
            return e
        v = evaluate(self.expr(e), {})
        try:
            return int(v)
        except (TypeError, ValueError):
            raise AccessAnalysisError(f"{what} is not an integer once the shapes are bound: {e}") from None

    def loop(self, lp: Loop) -> Loop:
        new = self.loops.get(lp.id)
        if new is None:
            new = replace(
                lp,
                min=self.int(lp.min, f"the start of loop {lp.name}"),
                extent=self.int(lp.extent, f"the extent of loop {lp.name}"),
                body=None,
            )
            self.loops[lp.id] = new
            if lp.body is not None:
                new.body = self.node(lp.body)
        return new

    def node(self, n):
        if isinstance(n, Loop):
            return self.loop(n)
        if isinstance(n, Seq):
            return Seq([self.node(c) for c in n.children])
        return Leaf(
            [
                replace(
                    a,
                    indices=tuple(self.expr(i) for i in a.indices),
                    guards=tuple(self.expr(g) for g in a.guards),
                    inner=tuple(self.loop(lp) for lp in a.inner),
                )
                for a in n.accesses
            ]
        )

    def program(self, p: AccessProgram) -> AccessProgram:
        root = self.node(p.root)
        loops = [self.loop(lp) for lp in p.loops]
        buffers = {
            name: replace(b, shape=tuple(self.int(s, f"dimension {d} of buffer {name}") for d, s in enumerate(b.shape)))
            for name, b in p.buffers.items()
        }
        return AccessProgram(p.name, buffers, root, loops, {})
