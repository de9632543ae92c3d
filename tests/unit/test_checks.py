"""Named checks: the API (targets, names, JSON), the CPU lab (tests/labs/cpu_mm_relu.py) and hazards
of small GPU programs whose answer is known by hand."""

from __future__ import annotations

import json

import pytest

from mlc_lab.core.checks import CHECKS, CheckReport, CheckResult, Hazard, Target, check_session
from mlc_lab.core.session import Session
from mlc_lab.errors import MlcLabError
from mlc_lab.tvm.course_programs import MATMUL, MM_RELU
from tests.fixtures.programs import MIRROR
from tests.labs import cpu_mm_relu as cpu_lab

CPU_CHECKS = {"loop_order", "vectorize", "parallel", "unroll", "reduction_init", "packing"}
GPU_CHECKS = {
    "thread_block_tiling",
    "shared_memory_tiling",
    "register_tiling",
    "cooperative_fetching",
    "write_cache",
    "epilogue_fusion",
}


def test_registry_names_and_targets():
    assert {n for n, c in CHECKS.items() if c.target == "cpu"} == CPU_CHECKS
    assert {n for n, c in CHECKS.items() if c.target == "cuda"} == GPU_CHECKS


@pytest.mark.parametrize(
    "given,kind,arch",
    [
        ("cpu", "cpu", None),
        ("cuda", "cuda", None),
        ("sm_75", "cuda", "sm_75"),
        ({"kind": "cuda", "arch": "sm_80"}, "cuda", "sm_80"),
        ({"kind": "llvm"}, "cpu", None),
    ],
)
def test_targets(given, kind, arch):
    t = Target.of(given)
    assert (t.kind, t.arch) == (kind, arch)


@pytest.mark.parametrize("bad", ["gpu", "sm_x", {"kind": "rocm"}, 3])
def test_bad_targets_say_what_is_accepted(bad):
    with pytest.raises(MlcLabError, match="target|kind"):
        Target.of(bad)


def test_report_json_and_ok():
    r = CheckReport(
        [CheckResult("parallel", True, "fine", "i", {"extent": 4})],
        [Hazard("race", "two threads", "Y")],
        {"ok": True, "max_error": 0.0, "shape": [8, 8], "x": 1},
    )
    data = r.to_json()
    assert data == {
        "checks": [
            {
                "name": "parallel",
                "ok": True,
                "verdict": "pass",
                "message": "fine",
                "where": "i",
                "evidence": {"extent": 4},
            }
        ],
        "hazards": [{"kind": "race", "message": "two threads", "where": "Y"}],
        # an older numeric dict (no verdict) reads as a match; unknown keys are dropped
        "numeric": {
            "ok": True,
            "verdict": "match",
            "message": "",
            "max_error": 0.0,
            "shape": [8, 8],
            "sizes": {},
            "engine": "",
        },
    }
    assert not r.ok  # a hazard
    assert CheckReport(r.checks, [], None).ok
    assert not CheckReport(r.checks, [], {"ok": False, "max_error": 1.0, "shape": [8]}).ok
    # a numeric check that could not run judged nothing: not a failure of the report
    could_not = {"ok": False, "verdict": "could_not_run", "message": "a host-computed argument", "shape": [8]}
    assert CheckReport(r.checks, [], could_not).ok
    json.dumps(data)


def test_unknown_and_misplaced_names():
    s = Session(MM_RELU)
    with pytest.raises(MlcLabError, match="no check named 'tiling'"):
        s.check(["tiling"])
    with pytest.raises(MlcLabError, match="for cuda targets"):
        s.check(["write_cache"], target="cpu")


def test_session_check_picks_the_target():
    s = Session(MM_RELU)
    rep = s.check()
    assert {c.name for c in rep.checks} == CPU_CHECKS
    assert not rep.ok
    named = s.check(["parallel"])
    assert [c.name for c in named.checks] == ["parallel"]


def test_checks_of_an_earlier_step():
    s = cpu_lab.session_of("reference")
    assert s.check(target="cpu").ok
    first = s.check(target="cpu", step=1)  # after the first split only
    assert {c.name for c in first.checks if not c.ok} >= {"parallel", "vectorize", "reduction_init"}


@pytest.mark.parametrize("name", sorted(cpu_lab.SUBMISSIONS))
def test_cpu_lab(name):
    s = cpu_lab.session_of(name)
    report = check_session(s, target="cpu")
    assert {c.name for c in report.checks} == CPU_CHECKS
    assert {c.name for c in report.checks if not c.ok} == cpu_lab.EXPECTED[name], str(report)
    assert report.hazards == []
    for c in report.checks:
        assert c.message and "\n" not in c.message
        assert "#" not in c.message  # no TVM placeholder


def test_loop_order_evidence():
    s = cpu_lab.session_of("k_innermost")
    c = next(c for c in s.check(target="cpu").checks if c.name == "loop_order")
    assert c.where == "k_1" and c.evidence["strides"]["B_global"] == 8 and "8 elements" in c.message


# --- hazards of small GPU programs, known by hand ----------------------------------------------------


def _gpu(steps, program=MATMUL):
    s = Session(program)
    for prim, *args in steps:
        s.apply(prim, *args)
    return s


def test_unbound_program_on_cuda_fails_tiling_and_judges_nothing_else_yet():
    s = Session(MATMUL)
    rep = s.check(target="cuda")
    assert {c.name for c in rep.checks} == GPU_CHECKS  # every check is listed
    by = {c.name: c for c in rep.checks}
    assert by["thread_block_tiling"].verdict == "fail" and "runs on the host" in by["thread_block_tiling"].message
    rest = [c for n, c in by.items() if n not in ("thread_block_tiling", "epilogue_fusion")]
    assert all(
        c.verdict == "unjudged" and "not judged yet" in c.message and "runs on the host" in c.message for c in rest
    )
    assert by["epilogue_fusion"].verdict == "unjudged" and "does not apply" in by["epilogue_fusion"].message
    assert [c.name for c in rep.failed()] == ["thread_block_tiling"]


def test_reduction_over_threads_races_only_once_decomposed():
    # k split over threadIdx.x: with its init in the block TVM lowers it to a cross-thread reduction
    # (numeric check: all of C right); decomposed at the thread loop, 32 threads add into one C[i, j]
    # (numeric check: 16380 of 16384 wrong)
    steps = [
        ("split", "k", [None, 32]),
        ("reorder", ["i", "j", "k_1", "k_0"]),
        ("bind", "i", "blockIdx.x"),
        ("bind", "k_1", "threadIdx.x"),
    ]
    assert not [h for h in _gpu(steps).check(target="cuda").hazards if h.kind == "race"]
    s = _gpu(steps + [("decompose_reduction", "C", "k_1")])
    races = [h for h in s.check(target="cuda").hazards if h.kind == "race"]
    assert races and "C[0, 0]" in races[0].message


def test_a_thread_reading_global_memory_another_thread_wrote_in_the_kernel_races():
    steps = [("split", "double/i", [None, 32]), ("bind", "i_0", "blockIdx.x"), ("bind", "i_1", "threadIdx.x")]
    # placed under the thread loop, each thread reads the element of B it wrote itself
    own = _gpu([*steps, ("reverse_compute_at", "mirror", "i_1")], MIRROR)
    assert not [h for h in own.check(target="cuda").hazards if h.kind == "race"]
    # under the block loop with a thread loop of its own, thread t reads what thread 31 - t wrote
    s = _gpu([*steps, ("reverse_compute_at", "mirror", "i_0"), ("bind", "ax0", "threadIdx.x")], MIRROR)
    (race,) = [h for h in s.check(target="cuda").hazards if h.kind == "race"]
    assert race.where == "mirror" and "in thread 0 reads element B[31] of B, which thread 31 writes" in race.message
    assert "no barrier between (global memory)" in race.message


def test_too_many_threads_and_too_much_shared_memory():
    s = _gpu(
        [
            ("split", "i", [None, 64]),
            ("split", "j", [None, 32]),
            ("reorder", ["i_0", "j_0", "i_1", "j_1", "k"]),
            ("bind", "i_0", "blockIdx.y"),
            ("bind", "j_0", "blockIdx.x"),
            ("bind", "i_1", "threadIdx.y"),
            ("bind", "j_1", "threadIdx.x"),
        ]
    )
    limits = [h.message for h in s.check(target="cuda").hazards if h.kind == "limit"]
    assert any("2048 threads per block" in m for m in limits)
    s = _gpu(
        [
            ("split", "i", [None, 16]),
            ("split", "j", [None, 16]),
            ("reorder", ["i_0", "j_0", "i_1", "j_1", "k"]),
            ("bind", "i_0", "blockIdx.y"),
            ("bind", "j_0", "blockIdx.x"),
            ("bind", "i_1", "threadIdx.y"),
            ("bind", "j_1", "threadIdx.x"),
            ("cache_read", "C", 0, "shared"),
            ("compute_at", "A_shared", "j_0"),
        ]
    )
    # A_shared holds a 16x128 stripe: 8 KB, within 48 KB; with a 4 KB limit it is over
    assert not [h for h in s.check(target="cuda").hazards if h.kind == "limit"]
    small = s.check(target={"kind": "cuda", "max_shared_memory_per_block": 4096})
    assert any(h.kind == "limit" and "A_shared 8 KB" in h.message for h in small.hazards)


def test_write_back_under_the_reduction_outer_loop_races():
    # the lab: thread loops under k_0 and the write-back placed at k_0, outside them: every
    # thread of a block writes the whole 64x64 tile of D from its own accumulator, 128 times
    from tests.labs.gpu_matmul import GEMM_RELU_ADD

    s = _gpu(
        [
            ("cache_write", "gemm", 0, "local"),
            ("split", "gemm/i", [None, 16, 4]),
            ("split", "gemm/j", [None, 16, 4]),
            ("split", "k", [None, 16]),
            ("reorder", ["i_0", "j_0", "k_0", "i_1", "j_1", "k_1", "i_2", "j_2"]),
            ("bind", "i_0", "blockIdx.y"),
            ("bind", "j_0", "blockIdx.x"),
            ("bind", "i_1", "threadIdx.y"),
            ("bind", "j_1", "threadIdx.x"),
            ("reverse_compute_at", "Y_local", "k_0"),
            ("reverse_compute_inline", "relu_add"),
            ("decompose_reduction", "gemm", "k_0"),
        ],
        GEMM_RELU_ADD,
    )
    rep = s.check(target="cuda")
    races = [h.message for h in rep.hazards if h.kind == "race"]
    assert any("both write element D[0, 0]" in m for m in races)
    assert any("local buffer Y_local" in m for m in races)
    # TVM's build cannot compact it at all (its CUDA code declares float Y_local[4194304])
    assert any(h.kind == "spill" and "2048x2048" in h.message for h in rep.hazards)
    wc = next(c for c in rep.checks if c.name == "write_cache")
    assert not wc.ok and "128 times" in wc.message
