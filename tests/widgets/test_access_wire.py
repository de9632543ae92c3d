"""The memory view's payloads have the shape of their contract (mlc_lab.model.access.payload), whose
TypeScript types js/access/data.ts and panel.ts read (generated into js/lib/model.ts)."""

from __future__ import annotations


from mlc_lab.model.access.payload import FootprintResult, GpuStats
from mlc_lab.widgets.access import view as av
from mlc_lab.model.conform import problems


def test_a_cpu_footprint_is_a_footprint_result(programs):
    from mlc_lab.core.session import Session

    s = Session(programs.mm_relu(128), "mm_relu")
    s.apply("split", "Y/j", factors=[None, 4])
    res, _ = av.footprint_payload(s, "j_1", {"Y/i": 3})
    assert problems(res, FootprintResult) == []
    assert res["buffers"] and all(b["arrays"] for b in res["buffers"] if b["distinct"])


def test_a_gpu_footprint_and_its_warp_statistics_follow_the_contract(programs):
    from mlc_lab.core.session import Session

    s = Session(programs.sched_window_sum(1024, 128).mod)
    res, _ = av.footprint_payload(s, "i_1", {"i_0": 1})
    assert res["gpu"] and problems(res, FootprintResult) == []
    g = av.gpu_payload(s, "i_1", {"i_0": 1})
    assert problems(g, GpuStats) == []
    # one encoding: every WarpAccess field is sent (null when it does not apply), as the page's type says
    assert all("bank_conflicts" in a and "sectors_per_request" in a for a in g["accesses"])


def test_the_check_sees_a_payload_that_drifted():
    """The checker itself: a key the contract lacks, a missing one, a wrong kind."""
    loop = {"name": "j", "ref": "j", "extent": 4, "min": 0, "thread": None, "loop_kind": "serial"}
    good = {"loop": loop, "enclosing": [], "at": {}, "steps": 1, "gpu": False, "launch": {}, "buffers": []}
    assert problems(good, FootprintResult) == []
    assert problems({**good, "extra": 1}, FootprintResult) == ["value.extra: FootprintResult declares no key 'extra'"]
    assert problems({**good, "loop": {**loop, "extent": "4"}}, FootprintResult) == [
        "value.loop.extent: '4' is not an integer"
    ]
    bad = dict(good)
    del bad["steps"]
    assert problems(bad, FootprintResult) == ["value.steps: missing (required by FootprintResult)"]
