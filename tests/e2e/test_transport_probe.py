"""Where a click's time goes between the browser and the kernel, hop by hop (a diagnostic, marked
``full``: run it alone with ``pytest -s -m full tests/e2e/test_transport_probe.py``).

One clock for all (the processes share the machine): the page logs every kernel websocket frame it
sends and receives (a wrapped ``WebSocket``, before JupyterLab sees it) and every click; the server
logs each frame as it crosses between the websocket and ZeroMQ (its config file patches
jupyter_server's channel connection); the kernel logs when the comm handler runs, when each message
is made (``Session.send``) and when the IOPub thread puts it on the wire. The explorer adds its own
samples (state drawn, first frame). The table gives each hop's median, min and max in ms after the
click, for the new-step clicks (unroll) on the chapter-2 schedule of mm_relu (as test_explorer_lab's
latency step); then click to frame (median and 90th percentile) of new steps and of moves the page
answers itself (undo, redo, go to step, diff), with the state updates each click cost. ``MLC_LAB_PROBE_TRACE=file.json`` also records a Chrome trace of the clicks, and
``MLC_LAB_PROBE_PROFILE=file.json`` a V8 CPU profile of the page (DevTools' .cpuprofile format).

It checks, per click, what the kernel must send: for a new step one state update and one reply, the
update first, and no comm opened (records for saved notebooks are made later); for a move, nothing
(the page answers it; the kernel's Session follows a note that is not answered).
"""

from __future__ import annotations

import json
import os
import statistics
from datetime import datetime
from pathlib import Path

import pytest

from tests.e2e.conftest import running_lab
from tests.e2e.lab import Lab, write_notebook
from tests.e2e.test_explorer_lab import prim, row, wait_code
from tests.fixtures.programs import MM_RELU

pytestmark = [pytest.mark.e2e, pytest.mark.full]

ROUNDS = 11  # unroll, undo, redo, go to step, diff each; the first round warms caches and is left out
NAVIGATION = ("undo", "redo", "goto", "diff")

# Appended to the server's config file (Python). Logs one JSON line per frame to MLC_LAB_PROBE_LOG.
SERVER_PROBE = r"""
import json as _pj, os as _po, time as _pt
from jupyter_server.services.kernels.connection import channels as _pch
from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1 as _pdeser
_PLOG = open(_po.environ["MLC_LAB_PROBE_LOG"], "a", buffering=1)
_C = _pch.ZMQChannelsWebsocketConnection
_in0, _out0 = _C.handle_incoming_message, _C.handle_outgoing_message
def _phead(parts):
    try:
        h, p = _pj.loads(bytes(parts[0])), _pj.loads(bytes(parts[1]))
        return h.get("msg_type"), h.get("msg_id"), p.get("msg_id")
    except Exception:
        return None, None, None
def _pin(self, ws_msg):
    t = _pt.time()
    mt = mid = pid = None
    if isinstance(ws_msg, bytes):
        mt, mid, pid = _phead(_pdeser(ws_msg)[1])
    _in0(self, ws_msg)
    _PLOG.write(_pj.dumps({"hop": "srv_in", "t": t, "type": mt, "id": mid, "parent": pid}) + "\n")
def _pout(self, stream, msg_list):
    t = _pt.time()
    _, fed = self.session.feed_identities(msg_list)
    mt, mid, pid = _phead([getattr(p, "bytes", p) for p in fed[1:3]])
    _out0(self, stream, msg_list)
    _PLOG.write(_pj.dumps({"hop": "srv_out", "t": t, "t_done": _pt.time(), "type": mt, "id": mid, "parent": pid}) + "\n")
_C.handle_incoming_message, _C.handle_outgoing_message = _pin, _pout
"""

# Run in the kernel (a hidden execute): wraps the comm_msg handler, Session.send and the IOPub
# thread's send; the log is the list _MLC_PROBE.
KERNEL_PROBE = r"""
import json as _pj, threading as _pth, time as _pt
_pk = get_ipython().kernel
_MLC_PROBE = []
_ph0 = _pk.shell_handlers["comm_msg"]
def _ph(*a, **kw):
    msg, t = a[-1], _pt.time()
    r = _ph0(*a, **kw)
    _MLC_PROBE.append({"hop": "k_handle", "t": t, "t_done": _pt.time(), "id": msg["header"]["msg_id"],
                       "thread": _pth.current_thread().name})
    return r
_pk.shell_handlers["comm_msg"] = _ph
_ps0 = _pk.session.send
def _ps(*a, **kw):
    t = _pt.time()
    m = _ps0(*a, **kw)
    c = m.get("content") if isinstance(m.get("content"), dict) else {}
    data = c.get("data") if isinstance(c.get("data"), dict) else {}
    _MLC_PROBE.append({"hop": "k_made", "t": t, "id": m["header"]["msg_id"], "parent": (m.get("parent_header") or {}).get("msg_id"),
                       "what": c.get("execution_state") or data.get("method") or m["header"]["msg_type"]})
    return m
_pk.session.send = _ps
_pio = _pk.iopub_socket.io_thread
_pr0 = _pio._really_send
def _pr(msg, *a, **kw):
    t = _pt.time()
    r = _pr0(msg, *a, **kw)
    parts = [bytes(p) for p in msg]
    if b"<IDS|MSG>" in parts:
        _MLC_PROBE.append({"hop": "k_wire", "t": t, "id": _pj.loads(parts[parts.index(b"<IDS|MSG>") + 2])["msg_id"]})
    return r
_pio._really_send = _pr
"""

# Added to the page before JupyterLab loads: kernel websocket frames (v1 protocol) and clicks.
PAGE_PROBE = r"""(() => {
  const WS = window.WebSocket;
  const log = (window.__mlcProbe = []);
  const now = () => (performance.timeOrigin + performance.now()) / 1000;
  const dec = new TextDecoder();
  const head = (data) => {
    if (!(data instanceof ArrayBuffer) && !ArrayBuffer.isView(data)) return null;
    const u8 = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const dv = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
    const n = Number(dv.getBigUint64(0, true));
    const off = [];
    for (let i = 0; i < n; i++) off.push(Number(dv.getBigUint64(8 * (i + 1), true)));
    const part = (i) => JSON.parse(dec.decode(u8.subarray(off[i], off[i + 1])));
    const h = part(1), p = part(2);
    return { type: h.msg_type, id: h.msg_id, parent: p.msg_id, date: h.date, bytes: u8.byteLength };
  };
  const safeHead = (d) => { try { return head(d); } catch { return null; } };
  window.WebSocket = class extends WS {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (ev) => { const t = now(); const h = safeHead(ev.data); if (h) log.push({ hop: "br_recv", t, ...h }); });
    }
    send(d) {
      const h = safeHead(d);
      if (h) log.push({ hop: "br_send", t: now(), ...h });
      return super.send(d);
    }
  };
  window.addEventListener("click", () => log.push({ hop: "br_click", t: now() }), true);
})();"""


@pytest.fixture(scope="module")
def probe_lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("probe-lab")
    log = base / "server-probe.jsonl"
    os.environ["MLC_LAB_PROBE_LOG"] = str(log)  # read by SERVER_PROBE in the server process
    # timed as a user's kernel runs: without the test suite's strict wire (tests/conftest.py)
    strict, os.environ["MLC_LAB_STRICT_WIRE"] = os.environ.get("MLC_LAB_STRICT_WIRE"), "0"
    try:
        with running_lab(base, SERVER_PROBE) as (url, root):
            yield url, root, log
    finally:
        os.environ.pop("MLC_LAB_PROBE_LOG", None)
        if strict is not None:
            os.environ["MLC_LAB_STRICT_WIRE"] = strict


def _ws_head(payload_b64: str) -> dict | None:
    """msg_type and msg_id of a kernel websocket frame (v1 protocol), from CDP's base64 payload."""
    import base64
    import struct

    try:
        raw = base64.b64decode(payload_b64)
        n = struct.unpack_from("<Q", raw, 0)[0]
        off = [struct.unpack_from("<Q", raw, 8 * (i + 1))[0] for i in range(n)]
        header = json.loads(raw[off[1] : off[2]])
        return {"type": header.get("msg_type"), "id": header.get("msg_id")}
    except Exception:  # noqa: BLE001  (a text frame, another protocol)
        return None


def network_log(cdp_events: list[tuple[str, dict]]) -> list[dict]:
    """When chromium's network stack got each kernel frame (CDP Network events; wall clock from the
    handshake's wallTime/timestamp pair), before the page's main thread sees it."""
    offsets = [p["wallTime"] - p["timestamp"] for m, p in cdp_events if m == "handshake" and "wallTime" in p]
    if not offsets:
        return []
    out = []
    for method, params in cdp_events:
        if method == "frame":
            head = _ws_head(params["response"].get("payloadData", ""))
            if head:
                out.append({"hop": "net_recv", "t": params["timestamp"] + offsets[-1], **head})
    return out


def _iso(date: str) -> float:
    return datetime.fromisoformat(date.replace("Z", "+00:00")).timestamp()


def click_rows(clicks, samples, page_log, kernel_log, server_log) -> list[dict]:
    """One row per click: each hop's time after the click (s). Columns named by what travels:
    req (the comm_msg), busy / update / reply / idle (what the kernel sent back), at k (made in the
    kernel), wire (left the kernel), srv (crossed the server), br (reached the page)."""
    requests = [e for e in page_log if e["hop"] == "br_send" and e["type"] == "comm_msg"]
    assert len(clicks) == len(samples) == len(requests), (len(clicks), len(samples), len(requests))
    rows = []
    for click, sample, req in zip(clicks, samples, requests):
        t0, rid = click["t"], req["id"]
        r: dict = {
            "primitive": sample["primitive"],
            "req sent (br)": req["t"] - t0,
            "req header date": _iso(req["date"]) - t0,
        }
        r.update([("req at srv", e["t"] - t0) for e in server_log if e["hop"] == "srv_in" and e["id"] == rid][-1:])
        handled = [e for e in kernel_log if e["hop"] == "k_handle" and e["id"] == rid]
        assert len(handled) == 1, f"the kernel handled request {rid} {len(handled)} times"
        r["handler start (k)"], r["handler end (k)"] = handled[0]["t"] - t0, handled[0]["t_done"] - t0
        made = [e for e in kernel_log if e["hop"] == "k_made" and e["parent"] == rid]
        names = {"update": "update", "custom": "reply", "busy": "busy", "idle": "idle"}
        kinds = [names.get(e["what"], e["what"]) for e in made]
        before_reply = kinds[: kinds.index("reply")] if "reply" in kinds else kinds
        r["updates"], r["comm_opens"], r["_kinds"] = before_reply.count("update"), kinds.count("comm_open"), kinds
        ids = {}
        for e in made:  # a second message of a kind (the checks' update) is "update 2"
            kind = names.get(e["what"], e["what"])
            ids[e["id"]] = kind if kind not in ids.values() else f"{kind} {list(ids.values()).count(kind) + 1}"
        for e in made:
            r[f"{ids[e['id']]} made (k)"] = e["t"] - t0
        for hop, label, source in (
            ("k_wire", "wire", kernel_log),
            ("srv_out", "srv", server_log),
            ("net_recv", "net", page_log),
            ("br_recv", "br", page_log),
        ):
            for e in source:
                if e["hop"] == hop and e.get("id") in ids:
                    r[f"{ids[e['id']]} at {label}"] = e["t"] - t0
                    if "t_done" in e:  # the server wrote it to the websocket
                        r[f"{ids[e['id']]} at {label} (written)"] = e["t_done"] - t0
        if sample.get("stateMs") is not None:
            r["state drawn from"] = sample["stateMs"] / 1000
        r["drawing"] = (sample.get("drawMs") or 0) / 1000
        r["first frame (done)"] = sample["ms"] / 1000
        r["_primitive"] = sample["primitive"]
        rows.append(r)
    return rows


def check_messages(rows: list[dict]) -> None:
    """What the protocol promises, per click (after the tables are printed)."""
    for r in rows:
        kinds = r["_kinds"]
        if r["_primitive"] in NAVIGATION:
            # answered by the page: the kernel follows and sends nothing back
            assert kinds.count("update") == kinds.count("reply") == kinds.count("comm_open") == 0, kinds
        else:
            # one state message, then the reply; no record (made later for saved notebooks). The
            # Checks panel's report of the new step may follow the reply, from its worker thread.
            assert kinds.count("reply") == 1 and kinds[: kinds.index("reply")].count("update") == 1, kinds
            assert kinds.count("comm_open") == 0, kinds


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def print_summary(samples: list[dict], rows: list[dict]) -> dict:
    """Click to frame per kind of click (median, 90th percentile) and the state updates each cost."""
    out: dict = {}
    updates = {}
    for r in rows:
        kind = "new step" if r["_primitive"] not in NAVIGATION else "navigation"
        updates.setdefault(kind, []).append(r["updates"])
    print(f"{'click to frame, ms':28s} {'n':>3s} {'median':>7s} {'p90':>7s} {'max':>7s}  state updates per click")
    for kind, names in (("new step", None), ("navigation", NAVIGATION), *((n, (n,)) for n in NAVIGATION)):
        v = [s["ms"] for s in samples if (s["primitive"] in names if names else s["primitive"] not in NAVIGATION)]
        if not v:
            continue
        per = sorted(set(updates.get(kind, []))) if kind in updates else ""
        out[kind] = {"n": len(v), "median_ms": statistics.median(v), "p90_ms": _p90(v), "max_ms": max(v)}
        print(f"  {kind:26s} {len(v):3d} {statistics.median(v):7.1f} {_p90(v):7.1f} {max(v):7.1f}  {per}")
    return out


def print_table(rows: list[dict]) -> None:
    rows = [{k: v for k, v in r.items() if k not in ("updates", "comm_opens", "_primitive", "_kinds")} for r in rows]
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys and k != "primitive"]
    order = ["req", "busy", "handler", "update", "reply", "idle", "state", "drawing", "first"]
    keys.sort(key=lambda k: next((i for i, w in enumerate(order) if k.startswith(w)), len(order)))
    print(f"{'ms after the click':28s} {'median':>7s} {'min':>7s} {'max':>7s}")
    for k in keys:
        v = [r[k] * 1000 for r in rows if k in r]
        print(f"  {k:26s} {statistics.median(v):7.1f} {min(v):7.1f} {max(v):7.1f}")


def test_transport_hops(probe_lab, page, artifacts):
    url, root, server_log_path = probe_lab
    page.add_init_script(PAGE_PROBE)
    write_notebook(
        root / "probe.ipynb",
        ["from mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU), "ex = explore(MM_RELU)\nex"],
    )
    lab = Lab(page, url, artifacts, prefix="probe")
    # chromium's network stack: when each kernel frame arrived, before the page's main thread ran
    cdp_events: list[tuple[str, dict]] = []
    net = page.context.new_cdp_session(page)
    net.on("Network.webSocketWillSendHandshakeRequest", lambda p: cdp_events.append(("handshake", p)))
    net.on("Network.webSocketFrameReceived", lambda p: cdp_events.append(("frame", p)))
    net.send("Network.enable")
    lab.open("probe.ipynb")
    lab.run_all()
    wait_code(page, "for i, j, k in T.grid(128, 128, 128):")
    lab.kernel(KERNEL_PROBE)
    # The chapter-2 schedule (test_explorer_lab reaches it by clicks).
    lab.kernel(
        "s = ex.session\ns.apply('split', 'Y/j', factors=[None, 4])\ns.apply('reorder', 'Y/i', 'j_0', 'k', 'j_1')\n"
        "s.apply('reverse_compute_at', 'C', 'j_0')\ns.apply('decompose_reduction', 'Y', 'k')"
    )
    wait_code(page, 'T.sblock("Y_init")')
    page.locator(".mlc-explorer").scroll_into_view_if_needed()
    row(page, "loop", "j_1_init").click()
    page.wait_for_timeout(300)
    tab = os.environ.get("MLC_LAB_PROBE_TAB")  # e.g. "trace": the clicks with another pane shown
    if tab:
        page.locator(f".mlc-explorer .mlc-tab-{tab}").click()
        page.wait_for_timeout(300)
    page.evaluate("() => { window.__mlcLab = { latencies: [] }; window.__mlcProbe.length = 0; }")
    if os.environ.get("MLC_LAB_PROBE_NO_CHECKS"):  # (an experiment: the Checks panel's worker off)
        lab.kernel("ex._checks.schedule = lambda *a, **k: None")
    lab.kernel("_MLC_PROBE.clear()")
    page.evaluate("() => { window.__mlcProbe.length = 0; }")  # forget the execute above
    trace = os.environ.get("MLC_LAB_PROBE_TRACE")
    if trace:
        page.context.browser.start_tracing(
            page=page,
            path=trace,
            categories=[
                "devtools.timeline",
                "disabled-by-default-devtools.timeline",
                "toplevel",
                "v8.execute",
                "blink.user_timing",
            ],
        )
    _cdp = None
    if os.environ.get("MLC_LAB_PROBE_PROFILE"):
        _cdp = page.context.new_cdp_session(page)
        _cdp.send("Profiler.enable")
        _cdp.send("Profiler.setSamplingInterval", {"interval": 100})
        _cdp.send("Profiler.start")
    n = 0
    start = lab.kernel_json("ex.session.current.id")
    clicks = (
        lambda: prim(page, "unroll").click(),
        lambda: page.locator(".mlc-explorer .mlc-undo").click(),
        lambda: page.locator(".mlc-explorer .mlc-redo").click(),
        lambda: page.locator(f".mlc-explorer .mlc-hrow[data-step='{start}']").click(),
        lambda: page.locator(".mlc-explorer .mlc-diff-mode").select_option("unified"),
    )
    if tab:  # the History is hidden: unroll and undo only
        clicks = clicks[:2]
    for _ in range(ROUNDS):
        for click in clicks:
            click()
            n += 1
            page.wait_for_function("(n) => window.__mlcLab.latencies.length >= n", arg=n, polling=50)
            # let the reply and idle land: each click starts from a quiet page (MLC_LAB_PROBE_PAUSE_MS=0:
            # click on at once, as a student does, and as test_explorer_lab's latency step)
            page.wait_for_timeout(int(os.environ.get("MLC_LAB_PROBE_PAUSE_MS", "150")))
        page.locator(".mlc-explorer .mlc-diff-mode").select_option("off")
        page.wait_for_timeout(50)
    if trace:
        page.context.browser.stop_tracing()
    if _cdp:
        Path(os.environ["MLC_LAB_PROBE_PROFILE"]).write_text(json.dumps(_cdp.send("Profiler.stop")["profile"]))
    samples = page.evaluate("() => window.__mlcLab.latencies")
    page_log = page.evaluate("() => window.__mlcProbe") + network_log(cdp_events)
    kernel_log = lab.kernel_json("_MLC_PROBE")
    server_log = [json.loads(line) for line in server_log_path.read_text().splitlines()]
    clicked_at = [e for e in page_log if e["hop"] == "br_click"]
    # a diff is chosen in a <select> (no click, no message): timed by the page only
    clicked = [s for s in samples if s["primitive"] != "diff"]
    assert lab.kernel_json("ex.session.current.id") == start  # the Session followed every move
    per_round = 2 if tab else 4
    rows = click_rows(clicked_at, clicked, page_log, kernel_log, server_log)[per_round:]
    samples = samples[per_round + (0 if tab else 1) :]  # the first round warms caches
    thread = next(e["thread"] for e in kernel_log if e["hop"] == "k_handle")
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    new = [r for r in rows if r["_primitive"] not in NAVIGATION]
    print(
        f"\nnew step (unroll on mm_relu 128^3) click -> rendered, hop by hop ({len(new)} clicks; handler thread {thread}; "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, {cpu})"
    )
    print_table(new)
    summary = print_summary(samples, rows)
    (artifacts / "transport-probe.json").write_text(
        json.dumps(
            {"summary": summary, "rows": rows, "page": page_log, "kernel": kernel_log, "server": server_log},
            default=str,
        )
    )
    for r in rows:
        print(f"  {r['_primitive']:8s} {r['first frame (done)'] * 1000:6.1f} ms  {' '.join(r['_kinds'])}")
    assert len(rows) == per_round * (ROUNDS - 1)
    check_messages(rows)
