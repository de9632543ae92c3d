"""A crop too large to draw is pooled before it is sent: per block the earliest touch (and who made
it), any read, any write, the sum of the counts; compared with a block-by-block loop."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.widgets.access.pool import pool_arrays, pool_factors


def brute(arrays: dict, pool: list[int]) -> dict:
    first = arrays["first_touch"]
    out_shape = tuple(math.ceil(n / f) for n, f in zip(first.shape, pool))
    out = {k: np.zeros(out_shape, dtype=v.dtype) for k, v in arrays.items()}
    for idx in np.ndindex(*out_shape):
        block = tuple(slice(i * f, (i + 1) * f) for i, f in zip(idx, pool))
        ft = first[block]
        touched = ft >= 0
        out["reads"][idx] = arrays["reads"][block].any()
        out["writes"][idx] = arrays["writes"][block].any()
        if "count" in arrays:
            out["count"][idx] = arrays["count"][block].sum()
        if touched.any():
            flat = np.where(touched, ft.astype(np.int64), np.iinfo(np.int64).max).ravel()
            at = int(np.argmin(flat))
            out["first_touch"][idx] = flat[at]
            for name in ("thread", "block"):
                if name in arrays:
                    out[name][idx] = arrays[name][block].ravel()[at]
        else:
            out["first_touch"][idx] = -1
            for name in ("thread", "block"):
                if name in arrays:
                    out[name][idx] = -1
    return out


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 13), min_size=1, max_size=3).map(tuple),
    pool_side=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
    gpu=st.booleans(),
)
def test_pooled_blocks_match_a_block_by_block_loop(shape, pool_side, seed, gpu):
    rng = np.random.default_rng(seed)
    touched = rng.random(shape) < 0.4
    reads = touched & (rng.random(shape) < 0.7)
    writes = touched & ~reads
    first = np.where(touched, rng.permutation(math.prod(shape)).reshape(shape), -1).astype(np.int32)
    arrays = {"reads": reads, "writes": writes, "first_touch": first, "count": np.where(touched, 2, 0)}
    if gpu:
        arrays["thread"] = np.where(touched, rng.integers(0, 64, shape), -1)
        arrays["block"] = np.where(touched, rng.integers(0, 8, shape), -1)
    pool = [1] * (len(shape) - 2) + [pool_side] * min(2, len(shape))
    got, want = pool_arrays(arrays, pool), brute(arrays, pool)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_only_the_last_two_dimensions_beyond_the_drawn_side_are_pooled():
    assert pool_factors((4096, 4096)) == [4, 4]
    assert pool_factors((3, 4096, 100)) == [1, 4, 1]
    assert pool_factors((5000,)) == [5]
    assert pool_factors((1024, 1024)) == [1, 1]
