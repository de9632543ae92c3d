"""Measuring and the CUDA view of the Explorer, over the fake session (no TVM).

`measure` and `cuda_source` requests are answered from a background thread, so these tests send
the request, wait for the widget's jobs (`Explorer.wait`) and then read the one response.
"""

from __future__ import annotations

import threading

from mlc_lab.model.requests import REQUESTS
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.widgets.explorer_text import target_label


def ask(w: Explorer, method: str, params: dict | None = None, req_id: str = "m1") -> dict:
    c = w.comm
    start = len(c.sent)
    c.deliver(
        {"method": "custom", "content": {"kind": "mlc-request", "id": req_id, "method": method, "params": params or {}}}
    )
    assert w.wait(10), "the background request did not finish"
    replies = [
        m
        for m in c.sent[start:]
        if m["data"].get("method") == "custom"
        and m["data"]["content"].get("kind") == "mlc-response"
        and m["data"]["content"]["id"] == req_id
    ]
    assert len(replies) == 1, replies
    return replies[0]["data"]["content"]


def test_measure_runs_in_the_background_and_fills_the_measurements(explorer, session):
    gate = threading.Event()
    session.measure_gate = gate
    c = explorer.comm
    mark = len(c.sent)
    c.deliver(
        {
            "method": "custom",
            "content": {"kind": "mlc-request", "id": "m1", "method": "measure", "params": {"target": "cpu", "step": 0}},
        }
    )
    # the message loop is free: the handler returned while the measurement waits on the gate
    for _ in range(200):
        if explorer.measuring:
            break
        threading.Event().wait(0.01)
    assert explorer.measuring == {"step": 0, "target": "cpu"}
    assert not [m for m in c.sent[mark:] if m["data"].get("method") == "custom"], "answered too early"
    gate.set()
    assert explorer.wait(10)
    reply = [m["data"]["content"] for m in c.sent[mark:] if m["data"].get("method") == "custom"][-1]
    assert reply["ok"] is True and reply["result"]["step"] == 0
    m = reply["result"]["measurement"]
    assert m["latency_s"] == 0.004 and m["target"] == "cpu" and m["correct"] is True
    assert explorer.measuring == {}
    assert explorer.measurements["0"]["latency_s"] == 0.004
    assert explorer.measurements["0"]["gflops"] > 0
    state = {k: v for u in c.updates(mark) for k, v in u.items()}
    assert state["measurements"]["0"]["max_abs_error"] == 0.0
    assert session.measure_calls == [("cpu", 0)]


def test_a_second_measurement_while_one_runs_is_refused(explorer, session):
    gate = threading.Event()
    session.measure_gate = gate
    c = explorer.comm
    c.deliver({"method": "custom", "content": {"kind": "mlc-request", "id": "a", "method": "measure", "params": {}}})
    for _ in range(200):
        if explorer.measuring:
            break
        threading.Event().wait(0.01)
    start = len(c.sent)
    c.deliver({"method": "custom", "content": {"kind": "mlc-request", "id": "b", "method": "measure", "params": {}}})
    for _ in range(200):
        if [m for m in c.sent[start:] if m["data"].get("content", {}).get("id") == "b"]:
            break
        threading.Event().wait(0.01)
    (busy,) = [m["data"]["content"] for m in c.sent[start:] if m["data"].get("content", {}).get("id") == "b"]
    assert busy["ok"] is False and busy["error"]["type"] == "busy" and "being measured" in busy["error"]["summary"]
    gate.set()
    assert explorer.wait(10)
    assert explorer.measuring == {} and list(explorer.measurements) == ["0"]


def test_measurements_of_two_steps_and_their_correctness(explorer, session):
    c = explorer.comm
    assert ask(explorer, "measure", {"target": "cpu"})["ok"]
    c.request("apply", {"primitive": "parallel", "kwargs": {"loop": "Y/i"}})
    c.request("apply", {"primitive": "unroll", "kwargs": {"loop": "C/j"}})
    reply = ask(explorer, "measure", {"target": "cpu", "step": "2"})  # ids may come back as text
    assert reply["ok"] is True
    assert sorted(explorer.measurements) == ["0", "2"]
    bad = explorer.measurements["2"]
    assert bad["correct"] is False and bad["max_abs_error"] == 0.5  # the fake's step 2 is wrong
    assert explorer.current == 2  # measuring does not move the session


def test_cuda_without_a_gpu_is_an_error_banner_and_changes_nothing(explorer, session):
    steps = len(session.steps)
    reply = ask(explorer, "measure", {"target": "cuda"})
    assert reply["ok"] is False
    assert reply["error"]["type"] == "no_gpu"
    assert reply["error"]["summary"].startswith("no CUDA GPU found")
    assert explorer.error["source"] == "measure" and explorer.error["type"] == "no_gpu"
    assert explorer.error["primitive"] == "measure on cuda"
    assert explorer.measuring == {} and explorer.measurements == {}
    assert session.measurements == {} and len(session.steps) == steps
    # a later successful measurement clears that banner
    assert ask(explorer, "measure", {"target": "cpu"})["ok"]
    assert explorer.error == {}


def test_bad_measure_requests(explorer):
    reply = ask(explorer, "measure", {"target": "tpu"})
    assert reply["ok"] is False and reply["error"]["type"] == "bad_request"
    reply = ask(explorer, "measure", {"step": 99})
    assert reply["ok"] is False and reply["error"]["type"] == "unknown_step"
    assert explorer.measuring == {}


def test_measuring_from_python_reaches_the_front_end(explorer, session):
    c = explorer.comm
    mark = len(c.sent)
    session.measure()
    (update,) = c.updates(mark)
    assert set(update) == {"measurements"}  # no full refresh for a measurement
    assert update["measurements"]["0"]["target"] == "cpu"


def test_cuda_view_of_a_bound_program(explorer, session):
    session.gpu_bound = True
    reply = ask(explorer, "cuda_source", {"step": 0})
    assert reply["ok"] is True
    r = reply["result"]
    assert "__global__" in r["source"] and "#include" not in r["source"]
    assert r["kernels"][0]["threads_per_block"] == 128 and r["kernels"][0]["thread_extents"]["blockIdx.x"] == 8
    assert r["ptx"].startswith(".visible") and r["step"] == 0
    assert explorer.error == {}  # a view, not an action: no banner


def test_cuda_view_of_unbound_loops_names_them(explorer):
    reply = ask(explorer, "cuda_source", {})
    assert reply["ok"] is False
    err = reply["error"]
    assert err["type"] == "gpu_check"
    assert err["summary"].startswith("the program has unbound loops")
    assert "block 'Y'" in err["detail"] and "block 'C'" in err["detail"]
    assert explorer.error == {}


def test_background_requests_are_known_handlers():
    background = {"measure", "cuda_source", "lower", "checks", "path", "access_footprint", "access_gpu_stats"}
    assert background == {n for n, r in REQUESTS.items() if r.background}
    assert {n for n, r in REQUESTS.items() if r.background} <= set(Explorer.handlers)


def test_target_label():
    assert target_label('{"kind":"llvm","mcpu":"cascadelake"}') == "cpu"
    assert target_label('{"kind":"cuda","arch":"sm_90"}') == "cuda"
    assert target_label("cuda") == "cuda"
    assert target_label("") == ""


def test_to_html_carries_measurements_and_failed_attempts(explorer, session, tmp_path):
    session.measure_gate = threading.Event()
    session.measure_gate.set()
    explorer.comm.deliver(
        {
            "method": "custom",
            "content": {"kind": "mlc-request", "id": "m1", "method": "measure", "params": {"target": "cpu", "step": 0}},
        }
    )
    assert explorer.wait(10) and explorer.measurements["0"]["latency_s"] == 0.004
    reply = explorer.comm.request("apply", {"primitive": "vectorize", "kwargs": {"loop": "k"}})
    assert reply["ok"] is False
    html = explorer.to_html(tmp_path / "e.html")
    assert "measured on cpu: 4.000 ms" in html and "matches the original" in html
    assert "Failed attempts from this step (1)" in html
    assert "vectorize(loop=k)" in html and "k is a reduction loop and cannot be vectorized" in html


def test_cancel_stops_a_measurement_in_its_worker_and_answers_cancelled(explorer, session, monkeypatch):
    # Before: a measurement had no Cancel (only its 30 s time-out, or a kernel restart, which left the
    # worker running). Now Cancel kills the worker process in flight; the request answers "cancelled",
    # no error banner is set, and the next request gets a fresh worker.
    from mlc_lab.core.measure import measure
    from mlc_lab.core.worker import worker
    from tests.unit.test_worker import _LONG_MEASURE, _gone

    namespace: dict = {}
    exec(_LONG_MEASURE, namespace)  # noqa: S102 - the test suite's own long request
    long = namespace["LONG"]
    monkeypatch.setattr(
        session,
        "measure",
        lambda target="cpu", step=None, **kw: measure(long["module"], repeats=200, timeout=300, roofline=False),
    )
    w = worker()
    w.start()
    first = w.pid
    c = explorer.comm
    c.deliver({"method": "custom", "content": {"kind": "mlc-request", "id": "m", "method": "measure", "params": {}}})
    for _ in range(500):
        if w._owner is not None:  # noqa: SLF001 - the measurement reached the worker
            break
        threading.Event().wait(0.01)
    assert explorer.measuring and w._owner is not None  # noqa: SLF001
    cancel = ask(explorer, "measure_cancel", req_id="x")
    assert cancel["ok"] is True
    reply = [
        m["data"]["content"]
        for m in c.sent
        if m["data"].get("method") == "custom" and m["data"]["content"].get("id") == "m"
    ][-1]
    assert reply["ok"] is False and reply["error"]["type"] == "cancelled", reply
    assert "cancelled" in reply["error"]["summary"]
    assert explorer.measuring == {} and explorer.error == {}
    assert _gone(first, within_s=2.0)
    assert ask(explorer, "measure_cancel", req_id="y")["ok"] is True  # nothing to stop: fine
