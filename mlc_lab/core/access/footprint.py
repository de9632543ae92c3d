"""The footprint of a loop: every buffer's first touch, kind, count and who, exactly."""

from __future__ import annotations

import itertools
import math

import numpy as np

from mlc_lab.core.access.accumulate import BufferAccumulator, dim_range
from mlc_lab.core.access.budget import Budget, BudgetExceeded
from mlc_lab.core.access.expr import Affine, Decomposer, Digit, NonAffine
from mlc_lab.core.access.grid import build_grid, plan_access
from mlc_lab.core.access.model import Footprint, LoopFootprint
from mlc_lab.model.access.program import AccessProgram, Loop
from mlc_lab.core.access.shapes import bind_shapes
from mlc_lab.core.access.space import ProgramIndex, Query
from mlc_lab.errors import AccessAnalysisError


def loop_of(prog: AccessProgram, loop) -> Loop:
    """The program's loop by id, name or Loop; an unknown or ambiguous name is an AccessAnalysisError."""
    try:
        return prog.loop(loop if not hasattr(loop, "id") else loop.id)
    except LookupError as exc:
        raise AccessAnalysisError(str(exc)) from None


def index_of(program: AccessProgram, shape_vars: dict | None = None) -> ProgramIndex:
    """The program with its symbolic shapes bound, indexed (cached on the program)."""
    bound = bind_shapes(program, shape_vars)
    idx = bound.__dict__.get("_index")
    if idx is None:
        idx = bound.__dict__["_index"] = ProgramIndex(bound)
    return idx


def groups(q: Query) -> list:
    """Accesses under the query's loop, identical ones merged: [access, n_reads, n_writes, step offset]."""
    out = []
    for leaf in q.leaves:
        seen: dict = {}
        for acc in leaf.accesses:
            if q.L.id in acc.body_loops:
                continue
            key = (
                acc.buffer,
                acc.label,
                tuple(str(i) for i in acc.indices),
                tuple(str(g) for g in q.index.guards[id(acc)]),
                q.chain(acc),
            )
            if key in seen:
                seen[key][1 if acc.kind == "read" else 2] += 1
                continue
            g = [acc, int(acc.kind == "read"), int(acc.kind == "write"), q.leaf_offset[id(leaf)]]
            seen[key] = g
            out.append(g)
    return out


def footprint(
    program: AccessProgram,
    loop,
    at: dict | None = None,
    *,
    counts: bool = False,
    shape_vars: dict | None = None,
    budget: Budget | None = None,
    sweep_threads: bool = False,
) -> LoopFootprint:
    """Footprint of every buffer over the iterations of ``loop`` (a loop id, name or Loop).

    ``at`` gives values to the loops that enclose ``loop`` (by id, name or Loop; missing ones are at
    their first value). ``counts=True`` adds per-element access counts. ``shape_vars`` gives values
    to symbolic shapes. ``sweep_threads=True`` runs the enclosing ``threadIdx`` loops over their whole
    range (thread after thread): ``Footprint.thread`` then colours the loop's footprint by thread. Raises :class:`AccessAnalysisError` with a sentence a person can act on.
    """
    index = index_of(program, shape_vars)
    q = Query(index, loop_of(index.prog, loop), at, sweep_threads)
    budget = budget or Budget()
    gs = groups(q)
    per_step = max([1] + [len(leaf.accesses) for leaf in q.leaves])
    dt = np.int32 if q.total_steps * per_step < np.iinfo(np.int32).max - 1 else np.int64
    parts = 2 * len(gs) + 1  # a grid built and a grid added per access, then the result
    by_buf, sliced = _build_grids(q, gs, dt, budget, parts)
    per_buf_strides, per_access = strides_table(q, gs)
    launch = index.launch()
    added = itertools.count(len(gs))  # the parts done when the next grid is added

    def tick() -> None:
        budget.tick(next(added), parts)

    out = {}
    for name, info in index.prog.buffers.items():
        origin, box, nr, nw = (0,) * len(info.shape), {}, 0, 0
        if name in by_buf or name in sliced:
            grids, big = by_buf.get(name, []), sliced.get(name, [])
            acc = _accumulate(q, name, info.shape, grids, big, dt, counts, budget, launch, tick)
            (origin, box), nr, nw = acc.result(), acc.n_reads, acc.n_writes
        out[name] = Footprint(
            buffer=name,
            shape=tuple(info.shape),
            dtype=info.dtype,
            scope=info.scope,
            itemsize=info.itemsize,
            origin=origin,
            box=box,
            n_reads=nr,
            n_writes=nw,
            strides=per_buf_strides.get(name, {}),
            gpu=bool(launch),
            counted=counts,
        )
    budget.tick(parts - 1, parts)
    return LoopFootprint(
        out,
        loop=q.L.name,
        steps=q.total_steps,
        at={lp.name: q.fixed[lp.id] for lp in q.enclosing if lp.id in q.fixed},
        launch=launch,
        accesses=per_access,
    )


def _build_grids(q: Query, gs: list, dt, budget: Budget, parts: int) -> tuple[dict[str, list], dict[str, list]]:
    """Each access's grid, by buffer; and, by buffer, the accesses too large to enumerate at once
    (added slice by slice later)."""
    by_buf: dict[str, list] = {}
    sliced: dict[str, list] = {}
    budget.tick(0, parts)
    for acc, nr, nw, off in gs:
        budget.tick(sum(map(len, by_buf.values())) + sum(map(len, sliced.values())), parts)
        try:
            g = build_grid(q, acc, off, nr, nw, step_dtype=dt, budget=budget)
        except BudgetExceeded:
            sliced.setdefault(acc.buffer, []).append((acc, nr, nw, off))
            continue
        if g is not None:
            by_buf.setdefault(acc.buffer, []).append(g)
    return by_buf, sliced


def _accumulate(q: Query, name: str, shape, grids: list, sliced: list, dt, counts: bool, budget: Budget, launch, tick):
    """One buffer's accumulator over the box its grids and sliced accesses span, every one of them
    added (``tick`` before each)."""
    ranges = [[dim_range(g, d) for d in range(len(shape))] for g in grids]
    ranges += [_whole_range(q, access_, shape) for access_, *_ in sliced]
    who = (lambda steps: q.who(steps, launch)) if launch else None
    acc = BufferAccumulator(name, shape, ranges, dt, counts, budget, who)
    for g in grids:
        tick()
        acc.add(g)
    for access_, nr, nw, off in sliced:
        tick()
        _add_in_slices(q, acc, access_, nr, nw, off, dt, budget, shape)
    return acc


SLICE_BYTES_PER_POINT = 64


def _whole_range(q: Query, access_, shape) -> list:
    """Per buffer dimension, the range an access's grid spans before its conditions: an affine
    index over all its points, the buffer's bounds for an evaluated one (checked per slice)."""
    plan = plan_access(q, access_)
    if plan is None:
        return [(0, 0) for _ in shape]
    out = []
    for aff, n in zip(plan.dims_aff, shape):
        if aff is None:
            out.append((0, int(n) - 1))
            continue
        coefs, const = plan.expand(aff)
        out.append(
            (
                int(const + sum(min(0, c * (k - 1)) for c, k in zip(coefs, plan.shape))),
                int(const + sum(max(0, c * (k - 1)) for c, k in zip(coefs, plan.shape))),
            )
        )
    return out


def _add_in_slices(
    q: Query, acc: BufferAccumulator, access_, nr: int, nw: int, off: int, dt, budget: Budget, shape
) -> None:
    """An access whose grid does not fit the budget, built and added slice by slice along its
    largest axis (exact: the slices partition the grid). The buffer's box holds every slice
    (``_whole_range``); an evaluated index is checked against the bounds where it runs."""
    plan = plan_access(q, access_)
    if plan is None:
        return
    if not plan.shape:  # a single point always fits
        g = build_grid(q, access_, off, nr, nw, step_dtype=dt, budget=budget, plan=plan)
        if g is not None:
            acc.add(g)
        return
    ax = max(range(len(plan.shape)), key=lambda i: plan.shape[i])
    per = math.prod(plan.shape) // plan.shape[ax]
    # slices of about half the room left (a slice that still does not fit says so when built)
    step = max(1, (budget.limit - budget.used) // SLICE_BYTES_PER_POINT // max(1, per))
    for a in range(0, plan.shape[ax], step):
        budget.stop_if_cancelled()  # a sliced access can be long: stop between its slices
        g = build_grid(
            q,
            access_,
            off,
            nr,
            nw,
            step_dtype=dt,
            budget=budget,
            plan=plan,
            chunk=(ax, a, min(plan.shape[ax], a + step)),
        )
        if g is None:
            continue
        for d, n in enumerate(shape):
            if not isinstance(g.dims[d], tuple):
                lo, hi = dim_range(g, d)
                if lo < 0 or hi >= int(n):
                    raise AccessAnalysisError(f"buffer {acc.name} is accessed out of its bounds {tuple(shape)}")
        acc.add(g)


def _symbolic_value(q: Query):
    """Every loop (enclosing ones too) as a variable: for strides."""

    def value_of(v) -> Affine:
        t = q.resolve(v.id)
        return Affine({Digit(t.id, 1, None): 1}, 0)

    return value_of


def strides_table(q: Query, gs: list):
    """Stride in elements of each loop (enclosing ones included) in each access's flat index."""
    per_buf: dict[str, dict] = {}
    per_access: list[dict] = []
    bufs = q.index.prog.buffers
    for acc, nr, _nw, _off in gs:
        row = _access_strides(q, acc, bufs[acc.buffer].shape)
        per_access.append({"buffer": acc.buffer, "block": acc.block, "kind": "read" if nr else "write", "strides": row})
        cur = per_buf.setdefault(acc.buffer, {})
        for name, s in row.items():
            if name in cur and cur[name] != s:
                cur[name] = None
            else:
                cur.setdefault(name, s)
    return per_buf, per_access


def _access_strides(q: Query, acc, shape) -> dict:
    dec = Decomposer(_symbolic_value(q), q.index.extents)
    rstr, rs = [], 1
    for s in reversed(shape):
        rstr.append(rs)
        rs *= int(s)
    rstr.reverse()
    flat: dict = {}
    try:
        for d, ix in enumerate(acc.indices):
            for t, c in dec.lin(ix).terms.items():
                flat.setdefault(t.loop, []).append((t, c * rstr[d]))
        ok = True
    except NonAffine:
        ok = False
    except Exception:  # noqa: BLE001 - symbolic leftovers: strides are unknown, not an error
        ok = False
    row: dict[str, int | None] = {}
    for lid in q.chain(acc):
        lp = q.index.loops[lid]
        if lp.role != "loop":
            continue
        terms = flat.get(q.resolve(lid).id, []) if ok else None
        if terms is None:
            row[lp.name] = None
        elif not terms:
            row[lp.name] = 0
        elif len(terms) == 1 and terms[0][0].place == 1 and terms[0][0].size is None:
            row[lp.name] = int(terms[0][1])
        else:
            row[lp.name] = None
    return row
