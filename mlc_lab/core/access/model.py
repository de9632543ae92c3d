"""What the access analysis answers, as plain data with one encoding each.

:class:`Footprint` is what one loop does to one buffer. Its arrays cover the *box* of the buffer
that the analysis worked on (``origin`` + the arrays' shape, inside the buffer, holding every
touched element); ``crop()`` narrows them to the touched bounding box, and ``reads`` /
``writes`` / ``first_touch`` / ``count`` / ``thread`` / ``block`` give them over the whole buffer
(built on first use). :class:`LoopFootprint` is the answer for a loop: every buffer, plus the
facts the views show (steps, launch, the enclosing values, per-access strides).

Conventions
-----------
* ``first_touch[e]`` is the step, counted from 0 at the first iteration of the loop, at which
  element ``e`` is first read or written (-1: never). A step is one execution of a leaf statement
  (predicated-off iterations and both branches of an ``if`` count, thread-bound loops run thread
  after thread; a ``T.init()`` shares the step of the first statement of its block's body; a
  tensorized block is one step).
* ``thread`` / ``block`` (GPU programs only): linear id, x fastest (``x + nx*(y + ny*z)``), of the
  thread and block of that first touch; -1 where untouched.
* ``cache_lines`` counts distinct 64-byte lines, the buffer's first element on a line boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mlc_lab.core.access.budget import BUDGET_BYTES
from mlc_lab.model.access.payload import BufferStats, GpuStats, WarpAccess  # noqa: F401  (re-exported: the answers live in the model)
from mlc_lab.errors import AccessAnalysisError

CACHE_LINE = 64
_FILL = {"reads": False, "writes": False, "first_touch": -1, "count": 0, "thread": -1, "block": -1}


def _packed(mask: np.ndarray) -> dict:
    return {
        "dtype": "bits",
        "shape": list(mask.shape),
        "data": np.packbits(np.ascontiguousarray(mask, dtype=bool).reshape(-1)).tobytes(),
    }


def _raw(arr: np.ndarray | None) -> dict:
    a = np.ascontiguousarray(arr)
    if a.dtype.kind == "i" and (a.size == 0 or (a.max() < 2**31 and a.min() >= -(2**31))):
        a = a.astype(np.int32)
    return {"dtype": a.dtype.str.lstrip("<=|"), "shape": list(a.shape), "data": a.tobytes()}


class WhoBox(dict):
    """The box arrays of a GPU footprint, with ``thread`` and ``block`` worked out from
    ``first_touch`` on first use (``who``: steps -> (thread ids, block ids)) rather than when the
    analysis runs: they are exact, but decoding tens of millions of first touches costs seconds
    that a caller asking for counts or statistics never needs. ``cropped`` decodes only a slice."""

    _LAZY = ("thread", "block")

    def __init__(self, arrays: dict, who, untouched, dtype):
        super().__init__(arrays)
        for k in self._LAZY:
            dict.__setitem__(self, k, None)
        self._who, self._untouched, self._dt = who, untouched, dtype

    def _decode(self, sl=None) -> tuple[np.ndarray, np.ndarray]:
        first = dict.__getitem__(self, "first_touch")
        untouched = self._untouched
        if sl is not None:
            first = first[sl]
            untouched = None if untouched is None else untouched[sl]
        if untouched is None or not untouched.any():
            thread, block = (np.asarray(a).reshape(first.shape) for a in self._who(first))
            return thread, block
        thread = np.full(first.shape, -1, self._dt)
        block = np.full(first.shape, -1, self._dt)
        touched = ~untouched
        thread[touched], block[touched] = self._who(first[touched])
        return thread, block

    def _resolve(self) -> None:
        if dict.__getitem__(self, "thread") is None:
            thread, block = self._decode()
            dict.__setitem__(self, "thread", thread)
            dict.__setitem__(self, "block", block)

    def __getitem__(self, key):
        if key in self._LAZY:
            self._resolve()
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def values(self):
        self._resolve()
        return dict.values(self)

    def items(self):
        self._resolve()
        return dict.items(self)

    def __reduce__(self):  # copied or pickled: as the plain dict of arrays it stands for
        self._resolve()
        return (dict, (dict(dict.items(self)),))

    def cropped(self, sl) -> dict:
        """Every array over ``sl``; thread and block decoded over that part only (unless known)."""
        out = {k: v[sl] for k, v in dict.items(self) if k not in self._LAZY}
        if dict.__getitem__(self, "thread") is None:
            out["thread"], out["block"] = self._decode(sl)
        else:
            out["thread"], out["block"] = dict.__getitem__(self, "thread")[sl], dict.__getitem__(self, "block")[sl]
        return out


@dataclass
class Footprint:
    """What one loop (over its iterations, enclosing loops fixed) does to one buffer."""

    buffer: str
    shape: tuple
    dtype: str
    scope: str
    itemsize: int
    origin: tuple  # where the box arrays start in the buffer
    box: dict  # name -> array over the box: reads, writes, first_touch, count?, thread?, block?
    n_reads: int
    n_writes: int
    strides: dict = field(default_factory=dict)  # loop name -> stride in elements (None: not affine)
    gpu: bool = False  # thread / block ids are known (the kernel binds threads)
    counted: bool = False  # per-element counts were asked for

    # --- whole-buffer arrays (built on first use) ------------------------------------------------
    def _whole(self, name: str):
        if name not in self.box:
            if (name == "count" and not self.counted) or (name in ("thread", "block") and not self.gpu):
                return None
            if name in ("thread", "block"):
                return np.broadcast_to(np.int64(-1), self.shape)
        fill = _FILL[name]
        arr = self.box.get(name)
        dtype = bool if name in ("reads", "writes") else (arr.dtype if arr is not None else np.int64)
        if arr is None or arr.size == 0:
            return np.broadcast_to(np.asarray(fill, dtype=dtype), self.shape)
        if tuple(arr.shape) == tuple(self.shape):
            return arr
        nbytes = math.prod(self.shape) * np.dtype(dtype).itemsize
        if nbytes > BUDGET_BYTES:
            raise AccessAnalysisError(
                f"buffer {self.buffer} is too large to expand to a whole-buffer array ({nbytes >> 20} MB); "
                f"use Footprint.crop() or .box"
            )
        out = np.full(self.shape, fill, dtype=dtype)
        out[self.box_slices()] = arr
        return out

    def box_slices(self) -> tuple:
        shape = next(iter(dict.values(self.box))).shape
        return tuple(slice(o, o + n) for o, n in zip(self.origin, shape))

    @cached_property
    def reads(self) -> np.ndarray:
        return self._whole("reads")

    @cached_property
    def writes(self) -> np.ndarray:
        return self._whole("writes")

    @cached_property
    def first_touch(self) -> np.ndarray:
        return self._whole("first_touch")

    @cached_property
    def count(self) -> np.ndarray | None:
        return self._whole("count")

    @cached_property
    def thread(self) -> np.ndarray | None:
        return self._whole("thread")

    @cached_property
    def block(self) -> np.ndarray | None:
        return self._whole("block")

    # --- statistics ------------------------------------------------------------------------------
    @cached_property
    def box_touched(self) -> np.ndarray:
        if "reads" not in self.box:
            return np.zeros((0,) * len(self.shape), dtype=bool)
        return self.box["reads"] | self.box["writes"]

    @cached_property
    def touched(self) -> np.ndarray:
        return self.reads | self.writes

    @cached_property
    def distinct(self) -> int:
        return int(np.count_nonzero(self.box_touched))

    @property
    def accesses(self) -> int:
        return self.n_reads + self.n_writes

    @property
    def reuse(self) -> float:
        """Accesses per distinct element (0 when untouched)."""
        return self.accesses / self.distinct if self.distinct else 0.0

    @cached_property
    def cache_lines(self) -> int:
        if not self.distinct:
            return 0
        if not self.shape:
            return 1
        per_line = CACHE_LINE // self.itemsize if CACHE_LINE % self.itemsize == 0 else 0
        if per_line and int(self.shape[-1]) % per_line == 0:
            return _lines_of_aligned_rows(self.box_touched, self.origin[-1], per_line)
        # nonzero walks the box in C order, so the flat indices come out sorted
        idx = np.nonzero(self.box_touched)
        flat = np.ravel_multi_index(tuple(i + o for i, o in zip(idx, self.origin)), self.shape)
        if CACHE_LINE % self.itemsize == 0:
            lines = flat // (CACHE_LINE // self.itemsize)
            return 1 + int(np.count_nonzero(np.diff(lines)))
        byte = flat.astype(np.int64) * self.itemsize
        return int(np.unique(np.concatenate([byte // CACHE_LINE, (byte + self.itemsize - 1) // CACHE_LINE])).size)

    @cached_property
    def bounds(self) -> list:
        """Per dimension ``[min, max]`` of the touched indices (None when untouched)."""
        if not self.distinct:
            return [None] * len(self.shape)
        t = self.box_touched
        out = []
        for d in range(len(self.shape)):
            other = tuple(i for i in range(len(self.shape)) if i != d)
            hit = np.flatnonzero(t.any(axis=other) if other else t)
            out.append([int(hit[0]) + self.origin[d], int(hit[-1]) + self.origin[d]])
        return out

    @property
    def steps(self) -> int:
        """One past the last first touch (0 when untouched): when the last new element is reached."""
        return int(self.box["first_touch"].max()) + 1 if self.distinct else 0

    def crop(self) -> tuple[list, dict]:
        """(offset, arrays) over the bounding box of the touched elements."""
        if not self.distinct:
            return [0] * len(self.shape), {}
        sl = tuple(slice(b[0] - o, b[1] - o + 1) for b, o in zip(self.bounds, self.origin))
        if isinstance(self.box, WhoBox):
            return [b[0] for b in self.bounds], self.box.cropped(sl)
        return [b[0] for b in self.bounds], {k: v[sl] for k, v in self.box.items()}

    def summary(self) -> BufferStats:
        return {
            "buffer": self.buffer,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "scope": self.scope,
            "itemsize": self.itemsize,
            "distinct": self.distinct,
            "accesses": self.accesses,
            "n_reads": self.n_reads,
            "n_writes": self.n_writes,
            "reuse": self.reuse,
            "cache_lines": self.cache_lines,
            "bounds": self.bounds,
            "strides": {k: (None if v is None else int(v)) for k, v in self.strides.items()},
        }

    def to_json(self) -> dict:
        """JSON-safe scalars; arrays as ``{"dtype", "shape", "data": bytes}`` (binary buffers).

        Masks are bit-packed (``np.packbits``, big-endian bit order, row-major); integer arrays
        are little-endian ``int32`` when they fit. Arrays cover the whole buffer.
        """
        out: dict = dict(self.summary())
        out["reads"] = _packed(self.reads)
        out["writes"] = _packed(self.writes)
        out["first_touch"] = _raw(self.first_touch)
        if self.count is not None:
            out["count"] = _raw(self.count)
        if self.gpu:
            out["thread"] = _raw(self.thread)
            out["block"] = _raw(self.block)
        return out


class LoopFootprint(dict):
    """Every buffer's :class:`Footprint` (a dict by buffer name) and the facts of the query."""

    def __init__(self, buffers: dict, *, loop: str, steps: int, at: dict, launch: dict, accesses: list):
        super().__init__(buffers)
        self.loop = loop  # the loop's name
        self.total_steps = steps  # steps of the loop's whole run
        self.at = at  # enclosing loop name -> value used
        self.launch = launch  # thread tag -> extent ({} on CPU)
        self.accesses = accesses  # per access: buffer, block, kind, strides

    @property
    def gpu(self) -> bool:
        return bool(self.launch)

    @property
    def steps(self) -> int:
        """One past the last first touch over all buffers (the length of the scrubber)."""
        return max([fp.steps for fp in self.values()] or [0])


def _lines_of_aligned_rows(touched: np.ndarray, col0: int, per_line: int) -> int:
    """Cache lines holding a touched element when every row of the buffer (its last dimension)
    starts on a line: no line spans two rows, so each row's lines are counted apart, the box's
    columns (from ``col0``) cut into line-aligned groups, without listing the elements."""
    skip = col0 % per_line
    cols = touched.shape[-1]
    width = -(-(skip + cols) // per_line) * per_line
    if skip == 0 and width == cols:
        grouped = touched
    else:
        grouped = np.zeros(touched.shape[:-1] + (width,), dtype=bool)
        grouped[..., skip : skip + cols] = touched
    return int(np.count_nonzero(grouped.reshape(touched.shape[:-1] + (width // per_line, per_line)).any(axis=-1)))
