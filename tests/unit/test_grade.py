"""The autograder on a lab of its own (tests/labs/grading: gemm + relu + add at 2048^3 for the GPU,
its assignment.toml and eleven submissions: traces, a tuning record, a schedule file, a notebook;
right, partial, wrong and hostile). Traces are parsed, never run; schedule files and notebooks run
only in a child process with the assignment's limits."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from mlc_lab.grading import GradeResult, grade, load_assignment
from mlc_lab.grading.assignment import AssignmentError

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "labs" / "grading"
ASSIGNMENT = LAB / "assignment.toml"
SUBMISSIONS = sorted((LAB / "submissions").iterdir())
TASKS = ["thread_blocks", "shared_memory", "registers", "epilogue"]

# submission -> (kind, score, tasks failed, a phrase of the error (None: graded))
EXPECTED = {
    "reference.py": ("trace", 20, set(), None),
    "variant_ji.json": ("trace", 20, set(), None),
    "schedule_variant.py": ("schedule", 20, set(), None),
    "no_shared.py": ("trace", 15, {"shared_memory"}, None),
    "no_write_cache.record.json": ("trace", 15, {"registers"}, None),
    "lab3.ipynb": ("notebook", 15, {"epilogue"}, None),
    "racing.json": ("trace", 0, set(TASKS), None),  # a race fails every task
    "hostile_trace.py": ("trace", 0, set(TASKS), "the trace is refused: line 6: only methods of `sch`"),
    "syntax_error.py": ("schedule", 0, set(TASKS), "syntax_error.py: line 2: Python syntax error"),
    "endless_loop.py": ("schedule", 0, set(TASKS), "did not finish within the time limit of 10 s"),
    "huge_alloc.py": ("schedule", 0, set(TASKS), "ran out of memory (limit 4096 MB)"),
}

MARKER = Path("/tmp/mlc_lab_grader_was_fooled")

# Gradescope's results.json as its autograder documentation describes it.
GRADESCOPE_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "stdout_visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"},
                "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
                "number": {"type": "string"}, "output": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
                "extra_data": {"type": "object"},
            },
            "additionalProperties": False,
        }},
        "leaderboard": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "value": {"type": ["number", "string"]},
                           "order": {"enum": ["asc", "desc"]}},
            "required": ["name", "value"],
            "additionalProperties": False,
        }},
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "additionalProperties": False,
}


def _cli(*args: str, timeout: int = 240) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout)
    return r, time.monotonic() - start


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """`mlc-lab grade` on all submissions at once, as JSON, and as Gradescope files."""
    MARKER.unlink(missing_ok=True)
    r, seconds = _cli("grade", str(ASSIGNMENT), *map(str, SUBMISSIONS), "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    return {Path(x["submission"]).name: x for x in data["results"]}, seconds, data


def test_every_submission_is_there():
    assert {p.name for p in SUBMISSIONS} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_verdicts(graded, name):
    results, _seconds, _data = graded
    kind, score, failed, error = EXPECTED[name]
    got = results[name]
    assert got["kind"] == kind
    assert got["score"] == score and got["max_score"] == 20
    assert {t["name"] for t in got["tasks"] if not t["passed"]} == failed, got
    if error is None:
        assert got["error"] is None
        assert got["trace"].startswith("from tvm import s_tir\n\n\ndef apply_trace(sch: s_tir.Schedule) -> None:")
    else:
        assert error in got["error"]
    for task in got["tasks"]:
        assert task["messages"] and all(isinstance(m, str) and m for m in task["messages"])
        assert "SBlock#" not in " ".join(task["messages"]) and "For#" not in " ".join(task["messages"])


def test_the_whole_lab_grades_in_under_a_minute_and_the_hostile_trace_never_ran(graded):
    _results, seconds, data = graded
    assert seconds < 60, seconds
    assert data["max_score"] == 20
    assert not MARKER.exists()


def test_failed_tasks_say_why_in_a_students_words(graded):
    results, _s, _d = graded
    shared = next(t for t in results["no_shared.py"]["tasks"] if t["name"] == "shared_memory")
    assert any("reads A straight from global memory" in m for m in shared["messages"])
    racing = results["racing.json"]
    assert any(m.startswith("race: ") for m in racing["tasks"][0]["messages"])
    assert racing["hazards"]


def test_gradescope_results_validate(tmp_path):
    out = tmp_path / "gs"
    picks = [LAB / "submissions" / n for n in ("reference.py", "no_shared.py", "hostile_trace.py")]
    r, _ = _cli("grade", str(ASSIGNMENT), *map(str, picks), "--format", "gradescope", "--out", str(out))
    assert r.returncode == 0, r.stderr
    docs = {p.name: json.loads((out / p.name / "results.json").read_text()) for p in picks}
    for name, doc in docs.items():
        jsonschema.validate(doc, GRADESCOPE_SCHEMA)
        assert [t["number"] for t in doc["tests"]] == TASKS
        assert sum(t["score"] for t in doc["tests"]) == doc["score"]
        assert {"name": "Score", "value": doc["score"], "order": "desc"} in doc["leaderboard"]
    assert docs["reference.py"]["score"] == 20 and all(t["status"] == "passed" for t in docs["reference.py"]["tests"])
    partial = {t["number"]: t for t in docs["no_shared.py"]["tests"]}
    assert partial["shared_memory"]["status"] == "failed" and partial["shared_memory"]["score"] == 0
    assert "global memory" in partial["shared_memory"]["output"]
    assert "only methods of `sch`" in docs["hostile_trace.py"]["output"]
    one, _ = _cli("grade", str(ASSIGNMENT), str(picks[0]), "--format", "gradescope")
    jsonschema.validate(json.loads(one.stdout), GRADESCOPE_SCHEMA)


def test_the_python_api_and_text_format():
    assignment = load_assignment(ASSIGNMENT)
    assert [t.name for t in assignment.tasks] == TASKS and assignment.max_score == 20
    result = grade(assignment, LAB / "submissions" / "no_write_cache.record.json")
    assert isinstance(result, GradeResult) and result.score == 15
    text = result.to_text()
    assert text.splitlines()[0].endswith("(trace): 15/20")
    assert "FAIL registers (0/5)" in text and "cache_write it to a 'local' buffer" in text
    missing = grade(assignment, LAB / "submissions" / "nope.py")
    assert missing.score == 0 and "no such file" in missing.error


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('checks = ["epilogue_fusion"]', 'checks = ["epilog"]'), "there is no check named 'epilog'"),
    (lambda t: t.replace('checks = ["epilogue_fusion"]', 'checks = ["vectorize"]'),
     "vectorize is a check for cpu targets"),
    (lambda t: t.replace('program = "gemm_relu_add.py"', 'program = "missing.py"'), "is not a file"),
    (lambda t: t.replace("[[tasks]]", "[[tasks", 1), "not valid TOML"),
])
def test_a_bad_assignment_says_which_key(tmp_path, edit, message):
    (tmp_path / "gemm_relu_add.py").write_text((LAB / "gemm_relu_add.py").read_text())
    bad = tmp_path / "assignment.toml"
    bad.write_text(edit(ASSIGNMENT.read_text()))
    with pytest.raises(AssignmentError, match=message):
        load_assignment(bad)
    r, _ = _cli("grade", str(bad), str(LAB / "submissions" / "reference.py"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and message.split("'")[0] in r.stderr
