"""A primitive whose result is a list gives a list even when it holds one value, in the Session and
in the trace it prints (``l1, = sch.get_loops(...)``): one table, mlc_lab.model.steps.LIST_RESULTS."""

from __future__ import annotations

import re

import mlc_lab

ONE_LOOP = """
from tvm.script import ir as I
from tvm.script import tirx as T


@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.sblock("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] * T.float32(2)
"""


def test_one_loop_comes_back_as_a_list_and_prints_with_a_comma():
    s = mlc_lab.Session(ONE_LOOP)
    loops = s.apply("get_loops", s.apply("get_sblock", "B"))
    assert isinstance(loops, list) and len(loops) == 1
    assert re.search(r"^\s*l\d+, = sch\.get_loops\(", s.trace, re.M), s.trace
    s.replay(s.trace)  # and the printed trace reads back
    assert isinstance(s.apply("get_loops", s.apply("get_sblock", "B")), list)


def test_a_single_result_that_is_no_list_comes_back_alone():
    s = mlc_lab.Session(ONE_LOOP)
    block = s.apply("get_sblock", "B")
    assert isinstance(block, str)
