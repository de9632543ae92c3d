"""The GPU lab against the numeric check (OpenCL on the CPU, ``mlc_lab.core.checks.numeric_gpu``): every
submission the checks find free of hazards computes the right numbers, and the racing and out-of-bounds
ones, flagged before anything runs, compute wrong ones. About 10 s a submission: ``pytest -m full``."""

from __future__ import annotations

import pytest

from mlc_lab.core.checks.numeric_gpu import numeric_check
from mlc_lab.model.checks import CheckReport, CheckResult, Hazard, NumericCheck
from tests.labs import gpu_matmul as lab

# what the numeric check says when the schedule does not run as a kernel
NOT_RUN = {"no_write_cache": "does_not_build"}  # flagged 'allocation': global memory allocated in a kernel
SLOW = {"copy_by_every_thread": 300.0}  # every thread copies every tile: slow to simulate


@pytest.mark.full
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


@pytest.mark.full
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


def _numeric(verdict: str, ok: bool = False) -> NumericCheck:
    return {
        "ok": ok,
        "verdict": verdict,  # type: ignore[typeddict-item]
        "message": f"the {verdict} sentence",
        "max_error": 0.0 if ok else None,
        "shape": {"C": [128, 128]},
        "sizes": {"1024": 128},
        "engine": "oclgrind",
    }


PASSED = [CheckResult("thread_block_tiling", True, "tiled")]


def test_a_report_shows_the_numeric_verdict_with_its_sentence_sizes_and_engine():
    for verdict, ok in (("match", True), ("mismatch", False), ("crash", False), ("could_not_run", False)):
        report = CheckReport(PASSED, [], _numeric(verdict, ok))
        data = report.to_json()["numeric"]
        assert data == {**_numeric(verdict, ok)}
        line = str(report).splitlines()[-1]
        assert f"numeric ({verdict.replace('_', ' ')}): the {verdict} sentence" in line
        assert line.startswith({"match": "ok  ", "could_not_run": "--  "}.get(verdict, "FAIL"))


def test_numbers_that_could_not_be_checked_fail_no_report():
    assert CheckReport(PASSED, [], _numeric("could_not_run")).ok
    assert not CheckReport(PASSED, [], _numeric("could_not_run")).numeric_judged
    assert not CheckReport(PASSED, [], _numeric("mismatch")).ok
    assert not CheckReport(PASSED, [], _numeric("crash")).ok
    assert not CheckReport(PASSED, [Hazard("race", "r")], _numeric("could_not_run")).ok
    assert CheckReport(PASSED, [], _numeric("match", True)).ok
