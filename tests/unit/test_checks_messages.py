"""No TVM placeholder (``tirx.For#0``, ``s_tir.SBlock#1``) reaches a user: failing primitives name the
loops and blocks as the user sees them, in the sentence and in TVM's rendering kept as the detail."""

from __future__ import annotations

import re

import pytest

from mlc_lab.core.session import Session
from mlc_lab.errors import ScheduleStepError
from mlc_lab.tvm.course_programs import MATMUL, MM_RELU

PLACEHOLDER = re.compile(r"(For|Block)#\d")

SOFTMAX = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def softmax(A: T.Buffer((64, 128), "float32"), B: T.Buffer((64, 128), "float32")):
        T.func_attr({"global_symbol": "softmax", "tirx.noalias": True})
        M = T.sblock_alloc_buffer((64,), dtype="float32")
        S = T.sblock_alloc_buffer((64,), dtype="float32")
        for i, k in T.grid(64, 128):
            with T.sblock("max"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    M[vi] = T.float32(-3.0e38)
                M[vi] = T.max(M[vi], A[vi, vk])
        for i, k in T.grid(64, 128):
            with T.sblock("sum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + T.exp(A[vi, vk] - M[vi])
        for i, j in T.grid(64, 128):
            with T.sblock("norm"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj] - M[vi]) / S[vi]
"""

# (program, steps, words the first sentence must hold)
CASES = {
    "fuse_not_nested": (MATMUL, [("fuse", "i", "k")], ["i, k", "directly contain"]),
    "fuse_reversed": (MATMUL, [("fuse", "j", "i")], ["j, i"]),
    "fuse_two_blocks": (MM_RELU, [("fuse", "Y/j", "C/i")], ["cannot be fused"]),
    "compute_at_output": (MM_RELU, [("compute_at", "C", "Y/i")], ["C is an output block"]),
    "parallel_reduction": (MM_RELU, [("parallel", "k")], ["k is a reduction loop"]),
    "split_too_small": (MATMUL, [("split", "i", [3, 5])], ["extent of i"]),
    "inline_reduction": (MM_RELU, [("compute_inline", "Y")], ["Y is a reduction"]),
    "decompose_not_reduction": (MM_RELU, [("decompose_reduction", "C", "C/i")], ["C is not a reduction block"]),
    "cache_write_index": (MM_RELU, [("cache_write", "Y", 3, "local")], ["Y has 1 write buffer", "not 3"]),
    "rfactor_spatial_loop": (MM_RELU, [("rfactor", "Y/i", 0)], ["i is used by a data-parallel iterator"]),
    "softmax_compute_at_consumer": (
        SOFTMAX,
        [("compute_at", "max", "norm/j")],
        ["max cannot move under loop j", "sum, norm"],
    ),
    "softmax_compute_at_one_consumer": (
        SOFTMAX,
        [("compute_at", "sum", "max/k")],
        ["sum cannot move under loop k", "consumer norm"],
    ),
    "softmax_reverse_compute_at": (
        SOFTMAX,
        [("reverse_compute_at", "sum", "norm/j")],
        ["sum cannot move under loop j", "producer max"],
    ),
    "vectorize_after_decompose": (
        MM_RELU,
        [("decompose_reduction", "Y", "k"), ("vectorize", "Y_update/j")],
        ["vectorize failed"],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_failing_primitive_names_what_the_user_sees(name):
    program, steps, words = CASES[name]
    s = Session(program)
    with pytest.raises(ScheduleStepError) as info:
        for primitive, *args in steps:
            s.apply(primitive, *args)
    exc = info.value
    assert not PLACEHOLDER.search(str(exc)), str(exc)
    assert not PLACEHOLDER.search(exc.detail)
    for w in words:
        assert w in exc.summary, exc.summary
    assert not PLACEHOLDER.search(s.failed[-1].message if hasattr(s.failed[-1], "message") else str(s.failed[-1]))


def test_rendering_comments_give_the_names():
    from mlc_lab.text.step_errors import without_placeholders

    text = (
        "for i in range(4):\n    # tirx.For#0\n    for j_1 in range(8):\n        # s_tir.SBlock#1\n"
        '        with T.sblock("Y_update"):\n            pass\n'
        "Error message: The queried subtree root tirx.For#0 has a child s_tir.SBlock#1 and s_tir.SBlock#2"
    )
    out = without_placeholders(text)
    assert "loop j_1" in out and "block Y_update" in out and "a block" in out
    assert "# tirx" not in out and not PLACEHOLDER.search(out)


def test_placeholders_listed_without_separator():
    from mlc_lab.text.step_errors import without_placeholders

    text = (
        '    # s_tir.SBlock#0\n    with T.sblock("sum"):\n    # s_tir.SBlock#1\n    with T.sblock("norm"):\n'
        "List of the consumer(s):s_tir.SBlock#0s_tir.SBlock#1"
    )
    assert without_placeholders(text).endswith("List of the consumer(s):block sum, block norm")


def test_the_sentences_name_the_buffer_a_stage_copies_or_writes_back():
    # Before: "block A_shared copies A_shared", "writes C_local back", "a 64x64 tile of C_local" (the
    # stage's own name where the program's buffer was meant), and "cooperative fetching does not apply"
    # of a matmul that had not staged anything in shared memory yet (it applies two steps later).
    import mlc_lab
    from tests.fixtures.programs import matmul

    s = mlc_lab.Session(matmul(256))
    s.apply("cache_write", "C", 0, "local")
    s.apply("split", "C/i", factors=[None, 8, 8])
    s.apply("split", "C/j", factors=[None, 8, 8])
    s.apply("split", "C/k", factors=[None, 8])
    s.apply("reorder", "i_0", "j_0", "i_1", "j_1", "k_0", "k_1", "i_2", "j_2")
    s.apply("reverse_compute_at", "C_local", "j_1")
    s.apply("bind", "i_0", "blockIdx.y")
    s.apply("bind", "j_0", "blockIdx.x")
    s.apply("bind", s.apply("fuse", "i_1", "j_1"), "threadIdx.x")
    lines = {c.name: c for c in s.check(target="cuda").checks}
    assert "computes a 64x64 tile of C with 64 threads" in lines["thread_block_tiling"].message
    assert "writes each element back to C once" in lines["write_cache"].message
    coop = lines["cooperative_fetching"]
    assert not coop.judged and coop.evidence["reason"] == "not judged yet", coop.message
    assert "does not apply" not in coop.message and "reads no shared buffer yet" in coop.message
    s.apply("cache_read", "C", 0, "shared")
    coop = {c.name: c for c in s.check(target="cuda").checks}["cooperative_fetching"]
    assert "block A_shared copies A into A_shared on the host" in coop.message, coop.message
    # an element-wise program has no tile whose inputs threads share: there it does not apply
    add = mlc_lab.Session(
        "from tvm.script import tirx as T\n"
        "@T.prim_func(s_tir=True)\n"
        "def main(A: T.Buffer((1024,), 'float32'), B: T.Buffer((1024,), 'float32')):\n"
        "    for i in range(1024):\n"
        "        with T.sblock('B'):\n"
        "            vi = T.axis.remap('S', [i])\n"
        "            B[vi] = A[vi] + T.float32(1)\n"
    )
    i0, i1 = add.apply("split", "i", factors=[None, 128])
    add.apply("bind", i0, "blockIdx.x")
    add.apply("bind", i1, "threadIdx.x")
    coop = {c.name: c for c in add.check(target="cuda").checks}["cooperative_fetching"]
    assert "does not apply" in coop.message
