"""Warp statistics: coalescing of global accesses and bank conflicts of shared ones, for one warp.

A *request* is one execution of an access by the warp: all loops other than the thread-bound
ones and the vectorised ones fixed. Threads are linearised x fastest (``x + nx * (y + ny * z)``)
and the warp holds 32 consecutive ones. Global and local buffers: distinct ``sector_bytes``
sectors per request. Shared buffers (in the layout TVM's buffer compaction gives them at build
time): the wavefronts a request needs with ``banks`` banks of ``bank_bytes`` bytes; an access of
8 or 16 bytes per thread is served in 2 or 4 phases of 16 or 8 threads, as on NVIDIA GPUs;
``bank_conflicts`` = wavefronts - phases.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mlc_lab.core.access.expr import evaluate
from mlc_lab.core.access.footprint import groups, index_of, loop_of
from mlc_lab.core.access.budget import Budget
from mlc_lab.core.access.grid import axis, check_points, plan_access
from mlc_lab.core.access.model import GpuStats, WarpAccess
from mlc_lab.model.access.program import AccessProgram
from mlc_lab.core.access.space import BLOCK_TAGS, THREAD_TAGS, Query
from mlc_lab.errors import AccessAnalysisError

_BIG = np.iinfo(np.int64).max


def gpu_stats(
    program: AccessProgram,
    loop,
    at: dict | None = None,
    warp: int | None = None,
    block: dict | None = None,
    *,
    shape_vars: dict | None = None,
    sector_bytes: int = 32,
    banks: int = 32,
    bank_bytes: int = 4,
) -> GpuStats:
    """Per-access warp statistics under ``loop``, for one warp of one thread block.

    ``warp`` defaults to the warp of the thread fixed by ``at``; ``block`` gives blockIdx values
    (by tag or loop name) for block loops inside ``loop`` (their first value otherwise).
    """
    index = index_of(program, shape_vars)
    q = Query(index, loop_of(index.prog, loop), at)
    dims = index.launch()
    nx, ny, nz = (dims.get(t, 1) for t in THREAD_TAGS)
    nthreads = nx * ny * nz
    if warp is None:
        tvals = {lp.tag: q.fixed[lp.id] for lp in q.enclosing if lp.tag in THREAD_TAGS}
        lin = tvals.get("threadIdx.x", 0) + nx * (tvals.get("threadIdx.y", 0) + ny * tvals.get("threadIdx.z", 0))
        warp = lin // 32
    tids = np.arange(warp * 32, min(nthreads, warp * 32 + 32))
    if tids.size == 0:
        raise AccessAnalysisError(f"warp {warp} is past the {nthreads} threads of a block")
    tcoord = {"threadIdx.x": tids % nx, "threadIdx.y": (tids // nx) % ny, "threadIdx.z": tids // (nx * ny)}
    results, budget = [], Budget()
    for acc, nr, nw, _off in groups(q):
        res = _warp_access(q, acc, nr, nw, tcoord, dict(block or {}), sector_bytes, banks, bank_bytes, budget)
        if res is not None:
            results.append(res)
    return GpuStats(int(warp), [int(t) for t in tids], {k: int(v) for k, v in dims.items()}, results)


def _lanes(q: Query, acc, block: dict):
    """Lane loops (thread-bound, then vectorised, of the access's chain) and the fixed values."""
    lane_loops, fixed = [], dict(q.fixed)
    for lid in q.chain(acc):
        t = q.resolve(lid)
        if t.tag in THREAD_TAGS:
            if t not in lane_loops:
                lane_loops.append(t)
        elif t.tag in BLOCK_TAGS and t.id not in q.fixed:
            fixed[t.id] = int(block.get(t.name, block.get(t.tag, t.min)))
        elif t.kind == "vectorized" and t not in lane_loops:
            lane_loops.append(t)
    lane_ids = {lp.id for lp in lane_loops}
    for lp in lane_loops:
        fixed.pop(lp.id, None)
    inside = {k: v for k, v in q.inside.items() if k not in lane_ids and v.tag not in BLOCK_TAGS and k not in fixed}
    inside.update({lp.id: lp for lp in lane_loops})
    return lane_loops, fixed, inside


def _lane_values(lane_loops: list, tcoord: dict):
    """Per lane loop, its value in each of the warp's lanes (threads x vector lanes)."""
    nthr = len(next(iter(tcoord.values())))
    vec = [lp for lp in lane_loops if lp.tag not in THREAD_TAGS]
    nvec = math.prod(int(lp.extent) for lp in vec) if vec else 1
    vals = {lp.id: np.repeat(tcoord[lp.tag], nvec) for lp in lane_loops if lp.tag in THREAD_TAGS}
    rem = np.arange(nvec)
    for lp in reversed(vec):
        vals[lp.id] = np.tile(int(lp.min) + rem % int(lp.extent), nthr)
        rem = rem // int(lp.extent)
    return vals, nthr, nvec


def _addresses(q, acc, plan, fixed, lane_vals, nl):
    """Byte offsets and activity per (request point, lane), in the buffer's (compacted) layout."""
    ndim = len(plan.shape)
    ar = [axis(n, i, ndim + 1) for i, n in enumerate(plan.shape)]
    env = {}
    for lp in plan.loops:
        env[lp.id] = lane_vals[lp.id].reshape((1,) * ndim + (nl,)) if lp.id in lane_vals else plan.loop_value(lp, ar)
    for k, v in fixed.items():
        env.setdefault(k, v)
    for lid in q.chain(acc):
        t = q.resolve(lid)
        if t.id != lid and t.id in env:
            env[lid] = env[t.id]
    active = np.ones((1,) * (ndim + 1), dtype=bool)
    for g in q.index.guards[id(acc)]:
        active = active & np.asarray(evaluate(g, env), dtype=bool)
    for lid in q.chain(acc):
        t = q.resolve(lid)
        if t.id != lid and t.id in lane_vals and q.index.extents[lid] < q.index.extents[t.id]:
            active = active & (env[t.id] < q.index.extents[lid])
    idx = [np.asarray(evaluate(ix, env), dtype=np.int64) for ix in acc.indices]
    return idx, active


def _layout(info, ndim: int):
    """Shape and strides (elements) the addresses are computed in: TVM's compacted layout for
    shared buffers when it has the same rank, else the buffer's own row-major layout."""
    shape, strides = info.shape, None
    if info.scope.startswith("shared") and info.layout and len(info.layout[0]) == ndim:
        shape, strides = info.layout
    if strides is None:
        strides, s = [], 1
        for ext in reversed(shape):
            strides.append(s)
            s *= int(ext)
        strides.reverse()
    return [int(x) for x in shape], [int(x) for x in strides]


def _warp_access(q: Query, acc, nr, nw, tcoord, block, sector_bytes, banks, bank_bytes, budget):
    info = q.index.prog.buffers[acc.buffer]
    lane_loops, fixed, inside = _lanes(q, acc, block)
    plan = plan_access(q, acc, frozenset(lp.id for lp in lane_loops), fixed, inside)
    if plan is None:
        return None
    lane_vals, nthr, nvec = _lane_values(lane_loops, tcoord)
    nl = nthr * nvec
    check_points(plan, budget, 8 * 6 * nl, f"the warp requests of {acc.buffer} in block {acc.block}")
    idx, active = _addresses(q, acc, plan, fixed, lane_vals, nl)
    cshape, cstrides = _layout(info, len(idx))
    addr: Any = 0  # an int, then an array
    for i, st in zip(idx, cstrides):
        addr = addr + i * st
    shape = tuple(plan.shape) + (nl,)
    addr = np.broadcast_to(addr * info.itemsize, shape).reshape(-1, nl)
    act = np.broadcast_to(active, shape).reshape(-1, nl)
    rows = act.any(axis=1)
    addr, act = addr[rows], act[rows]
    out = {
        "buffer": acc.buffer,
        "block": acc.block,
        "scope": info.scope,
        "kind": "read+write" if nr and nw else ("read" if nr else "write"),
        "index": ", ".join(str(i) for i in acc.indices),
        "requests": int(rows.sum()) * plan.mult * (nr + nw),
        "lanes": int(nl),
        "vector": int(nvec),
        "active_lanes": float(act.sum() / max(1, act.shape[0])),
    }
    m = plan.mult * (nr + nw)
    if addr.shape[0] == 0:
        pass
    elif info.scope.startswith("local"):
        out["note"] = "per-thread (registers or local memory): no coalescing figure"
    elif not info.scope.startswith("shared"):
        out.update(_sectors(addr, act, info.itemsize, sector_bytes, m))
    else:
        out.update(_banks(addr, act, info.itemsize * nvec, nthr, nvec, nl, banks, bank_bytes, m))
        out["layout"] = {"shape": cshape, "strides": cstrides}
    out.pop("phases", None)
    return WarpAccess(**out)


def _distinct_per_row(values, act):
    fill = np.where(act, values, _BIG).min(axis=1, keepdims=True)
    s = np.sort(np.where(act, values, fill), axis=1)
    return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)


def _sectors(addr, act, itemsize, sector_bytes, m):
    distinct = _distinct_per_row(addr // sector_bytes, act)
    useful = _distinct_per_row(addr, act) * itemsize  # distinct bytes asked for
    return {
        "sectors_per_request": float(distinct.mean()),
        "sectors": int(distinct.sum()) * m,
        "efficiency": float(useful.sum() / (distinct.sum() * sector_bytes)),
    }


def _banks(addr, act, per_thread, nthr, nvec, nl, banks, bank_bytes, m):
    phases = 1 if per_thread <= bank_bytes else min(nthr, per_thread // bank_bytes)
    tpp = max(1, -(-nthr // phases))
    words = addr // bank_bytes
    wav = np.zeros(words.shape[0], dtype=np.int64)
    ways_max = np.zeros(words.shape[0], dtype=np.int64)
    for ph in range(phases):
        sl = slice(ph * tpp * nvec, min(nl, (ph + 1) * tpp * nvec))
        w, a = words[:, sl], act[:, sl]
        if w.shape[1] == 0:
            continue
        fill = np.where(a, w, _BIG).min(axis=1, keepdims=True)
        s = np.sort(np.where(a, w, fill), axis=1)
        uniq = np.ones_like(s, dtype=bool)
        uniq[:, 1:] = np.diff(s, axis=1) != 0
        rowid = np.repeat(np.arange(s.shape[0]), s.shape[1]).reshape(s.shape)
        cnt = np.bincount((rowid * banks + s % banks)[uniq], minlength=s.shape[0] * banks).reshape(-1, banks)
        has = a.any(axis=1)
        ways = np.where(has, cnt.max(axis=1), 0)
        wav += ways
        ways_max = np.maximum(ways_max, ways)
    return {
        "phases": int(phases),
        "wavefronts": int(wav.sum()) * m,
        "bank_conflicts": int((wav - phases).clip(min=0).sum()) * m,
        "ways": float(ways_max.mean()),
        "max_ways": int(ways_max.max()),
    }
