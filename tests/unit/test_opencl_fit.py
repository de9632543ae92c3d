"""Issue 34: a GPU kernel's CPU run within a memory and time budget (mlc_lab.tvm.measure.opencl_fit): what
a run needs, pocl where its thread stack holds a block's private arrays, Oclgrind in chunks of thread
blocks, and "could not run: needs N MB" (never a crash) when nothing fits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlc_lab.tvm.measure import opencl_fit as fit
from mlc_lab.tvm.measure.opencl_run import OpenCLProgramError, run_in_child

# A kernel as TVM's OpenCL code writes one: its block from get_group_id, a private array per thread.
SOURCE = """
__kernel void fill(__global float* restrict out_ptr);
__kernel void fill(__global float* restrict out_ptr) {
  float acc_ptr[PRIVATE];
  int t = ((convert_int(get_group_id(1))) * 4 + (convert_int(get_group_id(0)))) * 64 + (convert_int(get_local_id(0)));
  for (int i = 0; i < PRIVATE; ++i) { acc_ptr[i] = (float)(i + t); }
  out_ptr[t] = acc_ptr[(t * 7) % PRIVATE] + (float)(convert_int(get_group_id(0)));
}
"""


def _prog(private: int, grid=(4, 3, 1), budget=None) -> dict:
    n = 64 * grid[0] * grid[1]
    prog = {
        "source": SOURCE.replace("PRIVATE", str(private)),
        "params": [{"name": "out", "shape": [n], "dtype": "float32"}],
        "allocs": [],
        "launches": [{"kernel": "fill", "args": [{"buffer": "out"}], "grid": list(grid), "block": [64, 1, 1]}],
    }
    if budget is not None:
        prog["budget"] = budget
    return prog


def _expected(private: int, grid=(4, 3, 1)) -> np.ndarray:
    t = np.arange(64 * grid[0] * grid[1])
    block_x = (t // 64) % grid[0]
    return ((t * 7) % private + t + block_x).astype(np.float32)


def test_what_a_kernel_needs_is_read_from_its_source():
    source = (
        SOURCE.replace("PRIVATE", "64")
        + "__kernel void two(__global half* x) {\n  int4 v_ptr[8];\n  __local float s[1024];\n}\n"
    )
    assert fit.private_bytes(source) == {"fill": 256, "two": 128}
    assert fit.pocl_problem(_prog(64)) is None
    stack = fit.pocl_stack_bytes()
    big = _prog(stack // 64 // 4)  # 64 threads whose arrays fill the whole stack
    why = fit.pocl_problem(big)
    assert why is not None and why.startswith("the 64 threads of a block of kernel fill hold")
    assert why.endswith(f"more than the {stack >> 20} MB stack of a pocl thread")


def test_a_chunkable_kernel_adds_its_first_block_to_its_block_index():
    out = fit.chunkable(SOURCE.replace("PRIVATE", "4"))
    assert out.count("int mlc_g0, int mlc_g1, int mlc_g2)") == 2  # the declaration and the definition
    assert "(get_group_id(1) + mlc_g1)" in out and "get_group_id(0))" not in out.replace("+ mlc_g0)", "")


@given(
    st.tuples(st.integers(1, 7), st.integers(1, 5), st.integers(1, 3)),
    st.integers(1, 40),
)
def test_the_chunks_cover_the_grid_once_in_order(grid, size):
    seen = [(0, 0, 0)]  # the first block, run alone and measured
    for sub, offset in fit._parts(list(grid), size, skip=1):
        assert 1 <= sub[0] * sub[1] * sub[2] <= size
        seen += [
            (offset[0] + x, offset[1] + y, offset[2] + z)
            for z in range(sub[2])
            for y in range(sub[1])
            for x in range(sub[0])
        ]
    every = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    assert sorted(seen) == sorted(every) and len(seen) == len(every)


class _Fake:
    """A launch that takes ``seconds`` and grows this process by nothing: what Chunks decides from."""

    def __init__(self):
        self.calls = []

    def __call__(self, grid, offset):
        self.calls.append((list(grid), list(offset)))


def test_a_run_whose_blocks_cannot_fit_the_memory_left_says_what_it_needs(monkeypatch):
    monkeypatch.setattr(fit, "rss_bytes", lambda: 500 << 20)
    chunks = fit.Chunks(fit.Budget(memory_mb=300), "oclgrind", 4)
    with pytest.raises(fit.BudgetError) as got:
        chunks._blocks_at_once({"kernel": "k", "block": [16, 16, 1]}, (400 << 20, 1.0), 15)
    assert got.value.memory
    assert str(got.value) == (
        "running kernel k on oclgrind needs about 900 MB (400 MB for one block of 256 threads), and the budget "
        "leaves 300 MB"
    )
    roomy = fit.Chunks(fit.Budget(memory_mb=2000), "oclgrind", 4)
    assert roomy._blocks_at_once({"kernel": "k", "block": [16, 16, 1]}, (400 << 20, 1.0), 15) == 3  # 0.8 x 1500 / 400


def test_a_run_that_cannot_finish_in_the_time_left_says_how_long_it_would_take():
    chunks = fit.Chunks(fit.Budget(seconds=30), "oclgrind", 2)
    with pytest.raises(fit.BudgetError) as got:
        chunks._blocks_at_once({"kernel": "k", "block": [256, 1, 1]}, (1 << 20, 2.0), 63)
    assert not got.value.memory
    assert str(got.value).startswith(
        "running kernel k on oclgrind would take about 63 s more (2.00 s for one block of 256 threads, "
        "63 blocks left, 2 at once), and the budget leaves"
    )


@pytest.mark.parametrize("engine", ["pocl", "oclgrind"])
def test_a_kernel_run_in_chunks_gives_the_numbers_of_one_launch(monkeypatch, engine):
    # Oclgrind runs a launch in chunks of blocks; the kernel sees its blocks as in one launch
    monkeypatch.setenv("MLC_LAB_OPENCL_ENGINE", engine)
    budget = {"memory_mb": 4096, "seconds": 600, "blocks": 2}  # 1 block, then chunks of 2: 11 launches
    ran = run_in_child(_prog(16, budget=budget), {"out": np.zeros(768, np.float32)})
    assert ran["engine"] == engine
    np.testing.assert_array_equal(ran["outputs"]["out"], _expected(16))
    assert ran["fit"]["blocks_at_once"] == (2 if engine == "oclgrind" else None)


def test_private_arrays_past_pocls_stack_run_on_oclgrind_and_right():
    big = fit.pocl_stack_bytes() // 64 // 4 + 1024
    ran = run_in_child(_prog(big, grid=(2, 1, 1)), {"out": np.zeros(128, np.float32)})
    assert ran["engine"] == "oclgrind" and ran["fit"]["pocl_problem"].startswith("the 64 threads of a block")
    np.testing.assert_array_equal(ran["outputs"]["out"], _expected(big, grid=(2, 1, 1)))


def test_a_run_over_its_memory_budget_could_not_run_and_says_what_it_needs(monkeypatch):
    monkeypatch.setenv("MLC_LAB_OPENCL_ENGINE", "oclgrind")
    with pytest.raises(OpenCLProgramError) as got:
        run_in_child(
            _prog(65536, grid=(2, 1, 1), budget={"memory_mb": 64, "seconds": 600}), {"out": np.zeros(128, np.float32)}
        )
    assert got.value.verdict == "could_not_run" and got.value.memory
    said = str(got.value)  # numeric_check puts "the numbers were not checked: " before it
    assert said.startswith("running ") and " on oclgrind needs " in said and "the budget leaves" in said, said


def test_the_runs_fit_crosses_the_worker_and_its_note_is_in_the_verdict():
    # What the run did to fit its budget travels in the worker's answer (NumericComparison) and the
    # verdict says it: a match made without Oclgrind's race detection must not read as a plain match.
    from mlc_lab.core.checks import numeric_gpu
    from mlc_lab.model.grading import NumericComparison

    note = "Oclgrind ran without its race detection, to fit the memory budget"
    sent = NumericComparison(
        wrong=0,
        total=16,
        max_error=0.0,
        worst=None,
        outputs=["C"],
        shape={"C": [4, 4]},
        guard_writes={},
        engine="oclgrind",
        diagnostics=[],
        nan_read=False,
        launches=[],
        out_of_bounds=[],
        seconds={"total": 1.0},
        fit={"races": False, "blocks_at_once": 1, "note": note},
    )
    back = NumericComparison.from_json(sent.to_json())
    assert back.fit == sent.fit
    r = numeric_gpu._result(back, {}, 1e-3, 1e-3, "the unscheduled program")
    assert r.verdict == "match" and r.message.endswith(f"on oclgrind ({note})"), r.message
    plain = numeric_gpu._result(NumericComparison.from_json({**sent.to_json(), "fit": None}), {}, 1e-3, 1e-3, "x")
    assert plain.verdict == "match" and "race detection" not in plain.message
