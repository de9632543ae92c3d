"""One access over the digits that matter: a dense numpy grid, one axis per relevant digit.

Digits of the loops an access runs under that appear in no index and no guard neither change what
it touches nor, at 0, delay its first touch: they are collapsed into a multiplicity. A guard
``sum(coef * digit) == c`` with coefficients of one sign (the reduction-init condition "every
reduction loop at its first iteration") pins its digits to 0: the init is analysed on that
sub-space, never enumerated. Other guards and non-affine indices are evaluated numerically over
every iteration of the loops they use.
"""

from __future__ import annotations

import math
from typing import Any
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mlc_lab.core.access.budget import Budget
from mlc_lab.core.access.expr import BINARY, Affine, Decomposer, Digit, NonAffine, digit_range, evaluate
from mlc_lab.model.access.program import Op, Var, free_vars
from mlc_lab.core.access.space import Query
from mlc_lab.errors import AccessAnalysisError


@dataclass
class Grid:
    """An access enumerated over its relevant digits (one numpy axis per digit)."""

    acc: object
    n_reads: int
    n_writes: int
    shape: tuple
    dims: list  # per buffer dim: (coefs per axis, const) or an evaluated array
    ev_aff: tuple  # step of a point = const + sum(weight[axis] * digit)
    masks: list  # bool arrays (broadcastable to shape) that all hold where the access runs
    mult: int  # iterations collapsed into each point
    digits: list  # Digit per axis
    dtype: Any = np.int64  # a numpy integer type

    def outer(self, aff, order=None):
        """An affine function of the axes as an array, axes in ``order`` (memory order of a view)."""
        c, w = aff
        order = list(range(len(self.shape))) if order is None else order
        nd = len(order)
        out = self.dtype(c)
        for j, i in enumerate(order):
            if w[i]:
                out = out + axis(self.shape[i], j, nd, self.dtype) * self.dtype(w[i])
        return np.broadcast_to(out, tuple(self.shape[i] for i in order))

    def fill(self, aff, order, out) -> None:
        """Write an affine function of the axes (in ``order``, the memory order of ``out``) into
        ``out``. Built from the innermost axis outwards as flat blocks, so every numpy loop runs
        over long contiguous rows (a view whose inner axes hold 4 or 8 elements is slow to fill
        by broadcasting)."""
        c, w = aff
        dt = self.dtype
        block = np.full(1, c, dtype=dt)
        for j, i in enumerate(reversed(order)):
            vals = np.arange(self.shape[i], dtype=dt) * dt(w[i])
            if j == len(order) - 1 and out.flags.c_contiguous:
                np.add(vals[:, None], block[None, :], out=out.reshape(self.shape[i], -1))
                return
            block = (vals[:, None] + block[None, :]).reshape(-1)
        out[...] = block.reshape(out.shape)

    @property
    def ev(self):
        return self.outer(self.ev_aff)

    @cached_property
    def mask(self):
        """Where the access runs (None: everywhere): the factors combined (once: asked per dimension)."""
        if not self.masks:
            return None
        out = self.masks[0]
        for m in self.masks[1:]:
            out = out & m
        return out

    @property
    def affine(self) -> bool:
        return all(isinstance(d, tuple) for d in self.dims)


def axis(arr_len: int, ax: int, ndim: int, dtype=np.int64):
    shape = [1] * ndim
    shape[ax] = arr_len
    return np.arange(arr_len, dtype=dtype).reshape(shape)


class _Vars:
    """How the variables of one access read in a query: constants, digits, or enumerated."""

    def __init__(self, q: Query, acc, fixed: dict | None = None, inside: dict | None = None):
        self.q = q
        self.fixed = q.fixed if fixed is None else fixed
        self.inside = q.inside if inside is None else inside
        self.chain = set(q.chain(acc))

    def value_of(self, v: Var) -> Affine:
        if v.id < 0:
            raise AccessAnalysisError(f"the symbolic shape {v.name} has no value; give it in shape_vars")
        if v.id in self.fixed:
            return Affine(const=self.fixed[v.id])
        if v.id not in self.chain:
            raise AccessAnalysisError(f"variable {v.name} is not a loop around the access")
        t = self.q.resolve(v.id)
        if t.id in self.fixed:
            return Affine(const=self.fixed[t.id])
        return Affine({Digit(t.id, 1, None): 1}, int(t.min))

    def loops_of(self, e) -> set:
        """Ids of the iterating loops an expression depends on."""
        out = set()
        for vid in free_vars(e):
            if vid < 0 or vid in self.fixed or vid not in self.chain:
                continue
            t = self.q.resolve(vid)
            if t.id in self.inside:
                out.add(t.id)
        return out


def _pin(dec: Decomposer, guard) -> tuple | None:
    """(digits pinned to 0, dead) for a guard ``affine == c`` whose coefficients share a sign."""
    if not (isinstance(guard, Op) and guard.op == "eq"):
        return None
    try:
        aff = dec.lin(guard.args[0]).add(dec.lin(guard.args[1]), -1)
    except NonAffine:
        return None
    if not aff.terms:
        return (), aff.const != 0
    signs = {c > 0 for c in aff.terms.values()}
    if len(signs) != 1:
        return None
    const = aff.const if signs == {True} else -aff.const
    if const < 0:
        return None  # a non-trivial point of the range: left to the numeric path
    return tuple(aff.terms), const > 0


def _refine(lp, marks: set, ext: int):
    """Digits of one loop cut at ``marks``; None when they do not nest (then the loop is enumerated)."""
    pts = sorted({p for p in marks if p < ext} | {1})
    if not all(b % a == 0 for a, b in zip(pts, pts[1:])):
        return None
    return [Digit(lp.id, a, b // a) for a, b in zip(pts, pts[1:])] + [Digit(lp.id, pts[-1], None)]


def _covers(t: Digit, dg: Digit) -> bool:
    """Whether refined digit ``dg`` lies inside digit ``t`` of the same loop."""
    hi = None if t.size is None else t.place * t.size
    return dg.place >= t.place and (hi is None or dg.place < hi)


class _Plan:
    """Axes of the grid of one access: which digits are enumerated, pinned or collapsed."""

    def __init__(self, q: Query, acc, loops: list, lanes: frozenset, vars_: _Vars):
        self.q, self.acc, self.loops, self.vars = q, acc, loops, vars_
        ext = q.index.extents
        self.dec = Decomposer(vars_.value_of, ext)
        self.dims_aff: list[Affine | None] = []
        self.full: set = set()
        for ix in acc.indices:
            try:
                self.dims_aff.append(self.dec.lin(ix))
            except NonAffine:
                self.dims_aff.append(None)
                self.full |= vars_.loops_of(ix)
        self.dead = False
        self.preds, pins, self.guard_terms = [], [], []
        for g in q.index.guards[id(acc)]:
            p = _pin(self.dec, g)
            if p is None:
                self.preds.append(g)
                terms = self._guard_terms(g)
                if terms is None:
                    self.full |= vars_.loops_of(g)
                else:  # an affine comparison: only the digits it reads are enumerated
                    self.guard_terms += terms
            elif p[1]:
                self.dead = True
            elif p[0]:
                pins.append((g, p[0]))
        self.bounds = self._alias_bounds()
        self.extra_terms = self._evaluated_terms()
        self.pinned = self._refine_all(pins, ext)
        self._axes(lanes, ext)

    def _guard_terms(self, g) -> list | None:
        """Digits a boolean combination of affine comparisons reads (None: not of that form)."""
        if not isinstance(g, Op):
            return None
        if g.op in ("and", "or", "not"):
            out = []
            for a in g.args:
                t = self._guard_terms(a)
                if t is None:
                    return None
                out += t
            return out
        if g.op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            return None
        try:
            return list(self.dec.lin(g.args[0]).terms) + list(self.dec.lin(g.args[1]).terms)
        except NonAffine:
            return None

    def _evaluated_terms(self) -> list:
        """Digits of the affine parts of the indices and conditions evaluated numerically
        (``(h + rh // 1024) // 2``: ``h`` and ``rh // 1024``). Cutting their loops there too lets
        each part be computed from its own digits (``_plan_value``) instead of over every digit
        of its loops."""
        out = []

        def walk(e):
            if not isinstance(e, Op):
                return
            try:
                out.extend(self.dec.lin(e).terms)
                return
            except NonAffine:
                pass
            for a in e.args:
                walk(a)

        for ix, aff in zip(self.acc.indices, self.dims_aff):
            if aff is None:
                walk(ix)
        for g in self.preds:
            walk(g)
        return out

    def _alias_bounds(self) -> list:
        """Aliased inner loops narrower than their thread: an implicit bound on the thread."""
        out = []
        for lid in self.q.chain(self.acc):
            lp = self.q.index.loops[lid]
            t = self.q.resolve(lid)
            if lp is t:
                continue
            if t.id in self.vars.inside and self.q.index.extents[lid] < self.q.index.extents[t.id]:
                out.append((t.id, self.q.index.extents[lid]))
                self.full.add(t.id)
            elif t.id in self.vars.fixed and not self.vars.fixed[t.id] < self.q.index.extents[lid]:
                self.dead = True
        return out

    def _refine_all(self, pins: list, ext: dict) -> set:
        while True:
            pin_loops = {d.loop for _, ds in pins for d in ds}
            marks: dict[int, set] = {lp.id: set() for lp in self.loops}
            terms = [d for aff in self.dims_aff if aff is not None for d in aff.terms]
            terms += [d for _, ds in pins for d in ds] + self.guard_terms
            for d in terms:
                marks[d.loop].update((d.place,) if d.size is None else (d.place, d.place * d.size))
            extra: dict[int, set] = {lp.id: set() for lp in self.loops}
            for d in self.extra_terms:
                if d.loop in extra:
                    extra[d.loop].update((d.place,) if d.size is None else (d.place, d.place * d.size))
            self.refined, bad = {}, set()
            for lp in self.loops:
                digs = _refine(lp, marks[lp.id], ext[lp.id])
                if digs is not None and lp.id not in pin_loops and extra[lp.id] - marks[lp.id]:
                    finer = _refine(lp, marks[lp.id] | extra[lp.id], ext[lp.id])
                    # only where the cuts nest and add no partial top digit (a mask)
                    if finer is not None and (ext[lp.id] % finer[-1].place == 0 or ext[lp.id] % digs[-1].place):
                        digs = finer
                if digs is not None and lp.id in pin_loops and ext[lp.id] % digs[-1].place:
                    digs = None
                if digs is None:
                    bad |= {lp.id} & pin_loops
                    self.full.add(lp.id)
                    digs = [Digit(lp.id, 1, None)]
                elif ext[lp.id] % digs[-1].place:
                    self.full.add(lp.id)  # a partial top digit: masked below
                self.refined[lp.id] = digs
            if not bad:
                break
            for g, ds in pins:  # digits that do not nest: the guard is evaluated instead
                if any(d.loop in bad for d in ds):
                    self.preds.append(g)
                    self.full |= self.vars.loops_of(g)
            pins = [p for p in pins if not any(d.loop in bad for d in p[1])]
        for i, aff in enumerate(self.dims_aff):
            if aff is not None and not all(self.representable(t, ext) for t in aff.terms):
                self.dims_aff[i] = None
                self.full |= self.vars.loops_of(self.acc.indices[i])
        return {dg for _, ds in pins for d in ds for dg in self.refined[d.loop] if _covers(d, dg)}

    window = None  # (start, stop) per axis: the part of the grid being built (None: all)

    def axis_values(self, i: int):
        """The values of axis ``i`` (within the window), shaped to broadcast over the grid."""
        nd = len(self.shape)
        if self.window is None:
            return axis(self.shape[i], i, nd)
        a, b = self.window[i]
        return axis(b - a, i, nd) + a

    def representable(self, t: Digit, ext: dict) -> bool:
        starts = {dg.place for dg in self.refined[t.loop]}
        return t.place in starts and (t.size is None or t.place * t.size in starts or t.place * t.size >= ext[t.loop])

    def _used(self, lp, dg: Digit) -> bool:
        terms = [t for aff in self.dims_aff if aff is not None for t in aff.terms] + self.guard_terms
        return any(t.loop == lp.id and _covers(t, dg) for t in terms)

    def _axes(self, lanes: frozenset, ext: dict) -> None:
        self.axes, self.mult = [], 1
        for lp in self.loops:
            if lp.id in lanes:
                continue
            for dg in reversed(self.refined[lp.id]):
                if dg in self.pinned:
                    continue
                if lp.id in self.full or self._used(lp, dg):
                    self.axes.append(dg)
                else:
                    self.mult *= digit_range(dg, ext)
        self.shape = tuple(digit_range(d, ext) for d in self.axes)
        self.ax_of = {d: i for i, d in enumerate(self.axes)}

    def expand(self, aff: Affine):
        """(coefficient per axis, constant) of an affine form."""
        coefs = np.zeros(len(self.axes), dtype=np.int64)
        for t, c in aff.terms.items():
            for dg in self.refined[t.loop]:
                if _covers(t, dg) and dg in self.ax_of:
                    coefs[self.ax_of[dg]] += c * (dg.place // t.place)
        return coefs, aff.const

    def loop_value(self, lp, ar):
        val = np.int64(lp.min)
        for dg in self.refined[lp.id]:
            if dg in self.ax_of:
                val = val + ar[self.ax_of[dg]] * dg.place
        return val


def _env(plan: _Plan, fixed: dict, overrides: dict | None = None, window: tuple | None = None) -> dict:
    """Variable values over the grid (loop id -> array), aliases following their thread.
    ``window`` ((start, stop) per axis) narrows the axes to a part of their range."""
    nd = len(plan.shape)
    if window is None:
        ar = [axis(n, i, nd) for i, n in enumerate(plan.shape)]
    else:
        ar = [axis(b - a, i, nd) + a for i, (a, b) in enumerate(window)]
    env = {lp.id: plan.loop_value(lp, ar) for lp in plan.loops}
    env.update(overrides or {})
    for k, v in fixed.items():
        env.setdefault(k, v)
    for lid in plan.q.chain(plan.acc):
        t = plan.q.resolve(lid)
        if t.id != lid and t.id in env:
            env[lid] = env[t.id]
    return env


def _conjuncts(e) -> list:
    """``a and b and c`` as [a, b, c]."""
    if isinstance(e, Op) and e.op == "and":
        return _conjuncts(e.args[0]) + _conjuncts(e.args[1])
    return [e]


_COMPARE = {op: BINARY[op] for op in ("lt", "le", "gt", "ge", "eq", "ne")}


def _affine_value(plan: _Plan, e):
    """An affine expression over the grid from its digits alone (so that the array spans only
    the axes it reads); None when it is not affine or its digits are not axes of the grid."""
    try:
        return _affine_array(plan, plan.dec.lin(e))
    except NonAffine:
        return None


def _affine_array(plan: _Plan, aff: Affine):
    """``aff`` over the grid from its digits alone; None when a digit is not an axis of the grid."""
    ext = plan.q.index.extents
    if not all(plan.representable(t, ext) for t in aff.terms):
        return None
    coefs, const = plan.expand(aff)
    nd = len(plan.shape)
    value = np.int64(const)
    for i, c in enumerate(coefs):
        if c:
            value = value + plan.axis_values(i) * int(c)
    return np.asarray(value).reshape((1,) * (nd - np.ndim(value)) + np.shape(value))


def _plan_value(plan: _Plan, e, env: dict):
    """``evaluate(e, env)`` with its affine parts computed from their digits: the same numbers,
    over only the axes each part reads (``(h + rh // 1024) // 2`` does not span the other
    digits of ``rh``'s fused loop)."""
    if isinstance(e, Op):
        v = _affine_value(plan, e)
        if v is not None:
            return v
        fn = BINARY.get(e.op)
        if fn is not None:
            return fn(_plan_value(plan, e.args[0], env), _plan_value(plan, e.args[1], env))
        if e.op == "not":
            return np.logical_not(_plan_value(plan, e.args[0], env))
    return evaluate(e, env)


def _condition(plan: _Plan, e, env: dict):
    """One condition over the grid. An affine comparison is computed from its digits, so that
    the array spans only the axes it reads (``ax_fused % 459 // 17 < 57`` reads one digit of
    the fused loop, not all of them)."""
    if isinstance(e, Op) and e.op in _COMPARE:
        try:
            value = _affine_array(plan, plan.dec.lin(e.args[0]).add(plan.dec.lin(e.args[1]), -1))
        except NonAffine:
            value = None
        if value is not None:
            return _COMPARE[e.op](value, 0)
    return np.asarray(_plan_value(plan, e, env), dtype=bool)


def _masks(plan: _Plan, env: dict) -> list | None:
    """The conditions of an access over the grid, one array per factor (None: it never runs).

    Kept apart, not and-ed into one array over the whole grid: each factor then spans only the
    axes of the loops it reads, and the accumulation can reduce independent axes separately
    (the padding guard of a convolution reads rows and columns in two factors)."""
    conds = [_condition(plan, c, env) for p in plan.preds for c in _conjuncts(p)]
    for lid, ext in plan.bounds:
        lp = plan.q.index.loops[lid]
        conds.append((env[lid] - lp.min) < ext)
    for lp in plan.loops:
        digs = plan.refined[lp.id]
        if plan.q.index.extents[lp.id] % digs[-1].place and len(digs) > 1:
            conds.append((env[lp.id] - lp.min) < plan.q.index.extents[lp.id])
    out = []
    for m in conds:
        if m.all():
            continue
        if m.size == 1:
            return None
        out.append(m)
    return out


def plan_access(q: Query, acc, lanes: frozenset = frozenset(), fixed: dict | None = None, inside: dict | None = None):
    """The axes of an access in a query (None when the access never runs there)."""
    vars_ = _Vars(q, acc, fixed, inside)
    loops = []
    for lid in q.chain(acc):
        t = q.resolve(lid)
        if t.id in vars_.inside and t not in loops:
            loops.append(t)
    plan = _Plan(q, acc, loops, lanes, vars_)
    if plan.dead:
        return None
    return plan


def check_points(plan, budget, per_point: int, what: str, shape: tuple | None = None) -> None:
    """Refuse a grid whose arrays would not fit in the budget (``per_point`` bytes per point)."""
    npts = math.prod(plan.shape if shape is None else shape)
    loops = sorted({plan.q.index.loops[d.loop].name for d in plan.axes})
    budget.check(npts * per_point, f"{what} ({npts} points over the loops {', '.join(loops)})")


def _describe(acc) -> str:
    what = {"init": "the T.init() access", "region": "the tensorized region access"}.get(acc.label, "the access")
    return f"{what} {acc.buffer}[{', '.join(str(i) for i in acc.indices)}] of block {acc.block}"


def _span(plan: _Plan, loop_ids: set, shape: tuple) -> tuple:
    """The grid's shape restricted to the axes of some loops (1 elsewhere): what an array
    computed from those loops' values spans."""
    return tuple(n if d.loop in loop_ids else 1 for n, d in zip(shape, plan.axes))


def _window(shape: tuple, masks: list) -> tuple | None:
    """Per axis, the (start, stop) outside which no point runs: every mask factor projected on
    each of its axes (None when a factor never holds). Points cut away all have a false factor,
    so the grid over the window runs exactly the same points."""
    lo, hi = [0] * len(shape), list(shape)
    for m in masks:
        for i in range(m.ndim):
            if m.shape[i] == 1:
                continue
            if m.take(0, axis=i).any() and m.take(m.shape[i] - 1, axis=i).any():
                continue  # points run at both ends of the axis: nothing to cut (cheap to see)
            other = tuple(j for j in range(m.ndim) if j != i)
            hit = np.flatnonzero(m.any(axis=other) if other else m)
            if not hit.size:
                return None
            lo[i], hi[i] = max(lo[i], int(hit[0])), min(hi[i], int(hit[-1]) + 1)
    if any(a >= b for a, b in zip(lo, hi)):
        return None
    return tuple(zip(lo, hi))


def build_grid(
    q: Query,
    acc,
    leaf_offset: int,
    n_reads: int,
    n_writes: int,
    step_dtype=np.int64,
    budget=None,
    plan=None,
    chunk: tuple | None = None,
) -> Grid | None:
    """The access's grid; ``chunk`` (axis, start, stop) builds only that slice of one axis (an
    access too large to enumerate at once is added to its buffer slice by slice)."""
    plan = plan or plan_access(q, acc)
    if plan is None:
        return None
    budget = budget or Budget()
    what = f"enumerating {_describe(acc)}"
    base = tuple((0, n) for n in plan.shape)
    if chunk is not None:
        ax, a, b = chunk
        base = base[:ax] + ((a, b),) + base[ax + 1 :]
    plan.window = base if chunk is not None else None
    full_shape = tuple(b - a for a, b in base)
    # Conditions are computed factor by factor, each over the axes of the loops it reads; an
    # affine grid is then written through strided views (the buffer's box is budgeted by the
    # accumulator, overlapping grids per group of axes), and only evaluated indices are
    # materialised over the whole grid, after the conditions have cut the axes down.
    spans = [_span(plan, plan.vars.loops_of(c), full_shape) for p in plan.preds for c in _conjuncts(p)]
    spans += [_span(plan, {lid}, full_shape) for lid, _ in plan.bounds]
    if spans:
        check_points(plan, budget, 32, what, max(spans, key=math.prod))
    masks: list = []
    if plan.preds or plan.bounds or any(lp.id in plan.full for lp in plan.loops):
        found = _masks(plan, _env(plan, q.fixed, window=plan.window))
        if found is None:
            return None
        masks = found
    rel = _window(full_shape, masks)
    if rel is None:
        return None
    cut = rel != tuple((0, n) for n in full_shape)
    window = tuple((a0 + a, a0 + b) for (a0, _), (a, b) in zip(base, rel))
    shape = tuple(b - a for a, b in window)
    if cut:
        sl = tuple(slice(a, b) for a, b in rel)
        masks = [m[tuple(s if n > 1 else slice(None) for s, n in zip(sl, m.shape))] for m in masks]
        masks = [m for m in masks if not m.all()]
    starts = np.array([a for a, _ in window], dtype=np.int64)
    cut = cut or chunk is not None
    plan.window = window if cut else None  # the axes the evaluated indices are computed over
    env = None
    dims: list = []  # per dimension: (coefficients, constant) or the evaluated indices
    for ix, aff in zip(acc.indices, plan.dims_aff):
        if aff is not None:
            coefs, const = plan.expand(aff)
            dims.append((coefs, const + int(coefs @ starts)))
        else:
            if env is None:
                check_points(plan, budget, 32, what, shape)
                env = _env(plan, q.fixed, window=window if cut else None)
            dims.append(np.asarray(_plan_value(plan, ix, env), dtype=np.int64))
    weights = [q.weights[d.loop] * d.place for d in plan.axes]
    ev_aff = (leaf_offset + int(np.dot(weights, starts)), weights)
    return Grid(acc, n_reads, n_writes, shape, dims, ev_aff, masks, plan.mult, plan.axes, step_dtype)
