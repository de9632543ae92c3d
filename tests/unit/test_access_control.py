"""The access analysis's control (``access.Budget``): it reports progress between its parts, stops at
the next part once cancelled, and answers the same as without a control."""

from __future__ import annotations

import numpy as np
import pytest

import mlc_lab
from mlc_lab.core.access import AnalysisCancelled, Budget
from mlc_lab.errors import error_kind

MATMUL = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((256, 256), "float32"), B: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 256), "float32")):
    for i, j, k in T.grid(256, 256, 256):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


@pytest.fixture(scope="module")
def session():
    return mlc_lab.Session(MATMUL)


def test_progress_counts_up_to_the_whole_and_the_answer_is_unchanged(session):
    seen: list[tuple[int, int]] = []
    with_control = session.footprint("i", budget=Budget(progress=lambda done, total: seen.append((done, total))))
    plain = session.footprint("i")
    totals = {t for _, t in seen}
    assert len(totals) == 1
    total = totals.pop()
    dones = [d for d, _ in seen]
    # n accesses: the start, a grid built per access, a grid added per access, the result
    n = (total - 1) // 2
    assert dones == [0, *range(n), *range(n, 2 * n), 2 * n]
    for name in ("A", "B", "C"):
        a, b = with_control[name].crop()[1], plain[name].crop()[1]
        np.testing.assert_array_equal(a["first_touch"], b["first_touch"])


@pytest.mark.parametrize("after", [0, 1, 3])
def test_a_cancelled_analysis_stops_at_its_next_part(session, after):
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > after

    with pytest.raises(AnalysisCancelled) as info:
        session.footprint("i", budget=Budget(cancelled=cancelled))
    assert len(asked) == after + 1  # it stopped at the first question answered yes
    assert error_kind(info.value) == "cancelled"
    assert str(info.value) == "the analysis was cancelled before it finished"
