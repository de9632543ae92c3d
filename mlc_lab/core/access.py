"""Memory footprint of a loop: which elements of every buffer it touches, when, how often, by whom.

Plain data for the access view. The analysis itself (exact, affine-aware) lives in
``mlc_lab.tvm.access``; this module gives it a shape that the widgets and a static export can use
without TVM: :class:`Footprint` per buffer and :class:`GpuStats` for one warp.

Conventions
-----------
* ``first_touch[e]`` is the step, counted from 0 at the first iteration of the loop, at which
  element ``e`` is first read or written (-1: never). A step is one execution of a leaf statement;
  see ``mlc_lab.tvm.access`` for the exact reading of the program (predicated-off iterations and
  both branches of an ``if`` count, thread-bound loops run thread after thread).
* ``thread`` / ``block`` (GPU programs only): linear id, x fastest (``x + nx*(y + ny*z)``), of the
  thread and block of that first touch; -1 where untouched.
* ``cache_lines`` counts distinct 64-byte lines, the buffer's first element on a line boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mlc_lab.tvm import access as _tvm_access

__all__ = ["Footprint", "GpuStats", "WarpAccess", "footprint", "gpu_stats", "AccessAnalysisError"]

AccessAnalysisError = _tvm_access.AccessAnalysisError
CACHE_LINE = 64


def _packed(mask: np.ndarray) -> dict:
    return {"dtype": "bits", "shape": list(mask.shape),
            "data": np.packbits(np.ascontiguousarray(mask, dtype=bool).reshape(-1)).tobytes()}


def _raw(arr: np.ndarray) -> dict:
    a = np.ascontiguousarray(arr)
    if a.dtype == np.int64 and (a.size == 0 or (a.max() < 2**31 and a.min() >= -(2**31))):
        a = a.astype(np.int32)
    return {"dtype": a.dtype.str.lstrip("<=|"), "shape": list(a.shape), "data": a.tobytes()}


@dataclass
class Footprint:
    """What one loop (over its iterations, enclosing loops fixed) does to one buffer."""

    buffer: str
    shape: tuple
    dtype: str
    scope: str
    itemsize: int
    reads: np.ndarray            # bool, buffer shape
    writes: np.ndarray           # bool, buffer shape
    first_touch: np.ndarray      # int, -1 where untouched
    count: np.ndarray | None     # int: accesses of each element (when asked for)
    n_reads: int
    n_writes: int
    strides: dict = field(default_factory=dict)     # loop name -> stride in elements (None: not affine)
    thread: np.ndarray | None = None
    block: np.ndarray | None = None

    @cached_property
    def touched(self) -> np.ndarray:
        return self.reads | self.writes

    @cached_property
    def distinct(self) -> int:
        return int(np.count_nonzero(self.touched))

    @property
    def accesses(self) -> int:
        return self.n_reads + self.n_writes

    @property
    def reuse(self) -> float:
        """Accesses per distinct element (0 when untouched)."""
        return self.accesses / self.distinct if self.distinct else 0.0

    @cached_property
    def cache_lines(self) -> int:
        flat = self.touched.reshape(-1)
        if flat.size == 0 or not self.distinct:
            return 0
        per = CACHE_LINE // self.itemsize if CACHE_LINE % self.itemsize == 0 else 0
        if per >= 1:
            pad = (-flat.size) % per
            if pad:
                flat = np.concatenate([flat, np.zeros(pad, dtype=bool)])
            return int(np.count_nonzero(flat.reshape(-1, per).any(axis=1)))
        idx = np.flatnonzero(flat) * self.itemsize
        return int(np.unique(np.concatenate([idx // CACHE_LINE, (idx + self.itemsize - 1) // CACHE_LINE])).size)

    @cached_property
    def bounds(self) -> list:
        """Per dimension ``[min, max]`` of the touched indices (None when untouched)."""
        if not self.distinct:
            return [None] * len(self.shape)
        out = []
        for d in range(len(self.shape)):
            other = tuple(i for i in range(len(self.shape)) if i != d)
            hit = np.flatnonzero(self.touched.any(axis=other) if other else self.touched)
            out.append([int(hit[0]), int(hit[-1])])
        return out

    def summary(self) -> dict:
        return {"buffer": self.buffer, "shape": list(self.shape), "dtype": self.dtype, "scope": self.scope,
                "itemsize": self.itemsize, "distinct": self.distinct, "accesses": self.accesses,
                "n_reads": self.n_reads, "n_writes": self.n_writes, "reuse": self.reuse,
                "cache_lines": self.cache_lines, "bounds": self.bounds,
                "strides": {k: (None if v is None else int(v)) for k, v in self.strides.items()}}

    def to_json(self) -> dict:
        """JSON-safe scalars; arrays as ``{"dtype", "shape", "data": bytes}`` (binary buffers).

        Masks are bit-packed (``np.packbits``, big-endian bit order, row-major); integer arrays
        are little-endian ``int32`` when they fit.
        """
        out = self.summary()
        out["reads"] = _packed(self.reads)
        out["writes"] = _packed(self.writes)
        out["first_touch"] = _raw(self.first_touch)
        if self.count is not None:
            out["count"] = _raw(self.count)
        if self.thread is not None:
            out["thread"] = _raw(self.thread)
            out["block"] = _raw(self.block)
        return out


def footprint(func, loop, at: dict | None = None, counts: bool = False) -> dict[str, Footprint]:
    """Footprint of every buffer of ``func`` (a PrimFunc) over the iterations of ``loop``.

    ``loop`` is the ``For`` node, ``at`` maps the names of enclosing loops to their values
    (missing ones are at their first value). ``counts=True`` adds the per-element access counts
    (``Footprint.count``, a reuse heat map; one more pass per access); the totals are always there.
    Raises :class:`AccessAnalysisError` with a sentence a
    person can act on when the loop nest cannot be analysed.
    """
    raw = _tvm_access.analyze_footprint(func, loop, at, counts=counts)
    out = {}
    for name, b in raw["buffers"].items():
        out[name] = Footprint(
            buffer=name, shape=tuple(b["shape"]), dtype=b["dtype"], scope=b["scope"], itemsize=b["itemsize"],
            reads=b["reads"], writes=b["writes"], first_touch=b["first_touch"], count=b["count"],
            n_reads=int(b["n_reads"]), n_writes=int(b["n_writes"]), strides=dict(b["strides"]),
            thread=b.get("thread"), block=b.get("block"))
    return out


@dataclass
class WarpAccess:
    """One access of a block body, as one warp issues it (Nsight Compute vocabulary)."""

    buffer: str
    block: str
    kind: str                    # read / write / read+write
    scope: str
    index: str
    requests: int                # warp-level instructions over the loop's iterations
    lanes: int                   # threads x vector lanes in one request
    vector: int
    active_lanes: float
    sectors_per_request: float | None = None    # global memory: 32-byte sectors per request
    sectors: int | None = None
    efficiency: float | None = None             # bytes asked for / bytes of the sectors moved
    wavefronts: int | None = None               # shared memory
    bank_conflicts: int | None = None           # extra wavefronts over the ideal
    ways: float | None = None                   # mean of the worst n-way conflict per request
    max_ways: int | None = None
    layout: dict | None = None                  # shared: compacted shape/strides used for banks
    note: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class GpuStats:
    warp: int
    threads: list
    launch: dict
    accesses: list

    def to_json(self) -> dict:
        return {"warp": self.warp, "threads": list(self.threads), "launch": dict(self.launch),
                "accesses": [a.to_json() for a in self.accesses]}


def gpu_stats(func, loop, at: dict | None = None, warp: int | None = None, block: dict | None = None) -> GpuStats:
    """Coalescing and bank conflicts of every access under ``loop`` for one warp of one block."""
    raw = _tvm_access.analyze_gpu(func, loop, at, warp=warp, block=block)
    fields = set(WarpAccess.__dataclass_fields__)
    accs = []
    for a in raw["accesses"]:
        kw = {k: v for k, v in a.items() if k in fields and k != "bytes_per_request"}
        accs.append(WarpAccess(**kw))
    return GpuStats(raw["warp"], raw["threads"], raw["launch"], accs)
