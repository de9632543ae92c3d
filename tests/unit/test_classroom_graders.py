"""The class server's graders (mlc_lab.classroom.graders, .timing): a fair share per student (a
student's second and third waiting hand-ins wait behind everyone's first), graders side by side,
paths that hold wherever the server was started, nothing left in the temporary folder or the class
folder by a grader killed mid-job, hand-ins named as the student sent them, and close results
timed again, interleaved, when the server is idle. The lab is mm_relu at 64x64 on the CPU."""

from __future__ import annotations

import tempfile
import time

import psutil
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.classroom import client, reaper
from mlc_lab.classroom.graders import FairQueue, disk_name, shown_as
from mlc_lab.classroom.identity import Who
from mlc_lab.classroom.server import ClassServer
from mlc_lab.classroom.timing import LOCK_ENV, timing_turn
from tests.unit.test_classroom import ASSIGNMENT, PARALLEL, ROSTER, SPLIT, VECTORIZE, trace

REFUSED = "def apply_trace(sch):\n    b0 = sch.get_sblock(name='Y')\n    sch.splitt(b0)\n"


def _server(folder, **kwargs) -> ClassServer:
    srv = ClassServer(ASSIGNMENT, folder, port=0, roster=ROSTER, **kwargs)
    srv.tokens = {sid: token for sid, _name, token in srv.issued}
    return srv


def _drain(q: FairQueue) -> list[str]:
    """Hand everything out one at a time, each graded before the next (one grader): the students' order."""
    order = []
    while (item := q.get(timeout_s=0)) is not None:
        order.append(item[1])
        q.done(*item)
    return order


def test_a_students_later_hand_ins_wait_behind_everyones_first():
    q = FairQueue()
    for sid, who in enumerate(["ada", "ada", "ada", "bo", "cy", "bo"], 1):
        q.put(sid, who)
    assert _drain(q) == ["ada", "bo", "cy", "ada", "bo", "ada"]
    # with two graders: ada's second does not start while bo's first waits
    q = FairQueue()
    for sid, who in enumerate(["ada", "ada", "ada", "bo"], 10):
        q.put(sid, who)
    first, second = q.get(timeout_s=0), q.get(timeout_s=0)
    assert (first[1], second[1]) == ("ada", "bo")
    q.put(20, "cy")  # a newcomer, while ada's first is being graded
    q.done(*second)
    assert q.get(timeout_s=0) == (20, "cy")
    q.done(*first)
    assert q.get(timeout_s=0) == (11, "ada")  # served longer ago than cy
    assert q.waiting() == 1 and not q.idle()
    q.put(12, "ada")  # queued already (a restart queues what waits): not twice
    assert q.waiting() == 1
    q.close()
    assert q.get(timeout_s=5) is None  # closed: at once


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcde"), min_size=1, max_size=30))
def test_fair_share_holds_for_any_queue(students):
    """Everything waiting at once, one grader: the k-th hand-in of any student is handed out before
    the (k+1)-th of any other, and each student's own come oldest first."""
    q = FairQueue()
    for sid, who in enumerate(students):
        q.put(sid, who)
    handed = []
    while (item := q.get(timeout_s=0)) is not None:
        handed.append(item)
        q.done(*item)
    assert sorted(handed) == sorted(enumerate(students))
    seen: dict[str, int] = {}
    rounds = []
    for _sid, who in handed:
        seen[who] = seen.get(who, 0) + 1
        rounds.append(seen[who])
    assert rounds == sorted(rounds)
    for who in set(students):
        mine = [sid for sid, w in handed if w == who]
        assert mine == sorted(mine)


def test_a_relative_dir_graders_side_by_side_and_a_fair_share(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    srv = _server("class", workers=1)  # relative: every submission failed with FileNotFoundError before
    try:
        assert srv.store.dir == tmp_path / "class"
        ada, bo = Who("ada"), Who("bo")
        good = trace(PARALLEL)
        first = [srv.submit(ada, good), srv.submit(ada, good + "\n"), srv.submit(ada, good + "\n\n")]
        theirs = srv.submit(bo, good)
        srv.start()
        for sid in [*first, theirs]:
            assert srv.wait(sid, 180), f"#{sid} was not graded"
        graded = dict(srv.store._db.execute("SELECT id, graded_at FROM submissions"))
        order = sorted(graded, key=graded.get)
        assert order == [first[0], theirs, first[1], first[2]]  # bo's first before ada's second
        v = srv.store.verdict(theirs)
        assert v["error"] is None and v["score"] == 5 and v["latency_ms"] > 0
    finally:
        srv.stop()
    # two graders: two children grade at once
    srv = _server(tmp_path / "two", workers=2).start()
    try:
        sids = [srv.submit(Who(who), trace(PARALLEL, SPLIT, VECTORIZE)) for who in ("ada", "bo", "cy")]
        deadline, most = time.monotonic() + 120, 0
        while time.monotonic() < deadline and srv.store.counts()["queued"]:
            kids = psutil.Process().children()  # the server's own (a child forking its worker looks like it too)
            most = max(most, sum("grade_class" in k.cmdline() for k in kids if _alive(k)))
            time.sleep(0.05)
        assert most == 2
        assert all(srv.store.verdict(s)["score"] == 10 for s in sids)
    finally:
        srv.stop()


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_grader_killed_mid_build_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    """A hand-in whose kernel takes minutes to build is stopped at the time limit: its grader, its
    timing worker and every file they made are gone (the issue: a 168 MB folder left in /tmp each)."""
    temp = tmp_path / "system-tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    srv = _server(tmp_path / "class", workers=1).start()
    try:
        url, tok = srv.url, srv.tokens
        ok = client.submit(url, trace(PARALLEL), token=tok["bo"])  # the grader started, its timing worker too
        assert ok["score"] == 5
        unrolled = trace(PARALLEL, ("unroll", "Y/j"), ("unroll", "Y/k"))  # 4096 statements a row: over 30 s to build
        srv.grade_timeout_s = 8
        slow = client.submit(url, unrolled, token=tok["ada"])
        assert "took longer than 8 s" in slow["error"], slow
        srv.grade_timeout_s = 300
        after = client.submit(url, trace(PARALLEL), token=tok["cy"])  # a fresh grader takes the next one
        assert after["score"] == 5 and after["error"] is None
        folders = [p for p in (srv.store.dir / "grading").iterdir()]
        assert len(folders) == 1  # the live grader's own folder; the killed one's is gone
    finally:
        srv.stop()
    assert list(temp.iterdir()) == []  # nothing in the temporary folder
    assert list((tmp_path / "class" / "grading").iterdir()) == []
    marked = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(reaper.MARK, "").startswith(str((tmp_path / "class").resolve())):
                marked.append(proc)
        except psutil.Error:
            continue
    assert marked == []


def test_a_hand_in_is_named_as_the_student_sent_it(tmp_path):
    srv = _server(tmp_path / "class", workers=1).start()
    try:
        url, tok = srv.url, srv.tokens
        named = client.submit(url, REFUSED, token=tok["ada"], file="lab1_trace.py")
        assert named["file"] == "lab1_trace.py"
        assert named["error"].startswith("lab1_trace.py: the trace is refused: line 3"), named["error"]
        step = client.submit(url, REFUSED, token=tok["bo"], file="step 3")  # the explorer's name: no file at all
        assert step["error"].startswith("step 3: the trace is refused"), step["error"]
        unnamed = client.submit(url, REFUSED, token=tok["cy"])
        assert unnamed["error"].startswith("your hand-in: the trace is refused"), unnamed["error"]
        for v in (named, step, unnamed):
            assert "submission_" not in str(v) and "hand-in.py" not in str(v)
            assert all(t["messages"] == [v["error"]] for t in v["tasks"])
        bad = client.submit  # a name that is not a file name is refused before anything is stored
        for file in ("a/b.py", "x" * 101, "tab\there"):
            try:
                bad(url, REFUSED, token=tok["cy"], file=file)
            except client.ClassServerError as exc:
                assert "the hand-in's name must be a file name" in str(exc)
            else:
                raise AssertionError(f"{file!r} was taken")
    finally:
        srv.stop()
    assert disk_name("lab 1 (v2).py", "b0 = 1") == "lab 1 (v2).py"
    assert disk_name("trace.json", "def apply_trace(sch): pass") == "hand-in.py"  # the text decides the form
    assert disk_name("../../etc/passwd", "[]") == "hand-in.json"
    assert shown_as({"a": ["hand-in.py: x"], "b": 1}, "hand-in.py", "step 2") == {"a": ["step 2: x"], "b": 1}


def test_close_results_are_timed_again_interleaved_when_the_server_is_idle(tmp_path):
    srv = _server(tmp_path / "class", workers=1)
    try:
        # two students' schedules that tie because the first timings were taken on a busy machine
        fast, slow = trace(PARALLEL, SPLIT, VECTORIZE), trace(PARALLEL)
        sids = []
        for who, text, ms in (("ada", fast, 1.0), ("bo", slow, 1.1)):
            sid = srv.store.add(who, None, text)
            tasks = [{"name": t["name"], "title": t["title"], "passed": True, "messages": []} for t in srv.store.tasks]
            timing = {"where": "the class server", "quiet": False, "spread_ms": 0.0, "load": 3.0}
            srv.store.record(
                sid, {"score": 10.0, "max_score": 10.0, "tasks": tasks, "latency_ms": ms, "timing": timing}
            )
            sids.append(sid)
        assert srv.store.retime_due() == tuple(sids)
        srv.start()
        deadline = time.monotonic() + 180
        while any(not (srv.store.verdict(s)["timing"] or {}).get("retimed") for s in sids):
            assert time.monotonic() < deadline, "the tied results were not timed again"
            time.sleep(0.5)
        for sid, first in zip(sids, (1.0, 1.1), strict=True):
            timing = srv.store.verdict(sid)["timing"]
            assert timing["retimed"]["rounds"] == 3 and timing["retimed_with"] == sids
            assert timing["first"]["latency_ms"] == first and timing["first"]["quiet"] is False
            assert srv.store.verdict(sid)["latency_ms"] != first
        assert srv.store.retime_due(srv._retimed) is None  # once per pair
    finally:
        srv.stop()


def test_timings_take_turns_but_a_long_build_holds_nobody_past_the_patience(tmp_path, monkeypatch):
    lock = tmp_path / "timing.lock"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    with timing_turn() as had:
        assert had and lock.stat().st_mode & 0o777 == 0o600
        started = time.monotonic()
        with timing_turn(patience_s=0.3) as other:  # another grader, while this one times (or builds)
            assert other is False and 0.3 <= time.monotonic() - started < 2.0
    with timing_turn(patience_s=0.3) as again:  # the turn was given back
        assert again is True
    with timing_turn(remote=True) as remote:  # the measurement machines: no turn to take
        assert remote is True
