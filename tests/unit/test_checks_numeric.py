"""The GPU lab against the numeric check (OpenCL on the CPU, ``mlc_lab.core.numeric_gpu``): every
submission the checks find free of hazards computes the right numbers, and the racing and out-of-bounds
ones, flagged before anything runs, compute wrong ones. About 10 s a submission: ``pytest -m full``."""

from __future__ import annotations

import pytest

from mlc_lab.core.numeric_gpu import numeric_check
from tests.labs import gpu_matmul as lab

pytestmark = pytest.mark.full

# what the numeric check says when the schedule does not run as a kernel
NOT_RUN = {"no_write_cache": "error"}  # flagged 'allocation': TVM cannot build it (global memory in a kernel)
SLOW = {"copy_by_every_thread": 300.0}  # every thread copies every tile: slow to simulate


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


@pytest.mark.parametrize(
    "name",
    [
        "reference",
        "variant_128_block_tk8",
        "racing_write_back",
        "no_register_tile",
        "course_blocking_with_shared",
        "GRP/cuda/sketch0",
        "GMM/cuda/sketch0",
        "GMM/cuda/sketch0/seed1",
    ],
)
def test_spill_agrees_with_ptxas(name):
    # the spill hazard (per-thread local arrays over half the registers) against ptxas's stack frame: the
    # lab, and meta_schedule's sketches at 224 words (GRP), 1024 words over 32 vthreads (GMM), 32 (seed1)
    if "/" in name:
        from mlc_lab.core.session import Session
        from tests.conformance.harness import entries

        e = entries(name)[0]
        session = Session.from_trace(e["module"], e["text"] or e["json"], e.get("func"))
    else:
        session = lab.session_of(name)
    stack = max(k.stack_bytes for k in session.lower(target="cuda").kernels)
    spills = [h for h in session.check(target="cuda").hazards if h.kind == "spill"]
    assert bool(spills) == (stack > 0), (stack, spills)
