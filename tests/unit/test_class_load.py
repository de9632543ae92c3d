"""The class server under a small load (benchmarks/class_load.py --quick, the default suite's version):
students handing in over real HTTP to a real `mlc-lab class serve`, a share of them slow or hostile
(exploits as traces and as schedule files, bodies too large or nested too deep, chunked bodies, ids past
any submission, clients hanging up before their verdict). Every request is answered, every stored
hand-in graded, and nothing is left in the server's temporary folder, its grading folder or the process
table. The full run (300 students, 1,500 hand-ins in 10 minutes) is the benchmark's; its figures are in
docs/running-a-class.md."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("class_load", ROOT / "benchmarks" / "class_load.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_small_class_with_hostile_students_gets_every_answer_and_leaves_nothing():
    bench = _benchmark()
    args = argparse.Namespace(
        students=6, per_student=2, minutes=0.15, hostile=0.5, workers=2, drain_minutes=4, seed=3, quick=True
    )
    fig = bench.run(args)
    assert bench.holds(fig) == [], bench.holds(fig)
    assert fig["roles"] == {"slow": 1, "attack": 1, "http": 1, "normal": 3}
    answers = fig["requests"]["by_answer"]
    # the hostile requests were each answered as they should be
    for what, status in [
        ("junk: schedule file", "400"),
        ("junk: 1 MB body", "413"),
        ("junk: nested body", "400"),
        ("junk: huge id", "404"),
        ("junk: chunked", "411"),
        ("junk: no token", "401"),
    ]:
        assert answers.get(f"{what} -> {status}") == 1, (what, answers)
    assert answers.get("junk: hung up before the verdict -> hung up") == 1
    kinds = fig["submissions"]["by_kind"]
    assert kinds["hung up"] == {"stored": 1, "graded": 1, "status graded": 1}  # graded though nobody waited
    assert kinds["attack"]["graded"] == kinds["attack"]["stored"] == kinds["attack"]["status refused"] == 2
    assert kinds["slow"]["graded"] == kinds["slow"]["stored"] == 2
    assert kinds["normal"]["graded"] == 6 and fig["verdict_s"]["normal"]["n"] == 6
    assert fig["normal_p95_s"] is not None and fig["summary_students"] == 6  # all handed in (the refused too)
