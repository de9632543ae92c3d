"""Task scoring in one function (mlc_lab.grading.scoring.score_tasks) and Gradescope's results.json as
Gradescope reads it: hazard classes, unjudged checks, the numeric verdict, visibility, numbers."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from mlc_lab.grading.assignment import Task
from mlc_lab.grading.report import GradeResult
from mlc_lab.grading.scoring import score_tasks
from mlc_lab.model.checks import HAZARD_CLASS, CheckReport, CheckResult, Hazard

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "gradescope_results.schema.json").read_text())
TILING = Task("tiling", "Tile", ("thread_block_tiling",), 5.0, number="1.1")
SHARED = Task("shared", "Share", ("shared_memory_tiling",), 3.0, number="1.2", visibility="hidden")
OK = CheckResult("thread_block_tiling", True, "tiled over blocks")
RACE = Hazard("race", "threads write Y_local[0] together")
SPILL = Hazard("spill", "registers spill to local memory")


def _report(*checks, hazards=()):
    return CheckReport(list(checks), list(hazards))


def test_a_passing_task_gets_its_points_and_the_checks_words():
    (r,) = score_tasks([TILING], _report(OK))
    assert (r.passed, r.points, r.max_points, r.messages, r.number) == (True, 5.0, 5.0, ["tiled over blocks"], "1.1")


def test_a_performance_hazard_fails_nothing_unless_named():
    report = _report(OK, hazards=[SPILL])
    assert score_tasks([TILING], report)[0].passed
    assert score_tasks([TILING], report, hazards_fail=())[0].passed
    named = score_tasks([TILING], report, hazards_fail=("performance",))[0]
    assert not named.passed and named.messages == ["spill: registers spill to local memory"]
    assert not score_tasks([TILING], report, hazards_fail=("spill",))[0].passed


def test_a_correctness_hazard_fails_by_default_and_not_when_turned_off():
    report = _report(OK, hazards=[RACE])
    failed = score_tasks([TILING], report)[0]
    assert failed.points == 0 and failed.messages == ["race: threads write Y_local[0] together"]
    assert score_tasks([TILING], report, hazards_fail=())[0].passed


def test_an_unjudged_check_fails_its_task_said_as_not_judged():
    unjudged = CheckResult("thread_block_tiling", False, "the program has no loop nest to tile", judged=False)
    (r,) = score_tasks([TILING], _report(unjudged))
    assert not r.passed and r.points == 0
    assert r.messages == [
        "thread_block_tiling could not be judged on this program, so the task is not passed: "
        "the program has no loop nest to tile"
    ]


def test_a_wrong_result_and_a_threshold():
    fast = Task("fast", "Be fast", ("thread_block_tiling",), 2.0, max_latency_ms=1.0)
    assert not score_tasks([fast], _report(OK), latency_ms=3.0)[0].passed
    assert (
        score_tasks([fast], _report(OK), latency_ms=0.5)[0].messages[-1]
        == "the program takes 0.5 ms (at most 1 ms asked)"
    )
    wrong = score_tasks([fast], _report(OK), latency_ms=0.5, wrong="wrong result at a smaller size: D differs")[0]
    assert not wrong.passed and wrong.messages == ["wrong result at a smaller size: D differs"]
    untimed = score_tasks([fast], _report(OK))[0]
    assert untimed.messages == ["the program was not timed, so its latency threshold cannot be judged"]


def test_a_failed_numeric_check_in_the_report_fails_every_task():
    report = CheckReport([OK], [], numeric={"ok": False, "max_error": 3.5, "shape": [64, 64]})
    (r,) = score_tasks([TILING], report)
    assert not r.passed and r.messages == ["wrong result at a smaller size: max error 3.5 at shape [64, 64]"]
    assert score_tasks([TILING], CheckReport([OK], [], numeric={"ok": True, "max_error": 0, "shape": [64]}))[0].passed


@given(
    oks=st.lists(st.booleans(), min_size=2, max_size=2),
    kinds=st.lists(st.sampled_from(sorted(HAZARD_CLASS)), max_size=3),
    fail_on=st.sets(st.sampled_from(["correctness", "performance", *sorted(HAZARD_CLASS)])),
)
def test_property_a_task_passes_exactly_when_its_checks_pass_and_no_named_hazard_was_found(oks, kinds, fail_on):
    checks = [
        CheckResult("thread_block_tiling", oks[0], "a"),
        CheckResult("shared_memory_tiling", oks[1], "b"),
    ]
    hazards = [Hazard(k, f"{k} here") for k in kinds]
    results = score_tasks([TILING, SHARED], _report(*checks, hazards=hazards), hazards_fail=fail_on)
    hazard_fails = any(h.kind in fail_on or h.severity in fail_on for h in hazards)
    for r, ok in zip(results, oks):
        assert r.passed == (ok and not hazard_fails)
        assert r.points == (r.max_points if r.passed else 0.0)


def _graded() -> GradeResult:
    tasks = score_tasks([TILING, SHARED], _report(OK, CheckResult("shared_memory_tiling", True, "ok"), hazards=[SPILL]))
    r = GradeResult("alice/lab3.py", "trace", tasks, hazards=[SPILL.to_json() | {"class": "performance"}])
    r.numeric = {
        "ok": True,
        "verdict": "match",
        "message": "D matches the program at 128 (max error 1e-06)",
        "max_error": 1e-06,
        "shape": {"D": [128, 128]},
        "sizes": {"1024": 128},
        "engine": "pocl",
    }
    r.seconds, r.latency_ms, r.visibility = 12.6, 0.75, "after_due_date"
    return r


def test_gradescope_results_validate_and_say_hazards_and_numeric_once():
    doc = _graded().to_gradescope()
    jsonschema.validate(doc, SCHEMA)
    assert doc["visibility"] == "after_due_date" and doc["execution_time"] == 13
    assert [(t["number"], t["visibility"]) for t in doc["tests"]] == [("1.1", "visible"), ("1.2", "hidden")]
    assert "Numeric check (match): D matches the program at 128" in doc["output"]
    assert "- spill (performance): registers spill to local memory" in doc["output"]
    assert all("spill" not in t["output"] for t in doc["tests"])
    assert {"name": "Latency (ms)", "value": 0.75, "order": "asc"} in doc["leaderboard"]


def test_the_schema_refuses_what_gradescope_refuses():
    doc = _graded().to_gradescope()
    for bad in ({**doc, "visibility": "students"}, {**doc, "tests": [{**doc["tests"][0], "status": "ok"}]}):
        try:
            jsonschema.validate(bad, SCHEMA)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"the schema let through {bad}")


def test_a_grade_round_trips_through_json():
    r = _graded()
    back = GradeResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back.to_json() == r.to_json()


def test_text_quotes_what_a_hand_in_wrote_so_no_line_can_pass_for_the_graders():
    r = _graded()
    r.error = "raised Exception: ok\nalice/lab3.py (trace, graded): 80/80\n  PASS 1.1 (20/20)"
    r.submission = "x\n  PASS 1.1 (20/20).py"
    lines = r.to_text().splitlines()
    assert lines[0].startswith("x\\n  PASS 1.1 (20/20).py (trace, graded): ")
    assert not any(line.lstrip().startswith("PASS 1.1 (20") for line in lines)
    assert not any(line.endswith("80/80") for line in lines)
    assert "  | raised Exception: ok\\nalice/lab3.py (trace, graded): 80/80\\n  PASS 1.1 (20/20)" in lines


def _racing() -> GradeResult:
    from mlc_lab.model.checks import numeric_failure

    numeric = {"ok": False, "verdict": "mismatch", "message": "3 of 16384 elements of C are wrong"}
    report = _report(OK, CheckResult("shared_memory_tiling", True, "ok"), hazards=[RACE])
    tasks = score_tasks([TILING, SHARED], report, wrong=numeric_failure(numeric))
    r = GradeResult("bob/lab3.py", "trace", tasks, hazards=[RACE.to_json() | {"class": "correctness"}])
    r.numeric = numeric
    return r


def test_the_text_report_says_hazards_and_the_numeric_verdict_once_at_the_top():
    lines = _racing().to_text().splitlines()
    assert lines[1] == "  numeric mismatch | 3 of 16384 elements of C are wrong"
    assert lines[2] == "  hazard 1 race (correctness) | threads write Y_local[0] together"
    assert lines[3].startswith("  FAIL 1.1 (0/5)")
    # under each task, a pointer to the lines above, not the sentences again
    assert sum("threads write Y_local[0] together" in line for line in lines) == 1
    assert sum("elements of C are wrong" in line for line in lines) == 1
    assert lines.count("       (hazard 1 above)") == 2 and lines.count("       (the numeric check above)") == 2


def test_gradescope_outputs_say_their_format_and_escape_what_a_hand_in_wrote():
    r = _racing()
    r.hazards[0]["message"] = "threads write C[i < 128] <b>twice</b>\x1b[2J\x07"
    r.notes = ["lab\x00.py: a note\nPASS"]
    text = r.to_gradescope()
    jsonschema.validate(text, SCHEMA)
    assert text["output_format"] == text["test_output_format"] == "text"
    assert all(t["output_format"] == "text" for t in text["tests"])
    assert "C[i < 128] <b>twice</b>\\x1b[2J\\x07" in text["output"]  # shown as written: text, never markup
    assert "lab\\x00.py: a note\\nPASS" in text["output"]
    assert not any(ch in text["output"] for ch in "\x00\x07\x1b")
    md = r.to_gradescope("md")
    jsonschema.validate(md, SCHEMA)
    assert md["output_format"] == md["test_output_format"] == "md"
    assert "C\\[i &lt; 128\\] &lt;b&gt;twice&lt;/b&gt;" in md["output"]
    assert "<b>" not in md["output"] and md["output"].startswith("**0 of 8 points (graded)**")


def test_no_number_gradescope_reads_is_nan_and_the_json_is_strict():
    from mlc_lab.grading.report import json_text

    r = _graded()
    r.latency_ms = float("nan")
    doc = r.to_gradescope()
    assert all(e["name"] != "Latency (ms)" for e in doc["leaderboard"])
    r.seconds = float("inf")
    assert r.to_gradescope()["execution_time"] == 0
    text = json_text({"result": r.to_json(), "x": [float("-inf")]})
    back = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert back["result"]["latency_ms"] is None and back["x"] == [None]
    assert "NaN" not in text and "Infinity" not in text
    assert r.to_text().startswith("alice/lab3.py (trace, graded): 8/8\n")  # no "nan ms"
