"""The GPU lab (tests/labs/gpu_matmul.py): every submission fails exactly the checks it breaks and has
exactly the hazards it creates; the reference and the correct variants pass every check."""

from __future__ import annotations

import pytest

from mlc_lab.core.checks import CHECKS
from tests.labs import gpu_matmul as lab

GPU_CHECKS = {n for n, c in CHECKS.items() if c.target == "cuda"}


@pytest.fixture(scope="module")
def reports():
    cache: dict = {}

    def get(name):
        if name not in cache:
            session = lab.session_of(name)
            cache[name] = (session, session.check(target="cuda"))
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(lab.SUBMISSIONS))
def test_verdicts(reports, name):
    _session, report = reports(name)
    fails, kinds = lab.EXPECTED[name]
    assert {c.name for c in report.failed()} == fails, str(report)
    assert {c.name for c in report.checks} == GPU_CHECKS  # every check listed, passed, failed or not judged
    for c in report.unjudged():  # none unjudged but what cannot apply, or what waits for a failing check
        waits = c.name == "cooperative_fetching" and "shared_memory_tiling" in fails
        assert ("not judged yet" if waits else "does not apply") in c.message, str(report)
    assert {h.kind for h in report.hazards} == kinds, str(report)
    assert report.ok == (not fails and not kinds)


def test_gemm_lists_every_gpu_check(reports):
    _s, report = reports("reference")
    assert {c.name for c in report.checks} == GPU_CHECKS


def test_plain_matmul_is_not_judged_on_epilogue_fusion(reports):
    _s, report = reports("course_blocking_with_shared")
    c = next(c for c in report.checks if c.name == "epilogue_fusion")
    assert c.verdict == "unjudged" and not c.ok and "does not apply" in c.message
    assert report.ok  # "does not apply" is no failure


def test_reference_figures(reports):
    _s, report = reports("reference")
    by = {c.name: c for c in report.checks}
    assert by["thread_block_tiling"].evidence["block_tile"] == [64, 64]
    assert by["thread_block_tiling"].evidence["threads_per_block"] == 256
    assert by["register_tiling"].evidence["thread_tile"] == [4, 4]
    shared = by["shared_memory_tiling"].evidence["operands"]
    assert shared["A_shared"]["tile"] == [64, 16] and shared["A_shared"]["under"] == "k_0"
    assert shared["A_shared"]["reuse"] == 64  # 16 threads along j x 4 values of j_2
    assert by["cooperative_fetching"].evidence["A_shared"]["sectors_per_request"] == 16
    assert by["write_cache"].evidence["writes_per_element"] == 1


def test_messages_name_the_loop_and_the_figure(reports):
    _s, report = reports("write_back_in_reduction")
    c = next(c for c in report.checks if c.name == "write_cache")
    assert "k_0" in c.message and "128 times" in c.message and c.evidence["writes_per_element"] == 128
    _s, report = reports("copy_uncoalesced")
    c = next(c for c in report.checks if c.name == "cooperative_fetching")
    # threadIdx.x walks A_shared with a stride of 64 words: 8-way bank conflicts on the writes
    assert "8-way" in c.message and c.evidence["A_shared"]["max_ways"] == 8


def test_out_of_bounds_copy_names_the_thread_axis(reports):
    _s, report = reports("copy_8x32_threads")
    oob = [h for h in report.hazards if h.kind == "out_of_bounds"]
    assert any("D" in h.message and "2111" in h.message and "threadIdx.x" in h.message for h in oob)
    ext = [h for h in report.hazards if h.kind == "thread_extent"]
    assert {h.where for h in ext} == {"i_1", "j_1"}


def test_racing_write_back_is_flagged_on_the_step_that_creates_it(reports):
    from mlc_lab.core.checks import step_hazards

    session, _report = reports("racing_write_back")
    kinds = []
    for sid in session.path():
        kinds.append({h.kind for h in step_hazards(session, sid, "cuda")})
    first = next(i for i, k in enumerate(kinds) if "race" in k)
    step = session.steps[session.path()[first]]
    # moving the write-back above the thread loops makes every thread write the whole tile
    assert step.primitive == "reverse_compute_at" and "j_0" in step.label


def test_json_shape(reports):
    _s, report = reports("copy_8x32_threads")
    data = report.to_json()
    assert set(data) == {"checks", "hazards", "numeric"}
    assert all(set(c) == {"name", "ok", "verdict", "message", "where", "evidence"} for c in data["checks"])
    assert all(set(h) == {"kind", "message", "where"} for h in data["hazards"])
    import json

    json.dumps(data)
