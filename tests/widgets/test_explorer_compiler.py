"""The explorer's Compiler view, Python side, over a real Session: the "lower" request, for the CPU
and for any CUDA architecture, TVM target tag or target JSON (issue 19, item 4); a bad target is one
sentence; the reply is recorded under its target for saved notebooks."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mlc_lab.tvm.course_programs import matmul
from tests.unit.test_cuda import blocking_with_shared
from mlc_lab.core.session import Session
from mlc_lab.model.requests import REQUESTS
from mlc_lab.widgets.explorer import Explorer
from tests.fixtures.programs import MM_RELU


def ask(w: Explorer, method: str, params: dict, req_id: str) -> dict:
    c = w.comm
    start = len(c.sent)
    c.deliver(
        {"method": "custom", "content": {"kind": "mlc-request", "id": req_id, "method": method, "params": params}}
    )
    assert w.wait(300), "the background request did not finish"
    (reply,) = [
        m["data"]["content"]
        for m in c.sent[start:]
        if m["data"].get("method") == "custom"
        and m["data"]["content"].get("kind") == "mlc-response"
        and m["data"]["content"]["id"] == req_id
    ]
    return reply


def test_lower_request_gives_passes_code_and_the_selected_loops_instructions(comms):
    s = Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 16])
    s.apply("reorder", "Y/i", j0, "k", j1)
    s.apply("vectorize", j1)
    w = Explorer(s)
    try:
        assert REQUESTS["lower"].background  # compiling never blocks the kernel's message loop
        reply = ask(w, "lower", {"step": s.current.id, "target": "cpu"}, "l1")
        assert reply["ok"] is True, reply
        r = reply["result"]
        assert r["step"] == s.current.id and r["kind"] == "cpu" and r["ok"] is True
        (vec,) = [p for p in r["passes"] if p["name"] == "tirx.VectorizeLoop"]
        assert vec["status"] == "changed" and "T.Ramp" in vec["script"]
        (j1_facts,) = [f for f in r["loops"] if f["loop"] == "j_1"]
        asm_lines = r["asm"].splitlines()
        picked = [asm_lines[n - 1] for n in j1_facts["asm_lines"]]
        assert any("vfmadd" in line for line in picked) and j1_facts["is_vector"] is True
        assert r["verdict"].startswith("j_1 vectorized")
        bad = ask(w, "lower", {"target": "tpu"}, "l2")
        assert bad["ok"] is False and bad["error"]["type"] == "bad_target"
        assert bad["error"]["summary"] == (
            "'tpu' is not a target the Compiler view knows: give 'cpu', 'cuda', a CUDA "
            "architecture such as 'sm_75', a target dict or a TVM target tag"
        )
        assert w.error == {}  # a view, not an action: no banner
    finally:
        w.close()


ROOT = Path(__file__).resolve().parents[2]
# What js/__tests__/compiler.test.ts feeds the panel: a real lowering (below), written by
# MLC_LAB_WRITE_FIXTURES=1 and otherwise compared with what Python sends now.
FIXTURE = ROOT / "tests" / "fixtures" / "lowering_cuda_big_tile.json"
STEP_FIXTURE = ROOT / "tests" / "fixtures" / "step_cuda_big_tile.json"  # the step itself, as the page gets it


@pytest.fixture(scope="module")
def big_tile():
    """The course's 1024^3 GPU matmul with a 64 x 64 accumulator per thread (2 x 2 threads per block)."""
    return blocking_with_shared(Session(matmul(1024)), local=64, block=2, tile_k=8)


def fixture_of(reply: dict) -> dict:
    """The reply, smaller: pass scripts and most of the PTX left out (the panel's CUDA facts and code kept)."""
    out = json.loads(json.dumps(reply))
    for p in out["passes"]:
        p["script"] = None
    out["ptx"] = "\n".join((out["ptx"] or "").splitlines()[:40])
    return out


# What does not depend on this machine (the target names the host CPU) nor on whether ptxas is there.
STABLE = ("kind", "arch", "ok", "kernel_arrays", "gpu_buffers", "cuda_loop_lines", "cuda_source", "step")
HAS_PTXAS = bool(shutil.which("nvcc") and shutil.which("ptxas"))


def test_lower_for_a_cuda_arch_a_tag_or_json_and_a_bad_target_in_one_sentence(comms, big_tile):
    w = Explorer(big_tile)
    try:
        assert w.compiler_target == "cpu" and w.get_state()["compiler_target"] == "cpu"  # the panel's field, kept
        step = big_tile.current.id
        reply = ask(w, "lower", {"step": step, "target": "sm_75"}, "g1")
        assert reply["ok"] is True, reply
        r = reply["result"]
        assert r["kind"] == "cuda" and r["arch"] == "sm_75" and r["step"] == step
        (kernel,) = r["kernels"]
        assert r["verdict"].startswith("main_kernel: each thread keeps a 64x64 float32 accumulator (C_local, 16 KB): ")
        if HAS_PTXAS:
            assert kernel["facts_from"] == "ptxas" and kernel["stack_bytes"] >= 16384 and kernel["registers"]
            assert "a 16 KB stack frame per thread (ptxas)" in r["verdict"]
        else:
            assert kernel["facts_from"] == "source" and kernel["registers"] is None
        became = {f["loop"]: f["verdict"] for f in r["loops"]}
        assert became["i_0"] == "blockIdx.y: 8 thread blocks, each runs one iteration"
        assert became["i_1_j_1_fused"] == "threadIdx.x: 4 threads of a block, each runs one iteration"
        # the record a saved notebook answers from names the target: sm_75's is not cuda's
        records = w.__dict__["_mlc_records"]
        assert f'lower {{"step":{step},"target":"sm_75"}}' in records
        assert not any(k.startswith("lower ") and '"target":"cuda"' in k for k in records)

        view = json.loads(big_tile.step_view(step).json_bytes)
        if os.environ.get("MLC_LAB_WRITE_FIXTURES"):
            FIXTURE.write_text(json.dumps(fixture_of(r), indent=1, sort_keys=True) + "\n")
            STEP_FIXTURE.write_text(json.dumps(view, indent=1, sort_keys=True) + "\n")
        fixture = json.loads(FIXTURE.read_text())
        saved_view = json.loads(STEP_FIXTURE.read_text())
        assert {k: saved_view[k] for k in ("id", "script", "loop_tree")} == {
            k: view[k] for k in ("id", "script", "loop_tree")
        }, "stale fixture: run this test with MLC_LAB_WRITE_FIXTURES=1"
        assert {k: fixture[k] for k in STABLE} == {k: fixture_of(r)[k] for k in STABLE}, (
            "stale fixture: run this test with MLC_LAB_WRITE_FIXTURES=1"
        )
        assert [(f["loop"], f["verdict"]) for f in fixture["loops"]] == [(f["loop"], f["verdict"]) for f in r["loops"]]
        if HAS_PTXAS:  # the fixture was written where ptxas ran: its figures are what ptxas says here
            assert fixture["verdict"] == r["verdict"]
            assert [k["stack_bytes"] for k in fixture["kernels"]] == [k["stack_bytes"] for k in r["kernels"]]

        tag = ask(w, "lower", {"step": step, "target": "nvidia/geforce-rtx-3080"}, "g2")
        assert tag["ok"] is True and tag["result"]["arch"] == "sm_86"
        as_json = ask(w, "lower", {"step": step, "target": ' {"kind": "cuda", "arch": "sm_80"}'}, "g3")
        assert as_json["ok"] is True and as_json["result"]["arch"] == "sm_80"

        for text, said in (
            (
                "sm75",
                "'sm75' is not a target the Compiler view knows: give 'cpu', 'cuda', a CUDA "
                "architecture such as 'sm_75', a target dict or a TVM target tag",
            ),
            ("opencl", "the Compiler view compiles for the CPU or for CUDA, not for 'opencl'"),
            (
                '{"kind": cuda}',
                "the Compiler view's target '{\"kind\": cuda}' is not valid JSON (Expecting value at column 10)",
            ),
            (
                "  ",
                "the Compiler view's target is empty: give cpu, cuda, a CUDA architecture such "
                "as sm_75, a TVM target tag or a target as JSON",
            ),
        ):
            bad = ask(w, "lower", {"step": step, "target": text}, "b")
            assert bad["ok"] is False and bad["error"]["type"] == "bad_target", (text, bad)
            assert bad["error"]["summary"] == said
            assert "Target kind" not in json.dumps(bad["error"])  # TVM's words stay out
        assert w.error == {}
    finally:
        w.close()
