"""Per-buffer accumulation of access grids: first touch, kind, count and who, over a working box.

The working box is the union of the accesses' index ranges (it may stick out of the buffer where
a guard masks points; the result is clipped and checked). Injective affine grids are written
through a strided view (plain assignments the first time); an affine grid that touches elements
more than once is reduced per group of independent axes (``_add_overlapping``); evaluated indices
go through ``np.minimum.at``. The thread and block of a first touch follow from its step
(``Query.who``): they are never tracked per point.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mlc_lab.core.access.budget import Budget
from mlc_lab.core.access.grid import Grid, axis
from mlc_lab.errors import AccessAnalysisError

READ, WRITE = 1, 2


def dim_range(grid: Grid, d: int) -> tuple[int, int]:
    spec = grid.dims[d]
    if isinstance(spec, tuple):
        coefs, const = spec
        lo = const + sum(min(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        hi = const + sum(max(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        return int(lo), int(hi)
    if grid.mask is not None:  # evaluated indices: only the points that run count
        # the mask reduced (any) over the axes the index does not read: the same values, over
        # the index's own axes instead of the whole grid
        nd = len(grid.shape)
        spec, m = np.asarray(spec), np.asarray(grid.mask)
        spec = spec.reshape((1,) * (nd - spec.ndim) + spec.shape)
        m = m.reshape((1,) * (nd - m.ndim) + m.shape)
        other = tuple(i for i in range(nd) if spec.shape[i] == 1 and m.shape[i] > 1)
        if other:
            m = np.asarray(m.any(axis=other, keepdims=True))
        shape = np.broadcast_shapes(spec.shape, m.shape)
        m = np.broadcast_to(m, shape)
        if not m.any():
            return 0, 0
        vals = np.broadcast_to(spec, shape)
        big = np.iinfo(np.int64).max
        return int(np.min(vals, where=m, initial=big)), int(np.max(vals, where=m, initial=-big))
    return int(spec.min()), int(spec.max())


def injective(shape, flat) -> bool:
    """Sorted by |stride|, each stride exceeds the span of the smaller ones: no two points collide."""
    span = 0
    for i in sorted(range(len(flat)), key=lambda i: abs(flat[i])):
        if shape[i] == 1:
            continue
        if abs(flat[i]) <= span:
            return False
        span += abs(flat[i]) * (shape[i] - 1)
    return True


def _independent_axes(shape, coefs, masks) -> list[list[int]]:
    """Axes (of more than one value) in groups that share no buffer dimension and no mask factor."""
    parent = {i: i for i, n in enumerate(shape) if n > 1}

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(axes):
        axes = [i for i in axes if i in parent]
        for i in axes[1:]:
            parent[root(i)] = root(axes[0])

    for row in coefs:
        join([i for i in range(len(shape)) if row[i]])
    for m in masks:
        join([i for i in range(m.ndim) if m.shape[i] > 1])
    groups: dict[int, list[int]] = {}
    for i in parent:
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


class BufferAccumulator:
    """First touch, kinds and counts of one buffer over its working box; ``who`` (steps -> thread
    and block ids) names the threads of GPU kernels."""

    def __init__(self, name: str, shape: tuple, ranges, dtype, counts: bool, budget: Budget, who=None):
        self.name, self.full = name, tuple(shape)
        self.with_counts = counts
        self.dt = dtype
        self.big = np.iinfo(dtype).max
        self.who = who
        self.budget = budget
        self.lo = [min(r[d][0] for r in ranges) for d in range(len(shape))]
        hi = [max(r[d][1] for r in ranges) for d in range(len(shape))]
        self.pshape = tuple(b - a + 1 for a, b in zip(self.lo, hi))
        self.size = math.prod(self.pshape)
        item = np.dtype(dtype).itemsize
        per = item + 1 + (item if counts else 0)
        budget.take(self.size * per, f"the footprint of buffer {name} (a box of {self.size} elements)")
        self.first: Any = None  # arrays, allocated by the first access
        self.count: Any = None
        self.kinds: Any = None
        self.fresh = True
        self._cover = False
        st, s = [], 1
        for ext in reversed(self.pshape):
            st.append(s)
            s *= ext
        self.strides = list(reversed(st))
        self.n_reads = 0
        self.n_writes = 0

    # --- allocation -------------------------------------------------------------------------------
    def _allocate(self, g: Grid, shape) -> None:
        # an injective unmasked first access covering the whole box writes every element:
        # no need to pre-fill (memset of a 1024x1024 buffer is a visible cost)
        cover = not g.masks and math.prod(shape) == self.size and g.affine
        if cover:

            def alloc(fill, dt=self.dt):
                return np.empty(self.size, dt)
        else:

            def alloc(fill, dt=self.dt):
                return np.full(self.size, fill, dt)

        self.first = alloc(self.big)
        if self.with_counts:
            self.count = alloc(0)
        self.kinds = alloc(0, np.uint8)
        self._cover = cover

    def _clear(self) -> None:
        self.first.fill(self.big)
        if self.count is not None:
            self.count.fill(0)
        self.kinds.fill(0)

    # --- adding a grid ----------------------------------------------------------------------------
    def add(self, g: Grid) -> None:
        shape = tuple(g.shape)
        if self.first is None:
            self._allocate(g, shape)
        if g.affine:
            self._add_affine(g, shape)
        else:
            self._add_general(g, shape)

    def _flat(self, g: Grid):
        flat = np.zeros(len(g.shape), dtype=np.int64)
        base = 0
        for d, (coefs, const) in enumerate(g.dims):
            flat += coefs * self.strides[d]
            base += (const - self.lo[d]) * self.strides[d]
        return [int(f) for f in flat], int(base)

    def _add_affine(self, g: Grid, shape) -> None:
        ndim = len(shape)
        flat, base = self._flat(g)
        if not injective(shape, flat):
            if self.fresh and self._cover:
                self._clear()
            self._add_overlapping(g, shape)
            return
        mask = g.mask
        if mask is not None:
            self._strided(base, shape, flat, g.ev, g.mult, np.broadcast_to(mask, shape), g)
            return
        # the common case: build steps directly in the view's memory order
        perm = sorted(range(ndim), key=lambda i: -abs(flat[i]))
        pshape = tuple(shape[i] for i in perm)
        if self.fresh:  # nothing there yet: write steps straight into the view
            self._fill_fresh(base, pshape, [flat[i] for i in perm], g, perm)
            return
        steps = np.empty(pshape, g.dtype)  # built row by row (faster than a broadcast sum)
        g.fill(g.ev_aff, perm, steps)
        self._strided(base, pshape, [flat[i] for i in perm], steps, g.mult, True, g)

    def _add_overlapping(self, g: Grid, shape) -> None:
        """An affine grid that touches elements more than once (``A[2*h + rh]``, or axes that do
        not move the address), reduced without visiting its points together.

        Axes fall into groups that share no buffer dimension and no mask factor. A point's step
        is a sum of one term per group, its address one index range per group, and it runs when
        every group's factors hold: so an element's first touch is the sum of the groups' least
        steps at its indices and its count the product of the groups' counts. Each group is
        reduced over its own points (the rows and the columns of a dilated convolution apart:
        2 * 109 * 13 points instead of 109**2 * 13**2), then combined over the box they span."""
        nb, nd = len(g.dims), len(shape)
        coefs = np.array([c for c, _ in g.dims], dtype=np.int64).reshape(nb, nd)
        weights = g.ev_aff[1]
        lo = [int(const) for _, const in g.dims]  # the sub-box's corner, per buffer dimension
        sub = [1] * nb
        first: Any = np.int64(g.ev_aff[0])  # a scalar, then an array over the sub-box
        count: Any = np.int64(g.mult)
        runs: Any = True
        for axes in _independent_axes(shape, coefs, g.masks):
            k = len(axes)
            ar = [axis(shape[i], j, k) for j, i in enumerate(axes)]
            ev = sum((ar[j] * int(weights[i]) for j, i in enumerate(axes) if weights[i]), np.int64(0))
            run = None
            for m in g.masks:
                if any(m.shape[i] > 1 for i in axes):
                    f = m.reshape(tuple(m.shape[i] for i in axes))
                    run = f if run is None else run & f
            dims = [d for d in range(nb) if coefs[d, axes].any()]
            gshape = tuple(shape[i] for i in axes)
            npts = math.prod(gshape)
            self.budget.check(
                npts * 24,
                f"the footprint of buffer {self.name} ({npts} points of an access "
                f"that touches elements repeatedly, enumerated together)",
            )
            off: Any = np.int64(0)
            lshape = []
            for d in dims:
                idx = sum((ar[j] * int(coefs[d, i]) for j, i in enumerate(axes) if coefs[d, i]), np.int64(0))
                a = sum(min(0, int(coefs[d, i]) * (shape[i] - 1)) for i in axes)
                b = sum(max(0, int(coefs[d, i]) * (shape[i] - 1)) for i in axes)
                off = off * (b - a + 1) + (idx - a)
                lo[d] += a
                lshape.append(b - a + 1)
            off = np.broadcast_to(off, gshape).reshape(-1)
            ev = np.broadcast_to(ev, gshape).reshape(-1)
            if run is not None:
                keep = np.broadcast_to(run, gshape).reshape(-1)
                off, ev = off[keep], ev[keep]
            if not ev.size:
                return  # one group never runs: neither does the access
            size = math.prod(lshape)
            self.budget.check(size * 16, f"the footprint of buffer {self.name} (a box of {size} elements)")
            gmin = np.full(size, np.iinfo(np.int64).max, np.int64)
            np.minimum.at(gmin, off, ev)
            gcnt = np.bincount(off, minlength=size)
            here = [1] * nb
            for d, n in zip(dims, lshape):
                here[d] = sub[d] = n
            gmin, gcnt = gmin.reshape(here), gcnt.reshape(here)
            hit = gcnt > 0
            first = first + np.where(hit, gmin, 0)
            count = count * gcnt
            runs = hit if runs is True else runs & hit
        base = sum((lo[d] - self.lo[d]) * self.strides[d] for d in range(nb))
        box = tuple(sub)
        self._strided(
            base,
            box,
            self.strides,
            np.broadcast_to(first, box),
            np.broadcast_to(count, box),
            True if runs is True else np.broadcast_to(runs, box),
            g,
        )

    def _add_general(self, g: Grid, shape) -> None:
        ndim = len(shape)
        offs = np.int64(0)
        for d, spec in enumerate(g.dims):
            if isinstance(spec, tuple):
                coefs, const = spec
                idx = np.int64(const - self.lo[d])
                for i in range(ndim):
                    if coefs[i]:
                        idx = idx + axis(shape[i], i, ndim) * int(coefs[i])
            else:
                idx = spec - self.lo[d]
            offs = offs + idx * self.strides[d]
        if self.fresh and self._cover:
            self._clear()
        steps = np.empty(shape, g.dtype)  # built row by row (faster than a broadcast sum)
        g.fill(g.ev_aff, list(range(ndim)), steps)
        self._scatter(np.broadcast_to(offs, shape), steps, g.mult, g.mask, g)

    @staticmethod
    def _bits(g: Grid) -> int:
        return (READ if g.n_reads else 0) | (WRITE if g.n_writes else 0)

    def _fill_fresh(self, base, kshape, kflat, g, perm) -> None:
        def view(arr):
            return as_strided(arr[base:], shape=kshape, strides=[s * arr.itemsize for s in kflat], writeable=True)

        g.fill(g.ev_aff, perm, view(self.first))
        if self.count is not None:
            view(self.count)[...] = g.mult * (g.n_reads + g.n_writes)
        view(self.kinds)[...] = self._bits(g)
        self.fresh = False
        total = g.mult * math.prod(kshape)
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def _strided(self, base, kshape, kflat, evm, cnt, anym, g):
        """Update through an injective strided view; ``anym`` (True or a bool array) says which
        points run, ``cnt`` (a number or an array) how many accesses each stands for."""

        def view(arr):
            return as_strided(arr[base:], shape=kshape, strides=[s * arr.itemsize for s in kflat], writeable=True)

        vf, vk = view(self.first), view(self.kinds)
        vc = None if self.count is None else view(self.count)
        per = g.n_reads + g.n_writes
        bits = np.uint8(self._bits(g))
        where = True if anym is True else np.broadcast_to(anym, kshape)
        if self.fresh:
            # nothing touched yet: plain assignments (an injective view writes each element once)
            np.copyto(vf, evm, where=where, casting="unsafe")
            if vc is not None:
                np.copyto(vc, np.asarray(cnt) * per, where=where, casting="unsafe")
            np.copyto(vk, bits, where=where)
        else:
            np.minimum(vf, evm, out=vf, where=where, casting="unsafe")
            if vc is not None:
                np.add(vc, np.asarray(cnt) * per, out=vc, where=where, casting="unsafe")
            np.bitwise_or(vk, bits, out=vk, where=where)
        self.fresh = False
        if np.ndim(cnt):
            total = int(np.sum(cnt, where=where, dtype=np.int64))
        else:
            n = math.prod(kshape) if where is True else int(np.count_nonzero(where))
            total = int(cnt) * n
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def _scatter(self, offs, evm, cnt, mask, g):
        offs = np.ascontiguousarray(offs).reshape(-1)
        evm = np.broadcast_to(evm, g.shape).reshape(-1)
        if mask is not None:
            sel = np.broadcast_to(mask, g.shape).reshape(-1)
            offs, evm = offs[sel], evm[sel]
        per = g.n_reads + g.n_writes
        np.minimum.at(self.first, offs, evm.astype(self.dt))
        if self.count is not None:
            self.count += (np.bincount(offs, minlength=self.count.size) * (cnt * per)).astype(self.dt)
        self.kinds[offs] |= np.uint8(self._bits(g))
        self.fresh = False
        total = int(cnt) * offs.size
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    # --- the result ---------------------------------------------------------------------------------
    def result(self) -> tuple[tuple, dict]:
        """(origin, arrays over the part of the working box inside the buffer)."""
        kinds = self.kinds.reshape(self.pshape)
        src = tuple(slice(max(0, -a), min(p, s - a)) for a, p, s in zip(self.lo, self.pshape, self.full))
        inner = kinds[src]
        if int(np.count_nonzero(inner)) != int(np.count_nonzero(kinds)):
            raise AccessAnalysisError(f"buffer {self.name} is accessed out of its bounds {self.full}")
        origin = tuple(max(0, a) for a in self.lo)
        untouched = inner == 0
        any_untouched = bool(untouched.any())

        def box(arr, fill):
            out = arr.reshape(self.pshape)[src]
            if fill != 0 and any_untouched:
                out = np.where(untouched, fill, out)
            return out

        arrays = {"reads": (inner & READ) != 0, "writes": (inner & WRITE) != 0, "first_touch": box(self.first, -1)}
        if self.count is not None:
            arrays["count"] = box(self.count, 0)
        if self.who is not None:  # thread and block: decoded from first_touch on first use
            from mlc_lab.core.access.model import WhoBox

            arrays = WhoBox(arrays, self.who, untouched if any_untouched else None, self.dt)
        return origin, arrays
