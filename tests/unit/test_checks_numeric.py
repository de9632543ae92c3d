"""The GPU lab against the numeric check (OpenCL on the CPU, ``mlc_lab.core.numeric_gpu``): every
submission the checks find free of hazards computes the right numbers, and the racing and out-of-bounds
ones, flagged before anything runs, compute wrong ones. About 10 s a submission: ``pytest -m full``."""

from __future__ import annotations

import pytest

from mlc_lab.core.numeric_gpu import numeric_check
from tests.labs import gpu_matmul as lab

pytestmark = pytest.mark.full

# what the numeric check says when the schedule does not run as a kernel
NOT_RUN = {"no_write_cache": "error"}      # flagged 'allocation': TVM cannot build it (global memory in a kernel)
SLOW = {"copy_by_every_thread": 300.0}     # every thread copies every tile: slow to simulate


@pytest.mark.parametrize("name", sorted(lab.SUBMISSIONS))
def test_numbers_agree_with_the_hazards(name):
    session = lab.session_of(name)
    _fails, kinds = lab.EXPECTED[name]
    result = numeric_check(session, timeout_s=SLOW.get(name, 60.0))
    if name in NOT_RUN:
        assert result.verdict == NOT_RUN[name], result.message
    elif kinds & {"race", "out_of_bounds", "thread_extent"}:
        assert not result.ok and result.verdict in ("mismatch", "crash"), result.message
    else:
        assert result.ok, result.message
