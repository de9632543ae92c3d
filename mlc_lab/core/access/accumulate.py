"""Per-buffer accumulation of access grids: first touch, kind, count and who, over a working box.

The working box is the union of the accesses' index ranges (it may stick out of the buffer where
a guard masks points; the result is clipped and checked). Injective affine grids are written
through a strided view (plain assignments the first time); the others go through
``np.minimum.at`` (exact, slower).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mlc_lab.core.access.budget import Budget
from mlc_lab.core.access.grid import Grid, axis
from mlc_lab.errors import AccessAnalysisError

READ, WRITE = 1, 2
SLICE_LOOP_LIMIT = 4096     # overlapping maps: at most this many strided updates instead of a scatter


def take_first(ev, who, axes):
    """``who`` at the first (smallest-step) point along ``axes``; ev holds BIG where masked."""
    keep = [i for i in range(ev.ndim) if i not in axes]
    perm = keep + list(axes)
    kshape = tuple(ev.shape[i] for i in keep)
    e = np.transpose(np.broadcast_to(ev, ev.shape), perm).reshape(kshape + (-1,))
    arg = e.argmin(axis=-1)[..., None]
    out = []
    for w in who:
        wf = np.transpose(np.broadcast_to(w, ev.shape), perm).reshape(kshape + (-1,))
        out.append(np.take_along_axis(wf, arg, axis=-1)[..., 0])
    return tuple(out)


def dim_range(grid: Grid, d: int) -> tuple[int, int]:
    spec = grid.dims[d]
    if isinstance(spec, tuple):
        coefs, const = spec
        lo = const + sum(min(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        hi = const + sum(max(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        return int(lo), int(hi)
    if grid.mask is not None:       # evaluated indices: only the points that run count
        m = np.broadcast_to(grid.mask, grid.shape)
        if not m.any():
            return 0, 0
        vals = np.broadcast_to(spec, grid.shape)[m]
        return int(vals.min()), int(vals.max())
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


class BufferAccumulator:
    """First touch, kinds, counts and who of one buffer over its working box."""

    def __init__(self, name: str, shape: tuple, ranges, dtype, counts: bool, budget: Budget, gpu: bool):
        self.name, self.full = name, tuple(shape)
        self.with_counts = counts
        self.dt = dtype
        self.big = np.iinfo(dtype).max
        self.lo = [min(r[d][0] for r in ranges) for d in range(len(shape))]
        hi = [max(r[d][1] for r in ranges) for d in range(len(shape))]
        self.pshape = tuple(b - a + 1 for a, b in zip(self.lo, hi))
        self.size = math.prod(self.pshape)
        item = np.dtype(dtype).itemsize
        per = item + 1 + (item if counts else 0) + (2 * item if gpu else 0)
        budget.take(self.size * per, f"the footprint of buffer {name} (a box of {self.size} elements)")
        self.first = self.count = self.kinds = None     # allocated by the first access
        self.who = None
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
    def _allocate(self, g: Grid, shape, mask) -> None:
        # an injective unmasked first access covering the whole box writes every element:
        # no need to pre-fill (memset of a 1024x1024 buffer is a visible cost)
        cover = mask is None and math.prod(shape) == self.size and g.affine
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
        if g.who_aff is not None:
            self.who = (alloc(-1), alloc(-1))
        self._cover = cover

    def _clear(self) -> None:
        self.first.fill(self.big)
        if self.count is not None:
            self.count.fill(0)
        self.kinds.fill(0)
        if self.who is not None:
            self.who[0].fill(-1)
            self.who[1].fill(-1)

    # --- adding a grid ----------------------------------------------------------------------------
    def add(self, g: Grid) -> None:
        shape = tuple(g.shape)
        mask = None if g.mask is None else np.broadcast_to(g.mask, shape)
        if self.first is None:
            self._allocate(g, shape, mask)
        if g.who_aff is not None and self.who is None:
            self.who = (np.full(self.size, -1, self.dt), np.full(self.size, -1, self.dt))
        if g.affine:
            self._add_affine(g, shape, mask)
        else:
            self._add_general(g, shape, mask)

    def _flat(self, g: Grid):
        flat = np.zeros(len(g.shape), dtype=np.int64)
        base = 0
        for d, (coefs, const) in enumerate(g.dims):
            flat += coefs * self.strides[d]
            base += (const - self.lo[d]) * self.strides[d]
        return [int(f) for f in flat], int(base)

    def _add_affine(self, g: Grid, shape, mask) -> None:
        ndim = len(shape)
        flat, base = self._flat(g)
        # axes that do not move the address (they come from guards): fold them
        zero = tuple(i for i in range(ndim) if flat[i] == 0)
        inj = not zero and injective(shape, flat)
        if self.fresh and self._cover and not inj:
            self._clear()
        if mask is None and inj:
            # the common case: build steps (and threads) directly in the view's memory order
            perm = sorted(range(ndim), key=lambda i: -abs(flat[i]))
            pshape = tuple(shape[i] for i in perm)
            if self.fresh:      # nothing there yet: write steps and ids straight into the views
                self._fill_fresh(base, pshape, [flat[i] for i in perm], g, perm)
                return
            evm = g.outer(g.ev_aff, perm)
            who = None if g.who_aff is None else tuple(g.outer(a, perm) for a in g.who_aff)
            self._strided(base, pshape, [flat[i] for i in perm], evm, g.mult, True, g, who)
            return
        evm, cnt, anym, who = self._fold(g, shape, mask, zero)
        keep = [i for i in range(ndim) if i not in zero]
        kshape = tuple(shape[i] for i in keep)
        kflat = [flat[i] for i in keep]
        if who is not None and not zero:
            who = tuple(np.broadcast_to(w, kshape) for w in who)
        if injective(kshape, kflat):
            self._strided(base, kshape, kflat, evm, cnt, anym, g, who)
            return
        if self._in_slices(base, kshape, kflat, evm, cnt, anym, g, who):
            return
        offs = np.int64(base)
        for j, i in enumerate(keep):
            offs = offs + axis(shape[i], j, len(keep)) * kflat[j]
        self._scatter(np.broadcast_to(offs, kshape), evm, cnt, anym, g, who)

    def _in_slices(self, base, kshape, kflat, evm, cnt, anym, g, who) -> bool:
        """An overlapping affine map (``A[2*h + rh]``) as a few injective strided updates: the axes
        that break injectivity are looped over in Python when they have few values together."""
        best = None
        for order in (sorted(range(len(kshape)), key=lambda i: abs(kflat[i])),
                      sorted(range(len(kshape)), key=lambda i: -kshape[i])):
            inj: list[int] = []
            rest: list[int] = []
            for i in order:
                trial = inj + [i]
                (inj if injective([kshape[j] for j in trial], [kflat[j] for j in trial]) else rest).append(i)
            n = math.prod(kshape[i] for i in rest)
            if best is None or n < best[0]:
                best = (n, inj, rest)
        n_rest, inj, rest = best
        if not rest or n_rest > SLICE_LOOP_LIMIT or n_rest * 4 > math.prod(kshape):
            return False
        inj.sort()
        sshape, sflat = tuple(kshape[i] for i in inj), [kflat[i] for i in inj]

        def part(arr, index):
            if arr is True or np.ndim(arr) == 0:
                return arr
            return np.broadcast_to(arr, kshape)[index]

        for combo in np.ndindex(*[kshape[i] for i in rest]):
            index = [slice(None)] * len(kshape)
            off = base
            for i, v in zip(rest, combo):
                index[i] = v
                off += v * kflat[i]
            index = tuple(index)
            self._strided(off, sshape, sflat, part(evm, index), part(cnt, index), part(anym, index), g,
                          None if who is None else tuple(part(w, index) for w in who))
        return True

    def _fold(self, g: Grid, shape, mask, zero):
        """Steps, counts, the mask and who with the address-free axes ``zero`` folded (first touch
        kept). Without such axes the steps stay raw and the mask applies through ``where=``."""
        ev, who = g.ev, g.who
        if mask is not None and not zero:
            return ev, g.mult, mask, who
        if mask is not None:
            evm = np.where(mask, ev, self.big)
            cnt = mask.sum(axis=zero, dtype=self.dt)
            if who is not None:
                who = take_first(evm, who, zero)
            evm = evm.min(axis=zero)
            if g.mult != 1:
                cnt = cnt * self.dt(g.mult)
            return evm, cnt, cnt > 0, who
        if zero and who is not None:
            who = take_first(ev, who, zero)
        evm = ev.min(axis=zero) if zero else ev
        return evm, g.mult * math.prod(shape[i] for i in zero), True, who

    def _add_general(self, g: Grid, shape, mask) -> None:
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
        self._scatter(np.broadcast_to(offs, shape), g.ev, g.mult, True if mask is None else mask, g, g.who)

    @staticmethod
    def _bits(g: Grid) -> int:
        return (READ if g.n_reads else 0) | (WRITE if g.n_writes else 0)

    def _fill_fresh(self, base, kshape, kflat, g, perm) -> None:
        def view(arr):
            return as_strided(arr[base:], shape=kshape, strides=[s * arr.itemsize for s in kflat], writeable=True)

        g.fill(g.ev_aff, perm, view(self.first))
        if g.who_aff is not None:
            g.fill(g.who_aff[0], perm, view(self.who[0]))
            g.fill(g.who_aff[1], perm, view(self.who[1]))
        if self.count is not None:
            view(self.count)[...] = g.mult * (g.n_reads + g.n_writes)
        view(self.kinds)[...] = self._bits(g)
        self.fresh = False
        total = g.mult * math.prod(kshape)
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def _strided(self, base, kshape, kflat, evm, cnt, anym, g, who):
        """Update through an injective strided view; ``anym`` (True or a bool array) says which
        points run, ``cnt`` (a number or an array) how many accesses each stands for."""
        def view(arr):
            return as_strided(arr[base:], shape=kshape, strides=[s * arr.itemsize for s in kflat], writeable=True)

        vf, vk = view(self.first), view(self.kinds)
        vc = None if self.count is None else view(self.count)
        per = g.n_reads + g.n_writes
        bits = np.uint8(self._bits(g))
        where = True if anym is True else np.broadcast_to(anym, kshape)
        if who is not None:
            vt, vb = view(self.who[0]), view(self.who[1])
            better = where if self.fresh else (evm < vf) & where
            np.copyto(vt, who[0], where=better, casting="unsafe")
            np.copyto(vb, who[1], where=better, casting="unsafe")
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
            total = int(np.sum(cnt))
        else:
            n = math.prod(kshape) if where is True else int(np.count_nonzero(where))
            total = int(cnt) * n
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def _scatter(self, offs, evm, cnt, anym, g, who):
        shape = offs.shape
        offs = np.ascontiguousarray(offs).reshape(-1)
        evm = np.ascontiguousarray(np.broadcast_to(evm, shape)).reshape(-1)
        cnt = np.ascontiguousarray(np.broadcast_to(np.asarray(cnt, dtype=np.int64), shape)).reshape(-1)
        if who is not None:
            who = [np.ascontiguousarray(np.broadcast_to(w, shape)).reshape(-1) for w in who]
        if anym is not True:
            sel = np.ascontiguousarray(np.broadcast_to(anym, shape)).reshape(-1)
            offs, evm, cnt = offs[sel], evm[sel], cnt[sel]
            if who is not None:
                who = [w[sel] for w in who]
        per = g.n_reads + g.n_writes
        np.minimum.at(self.first, offs, evm.astype(self.dt))
        if who is not None:
            # the point whose step is now the element's first touch names the thread
            hit = self.first[offs] == evm
            self.who[0][offs[hit]] = who[0][hit]
            self.who[1][offs[hit]] = who[1][hit]
        if self.count is not None:
            self.count += np.bincount(offs, weights=cnt * per, minlength=self.count.size).astype(self.dt)
        self.kinds[offs] |= np.uint8(self._bits(g))
        self.fresh = False
        total = int(cnt.sum())
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

        arrays = {"reads": (inner & READ) != 0, "writes": (inner & WRITE) != 0,
                  "first_touch": box(self.first, -1)}
        if self.count is not None:
            arrays["count"] = box(self.count, 0)
        if self.who is not None:
            arrays["thread"], arrays["block"] = box(self.who[0], -1), box(self.who[1], -1)
        return origin, arrays
