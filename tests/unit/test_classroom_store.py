"""The class's store alone (mlc_lab.classroom.store, no grading): a tie only within the spread of the two
timings, a busy machine widening the band but never erasing a 2x gap; close results timed again once;
students whose hand-ins were all refused counted, at the first task; the refused list telling an
attack from a mistake; a folder and files the teacher's alone, the teacher's token kept as a hash."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab.classroom.refusals import refusal_kind
from mlc_lab.classroom.store import BUSY_BAND, Store, tied

TASKS = [
    {"name": "parallel", "title": "Run the rows in parallel", "points": 5.0},
    {"name": "vectorize", "title": "Vectorize the inner loop", "points": 5.0},
]


def row(latency: float | None, spread: float | None = 0.0, quiet: bool | None = True, score: float = 10.0) -> dict:
    return {"score": score, "best_latency_ms": latency, "spread_ms": spread, "quiet": quiet}


def test_a_tie_is_within_the_spread_of_the_two_timings():
    assert tied(row(1.0, 0.02), row(1.01, 0.02))  # their bands meet
    assert not tied(row(1.0, 0.02), row(1.1, 0.02))  # 10% apart on a quiet machine: two ranks
    assert not tied(row(1.0, 0.02), row(1.0, 0.02, score=5.0))  # another score: never a tie
    assert not tied(row(1.0), row(None))
    # a busy machine widens the band of its own timing (to BUSY_BAND of it)...
    assert tied(row(1.0, 0.001, quiet=False), row(1.15, 0.001))
    assert not tied(row(1.0, 0.001), row(1.15, 0.001))
    # ...but never erases a gap of 2x: the 11x "tie" between two busy timings is two ranks
    assert not tied(row(1.0, 0.5, quiet=False), row(11.0, 0.5, quiet=False))
    assert not tied(row(1.0, 5.0, quiet=False), row(2.0, 5.0, quiet=False))
    assert tied(row(1.0, 5.0, quiet=False), row(1.99, 5.0, quiet=False))


latency = st.floats(min_value=1e-4, max_value=1e4, allow_nan=False)
spread = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e4, allow_nan=False))
quiet = st.sampled_from([True, False, None])


@settings(max_examples=300, deadline=None)
@given(latency, spread, quiet, latency, spread, quiet)
def test_ties_are_symmetric_never_span_2x_and_grow_with_busy_machines(la, sa, qa, lb, sb, qb):
    a, b = row(la, sa, qa), row(lb, sb, qb)
    assert tied(a, b) == tied(b, a)
    if tied(a, b):
        assert max(la, lb) < 2 * min(la, lb)
        # a busier machine only widens: a tie stays a tie when either timing was taken busy
        assert tied(row(la, sa, False), b) and tied(a, row(lb, sb, False))
    if max(la, lb) <= (1 + BUSY_BAND) / (1 - BUSY_BAND) * min(la, lb) * 0.999:
        assert tied(row(la, sa, False), row(lb, sb, False))  # two busy timings within the band: a tie


def _record(store: Store, name: str, passed: list[str], latency=None, timing=None, trace="t", **extra) -> int:
    sid = store.add(name, None, trace, file=extra.pop("file", None))
    tasks = [
        {
            "name": t["name"],
            "title": t["title"],
            "passed": t["name"] in passed,
            "messages": [] if t["name"] in passed else ["no"],
        }
        for t in TASKS
    ]
    result = {"score": 5.0 * len(passed), "max_score": 10.0, "tasks": tasks, "latency_ms": latency, **extra}
    if timing is not None:
        result["timing"] = timing
    store.record(sid, result)
    return sid


def test_students_whose_hand_ins_were_all_refused_handed_in_and_are_at_task_1(tmp_path):
    store = Store(tmp_path, TASKS)
    try:
        store.sync_roster([])
        _record(store, "ada", ["parallel", "vectorize"], 1.0)
        refused = {
            "status": "refused",
            "error": "lab.py: the trace is refused: line 3: `splitt` is not a schedule primitive",
        }
        for _ in range(2):
            _record(store, "eve", [], trace="def apply_trace(sch):\n    sch.splitt(1)\n", file="lab.py", **refused)
        hostile = "def apply_trace(sch):\n    __import__('os').system('id')\n"
        attack = {
            "status": "refused",
            "error": "step 2: the trace is refused: line 2: only methods of `sch` may be called",
        }
        _record(store, "mal", [], trace=hostile, file="step 2", **attack)
        summary = store.summary({"eve": "Eve E (eve)", "mal": "Mal M (mal)", "ada": "Ada A (ada)"})
        # before: "Nobody is stuck", 1 student; now both are counted, at the first task
        assert summary["students"] == 3 and [t["students"] for t in summary["tasks"]] == [3, 3]
        assert summary["tasks"][0]["passed"] == 1
        stuck = {s["name"]: s for s in summary["stuck"]}
        assert stuck["Eve E (eve)"]["task"] == "parallel" and stuck["Eve E (eve)"]["failed_attempts"] == 2
        assert "`splitt` is not a schedule primitive" in stuck["Eve E (eve)"]["last_message"]
        assert stuck["Mal M (mal)"]["failed_attempts"] == 1 and "Ada A (ada)" not in stuck
        # the refused list: the attack told from the mistake, the student's name and pseudonym, the hand-in's name
        listed = [(r["name"], r["pseudonym"], r["kind"], r["file"]) for r in summary["refused"]]
        assert listed == [
            ("Mal M (mal)", "mal", "attack", "step 2"),
            ("Eve E (eve)", "eve", "mistake", "lab.py"),
            ("Eve E (eve)", "eve", "mistake", "lab.py"),
        ]
        assert summary["refused"][0]["why"] == "calls __import__"
        assert [r["name"] for r in store.leaderboard()["rows"]] == ["ada"]  # refused hand-ins are never ranked
    finally:
        store.close()


ATTACKS = [
    "from tvm import s_tir\n\ndef apply_trace(sch):\n    __import__('os').system('touch /tmp/x')\n",
    "def apply_trace(sch):\n    open('/etc/passwd').read()\n",
    "import os\nos.system('id')\n",
    "def apply_trace(sch):\n    b0 = sch.get_sblock('Y')\n    b0.__class__.__bases__\n",
    "def apply_trace(sch:\n    subprocess.run(['id'])",  # not even valid Python: judged by its words
    '[[["GetBlock", [], ["__globals__"], ["b0"]]], []]',
    "def apply_trace(sch):\n    eval('1')\n",
]
MISTAKES = [
    "def apply_trace(sch):\n    b0 = sch.get_sblock('Y')\n    sch.splitt(b0)\n",
    "def apply_trace(sch):\n    print(sch.mod)\n",
    "def apply_trace(sch)\n    b0 = sch.get_sblock('Y')\n",
    "\x00\x01 not a trace at all ((((",
    '[[["GetBlock", [], ["Y"], ["b0"]]], [], 7]',
    "from tvm import s_tir\nb0 = sch.get_sblock(name='Y', func_name='main')\nl1 = sch.get_loops(block=b9)\n",
]


@pytest.mark.parametrize("trace", ATTACKS)
def test_an_attack_is_told_by_what_it_reaches_for(trace):
    kind, why = refusal_kind(trace, "the trace is refused")
    assert kind == "attack" and why, trace


@pytest.mark.parametrize("trace", MISTAKES)
def test_an_honest_mistake_is_a_mistake(trace):
    assert refusal_kind(trace, "the trace is refused") == ("mistake", "")


def test_code_in_an_annotation_or_a_nesting_bomb_is_an_attack_by_the_graders_sentence():
    words = "the annotation 'pragma_import_c' is refused: it adds C code, and a trace never adds code"
    assert refusal_kind("[]", f"lab.py: line 4: {words}")[0] == "attack"
    assert refusal_kind("(" * 300, "brackets are nested more than 100 deep")[0] == "attack"


def test_close_results_are_due_again_once_and_the_first_timing_is_kept(tmp_path):
    store = Store(tmp_path, TASKS)
    try:
        busy = {"quiet": False, "spread_ms": 0.001, "load": 2.5}
        a = _record(store, "ada", ["parallel", "vectorize"], 1.00, dict(busy))
        b = _record(store, "bo", ["parallel", "vectorize"], 1.10, dict(busy))
        _record(store, "cy", ["parallel", "vectorize"], 3.0, {"quiet": True, "spread_ms": 0.01, "load": 0.1})
        assert store.retime_due() == (a, b)
        assert store.retime_due({frozenset((a, b))}) is None  # tried: not again
        retimed = {"quiet": True, "spread_ms": 0.002, "load": 0.2, "retimed": {"rounds": 3}}
        store.retimed(a, 0.95, retimed)
        store.retimed(b, 1.20, retimed)
        rows = store.leaderboard()["rows"]
        assert [(r["name"], r["rank"], r["tie"], r["best_latency_ms"]) for r in rows] == [
            ("ada", 1, False, 0.95),
            ("bo", 2, False, 1.20),
            ("cy", 3, False, 3.0),
        ]
        v = store.verdict(b)
        assert v["latency_ms"] == 1.20 and v["timing"]["quiet"] is True
        assert v["timing"]["first"] == {"latency_ms": 1.10, "spread_ms": 0.001, "load": 2.5, "quiet": False}
        assert store.retime_due() is None  # both timed again: settled
    finally:
        store.close()


def test_a_new_class_folder_is_the_teachers_alone(tmp_path):
    folder = tmp_path / "a" / "class"
    store = Store(folder, TASKS)
    try:
        token = store.teacher_token()
        assert token and store.is_teacher(token) and not store.is_teacher("")
        for i in range(3):
            _record(store, "ada", ["parallel"], 1.0 + i)
        assert folder.stat().st_mode & 0o777 == 0o700
        files = sorted(folder.glob("class.sqlite*"))
        assert {f.name for f in files} >= {"class.sqlite", "class.sqlite-wal"}
        assert all(f.stat().st_mode & 0o777 == 0o600 for f in files), [(f.name, oct(f.stat().st_mode)) for f in files]
        raw = b"".join(f.read_bytes() for f in files)
        assert token.encode() not in raw  # only its hash
    finally:
        store.close()
    os.chmod(folder, 0o755)  # loosened by hand: the next server tightens it again
    Store(folder, TASKS).close()
    assert folder.stat().st_mode & 0o777 == 0o700
