"""The Explorer over a real mlc_lab.Session (TVM): the course's chapter-2 steps as front-end requests."""

from __future__ import annotations

import pytest

from mlc_lab.core.session import Session  # TVM is a hard dependency: a broken install fails here
from mlc_lab.widgets.explorer import Explorer
from tests.fixtures.programs import MM_RELU


@pytest.fixture()
def real(comms):
    w = Explorer(Session(MM_RELU))
    yield w
    w.close()


def _walk(tree):
    for fn in tree["functions"]:
        stack = list(fn["children"])
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node["children"])


def test_chapter2_by_requests(real):
    c = real.comm
    ok = lambda r: r["ok"] or pytest.fail(str(r))  # noqa: E731
    ok(c.request("apply", {"primitive": "split", "kwargs": {"loop": "Y/j", "factors": [None, 4]}}))
    assert real.selection == {"kind": "loop", "name": "j_0"}
    ok(c.request("apply", {"primitive": "reorder", "args": ["Y/i", "j_0", "k", "j_1"]}))
    ok(
        c.request(
            "apply",
            {"primitive": "reverse_compute_at", "kwargs": {"block": "C", "loop": "j_0", "preserve_unit_loops": False}},
        )
    )
    ok(c.request("apply", {"primitive": "decompose_reduction", "kwargs": {"block": "Y", "loop": "k"}}))
    assert 'T.sblock("Y_init")' in real.script and "for ax0 in range(4):" in real.script
    assert real.changed_lines, "the last step's lines are marked"
    names = [n["name"] for n in _walk(real.loop_tree) if n["kind"] == "block"]
    assert sorted(names) == ["C", "Y_init", "Y_update"]
    # every loop node carries the line it starts on in the shown script
    lines = real.script.splitlines()
    for node in _walk(real.loop_tree):
        if node["kind"] == "loop":
            assert node["name"] in lines[node["line"] - 1]


def test_real_failure_and_sampling(real):
    c = real.comm
    reply = c.request("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}})
    assert reply["ok"] is False and "k" in reply["error"]["involved"]
    assert len(real.session.steps) == 1
    # one label: the Session writes it on the error; its history and the banner read that field
    assert real.error["label"] == real.session.failed[-1].label == real.failures[-1]["label"] == "vectorize(k)"
    reply = c.request(
        "apply",
        {
            "primitive": "sample_perfect_tile",
            "then_split": True,
            "kwargs": {"loop": "k", "n": 2, "max_innermost_factor": 16},
        },
    )
    assert reply["ok"] is True, reply
    (d,) = real.decisions
    other = next(ch for ch in d["choices"] if ch != d["value"])
    assert c.request("set_decision", {"index": 0, "value": other})["ok"] is True
    assert real.decisions[0]["value"] == other
    text = c.request("export_trace", {"format": "text"})["buffers"][0].decode()
    replay = c.request("replay", {"trace": text})
    assert replay["ok"] is True, replay
    bad = c.request("replay", {"trace": text + "\nimport os\n"})
    assert bad["ok"] is False and bad["error"]["line"] is not None
    assert real.error["source"] == "replay"
    py = c.request("export_trace", {"format": "python"})["buffers"][0].decode()
    assert "def schedule(sch" in py


def test_measure_mm_relu_for_real(real):
    """One real CPU measurement through the widget (worker process, background thread)."""
    c = real.comm
    start = len(c.sent)
    c.deliver(
        {
            "method": "custom",
            "content": {"kind": "mlc-request", "id": "m", "method": "measure", "params": {"target": "cpu", "step": 0}},
        }
    )
    assert real.wait(120), "the measurement did not finish"
    (reply,) = [
        m["data"]["content"]
        for m in c.sent[start:]
        if m["data"].get("method") == "custom" and m["data"]["content"].get("id") == "m"
    ]
    assert reply["ok"] is True, reply
    m = real.measurements["0"]
    assert m["latency_s"] > 0 and m["gflops"] > 0 and m["correct"] is True and m["target"] == "cpu"
    assert real.session.measurements[0].latency_s == m["latency_s"]
    assert real.measuring == {}
