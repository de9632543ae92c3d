"""The explorer's Compiler view, Python side, over a real Session: the "lower" request."""

from __future__ import annotations

from mlc_lab.core.session import Session
from mlc_lab.widgets.explorer import BACKGROUND_REQUESTS, Explorer
from tests.fixtures.programs import MM_RELU


def ask(w: Explorer, method: str, params: dict, req_id: str) -> dict:
    c = w.comm
    start = len(c.sent)
    c.deliver({"method": "custom", "content": {"kind": "mlc-request", "id": req_id, "method": method, "params": params}})
    assert w.wait(300), "the background request did not finish"
    (reply,) = [m["data"]["content"] for m in c.sent[start:] if m["data"].get("method") == "custom"
                and m["data"]["content"].get("kind") == "mlc-response" and m["data"]["content"]["id"] == req_id]
    return reply


def test_lower_request_gives_passes_code_and_the_selected_loops_instructions(comms):
    s = Session(MM_RELU)
    j0, j1 = s.apply("split", "Y/j", factors=[None, 16])
    s.apply("reorder", "Y/i", j0, "k", j1)
    s.apply("vectorize", j1)
    w = Explorer(s)
    try:
        assert "lower" in BACKGROUND_REQUESTS  # compiling never blocks the kernel's message loop
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
        assert bad["ok"] is False and bad["error"]["type"] == "bad_request"
        assert w.error == {}  # a view, not an action: no banner
    finally:
        w.close()
