"""Issue 28: the checks and hazards on another course's GPU lab, written in that course's pattern
(a register-level copy of each shared tile), and on the states a student passes through step by step.
Every program is built by scheduling with TVM (``Session.apply``), never by hand-written TIR."""

from __future__ import annotations

from mlc_lab.core.checks import CHECKS
from mlc_lab.core.session import Session
from tests.labs.gpu_matmul import GEMM_RELU_ADD, MATMUL_1024
from tests.verdicts.programs import GEMM_RELU_ADD as GEMM_RELU_THEN_ADD  # relu and add: two blocks

GPU_CHECKS = [n for n, c in CHECKS.items() if c.target == "cuda"]
CPU_CHECKS = [n for n, c in CHECKS.items() if c.target == "cpu"]


def _tiles(block="gemm", out="Y", write_cache=True, epilogue=True, at="j_1"):
    """Thread-block and thread tiles (64x64 per block, 4x4 per thread, k by 16), written back at ``at``."""
    s = [("cache_write", block, 0, "local")] if write_cache else []
    s += [
        ("split", f"{block}/i", [None, 16, 4]),
        ("split", f"{block}/j", [None, 16, 4]),
        ("split", "k", [None, 16]),
        ("reorder", ["i_0", "j_0", "i_1", "j_1", "k_0", "k_1", "i_2", "j_2"]),
        ("bind", "i_0", "blockIdx.y"),
        ("bind", "j_0", "blockIdx.x"),
        ("bind", "i_1", "threadIdx.y"),
        ("bind", "j_1", "threadIdx.x"),
    ]
    if write_cache:
        s.append(("reverse_compute_at", f"{out}_local", at))
    if epilogue:
        s.append(("reverse_compute_inline", "relu_add"))
    return s


def _shared(block="gemm", names=("A_shared", "B_shared"), at="k_0", swap=False, split_axes=False):
    """A cooperative copy of each operand into shared memory: fused, split by the 16x16 threads and a
    4-wide vector (``split_axes``: each axis split on its own, threadIdx.x on the slower one if ``swap``)."""
    s = []
    for idx, name in enumerate(names):
        s.append(("cache_read", block, idx, "shared"))
        if at is not None:
            s.append(("compute_at", name, at))
        if split_axes:
            x, y = ("threadIdx.y", "threadIdx.x") if swap else ("threadIdx.x", "threadIdx.y")
            s += [
                ("split", f"{name}/ax0", [None, 16]),
                ("split", f"{name}/ax1", [None, 16]),
                ("reorder", [f"{name}/ax0_0", f"{name}/ax1_0", f"{name}/ax0_1", f"{name}/ax1_1"]),
                ("bind", f"{name}/ax0_1", y),
                ("bind", f"{name}/ax1_1", x),
            ]
        else:
            s += [
                ("fuse", f"{name}/ax0", f"{name}/ax1"),
                ("split", f"{name}/ax0_ax1_fused", [None, 16, 16, 4]),
                ("vectorize", f"{name}/ax0_ax1_fused_3"),
                ("bind", f"{name}/ax0_ax1_fused_1", "threadIdx.y"),
                ("bind", f"{name}/ax0_ax1_fused_2", "threadIdx.x"),
            ]
    return s


def _registers(block="gemm", names=("A_shared_local", "B_shared_local"), at="k_1"):
    """The course's register-level copy of each shared tile, under the thread loops."""
    s = []
    for idx, name in enumerate(names):
        s += [("cache_read", block, idx, "local"), ("compute_at", name, at)]
    return s


def session(steps, program=GEMM_RELU_ADD):
    s = Session(program)
    for prim, *args in steps:
        s.apply(prim, *args)
    return s


def verdicts(s, **kw):
    rep = s.check(target="cuda", **kw)
    return {c.name: c for c in rep.checks}, rep.hazards


COURSE = _tiles() + _shared() + _registers() + [("decompose_reduction", "gemm", "k_0")]


DONE = [("decompose_reduction", "gemm", "k_0")]


# --- item 3: every check present, no false pass ------------------------------------------------------


def test_register_level_copies_are_looked_through():
    checks, hazards = verdicts(session(COURSE))
    assert list(checks) == GPU_CHECKS
    assert all(c.verdict == "pass" for c in checks.values()), [c.message for c in checks.values()]
    shared = checks["shared_memory_tiling"].evidence["operands"]
    assert shared["A_shared"]["through"] == ["A_shared_local"] and shared["A_shared"]["tile"] == [64, 16]
    assert "through A_shared_local" in checks["shared_memory_tiling"].message
    assert set(checks["cooperative_fetching"].evidence) == {"A_shared", "B_shared"}
    assert hazards == []


def test_a_cache_stage_never_compute_at_fails_and_raises_no_shared_memory_hazard():
    checks, hazards = verdicts(session(_tiles() + _shared(at=None) + DONE))
    smt = checks["shared_memory_tiling"]
    assert smt.verdict == "fail" and smt.evidence["operands"]["A_shared"]["placed"] is False
    assert "compute_at A_shared under k_0 so each block holds one tile" in smt.message
    assert "global memory" in smt.message
    assert checks["cooperative_fetching"].verdict == "pass"  # the copy itself is spread over its own kernel
    assert hazards == []  # TVM puts the copy in a global workspace: no shared-memory limit


def test_a_copy_with_threadIdx_x_on_the_slower_axis_is_not_coalesced():
    good, _ = verdicts(session(_tiles() + _shared(split_axes=True) + DONE))
    assert good["cooperative_fetching"].verdict == "pass"
    assert good["cooperative_fetching"].evidence["A_shared"]["efficiency"] == 1.0
    bad, _ = verdicts(session(_tiles() + _shared(split_axes=True, swap=True) + DONE))
    c = bad["cooperative_fetching"]
    assert c.verdict == "fail" and "not coalesced" in c.message
    assert (
        c.evidence["A_shared"]["sectors_per_request"]
        == 4 * good["cooperative_fetching"].evidence["A_shared"]["sectors_per_request"]
    )


def test_register_tiling_needs_the_accumulator_in_registers():
    checks, _ = verdicts(session(_tiles(write_cache=False, epilogue=False) + _shared() + DONE))
    c = checks["register_tiling"]
    assert c.verdict == "fail" and "Y, global memory" in c.message and "cache_write gemm" in c.message
    assert checks["write_cache"].verdict == "fail"


def _epilogue(steps):
    base = _tiles(epilogue=False) + _shared() + DONE
    checks, hazards = verdicts(session(base + steps, GEMM_RELU_THEN_ADD))
    return checks["epilogue_fusion"], hazards


def test_epilogue_fusion_considers_every_op_after_the_reduction():
    both, hazards = _epilogue([("reverse_compute_inline", "relu"), ("reverse_compute_inline", "add")])
    assert both.verdict == "pass" and both.evidence["epilogue"] == ["relu", "add"] and hazards == []
    assert "block Y_local writes D" in both.message
    host, _ = _epilogue([("reverse_compute_inline", "relu")])
    assert host.verdict == "fail" and host.where == "add"
    assert "block add computes D on the host, outside every kernel, reading R back" in host.message
    own, _ = _epilogue(
        [
            ("reverse_compute_inline", "relu"),
            ("fuse", "add/i", "add/j"),
            ("split", "i_j_fused", [None, 256]),
            ("bind", "i_j_fused_0", "blockIdx.x"),
            ("bind", "i_j_fused_1", "threadIdx.x"),
        ]
    )
    assert own.verdict == "fail" and "block add computes D in a kernel of its own" in own.message


# --- item 5: step by step ----------------------------------------------------------------------------


def test_cache_read_before_its_compute_at_is_advice_not_a_hazard():
    checks, hazards = verdicts(session(_tiles() + [("cache_read", "gemm", 0, "shared")]))
    assert hazards == []
    c = checks["shared_memory_tiling"]
    assert c.verdict == "fail" and "at the root, outside every kernel" in c.message
    assert "compute_at A_shared under k_0 so each block holds one tile" in c.message


def test_a_shared_copy_above_the_reduction_or_read_once_per_element_fails():
    # placed under the block loop j_0, above k_0: the copy holds a whole 64x2048 stripe of A
    c = verdicts(session(_tiles() + _shared(at="j_0") + DONE))[0]["shared_memory_tiling"]
    assert c.verdict == "fail" and c.where == "A_shared"
    assert "A_shared is filled once for the whole reduction (64x2048 elements, above loop k_0)" in c.message
    assert "compute_at block A_shared under k_0" in c.message
    # a thread block of one thread per output: each element of the 1x16 slice of A copied is read once
    steps = [
        ("split", "k", [None, 16]),
        ("reorder", ["gemm/i", "gemm/j", "k_0", "k_1"]),
        ("bind", "gemm/i", "blockIdx.y"),
        ("bind", "gemm/j", "blockIdx.x"),
        ("cache_read", "gemm", 0, "shared"),
        ("compute_at", "A_shared", "k_0"),
        ("cache_read", "gemm", 1, "shared"),
        ("compute_at", "B_shared", "k_0"),
    ]
    c = verdicts(session(steps))[0]["shared_memory_tiling"]
    assert c.verdict == "fail" and c.where == "A_shared"
    assert "each element of A that block A_shared copies into A_shared is read only 1 times by gemm" in c.message
    assert c.evidence["operands"] == {
        "A_shared": {"copy": "A_shared", "tile": [1, 16], "through": [], "under": "k_0", "reuse": 1.0}
    }


def test_cache_write_before_its_reverse_compute_at_is_advice_not_a_spill():
    steps = [x for x in _tiles() if x[0] not in ("reverse_compute_at", "reverse_compute_inline")]
    checks, hazards = verdicts(session(steps))
    assert hazards == []
    wc = checks["write_cache"]
    assert wc.verdict == "fail" and "reverse_compute_at Y_local under j_1" in wc.message
    assert "outside every kernel" in wc.message
    assert checks["register_tiling"].verdict == "unjudged"
    assert checks["epilogue_fusion"].message.startswith("block relu_add computes D on the host, outside every kernel")


def test_identical_redundant_writes_are_not_a_race():
    n = "A_shared"
    steps = _tiles() + [
        ("cache_read", "gemm", 0, "shared"),
        ("compute_at", n, "k_0"),
        ("fuse", f"{n}/ax0", f"{n}/ax1"),
        ("split", f"{n}/ax0_ax1_fused", [None, 16, 16, 4]),
        ("vectorize", f"{n}/ax0_ax1_fused_3"),
        ("bind", f"{n}/ax0_ax1_fused_1", "threadIdx.y"),  # threadIdx.x not bound yet: 16 threads per element
    ]
    checks, hazards = verdicts(session(steps))
    assert hazards == []  # every one of them writes A[v0, v1]: redundant work, not a race
    c = checks["cooperative_fetching"]
    assert c.verdict == "fail" and "every element is copied by 16 threads" in c.message
    assert c.evidence["A_shared"]["most_copies"] == 16
    checks, hazards = verdicts(session(steps + [("bind", f"{n}/ax0_ax1_fused_2", "threadIdx.x")]))
    assert hazards == [] and checks["cooperative_fetching"].verdict == "pass"


def test_threads_writing_different_values_to_one_element_still_race():
    # the write-back placed above the thread loops: every thread writes the whole tile of D from its own
    # accumulator (values that differ from thread to thread)
    steps = [x for x in _tiles() if x[0] != "reverse_compute_at"]
    steps.insert(-1, ("reverse_compute_at", "Y_local", "j_0"))
    _checks, hazards = verdicts(session(steps))
    races = [h.message for h in hazards if h.kind == "race"]
    assert any("both write element D[0, 0]" in m and "different values" in m for m in races), races


def test_the_history_learns_which_step_resolved_a_hazard():
    from mlc_lab.widgets.checks import ChecksWorker

    steps = [x for x in _tiles() if x[0] not in ("reverse_compute_at", "reverse_compute_inline")]
    s = session(steps + [("reverse_compute_at", "Y_local", "j_0"), ("reverse_compute_at", "Y_local", "j_1")])
    worker = ChecksWorker(s, {"available": True, "target": "cuda"}, lambda *a: None)
    made, fixed = s.steps[-2].id, s.steps[-1].id
    created = worker.hazards_of(made)
    assert "race" in {h["kind"] for h in created["new"]} and created["resolved"] == []
    later = worker.hazards_of(fixed)
    assert later["new"] == [] and later["count"] == 0
    assert {h["kind"] for h in later["resolved"]} == {h["kind"] for h in created["new"]}


def test_a_register_level_copy_before_its_compute_at_names_that_step():
    at = COURSE.index(("compute_at", "A_shared_local", "k_1"))
    _checks, hazards = verdicts(session(COURSE[:at]))
    assert [h.kind for h in hazards] == ["spill"]  # TVM gives each thread the whole 2048x16 stripe
    assert "compute_at A_shared_local under k_1 so each thread copies only the values of A_shared" in hazards[0].message
    assert hazards[0].severity == "performance"
    _checks, hazards = verdicts(session(COURSE[: at + 1]))
    assert hazards == []


def test_register_tiling_is_not_judged_before_the_thread_loops_are_bound():
    steps = _tiles()[:6]  # the splits, the reorder and blockIdx.y
    checks, _ = verdicts(session(steps))
    c = checks["register_tiling"]
    assert c.verdict == "unjudged" and "no loop of gemm is bound to threadIdx" in c.message


def test_why_a_check_did_not_judge_is_in_its_evidence():
    checks, _ = verdicts(session([]))
    reasons = {n: c.evidence.get("reason") for n, c in checks.items() if not c.judged}
    assert reasons == {n: "not judged yet" for n in GPU_CHECKS if n != "thread_block_tiling"}
    plain, _ = verdicts(session([], MATMUL_1024))
    assert plain["epilogue_fusion"].evidence == {"reason": "does not apply"}


def test_a_meta_schedule_sketch_copy_left_for_its_postprocessing_says_so():
    from tests.conformance.harness import corpus

    entry = next(e for e in corpus() if e["id"] == "GMM/cuda/sketch1/seed1")
    s = Session.from_trace(entry["module"], entry["text"], entry.get("func"))
    checks, _ = verdicts(s)
    c = checks["cooperative_fetching"]
    assert c.verdict == "fail" and "every element is copied by 256 threads" in c.message
    assert (
        "meta_schedule.cooperative_fetch annotation" in c.message
        and c.evidence["X_shared"]["cooperative_fetch_annotation"]
    )
    assert [n for n, c in checks.items() if c.verdict == "pass"] == [
        "thread_block_tiling",
        "shared_memory_tiling",
        "register_tiling",
        "write_cache",
    ]


def test_an_unguarded_last_tile_reads_past_what_the_shared_copy_holds():
    def build(guard: bool):
        s = Session(MATMUL_1024)
        s.apply("cache_write", "C", 0, "local")
        s.apply("split", "i", [None, 16, 4])
        s.apply("split", "j", [None, 16, 4])
        s.apply("split", "k", [None, 20], disable_predication=not guard)  # 20 does not divide 1024
        for prim, *args in [
            ("reorder", ["i_0", "j_0", "i_1", "j_1", "k_0", "k_1", "i_2", "j_2"]),
            ("bind", "i_0", "blockIdx.y"),
            ("bind", "j_0", "blockIdx.x"),
            ("bind", "i_1", "threadIdx.y"),
            ("bind", "j_1", "threadIdx.x"),
            ("reverse_compute_at", "C_local", "j_1"),
        ] + _shared(block="C"):
            s.apply(prim, *args)
        return verdicts(s)

    _checks, hazards = build(guard=False)
    oob = [h.message for h in hazards if h.kind == "out_of_bounds"]
    assert any(
        "reads A_shared at index 1039 past the end of the 1024 elements it holds in dimension 1" in m for m in oob
    )
    assert all("does not divide its loop runs unguarded" in m for m in oob)
    _checks, hazards = build(guard=True)
    assert hazards == []


def _one_block(n: int, per_thread: int):
    program = MATMUL_1024.replace("1024", str(n))
    steps = [
        ("split", "i", [None, 16, per_thread]),
        ("split", "j", [None, 16, per_thread]),
        ("reorder", ["i_0", "j_0", "i_1", "j_1", "k", "i_2", "j_2"]),
        ("bind", "i_0", "blockIdx.y"),
        ("bind", "j_0", "blockIdx.x"),
        ("bind", "i_1", "threadIdx.y"),
        ("bind", "j_1", "threadIdx.x"),
    ]
    checks, _ = verdicts(session(steps, program))
    return checks["thread_block_tiling"]


def test_one_thread_block_is_a_tiling_of_a_small_output_only():
    small = _one_block(64, 4)  # the 64x64 output is one 64x64 tile
    assert small.verdict == "pass" and small.evidence["blocks"] == 1
    big = _one_block(1024, 64)  # 256 threads, 4096 outputs each
    assert big.verdict == "fail" and "whose 256 threads compute 4096 outputs each" in big.message


# --- issue 34: a write-back bound as its compute is, and a layout that folds elements -----------------


def _sgemm(write_back="j_1", bound=True, layout=None):
    """The course's tiles (64x64 per block, 4x4 per thread) on the plain 1024^3 matmul, with its
    register-level copies; the write-back under the thread loop j_1, or under the block loop j_0 with
    its loops bound to the threads as the compute's are (``bound``) or left to every thread."""
    s = [("cache_write", "C", 0, "local")]
    if layout is not None:
        s.append(("transform_layout", "C_local", ("write", 0), layout))
    s += _tiles(block="C", out="C", write_cache=False, epilogue=False)
    s.append(("reverse_compute_at", "C_local", write_back))
    if write_back == "j_0" and bound:
        s += [
            ("split", "C_local/ax0", [16, 4]),
            ("split", "C_local/ax1", [16, 4]),
            ("reorder", ["C_local/ax0_0", "C_local/ax1_0", "C_local/ax0_1", "C_local/ax1_1"]),
            ("bind", "C_local/ax0_0", "threadIdx.y"),
            ("bind", "C_local/ax1_0", "threadIdx.x"),
        ]
    s += _shared(block="C") + _registers(block="C") + [("decompose_reduction", "C", "k_0")]
    return session(s, MATMUL_1024)


def test_a_write_back_under_the_block_loop_bound_as_its_compute_is_keeps_a_4x4_accumulator():
    # TVM lifts the thread bindings before it compacts (as its build does): each thread's C_local is the
    # 4x4 tile it computes, as the CUDA code declares it; no spill
    s = _sgemm(write_back="j_0")
    checks, hazards = verdicts(s)
    assert hazards == [], [h.message for h in hazards]
    assert "float C_local_ptr[16];" in s.cuda_source().source
    racy, hazards = verdicts(_sgemm(write_back="j_0", bound=False))
    assert {h.kind for h in hazards} == {"race", "spill"}


def test_a_layout_that_folds_two_elements_into_one_is_a_correctness_hazard():
    _checks, hazards = verdicts(_sgemm(layout=lambda i, j: (i % 128, j)))
    (h,) = [h for h in hazards if h.kind == "aliasing"]
    assert h.severity == "correctness" and h.where == "C_local"
    assert h.message.startswith(
        "the schedule's layout of C maps the 1024x1024 elements of C onto 128x1024 places: block C_local "
        "writes C[0, 0] twice; two elements share one place in memory"
    )
    # a layout that keeps every element apart (a transpose-like split) is no hazard
    _checks, hazards = verdicts(_sgemm(layout=lambda i, j: (i // 128, j, i % 128)))
    assert [h for h in hazards if h.kind == "aliasing"] == []
