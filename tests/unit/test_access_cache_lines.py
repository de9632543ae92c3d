"""Cache lines of a footprint, counted row by row when the buffer's rows start on a line, agree with
the count over every touched element's address (random masks, offsets and item sizes)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.core.access.model import CACHE_LINE, _lines_of_aligned_rows


def lines_by_address(touched: np.ndarray, origin: tuple, shape: tuple, itemsize: int) -> int:
    idx = np.nonzero(touched)
    flat = np.ravel_multi_index(tuple(i + o for i, o in zip(idx, origin)), shape)
    return int(np.unique(flat * itemsize // CACHE_LINE).size)


@settings(max_examples=150, deadline=None)
@given(
    itemsize=st.sampled_from([1, 2, 4, 8]),
    rows=st.integers(1, 5),
    row_lines=st.integers(1, 4),
    data=st.data(),
)
def test_row_by_row_count_matches_the_addresses(itemsize, rows, row_lines, data):
    per_line = CACHE_LINE // itemsize
    shape = (rows + 2, row_lines * per_line)
    r0 = data.draw(st.integers(0, 2))
    c0 = data.draw(st.integers(0, shape[1] - 1))
    ncols = data.draw(st.integers(1, shape[1] - c0))
    nrows = data.draw(st.integers(1, shape[0] - r0))
    seed = data.draw(st.integers(0, 2**31 - 1))
    density = data.draw(st.sampled_from([0.02, 0.3, 1.0]))
    touched = np.random.default_rng(seed).random((nrows, ncols)) < density
    expected = lines_by_address(touched, (r0, c0), shape, itemsize)
    assert _lines_of_aligned_rows(touched, c0, per_line) == expected
