"""The way to targets made by the rarer buffer and stage primitives (issue 33): ``read_at`` /
``write_at`` copies under a loop are read off the target and made on the start, with TVM as the
oracle: its own replay of the ``apply_trace`` gives the target, and so do the steps applied one by
one through ``Session.apply``.
"""

from __future__ import annotations

import pytest
import tvm
from tvm import s_tir

from mlc_lab import Session
from tests.unit.test_path import assert_way

MATMUL = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def _schedule(text: str = MATMUL, check: bool = True) -> s_tir.Schedule:
    # cache_inplace names both of its copies alike, which TVM's own verification refuses
    return s_tir.Schedule(tvm.script.from_source(text), debug_mask="all" if check else "none")


@pytest.mark.parametrize(
    ("reads", "loop", "write"),
    [([0], 0, None), ([1], 1, None), ([0, 1], 1, "local"), ([], 0, "local")],
)
def test_copies_at_a_loop_are_read_at_and_write_at(reads, loop, write):
    sch = _schedule()
    block = sch.get_sblock("C")
    at = sch.get_loops(block)[loop]
    for n in sorted(reads, reverse=True):  # C reads [A, B]
        sch.read_at(at, block, n, "shared")
    if write is not None:
        sch.write_at(at, block, 0, write)
    answer = Session(MATMUL).path_to(sch.mod)
    assert_way(MATMUL, sch.mod, answer, "main")
    kinds = [s.primitive for s in answer.steps]
    assert kinds.count("read_at") == len(reads) and kinds.count("write_at") == (write is not None)


def test_a_copy_at_a_loop_of_another_computation_is_not_reached():
    sch = _schedule()
    block = sch.get_sblock("C")
    sch.read_at(sch.get_loops(block)[0], block, 0, "shared")
    other = MATMUL.replace("A[vi, vk] * B", "A[vi, vk] + B")
    answer = Session(other).path_to(sch.mod)
    assert not answer.reached
    assert "computes something else" in answer.why


TWO_NESTS = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32"), D: T.Buffer((32, 32), "float32")):
    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 8, 8):
        with T.sblock("C"):
            vi = T.axis.spatial(64, i_0 * 8 + i_1)
            vj = T.axis.spatial(64, j_0 * 8 + j_1)
            C[vi, vj] = A[vi, vj] + T.float32(1.0)
    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 4, 4):
        with T.sblock("D"):
            vi = T.axis.spatial(32, i_0 * 4 + i_1)
            vj = T.axis.spatial(32, j_0 * 4 + j_1)
            D[vi, vj] = A[vi, vj] * T.float32(2.0)
"""


@pytest.mark.parametrize("depth", [0, 1])
def test_loops_merged_across_nests_are_one_merge(depth):
    sch = _schedule(TWO_NESTS)
    sch.merge(sch.get_loops(sch.get_sblock("C"))[depth], sch.get_loops(sch.get_sblock("D"))[depth])
    answer = Session(TWO_NESTS).path_to(sch.mod)
    assert_way(TWO_NESTS, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["merge"]
    assert answer.steps[0].call()[0] == (["C/i_0", "D/i_0"] if depth == 0 else ["C/j_0", "D/j_0"])


IN_PLACE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(data_io: T.Buffer((64,), "int32")):
    data_1d = T.sblock_alloc_buffer((64,), "int32")
    for i0 in range(64):
        with T.sblock("copy_in"):
            v0 = T.axis.spatial(64, i0)
            data_1d[v0] = data_io[v0]
    for i0 in range(1):
        with T.sblock("ext_call"):
            T.reads(data_1d[0:64])
            T.writes(data_1d[0:64])
            T.evaluate(T.call_extern("void", "call_impl", data_1d.data))
    for i0 in range(64):
        with T.sblock("copy_out"):
            v0 = T.axis.spatial(64, i0)
            data_io[v0] = data_1d[v0]
"""


@pytest.mark.parametrize("scope", ["local", "shared"])
def test_a_block_working_in_place_on_a_cache_is_one_cache_inplace(scope):
    sch = _schedule(IN_PLACE, check=False)
    sch.cache_inplace(sch.get_sblock("ext_call"), 0, scope)
    answer = Session(IN_PLACE).path_to(sch.mod)
    assert_way(IN_PLACE, sch.mod, answer, "main")
    assert [(s.primitive, s.arguments["block"]) for s in answer.steps] == [("cache_inplace", "ext_call")]


def test_a_copy_of_a_buffer_read_and_written_in_place_comes_before_its_writer():
    sch = _schedule(IN_PLACE)
    block = sch.get_sblock("copy_in")
    sch.cache_read(block, 0, "local", [block])  # before copy_out writes data_io: TVM puts it there when told
    answer = Session(IN_PLACE).path_to(sch.mod)
    assert_way(IN_PLACE, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["cache_read"]


def test_a_target_bound_through_a_stray_iterator_is_said_never_equal():
    sch = _schedule(ONE_IN_PLACE, check=False)
    sch.cache_inplace(sch.get_sblock("A"), 0, "local")  # TVM leaves A's iterator vi unbound above the copies
    answer = Session(ONE_IN_PLACE).path_to(sch.mod)
    assert not answer.reached and not answer.steps
    assert "vi, defined nowhere" in answer.why and "never holds" in answer.why


ONE_IN_PLACE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("A"):
            vi = T.axis.spatial(64, i)
            A[vi] = A[vi] + T.float32(1.0)
"""


GATHER = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), I: T.Buffer((16,), "int32"), C: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    P = T.sblock_alloc_buffer((16,), "int32")
    Q = T.sblock_alloc_buffer((16,))
    for i in range(16):
        with T.sblock("P"):
            vi = T.axis.spatial(16, i)
            P[vi] = T.min(T.max(I[vi], 0), 15)
    for i in range(16):
        with T.sblock("Q"):
            vi = T.axis.spatial(16, i)
            Q[vi] = A[P[vi]]
    for i in range(16):
        with T.sblock("R"):
            vi = T.axis.spatial(16, i)
            D[vi] = Q[vi] + C[vi]
"""


@pytest.mark.parametrize("order", [("P", "Q"), ("Q", "P")])
def test_blocks_inlined_in_either_order_list_their_reads_as_the_target_does(order):
    sch = _schedule(GATHER)
    for name in order:  # a gather's index read lands before or after its region as the order goes
        sch.compute_inline(sch.get_sblock(name))
    answer = Session(GATHER).path_to(sch.mod)
    assert_way(GATHER, sch.mod, answer, "main")
    assert sorted(s.arguments["block"] for s in answer.steps) == ["P", "Q"]


@pytest.mark.parametrize(("kind", "indices"), [("read", [0]), ("read", [1]), ("read", [0, 1]), ("write", [0])])
def test_accesses_a_target_does_not_state_are_hidden_last(kind, indices):
    sch = _schedule()
    sch.unsafe_hide_buffer_access(sch.get_sblock("C"), kind, indices)
    answer = Session(MATMUL).path_to(sch.mod)
    assert_way(MATMUL, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["unsafe_hide_buffer_access"]


TWO_CONSUMERS = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.sblock_alloc_buffer((32, 32))
    for i, j in T.grid(32, 32):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
    for i, j in T.grid(32, 16):
        with T.sblock("C_1"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj * 2] = B[vi, vj * 2] + T.float32(1.0)
        with T.sblock("C_2"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj * 2 + 1] = B[vi, vj * 2 + 1] * T.float32(2.0)
"""


@pytest.mark.parametrize("loop", [0, 1])
def test_a_producer_moved_under_two_consumers_that_share_a_nest_is_one_compute_at(loop):
    sch = _schedule(TWO_CONSUMERS)
    sch.compute_at(sch.get_sblock("B"), sch.get_loops(sch.get_sblock("C_1"))[loop])
    answer = Session(TWO_CONSUMERS).path_to(sch.mod)
    assert_way(TWO_CONSUMERS, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["compute_at"]


@pytest.mark.parametrize(
    ("read_map", "write_map"),
    [
        (lambda i, j, k: (i, k), None),
        (lambda i, j, k: (k, i), None),
        (None, lambda i, j, k: (j, i)),
        (lambda i, j, k: (i, k), lambda i, j, k: (j, i)),
        (None, lambda i, j, k: (i, j)),
    ],
)
def test_copies_indexed_by_the_block_own_iterators_are_reindex_cache_read_and_write(read_map, write_map):
    sch = _schedule()
    block = sch.get_sblock("C")
    if read_map is not None:
        sch.reindex_cache_read(block, 0, "shared", read_map)
    if write_map is not None:
        sch.reindex_cache_write(block, 0, "local", write_map)
    answer = Session(MATMUL).path_to(sch.mod)
    assert_way(MATMUL, sch.mod, answer, "main")
    want = ["reindex_cache_read"] * (read_map is not None) + ["reindex_cache_write"] * (write_map is not None)
    assert [s.primitive for s in answer.steps] == want


def test_a_plain_cache_of_a_reduction_stays_cache_write():
    sch = _schedule()
    sch.cache_write(sch.get_sblock("C"), 0, "local")
    answer = Session(MATMUL).path_to(sch.mod)
    assert_way(MATMUL, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["cache_write"]


PARAM_IN_PLACE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(data_io: T.Buffer((64,), "int32")):
    for i0 in range(1):
        with T.sblock("ext_call"):
            T.reads(data_io[0:64])
            T.writes(data_io[0:64])
            T.evaluate(T.call_extern("void", "call_impl", data_io.data))
"""


def test_a_way_past_blocks_of_one_name_is_said_unwritable():
    sch = _schedule(PARAM_IN_PLACE, check=False)
    copy_in, _ = sch.cache_inplace(sch.get_sblock("ext_call"), 0, "local")
    sch.cache_read(copy_in, 0, "global")  # only TVM's handle names this copy: its name is its twin's too
    answer = Session(PARAM_IN_PLACE).path_to(sch.mod)
    assert not answer.reached
    assert "several blocks named data_io_local" in answer.why


TRANSPOSE = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((32, 64), "float32"), B: T.Buffer((64, 32), "float32")):
    for i, j in T.grid(64, 32):
        with T.sblock("B"):
            v0, v1 = T.axis.remap("SS", [i, j])
            B[v0, v1] = A[v1, v0]
"""


def test_a_cache_read_for_a_block_whose_iterators_share_its_copy_names_stays_cache_read():
    sch = _schedule(TRANSPOSE)
    sch.cache_read(sch.get_sblock("B"), 0, "shared")  # the copy's v0, v1 are cache_read's, not B's
    answer = Session(TRANSPOSE).path_to(sch.mod)
    assert_way(TRANSPOSE, sch.mod, answer, "main")
    assert [s.primitive for s in answer.steps] == ["cache_read"]
