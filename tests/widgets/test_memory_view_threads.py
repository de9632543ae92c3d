"""Notebook 04's instruction, "loop k_0, colour by thread, pick a warp", on a real Session: the
enclosing threadIdx loop runs over every thread by default, so the colours are the block's threads
(before, the thread loop sat at 0 and everything was one colour)."""

from __future__ import annotations

import zlib

import numpy as np

import mlc_lab
from mlc_lab.widgets.access.view import AccessView, footprint_payload
from tests.fixtures import programs_access as P


def _array(result: dict, data: list[bytes], buffer: str, name: str) -> np.ndarray:
    entry = next(b for b in result["buffers"] if b["buffer"] == buffer)
    d = entry["arrays"][name]
    raw = data[d["buffer"]]
    if d.get("enc") == "deflate":
        raw = zlib.decompress(raw)
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"]).newbyteorder("<"))


def test_k0_of_the_shared_memory_matmul_shows_every_thread():
    s = mlc_lab.Session(P.sched_gpu_shared(256).mod)
    swept, data = footprint_payload(s, "k_0", {}, sweep_threads=True)
    assert swept["swept"] == ["i_1_j_1_fused"]
    threads = _array(swept, data, "A_shared", "thread")
    # the block's threads fetch together: colours of many threads (the first toucher of each element)
    assert len(np.unique(threads[threads >= 0])) > 32
    one, data1 = footprint_payload(s, "k_0", {"i_1_j_1_fused": 5}, sweep_threads=False)
    assert one["swept"] == [] and one["at"]["i_1_j_1_fused"] == 5
    only = _array(one, data1, "A_shared", "thread")
    assert set(np.unique(only[only >= 0]).tolist()) == {5}  # one thread: one colour
    # sweeping touches what all threads touch: more of A_shared than one thread
    a_all = next(b for b in swept["buffers"] if b["buffer"] == "A_shared")["distinct"]
    a_one = next(b for b in one["buffers"] if b["buffer"] == "A_shared")["distinct"]
    assert a_all > a_one


def test_the_access_view_sweeps_by_default_and_its_snapshot_too():
    s = mlc_lab.Session(P.sched_gpu_shared(256).mod)
    view = AccessView(s, "k_0", color_by="thread")
    assert view.sweep_threads is True
    snap = view.snapshot()
    fp = snap["footprints"]["A_shared"]
    touched = np.asarray(fp.thread)[np.asarray(fp.reads) | np.asarray(fp.writes)]
    assert len(np.unique(touched)) > 32
    view.close()
