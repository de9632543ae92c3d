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


def _schedule(text: str = MATMUL) -> s_tir.Schedule:
    return s_tir.Schedule(tvm.script.from_source(text), debug_mask="all")


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
