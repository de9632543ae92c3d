"""A crop too large to draw element by element, pooled before it goes to the page.

The page draws a heatmap at most a few hundred pixels a side, pooling blocks of elements to their
earliest touch (js/access/data.ts, ``sliceMap``). A 4096 x 4096 crop sent whole is 16M elements
per array, seconds to pack and send, for pixels that show one element in 200. Here the last two
dimensions are pooled the same way before sending, to at most ``DRAW_SIDE`` elements a side: per
block, the earliest-touched element's first touch, thread and block, any read, any write, and the
sum of the counts. The buffer's statistics stay exact; the payload says ``crop.pool`` per dimension.
"""

from __future__ import annotations

import math

import numpy as np

DRAW_SIDE = 1024  # array elements per side beyond which a crop is pooled


def pool_factors(shape: tuple[int, ...], side: int = DRAW_SIDE) -> list[int]:
    """Buffer elements per array element, per dimension (the last two only; 1: not pooled)."""
    nd = len(shape)
    return [math.ceil(int(n) / side) if d >= nd - 2 and int(n) > side else 1 for d, n in enumerate(shape)]


def pool_arrays(arrays: dict, pool: list[int]) -> dict:
    """The crop's arrays pooled by ``pool`` (see the module's docstring); ``first_touch`` is -1
    where nothing is touched, in a block as in an element."""
    first = np.asarray(arrays["first_touch"])
    shape = first.shape
    out_shape = tuple(math.ceil(n / f) for n, f in zip(shape, pool))
    padded = tuple(n * f for n, f in zip(out_shape, pool))
    inner = tuple(2 * d + 1 for d in range(len(shape)))  # the axes inside a block

    def split(arr: np.ndarray, fill: float) -> np.ndarray:
        """``arr`` as (n0, f0, n1, f1, ...), padded with ``fill`` (a view when nothing is padded)."""
        arr = np.asarray(arr)
        if padded != shape:
            full = np.full(padded, fill, dtype=arr.dtype)
            full[tuple(slice(0, n) for n in shape)] = arr
            arr = full
        return arr.reshape([x for n, f in zip(out_shape, pool) for x in (n, f)])

    never = np.inf if first.dtype.kind == "f" else np.iinfo(first.dtype).max
    key = np.where(first < 0, first.dtype.type(never), first)
    earliest = _reduce_blocks(split(key, never), np.minimum)
    out = {
        "reads": _reduce_blocks(split(arrays["reads"], False), np.logical_or),
        "writes": _reduce_blocks(split(arrays["writes"], False), np.logical_or),
        "first_touch": np.where(earliest == never, first.dtype.type(-1), earliest),
    }
    if "count" in arrays:
        out["count"] = _reduce_blocks(split(arrays["count"], 0), np.add)
    if "thread" in arrays or "block" in arrays:  # GPU: who touched the earliest element of each block
        nd = len(shape)
        order = [2 * d for d in range(nd)] + list(inner)
        pick = np.argmin(split(key, never).transpose(order).reshape(out_shape + (-1,)), axis=-1)[..., None]
        for name in ("thread", "block"):
            if name in arrays:
                per_block = split(arrays[name], -1).transpose(order).reshape(out_shape + (-1,))
                out[name] = np.take_along_axis(per_block, pick, axis=-1)[..., 0]
    return out


def _reduce_blocks(blocks: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc`` over the block axes (odd) of a (n0, f0, n1, f1, ...) array, one elementwise pass
    per element of a block's side (numpy reduces short strided axes an order slower)."""
    out = blocks
    for axis in range(out.ndim - 1, 0, -2):
        take: list[slice | int] = [slice(None)] * out.ndim
        take[axis] = 0
        acc = out[tuple(take)].copy()
        for k in range(1, out.shape[axis]):
            take[axis] = k
            ufunc(acc, out[tuple(take)], out=acc)
        out = acc
    return out
