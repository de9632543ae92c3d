"""One copy of the front end per kernel: every widget carries the small loader as its `_esm` and
points at the one FrontEnd model, whose `code` is the bundle (gzip + base64) — so a saved notebook
carries the bundle once, whatever the number of widgets."""

from __future__ import annotations

import base64
import gzip
import json

import ipywidgets

from mlc_lab.widgets import _base
from tests.widgets.test_access_view import AnalysingSession
from mlc_lab.widgets._base import FRONT_END_BUNDLE, LOADER_BUNDLE, FrontEnd, front_end, front_end_code


def test_widgets_share_one_front_end_model(comms):
    from mlc_lab.widgets.access.view import AccessView
    from mlc_lab.widgets.explorer import Explorer

    session = AnalysingSession()
    ipywidgets.Widget.close_all()
    a = Explorer(session)
    b = AccessView(session)
    host = front_end()
    assert a._mlc_front_end == b._mlc_front_end == f"anywidget:{host.model_id}"
    assert (a._mlc_entry, b._mlc_entry) == ("explorer", "access_view")
    # the FrontEnd is model-only (no view, no _esm of its own) and opened before the widgets
    assert host.comm in comms and comms.index(host.comm) < comms.index(a.comm)
    assert not hasattr(host, "_esm") and host._model_name == "WidgetModel"
    # each widget's own code is the loader, not the bundle
    for w in (a, b):
        assert w._esm == LOADER_BUNDLE.read_text()
        assert len(w._esm) < 8_000 < FRONT_END_BUNDLE.stat().st_size


def test_front_end_code_is_the_bundle_compressed():
    packed = front_end_code()
    raw = gzip.decompress(base64.b64decode(packed.code))
    assert raw == FRONT_END_BUNDLE.read_bytes()
    assert packed.raw_bytes == len(raw) and len(packed.code) < 0.6 * len(raw)
    assert front_end_code() is packed  # compressed once per build
    assert len(packed.digest) == 16


def test_front_end_is_remade_after_close_all(comms, session):
    first = front_end()
    assert front_end() is first
    ipywidgets.Widget.close_all()
    second = front_end()
    assert second is not first and second.comm is not None
    assert isinstance(second, FrontEnd) and second.code == first.code


def test_saved_state_carries_the_bundle_once(comms):
    """What JupyterLab saves (the manager state): the bundle once for three widgets."""
    from mlc_lab.widgets.access.view import AccessView
    from mlc_lab.widgets.explorer import Explorer

    session = AnalysingSession()
    ipywidgets.Widget.close_all()
    widgets = [Explorer(session), AccessView(session), Explorer(session)]
    state = ipywidgets.Widget.get_manager_state(drop_defaults=True, widgets=None)["state"]
    text = json.dumps(state)
    code = front_end_code().code
    assert text.count(code[:200]) == 1
    assert len(text) < len(code) + 200_000
    assert all(state[w.model_id]["state"]["_mlc_front_end"] == f"anywidget:{front_end().model_id}" for w in widgets)


def test_explorer_records_each_step_once_for_saved_views(comms, session):
    from mlc_lab.widgets.explorer import Explorer

    w = Explorer(session)
    w.wait()
    opened = len(comms)
    session.apply("split", "Y/j", factors=[None, 4])
    session.apply("parallel", "Y/i")
    session.undo()
    session.redo()
    # off the click's path: no record (a gzip and a comm of its own) is made with the step's state
    assert len(comms) == opened and not any(k in w._mlc_recorded for k in ("step:1", "step:2"))
    w.wait()  # (or RECORD_DELAY_S after the last change, or at the end of the cell)
    recorded = w._mlc_recorded
    assert sorted(k for k in recorded if k.startswith("step:")) == ["step:0", "step:1", "step:2"]
    records = {k: r for k, (_g, r) in w._mlc_records.items()}
    # each record is the step's own view, sent once (undo/redo made no new record)
    assert json.loads(records["step:2"].raw_data)["id"] == 2 and records["step:2"].comm is not None
    assert json.loads(records["step:0"].raw_data)["parent"] is None
    assert records["step:2"].encoding == "gzip" and len(records["step:2"].data) < len(records["step:2"].raw_data) / 2
    w.close()
    assert all(r.comm is None for r in records.values())


def test_recorded_replies_keep_only_the_last_ones(comms, session):
    from mlc_lab.widgets._base import Recorded, record_key
    from mlc_lab.widgets.explorer import Explorer

    w = Explorer(session)
    for i in range(5):
        w.mlc_record(
            record_key("access_footprint", {"loop": "j", "at": {"i": i}}),
            group="access_footprint",
            keep=2,
            result={"i": i},
            buffers=[bytes([i])],
        )
    keys = [k for k in w._mlc_recorded if k.startswith("access_footprint")]
    assert keys == [
        record_key("access_footprint", {"at": {"i": 3}, "loop": "j"}),
        record_key("access_footprint", {"at": {"i": 4}, "loop": "j"}),
    ]
    assert keys[1] == 'access_footprint {"at":{"i":4},"loop":"j"}'  # what js/lib/offline.ts recordKey writes
    rec = w._mlc_records[keys[1]][1]
    assert isinstance(rec, Recorded) and json.loads(rec.result) == {"i": 4} and rec.buffers == [b"\x04"]
    w.close()


def test_a_rebuilt_bundle_reaches_the_front_end_model(comms, monkeypatch):
    host = front_end()
    rebuilt = _base.FrontEndCode(code="bmV3", digest="0123456789abcdef", raw_bytes=3)
    monkeypatch.setattr(_base, "front_end_code", lambda path=FRONT_END_BUNDLE: rebuilt)
    assert front_end() is host and (host.code, host.digest) == ("bmV3", "0123456789abcdef")


def _record(w, key):
    return {k: r for k, (_g, r) in w._mlc_records.items()}[key]


def _reply_of(rec):
    """A recorded reply as js/lib/offline.ts reads it (plain or gzip-compressed)."""
    if rec.encoding == "gzip":
        text = rec.result or gzip.decompress(rec.data).decode()
        return json.loads(text), [gzip.decompress(b) for b in rec.buffers]
    return json.loads(rec.result), list(rec.buffers)


def test_explorer_records_the_panels_per_step(comms):
    """A saved explorer shows offline what its Memory and CUDA panels showed at each step: the
    records name the step (the memory panel asks about "the current step"); errors that belong to
    the step (no GPU kernel) are recorded as errors; big answers are stored compressed."""
    from mlc_lab.widgets._base import record_key
    from mlc_lab.widgets.explorer import Explorer

    session = AnalysingSession()
    w = Explorer(session)
    c = w.comm
    assert c.request("access_footprint", {"loop": "Y/j", "at": {"Y/i": 3}})["ok"]
    session.apply("split", "Y/j", factors=[None, 4])
    assert c.request("access_footprint", {"loop": "j_1", "at": {"Y/i": 3}}, req_id="r2")["ok"]
    at0 = record_key("access_footprint", {"loop": "Y/j", "at": {"Y/i": 3}, "step": 0})
    at1 = record_key("access_footprint", {"loop": "j_1", "at": {"Y/i": 3}, "step": 1})
    assert at0 in w._mlc_recorded and at1 in w._mlc_recorded
    result, buffers = _reply_of(_record(w, at1))
    assert result["loop"]["name"] == "j_1" and len(buffers) > 1 and b"\xf0" in buffers
    # the CUDA panel: an error of the step is kept (offline it says the same), then a result
    c.deliver(
        {
            "method": "custom",
            "content": {"kind": "mlc-request", "id": "c1", "method": "cuda_source", "params": {"step": 1, "ptx": True}},
        }
    )
    assert w.wait(60)
    bad = _record(w, record_key("cuda_source", {"step": 1, "ptx": True}))
    assert bad.ok is False and json.loads(bad.result)["type"] == "gpu_check"
    session.gpu_bound = True
    c.deliver(
        {
            "method": "custom",
            "content": {"kind": "mlc-request", "id": "c2", "method": "cuda_source", "params": {"step": 0, "ptx": True}},
        }
    )
    assert w.wait(60)
    good = _record(w, record_key("cuda_source", {"step": 0, "ptx": True}))
    assert good.ok is True and "main_kernel" in _reply_of(good)[0]["source"]
    assert w.record_cut == {}  # nothing left out
    w.close()


def test_big_records_are_compressed_and_replies_stay_within_the_budget(comms, monkeypatch):
    from mlc_lab.widgets._base import Recorded
    from mlc_lab.widgets.explorer import Explorer

    session = AnalysingSession()
    w = Explorer(session)
    monkeypatch.setattr(Explorer, "_mlc_reply_budget", 60_000)
    text = "".join(f"line {i}: T.Ramp(x, 1, 8)\n" for i in range(4000))  # ~100 kB of lowering text
    for step in range(6):
        w.mlc_record(f"lower {step}", group="lower", keep=200, result={"step": step, "asm": text + str(step)})
    kept = [k for k in w._mlc_recorded if k.startswith("lower")]
    rec = _record(w, kept[-1])
    assert isinstance(rec, Recorded) and rec.encoding == "gzip" and rec.result == ""
    assert rec.nbytes < 20_000 and _reply_of(rec)[0]["step"] == 5
    assert sum(_record(w, k).nbytes for k in kept) <= 60_000 and kept[-1] == "lower 5"
    assert w.mlc_records_dropped["lower"] == 6 - len(kept) > 0
    assert w.record_cut["replies_dropped"] == 6 - len(kept)  # the saved view says so
    w.close()


def test_record_cut_says_how_many_steps_the_record_left_out(comms, monkeypatch):
    from mlc_lab.widgets.explorer import Explorer

    monkeypatch.setattr(Explorer, "MAX_RECORDED_STEPS", 3)
    session = AnalysingSession()
    w = Explorer(session)
    assert w.record_cut == {}
    session.apply("parallel", "Y/i")
    session.apply("unroll", "k")
    session.apply("vectorize", "C/j")
    session.apply("split", "Y/j", factors=[None, 2])
    steps = len(session.steps)
    assert steps == 5
    w.wait()
    assert sum(1 for k in w._mlc_recorded if k.startswith("step:")) == 3
    assert w.record_cut == {"max_steps": 3, "steps": steps, "steps_recorded": 3, "replies_dropped": 0}
    w.close()


def test_each_marimo_session_gets_its_own_front_end(comms, monkeypatch):
    """`marimo run` serves every browser session from one process, each with its own runtime context
    (thread-local); a model reaches only the session that made it. A widget must point at a
    FrontEnd made for its own session, or the second browser shows "Model not found"."""
    import types

    import marimo._runtime.context as marimo_context

    from mlc_lab.widgets.access.view import AccessView

    def context():
        return types.SimpleNamespace(stream=types.SimpleNamespace(pipe=object()))

    first, second = context(), context()
    current = {"ctx": first}
    monkeypatch.setattr(marimo_context, "safe_get_context", lambda: current["ctx"])
    session = AnalysingSession()
    a = AccessView(session)
    current["ctx"] = second
    b = AccessView(session)
    host_b = front_end()
    current["ctx"] = first
    host_a = front_end()
    assert host_a is not host_b
    assert a._mlc_front_end == f"anywidget:{host_a.model_id}" and b._mlc_front_end == f"anywidget:{host_b.model_id}"
    # a session's front end is kept while it is open, and remade once it is closed
    assert front_end() is host_a
    # a thread the session starts writes through a copy of its stream, to the same pipe: the same page
    current["ctx"] = types.SimpleNamespace(stream=types.SimpleNamespace(pipe=first.stream.pipe))
    assert front_end() is host_a
    current["ctx"] = first
    host_a.close()
    assert front_end() is not host_a
    current["ctx"] = None  # outside any marimo cell: the kernel's one page
    assert front_end() not in (host_a, host_b)
