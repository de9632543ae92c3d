"""A Lowering's one encoding has the shape of its contract (mlc_lab.model.lowering), whose TypeScript
types the Compiler panel reads (generated into js/lib/model.ts)."""

from __future__ import annotations

from mlc_lab.core.session import Session
from mlc_lab.model.lowering import KernelFacts, Lowering
from mlc_lab.model.conform import problems
from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU


def test_a_cpu_lowering_is_sent_as_its_contract_says():
    s = Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 16])
    s.apply("vectorize", j1)
    data = s.lower().to_json()
    assert data["loops"] and problems(data, Lowering) == []
    assert any(f["is_vector"] for f in data["loops"])  # the properties travel with the fields


def test_a_cuda_lowering_without_ptxas_is_sent_as_its_contract_says():
    data = Session(GPU_TWO_BLOCKS).lower(target="sm_80", ptx=False).to_json()
    assert data["kind"] == "cuda" and data["kernels"] and problems(data, Lowering) == []
    assert {k["facts_from"] for k in data["kernels"]} == {"source"}


def test_where_a_kernels_figures_come_from():
    assert KernelFacts("k", registers=12).to_json()["facts_from"] == "ptxas"
    assert KernelFacts("k").to_json()["facts_from"] == "source"
