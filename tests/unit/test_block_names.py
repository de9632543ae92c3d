"""Blocks that share a name (a second rfactor of one block names its new block as the first did):
reached as ``name#k`` by the session, the path engine's reading and its work schedule."""

from __future__ import annotations

import pytest
import tvm_ffi
from tvm import s_tir

from mlc_lab.core.session import Session
from mlc_lab.errors import NameResolutionError
from mlc_lab.tvm.block_names import aliases, get_block, split_alias
from mlc_lab.tvm.path.ir import read
from mlc_lab.tvm.path.work import Work
from mlc_lab.tvm.program import load

SUM = """
from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 64):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def _two_rfactors() -> Session:
    s = Session(SUM)
    s.apply("split", loop="k", factors=[None, 8])
    s.apply("rfactor", loop="k_1", factor_axis=0)
    s.apply("split", loop="B/k_1", factors=[2, None])
    s.apply("rfactor", loop="B/k_1_0", factor_axis=0)
    return s


def test_aliases_and_their_parts():
    assert aliases(["B_rf", "B_rf", "B", "B_rf"]) == ["B_rf", "B_rf#2", "B", "B_rf#3"]
    assert split_alias("B_rf#2") == ("B_rf", 2)
    assert split_alias("B_rf") == ("B_rf", 1)
    assert split_alias("odd#name") == ("odd#name", 1)


def test_session_reaches_the_second_block_of_a_shared_name_and_its_trace_replays():
    s = _two_rfactors()
    assert [b.name for b in read(s.module["main"]).blocks] == ["B_rf", "B_rf#2", "B"]
    s.apply("set_scope", block="B_rf#2", buffer_index=0, storage_scope="local")
    second = read(s.module["main"]).block("B_rf#2")
    assert second is not None and second.writes() == ["B.rf_local"]  # the second one, not the first
    assert read(s.module["main"]).block("B_rf").writes() == ["B.rf"]
    s.apply("decompose_reduction", block="B_rf#2", loop="B_rf#2/i")
    s.apply("decompose_reduction", block="B_rf", loop="B_rf/i")
    with pytest.raises(NameResolutionError, match="B_rf_init#2"):
        s.apply("compute_inline", block="B_rf#3")
    # TVM replays the printed trace (its look-ups of such blocks: get_child_blocks) to the same program
    sch = s_tir.Schedule(load(SUM), debug_mask="none")
    env: dict = {}
    exec(compile(s.submission(), "<trace>", "exec"), env)  # noqa: S102  (the session's own output)
    env["apply_trace"](sch)
    assert tvm_ffi.structural_equal(sch.mod, s.module)
    # and so does the session's own reader of traces (the whitelist parser)
    assert tvm_ffi.structural_equal(Session.from_trace(SUM, s.submission()).module, s.module)


def test_work_names_blocks_by_alias():
    s = _two_rfactors()
    sch = s_tir.Schedule(s.module, debug_mask="none")
    work = Work(sch, "main")
    rv = work.block_rv("B_rf#2")
    assert "B_rf[vk_1_0 * 4 + vk_1_1, vi]" in str(work.get(rv))  # the second: it reads the first's sums
    assert work.get(rv).same_as(read(sch.mod["main"]).block("B_rf#2").block)
    work.apply("set_scope", block=rv, buffer_index=0, storage_scope="local")
    assert work.ops[-1].args["block"] == ("block", "B_rf#2")
    with pytest.raises(Exception, match="B_rf#5"):  # TVM's own error: no such block
        get_block(sch, "B_rf#5", "main")
