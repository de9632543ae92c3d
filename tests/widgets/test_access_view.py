"""Headless tests of the access view: a recording comm stands in for the front end.

Every request the panel can send (js/access/panel.ts, js/access_view.ts) is fed in as a custom
message; binary buffers are decoded the way the front end decodes them. A fake session with
hand-made footprints needs no TVM; the last tests run the course's schedules on a real Session.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from mlc_lab.core.access import Footprint, LoopFootprint
from mlc_lab.errors import AccessAnalysisError, MlcLabError
from mlc_lab.widgets.access import render as ar
from mlc_lab.widgets.access import view as av
from mlc_lab.widgets.access.view import AccessView, access_view
from tests.widgets.fakes import FakeSession

ROOT = Path(__file__).resolve().parents[2]


# --- a fake analysis ----------------------------------------------------------------------------------


def fake_footprint(name, reads, writes, first_touch, strides, thread=None, block=None) -> Footprint:
    """A real (plain-data) Footprint over the whole buffer; counts as the number of touched cells."""
    box = {"reads": reads, "writes": writes, "first_touch": first_touch}
    if thread is not None:
        box.update(thread=thread, block=block)
    return Footprint(
        buffer=name,
        shape=reads.shape,
        dtype="float32",
        scope="global",
        itemsize=4,
        origin=(0,) * reads.ndim,
        box=box,
        n_reads=int(reads.sum()),
        n_writes=int(writes.sum()),
        strides=dict(strides),
        gpu=thread is not None,
    )


def chapter2_footprints(at: dict) -> dict:
    """mm_relu after split/reorder, loop j_1: one A element, 4 of B's row k, 4 of Y's row i."""
    i, j0, k = at.get("i", 0), at.get("j_0", 0), at.get("k", 0)

    def fp(name, cells, kind):
        r = np.zeros((128, 128), bool)
        w = np.zeros((128, 128), bool)
        ft = np.full((128, 128), -1, np.int32)
        for step, (a, b) in enumerate(cells):
            if kind in ("r", "rw"):
                r[a, b] = True
            if kind in ("w", "rw"):
                w[a, b] = True
            if ft[a, b] < 0:
                ft[a, b] = step
        return r, w, ft

    return {
        "A": fp("A", [(i, k)] * 4, "r"),
        "B": fp("B", [(k, j0 * 4 + t) for t in range(4)], "r"),
        "C": fp("C", [], "r"),
        "Y": fp("Y", [(i, j0 * 4 + t) for t in range(4)], "rw"),
    }


def chapter2_result(at: dict, gpu: bool = False) -> LoopFootprint:
    """The same as the analysis returns it: Footprints (thread/block when ``gpu``) and the loop's facts."""
    strides = {"i": 128, "j_0": 4, "k": 0, "j_1": 1}
    fps = {}
    for name, (r, w, ft) in chapter2_footprints(at).items():
        thread = block = None
        if gpu:
            touched = r | w
            thread = np.where(touched, np.arange(128 * 128).reshape(128, 128) % 64, -1).astype(np.int64)
            block = np.where(touched, 5, -1).astype(np.int64)
        fps[name] = fake_footprint(name, r, w, ft, strides, thread, block)
    return LoopFootprint(fps, loop="j_1", steps=4, at=dict(at), launch={"threadIdx.x": 64} if gpu else {}, accesses=[])


class AnalysingSession(FakeSession):
    """The explorer's fake session plus footprint / gpu_stats with the Session's contract."""

    def __init__(self):
        super().__init__()
        self.calls: list = []
        self.fail: Exception | None = None
        self.gpu = False
        self.symbolic: list[str] = []  # symbolic shapes of the program (Session: shape_vars needed)

    gate: threading.Event | None = None  # set: footprints wait for it (an analysis that takes long)

    def footprint(self, loop, at=None, step=None, shape_vars=None, budget=None):
        self.calls.append(("footprint", loop, dict(at or {})) + ((dict(shape_vars),) if shape_vars else ()))
        if self.gate is not None:
            assert self.gate.wait(30), "the test never opened the gate"
        if budget is not None:  # the real analysis asks between its parts
            budget.tick(1, 2)
        if self.fail:
            raise self.fail
        missing = sorted(set(self.symbolic) - set(shape_vars or {}))
        if missing:  # the words and the attribute of mlc_lab.core.access.shapes.bind_shapes
            raise AccessAnalysisError(
                f"function main has symbolic shapes {', '.join(missing)}: give their values, "
                f"for example shape_vars={{'n': 128}}",
                shape_vars=missing,
            )
        plain = {k.rpartition("/")[2]: v for k, v in (at or {}).items()}
        return chapter2_result(plain, self.gpu)

    def gpu_stats(self, loop, at=None, warp=None, block=None, step=None):
        self.calls.append(("gpu_stats", loop, dict(at or {}), warp, block))

        class Stats:
            def to_json(self_inner):
                return {
                    "warp": warp or 0,
                    "threads": list(range(32)),
                    "launch": {"threadIdx.x": 64},
                    "accesses": [
                        {
                            "buffer": "B",
                            "block": "Y",
                            "kind": "read",
                            "scope": "global",
                            "index": "vk, vj",
                            "requests": 4,
                            "lanes": 32,
                            "vector": 1,
                            "active_lanes": 32.0,
                            "sectors_per_request": 4.0,
                            "sectors": 16,
                            "efficiency": 1.0,
                            "wavefronts": None,
                            "bank_conflicts": None,
                            "ways": None,
                            "max_ways": None,
                            "layout": None,
                            "note": None,
                        }
                    ],
                }

        return Stats()


@pytest.fixture()
def asession():
    s = AnalysingSession()
    s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", "j_0", "k", "j_1")
    # the fake records reorder without moving loops: make the nest (i, j_0, k, j_1) by hand
    j0 = s._states[s._current].tree["functions"][0]["children"][0]["children"][0]
    j1 = j0["children"][0]
    k = j1["children"][0]
    j1["children"], k["children"] = k["children"], [j1]
    j0["children"] = [k]
    return s


@pytest.fixture()
def view(comms, asession):
    w = AccessView(asession, "j_1")
    yield w
    w.close()


# --- decoding as the front end does (js/access/data.ts) --------------------------------------------


def decode(reply: dict) -> dict:
    """{buffer name: {"kind": 2-D crop of 0..3, "first": ..., "thread": ...}} from a response."""
    out = {}
    for b in reply["result"]["buffers"]:
        shape = tuple(b["crop"]["shape"])
        arrays = {}
        for name, d in b["arrays"].items():
            raw = reply["buffers"][d["buffer"]]
            if d.get("enc") == "deflate":
                raw = zlib.decompress(raw)
            assert d["nbytes"] == len(raw)
            if d["dtype"] == "bits":
                arrays[name] = np.unpackbits(np.frombuffer(raw, np.uint8))[: d["size"]].reshape(shape).astype(bool)
            else:
                arrays[name] = np.frombuffer(raw, np.dtype(d["dtype"]).newbyteorder("<")).reshape(shape)
        out[b["buffer"]] = {**b, **arrays}
    return out


def ok(reply):
    assert reply["ok"], reply.get("error")
    return reply


# --- tests ------------------------------------------------------------------------------------------


def test_opening_sends_the_loop_and_tree(view, asession):
    state = view.comm.open_data["state"]
    assert state["loop"] == "j_1"
    assert ["loop_tree_json"] in view.comm.open_data["buffer_paths"]
    assert view.loop_tree == asession.step_view().loop_tree
    assert state["color_by"] == "access" and state["time"] == -1 and state["warp"] == -1
    assert view._esm


def test_default_loop_is_the_innermost_of_the_last_nest(comms, asession):
    w = AccessView(asession)
    assert w.loop in {n["qualified"] for n in av.all_loops(asession.step_view().loop_tree)}
    w.close()
    with pytest.raises(MlcLabError, match="no loop called 'nope'"):
        AccessView(asession, "nope")
    with pytest.raises(TypeError, match="needs a mlc_lab.Session"):
        AccessView(object())


def test_footprint_travels_as_binary_buffers(view, asession):
    reply = ok(view.comm.request("access_footprint", {"loop": "j_1", "at": {"Y/i": 3, "k": 7}}))
    res = reply["result"]
    assert res["loop"]["ref"] == "j_1" and res["loop"]["extent"] == 4
    assert [e["ref"] for e in res["enclosing"]] == ["Y/i", "j_0", "k"]
    assert res["at"] == {"Y/i": 3, "j_0": 0, "k": 7}
    assert res["steps"] == 4 and res["gpu"] is False
    # No array travels as a JSON list.
    assert all(isinstance(b, bytes) for b in reply["buffers"])
    assert "[[" not in json.dumps(res) or all("arrays" in b for b in res["buffers"])
    d = decode(reply)
    a, b, y, c = d["A"], d["B"], d["Y"], d["C"]
    assert a["crop"] == {"offset": [3, 7], "shape": [1, 1]} and a["reads"].all() and not a["writes"].any()
    assert b["crop"] == {"offset": [7, 0], "shape": [1, 4]} and b["first_touch"].tolist() == [[0, 1, 2, 3]]
    assert y["reads"].all() and y["writes"].all() and y["crop"]["offset"] == [3, 0]
    assert b["first_touch"].dtype == np.int32
    assert c["distinct"] == 0 and c["arrays"] == {}
    assert b["distinct"] == 4 and b["strides"]["j_1"] == 1
    # the session saw the enclosing values by name
    assert asession.calls[-1] == ("footprint", "j_1", {"Y/i": 3, "j_0": 0, "k": 7})


def test_at_is_clamped_and_limited_to_enclosing_loops(view, asession):
    res = ok(view.comm.request("access_footprint", {"loop": "j_1", "at": {"Y/i": 999, "k": -5, "C/i": 4}}))["result"]
    assert res["at"] == {"Y/i": 127, "j_0": 0, "k": 0}
    bad = view.comm.request("access_footprint", {"loop": "j_1", "at": {"k": "x"}}, req_id="r2")
    assert not bad["ok"] and "must be an integer" in bad["error"]["summary"]


def test_gpu_footprint_carries_thread_and_block(view, asession):
    asession.gpu = True
    reply = ok(view.comm.request("access_footprint", {"loop": "j_1", "at": {"Y/i": 1}}))
    assert reply["result"]["gpu"] is True
    d = decode(reply)
    b = d["B"]
    assert b["arrays"]["thread"]["dtype"] == "int8"  # the smallest type that holds -1..63
    assert b["thread"].tolist() == [[0, 1, 2, 3]]  # (k=0, j) -> j % 64
    assert (d["Y"]["block"] == 5).all()


def test_a_buffer_too_large_to_draw_is_refused_before_its_threads_are_decoded(monkeypatch):
    """The analysis decodes each element's thread and block only when asked (the crop): a
    buffer the view refuses never pays for it; one it draws gets them over the crop, exactly."""
    from mlc_lab.core.access import footprint
    from mlc_lab.core.access.space import Query
    from tests.unit.test_access_core import staged_copy

    calls = []
    who = Query.who
    monkeypatch.setattr(Query, "who", lambda self, steps, launch: calls.append(1) or who(self, steps, launch))
    fps = footprint(staged_copy(), "tx", {"bx": 1})
    monkeypatch.setattr(av, "MAX_ELEMENTS", 17)
    with pytest.raises(av.RequestError, match="18 touched elements"):
        av._buffer_entry("A", fps["A"], av._Packer())
    assert calls == []
    entry = av._buffer_entry("B", fps["B"], av._Packer())
    assert calls == [1] and entry["crop"] == {"offset": [16], "shape": [16]} and "thread" in entry["arrays"]


def test_big_payloads_are_deflated(view, asession, monkeypatch):
    monkeypatch.setattr(av, "DEFLATE_ABOVE", 0)
    reply = ok(view.comm.request("access_footprint", {"loop": "j_1", "at": {"Y/i": 2, "k": 9}}))
    descr = reply["result"]["buffers"][1]["arrays"]["first_touch"]
    assert descr["enc"] == "deflate"
    assert decode(reply)["B"]["first_touch"].tolist() == [[0, 1, 2, 3]]


def test_analysis_errors_give_an_error_state(view, asession):
    asession.fail = ValueError("a load through an indirect index (A[B[i]]) is not affine\nmore detail")
    reply = view.comm.request("access_footprint", {"loop": "j_1"})
    assert reply["ok"] is False
    err = reply["error"]
    assert err["summary"].startswith("the access analysis cannot show loop j_1:")
    assert "more detail" in err["detail"] and err["type"] == "analysis"
    assert view.error["loop"] == "j_1" and "indirect" in view.error["summary"]
    asession.fail = None
    ok(view.comm.request("access_footprint", {"loop": "j_1"}, req_id="r2"))
    assert view.error == {}


def test_symbolic_shapes_are_named_in_the_error_and_their_values_passed_through(view, asession):
    """The panel offers one field per variable the error names; the values travel with the request
    (and in the ``shape_vars`` trait) to ``Session.footprint(..., shape_vars=...)``."""
    asession.symbolic = ["m", "n"]
    reply = view.comm.request("access_footprint", {"loop": "j_1"})
    assert reply["ok"] is False
    err = reply["error"]
    assert err["shape_vars"] == ["m", "n"] and "symbolic shapes m, n" in err["summary"]
    assert view.error["shape_vars"] == ["m", "n"]
    r = ok(view.comm.request("access_footprint", {"loop": "j_1", "shape_vars": {"m": "64", "n": 128}}, req_id="r2"))
    assert r["result"]["shape_vars"] == {"m": 64, "n": 128}
    assert asession.calls[-1] == ("footprint", "j_1", {"Y/i": 0, "j_0": 0, "k": 0}, {"m": 64, "n": 128})
    assert view.error == {}
    bad = view.comm.request("access_footprint", {"loop": "j_1", "shape_vars": {"n": "many"}}, req_id="r3")
    assert not bad["ok"] and bad["error"]["type"] == "bad_request" and "symbolic shape n" in bad["error"]["summary"]
    # the trait: what a notebook sets from Python (or the panel saves) is used by snapshots too
    view.shape_vars = {"m": 8, "n": 16}
    assert view.snapshot()["footprints"]["B"].distinct == 4
    assert asession.calls[-1][-1] == {"m": 8, "n": 16}
    view.shape_vars = {}
    with pytest.raises(AccessAnalysisError, match="symbolic shapes m, n"):
        view.snapshot()


def test_unknown_loop_and_bad_requests(view):
    r = view.comm.request("access_footprint", {"loop": "zz"})
    assert not r["ok"] and r["error"]["type"] == "unknown_loop"
    r = view.comm.request("access_footprint", {"lop": "j_1"}, req_id="r2")
    assert not r["ok"] and r["error"]["type"] == "bad_request"
    r = view.comm.request("set_state", {}, req_id="r3")  # not a request: ipywidgets' own method stays intact
    assert not r["ok"] and r["error"]["type"] == "unknown"


def test_gpu_stats_request(view, asession):
    r = ok(view.comm.request("access_gpu_stats", {"loop": "j_1", "at": {"Y/i": 1}, "warp": 1, "block": -1}))
    assert r["result"]["accesses"][0]["sectors_per_request"] == 4.0
    assert asession.calls[-1] == ("gpu_stats", "j_1", {"Y/i": 1, "j_0": 0, "k": 0}, 1, None)


def test_block_ids_become_blockidx_values():
    assert av.block_coords(37, {"blockIdx.x": 16, "blockIdx.y": 16}) == {"blockIdx.x": 5, "blockIdx.y": 2}
    assert av.block_coords(3, {"blockIdx.x": 8}) == {"blockIdx.x": 3}


def _deliver(view, method: str, req_id: str, params: dict | None = None) -> None:
    content = {"kind": "mlc-request", "id": req_id, "method": method, "params": params or {}}
    view.comm.deliver({"method": "custom", "content": content})


def _answer(view, req_id: str, timeout: float = 0.0) -> dict | None:
    deadline = time.monotonic() + timeout
    while True:
        for m in view.comm.sent:
            content = m["data"].get("content") if m["data"].get("method") == "custom" else None
            if content and content.get("kind") == "mlc-response" and content.get("id") == req_id:
                return content
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _calls_reach(asession, n: int) -> None:
    deadline = time.monotonic() + 10
    while len([c for c in asession.calls if c[0] == "footprint"]) < n:
        assert time.monotonic() < deadline, "the footprint request never reached the analysis"
        time.sleep(0.01)


def test_a_long_footprint_leaves_the_message_loop_free_and_goes_stale(view, asession):
    """The analysis runs off the message loop: while it runs, other requests are answered; a newer
    footprint request, a new step and the panel's Cancel each make it stale (answered "cancelled")."""
    asession.gate = threading.Event()
    started = time.monotonic()
    _deliver(view, "access_footprint", "old", {"loop": "j_1"})
    assert time.monotonic() - started < 5, "the request held the message loop while it analysed"
    _calls_reach(asession, 1)
    assert _answer(view, "old") is None
    ok(view.comm.request("access_gpu_stats", {"loop": "j_1"}, req_id="other"))  # answered meanwhile
    _deliver(view, "access_footprint", "new", {"loop": "k"})  # a newer request: the old one is stale
    _calls_reach(asession, 2)
    asession.gate.set()
    old, new = _answer(view, "old", 10), _answer(view, "new", 10)
    assert old["ok"] is False and old["error"]["type"] == "cancelled", old
    assert new["ok"] is True and new["result"]["loop"]["name"] == "k"
    assert view.error == {}  # a cancelled request is no error of the view

    asession.gate = threading.Event()  # a new step while it runs
    _deliver(view, "access_footprint", "before-step", {"loop": "j_1"})
    _calls_reach(asession, 3)
    asession.undo()
    asession.gate.set()
    assert _answer(view, "before-step", 10)["error"]["type"] == "cancelled"

    asession.redo()
    asession.gate = threading.Event()  # the panel's Cancel
    _deliver(view, "access_footprint", "to-cancel", {"loop": "j_1"})
    _calls_reach(asession, 4)
    assert ok(view.comm.request("access_cancel", req_id="cancel"))["result"] == {}
    asession.gate.set()
    assert _answer(view, "to-cancel", 10)["error"]["type"] == "cancelled"


def test_session_changes_refresh_the_tree(view, asession):
    c = view.comm
    mark = len(c.sent)
    asession.undo()
    asession.undo()  # back to the original: j_1 does not exist any more
    assert view.loop == ""
    assert view.current == 0
    paths = [m["data"].get("buffer_paths") for m in c.sent[mark:] if m["data"].get("method") == "update"]
    assert any(["loop_tree_json"] in (p or []) for p in paths)  # the new tree, as a binary buffer


def test_export_html_and_png(view, tmp_path):
    view.at = {"Y/i": 3, "k": 7}
    r = ok(view.comm.request("export_html", {}))
    page = r["buffers"][0].decode("utf-8")
    assert page.startswith("<!doctype html>") and page.count("data:image/png;base64,") == 4
    assert "Memory touched by loop j_1" in page and "Y/i=3" in page
    view.region = "buffer"
    out = view.save_png(tmp_path / "j1.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert h == 128 * 2 and w == 4 * 128 * 2 + 3 * 8  # 4 buffers side by side, scale 2
    view.region = "auto"  # the default: zoomed on the few touched elements, larger cells
    zw, zh = struct.unpack(">II", view.save_png(tmp_path / "j1z.png").read_bytes()[16:24])
    assert zw < w  # the touched buffers shrink to their part (C, untouched, stays whole)
    view.to_html(tmp_path / "j1.html")
    assert (tmp_path / "j1.html").read_text().count("<img") == 4
    with pytest.raises(MlcLabError, match="no buffer"):
        view.save_png(tmp_path / "x.png", buffer="Z")


def test_heatmap_colours_follow_the_rules():
    fp = chapter2_result({"i": 3, "k": 7})
    img = ar.heatmap_rgb(fp["Y"])
    assert tuple(img[3, 0]) == ar.COLORS["both"] and tuple(img[0, 0]) == ar.COLORS["empty"]
    assert tuple(ar.heatmap_rgb(fp["B"])[7, 2]) == ar.COLORS["read"]
    early = ar.heatmap_rgb(fp["B"], time=1, steps=4)
    assert tuple(early[7, 1]) == ar.COLORS["read"]  # touched now: full colour
    assert early[7, 0].tolist() != early[7, 1].tolist() != early[7, 3].tolist()  # past dimmer, future ghost


def test_png_encoder_round_trip():
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    data = ar.png_bytes(rgb)
    idat = data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8]
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(2, 1 + 9)
    assert (raw[:, 0] == 0).all() and (raw[:, 1:].reshape(2, 3, 3) == rgb).all()


def test_palette_matches_the_front_end():
    ts = (ROOT / "js" / "access" / "color.ts").read_text()
    for name, rgb in ar.COLORS.items():
        m = re.search(rf"{name}: \[(\d+), (\d+), (\d+)\]", ts)
        assert m and tuple(int(x) for x in m.groups()) == rgb, name


def test_the_facade_and_the_explorer_answer_the_same_requests(comms, asession):
    from mlc_lab.widgets.explorer import Explorer

    v = access_view(asession, "j_1", at={"Y/i": 3})
    assert isinstance(v, AccessView) and v.at == {"Y/i": 3}
    ex = Explorer(asession)
    r = ok(ex.comm.request("access_footprint", {"loop": "j_1", "at": {"k": 7}}))
    assert decode(r)["A"]["crop"]["offset"] == [0, 7]
    r = ok(ex.comm.request("access_gpu_stats", {"loop": "j_1"}, req_id="r2"))
    assert r["result"]["warp"] == 0
    ex.close()
    v.close()


def test_widgets_do_not_import_tvm():
    code = (
        "import sys; import mlc_lab.widgets.access.view, mlc_lab.widgets.explorer; "
        "print(any(m == 'tvm' or m.startswith('tvm.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


# --- the course's scenarios on a real Session (TVM) ---------------------------------------------------


def test_chapter2_j1_at_one_k(programs):
    from mlc_lab.core.session import Session

    s = Session(programs.mm_relu(128), "mm_relu")
    s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", "j_0", "k", "j_1")
    res, bufs = av.footprint_payload(s, "j_1", {"Y/i": 3, "j_0": 5, "k": 7})
    d = decode({"result": res, "buffers": bufs})
    assert d["A"]["distinct"] == 1 and d["A"]["crop"]["offset"] == [3, 7]
    assert d["B"]["crop"] == {"offset": [7, 20], "shape": [1, 4]}  # a contiguous run of row k of B
    assert d["Y"]["crop"] == {"offset": [3, 20], "shape": [1, 4]} and d["Y"]["writes"].all()
    assert d["B"]["strides"]["j_1"] == 1 and d["B"]["cache_lines"] == 1


def test_window_sum_shared_segment_and_its_fetching_threads(programs):
    from mlc_lab.core.session import Session

    s = Session(programs.sched_window_sum(1024, 128).mod)
    res, bufs = av.footprint_payload(s, "i_1", {"i_0": 1})
    d = decode({"result": res, "buffers": bufs})
    sh = d["A_shared"]
    assert res["gpu"] and sh["distinct"] == 130 and sh["crop"] == {"offset": [128], "shape": [130]}  # nthread + 2
    assert sh["writes"].all()
    # cooperative fetching: thread t loads element t of the segment from A, threads 0 and 1 also the last two
    a = d["A"]
    assert a["crop"] == sh["crop"] and not a["writes"].any()
    assert a["thread"][:128].tolist() == list(range(128)) and a["thread"][128:].tolist() == [0, 1]
    g = av.gpu_payload(s, "i_1", {"i_0": 1})
    assert {a["buffer"] for a in g["accesses"]} >= {"A", "A_shared", "B"}


def test_gpu_matmul_local_vs_shared_blocking(programs):
    from mlc_lab.core.session import Session

    local = Session(programs.sched_gpu_local(1024).mod)
    shared = Session(programs.sched_gpu_shared(1024).mod)
    # one thread's 8x8 tile of C
    res, bufs = av.footprint_payload(local, "j_1", {"i_0": 1, "j_0": 2, "i_1": 3})
    d = decode({"result": res, "buffers": bufs})
    assert d["C"]["distinct"] == 8 * 64 and set(np.unique(d["C"]["thread"])) == set(range(24, 32))
    # one k step of the shared schedule stages a 64x8 stripe of A and an 8x64 stripe of B
    res, bufs = av.footprint_payload(shared, "k_1", {"i_0": 1, "j_0": 2, "k_0": 5})
    d = decode({"result": res, "buffers": bufs})
    assert d["A_shared"]["bounds"][1] == [40, 47] and d["B_shared"]["bounds"][0] == [40, 47]
    sectors = lambda g: {a["buffer"]: a.get("sectors_per_request") for a in g["accesses"] if a["scope"] == "global"}  # noqa: E731
    gl = sectors(av.gpu_payload(local, "k_0", {"i_0": 1, "j_0": 2}))
    gs = sectors(av.gpu_payload(shared, "k_0", {"i_0": 1, "j_0": 2}))
    assert gl != gs


def test_trait_changes_from_the_front_end(view):
    """The panel writes loop/at/colour/warp/block/time/region back as ordinary trait updates."""
    state = {
        "loop": "k",
        "at": {"Y/i": 5},
        "color_by": "thread",
        "warp": 2,
        "block": 1,
        "time": 17,
        "region": "touched",
    }
    view.comm.deliver({"method": "update", "state": state, "buffer_paths": []})
    assert {k: getattr(view, k) for k in state} == state
    snap = view.snapshot()
    assert snap["loop"] == "k" and snap["at"] == {"Y/i": 5, "j_0": 0}


def test_auto_region_zooms_like_the_front_end():
    """view_box follows js/access/data.ts viewBox (memory_view.test.ts has the same cases)."""
    assert ar.view_box((16, 16), (3, 4, 1, 2)) == (0, 0, 16, 16)  # small: whole
    assert ar.view_box((128, 128), (7, 8, 1, 4)) == (5, 6, 5, 8)  # the run with context
    assert ar.view_box((1024, 1024), (0, 0, 600, 1024)) == (0, 0, 1024, 1024)  # most of it: whole
    fp = chapter2_result({"i": 3, "k": 7})
    img = ar.heatmap_rgb(fp["B"], region="auto")  # B: row 7, columns 0..3 of 128 x 128
    assert img.shape[:2] == (5, 6)
    assert tuple(img[2, 0]) == ar.COLORS["read"] and tuple(img[0, 0]) == ar.COLORS["empty"]
