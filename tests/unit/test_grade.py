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
# A submission with a syntax error is written when the tests run (a committed one would fail the lint).
SYNTAX_ERROR = 'def schedule(sch):\n    block = sch.get_sblock("gemm"\n    i, j, k = sch.get_loops(block)\n'
SUBMISSIONS = sorted(p for p in (LAB / "submissions").iterdir() if p.is_file())  # not a __pycache__
TASKS = ["thread_blocks", "shared_memory", "registers", "epilogue"]

# submission -> (kind, score, tasks failed, a phrase of the error (None: graded))
EXPECTED = {
    "reference.py": ("trace", 20, set(), None),
    "variant_ji.json": ("trace", 20, set(), None),
    "schedule_variant.py": ("trace", 20, set(), None),  # its schedule(sch) holds schedule calls only: never run
    "no_shared.py": ("trace", 15, {"shared_memory"}, None),
    "write_back_in_k.record.json": ("trace", 15, {"registers"}, None),
    "lab3.ipynb": ("notebook", 15, {"epilogue"}, None),
    "racing.json": ("trace", 0, set(TASKS), None),  # a race fails every task
    "hostile_trace.py": ("", 0, set(TASKS), "hostile_trace.py: the trace is refused: line 6: only methods of `sch`"),
    "syntax_error.py": ("schedule", 0, set(TASKS), "syntax_error.py: line 2: Python syntax error"),
    # the limit is CPU time: a loaded machine slows the loop's wall clock, never its verdict
    "endless_loop.py": ("schedule", 0, set(TASKS), "endless_loop.py used more than 10 s of CPU time"),
    # filling 4 GB takes seconds on a loaded machine: the memory limit or the 10 s of CPU stops it
    "huge_alloc.py": ("schedule", 0, set(TASKS), ("memory limit of 4096 MB", "10 s of CPU time")),
}

MARKER = Path("/tmp/mlc_lab_grader_was_fooled")

# Gradescope's results.json as its autograder documentation describes it.
GRADESCOPE_SCHEMA = json.loads((ROOT / "tests" / "fixtures" / "gradescope_results.schema.json").read_text())


def _cli(*args: str, timeout: int = 240) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )
    return r, time.monotonic() - start


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """`mlc-lab grade` on all submissions at once, as JSON, and as Gradescope files."""
    MARKER.unlink(missing_ok=True)
    broken = tmp_path_factory.mktemp("hand_ins") / "syntax_error.py"
    broken.write_text(SYNTAX_ERROR)
    r, seconds = _cli("grade", str(ASSIGNMENT), *map(str, SUBMISSIONS + [broken]), "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    return {Path(key).name: x for key, x in data["results"].items()}, seconds, data


def test_every_submission_is_there():
    assert {p.name for p in SUBMISSIONS} | {"syntax_error.py"} == set(EXPECTED)


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
        assert any(e in got["error"] for e in ((error,) if isinstance(error, str) else error)), got["error"]
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
    for doc in docs.values():
        jsonschema.validate(doc, GRADESCOPE_SCHEMA)
        assert [t["number"] for t in doc["tests"]] == ["1.1", "1.2", "1.3", "1.4"]
        assert all(t["visibility"] == "visible" for t in doc["tests"]) and doc["visibility"] == "visible"
        assert sum(t["score"] for t in doc["tests"]) == doc["score"]
        assert {"name": "Score", "value": doc["score"], "order": "desc"} in doc["leaderboard"]
    assert docs["reference.py"]["score"] == 20 and all(t["status"] == "passed" for t in docs["reference.py"]["tests"])
    partial = {t["number"]: t for t in docs["no_shared.py"]["tests"]}
    assert partial["1.2"]["status"] == "failed" and partial["1.2"]["score"] == 0
    assert "global memory" in partial["1.2"]["output"]
    assert "only methods of `sch`" in docs["hostile_trace.py"]["output"]
    one, _ = _cli("grade", str(ASSIGNMENT), str(picks[0]), "--format", "gradescope")
    jsonschema.validate(json.loads(one.stdout), GRADESCOPE_SCHEMA)


def test_the_python_api_and_text_format():
    assignment = load_assignment(ASSIGNMENT)
    assert [t.name for t in assignment.tasks] == TASKS and assignment.max_score == 20
    result = grade(assignment, LAB / "submissions" / "write_back_in_k.record.json")
    assert isinstance(result, GradeResult) and result.score == 15
    text = result.to_text()
    assert text.splitlines()[0].endswith("(trace, graded): 15/20")
    assert (
        "FAIL 1.3 (0/5)\n       task | registers: " in text
        and "inside the reduction loop k_0, 128 times per element" in text
    )
    missing = grade(assignment, LAB / "submissions" / "nope.py")
    assert missing.score == 0 and "no such file" in missing.error


def test_an_apply_trace_with_a_loop_is_refused_with_the_way_out(tmp_path):
    hand_in = tmp_path / "loop_trace.py"
    hand_in.write_text('def apply_trace(sch):\n    for name in ["gemm"]:\n        sch.get_sblock(name)\n')
    result = grade(load_assignment(ASSIGNMENT), hand_in)
    assert result.status == "refused" and result.score == 0
    assert result.error.startswith("loop_trace.py: the trace is refused: line 2: only schedule calls are allowed")
    assert "a hand-in is one of: a .py file holding the program and schedule(sch) or manual_schedule()" in result.error


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda t: t.replace('checks = ["epilogue_fusion"]', 'checks = ["epilog"]'),
            "there is no check named 'epilog'",
        ),
        (
            lambda t: t.replace('checks = ["epilogue_fusion"]', 'checks = ["vectorize"]'),
            "vectorize is a check for cpu targets",
        ),
        (lambda t: t.replace('program = "gemm_relu_add.py"', 'program = "missing.py"'), "is not a file"),
        (lambda t: t.replace("[[tasks]]", "[[tasks", 1), "not valid TOML"),
    ],
)
def test_a_bad_assignment_says_which_key(tmp_path, edit, message):
    (tmp_path / "gemm_relu_add.py").write_text((LAB / "gemm_relu_add.py").read_text())
    bad = tmp_path / "assignment.toml"
    bad.write_text(edit(ASSIGNMENT.read_text()))
    with pytest.raises(AssignmentError, match=message):
        load_assignment(bad)
    r, _ = _cli("grade", str(bad), str(LAB / "submissions" / "reference.py"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and message.split("'")[0] in r.stderr


# --- performance thresholds (a CPU assignment, timed in the worker) ----------------------------------

# The class lab's mm_relu (tests/labs/classroom), at 128x128.
CPU_PROGRAM = (ROOT / "tests" / "labs" / "classroom" / "mm_relu.py").read_text().replace("\nN = 64\n", "\nN = 128\n")
assert "N = 128" in CPU_PROGRAM

CPU_ASSIGNMENT = """title = "Lab 2: mm_relu on the CPU"
program = "mm_relu.py"
target = "cpu"

[performance]
repeats = 3

[[tasks]]
name = "parallel"
title = "Run the outer loop on every core"
checks = ["parallel"]
points = 2

[[tasks]]
name = "fast"
title = "Vectorize, and be fast"
checks = ["vectorize"]
points = 3
max_latency_ms = LIMIT
"""

COURSE_TRACE = """from tvm import s_tir


def apply_trace(sch: s_tir.Schedule) -> None:
    b0 = sch.get_sblock(name="Y", func_name="main")
    l1, l2, l3 = sch.get_loops(block=b0)
    l4, l5 = sch.split(loop=l2, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)
    sch.reorder(l1, l4, l3, l5)
    sch.parallel(loop=l1)
    sch.vectorize(loop=l5)
"""


@pytest.mark.usefixtures("kernels_only_in_the_sandbox")  # a hand-in's kernel: in the sandbox only
def test_performance_thresholds_time_the_program_and_rank_it(tmp_path):
    (tmp_path / "mm_relu.py").write_text(CPU_PROGRAM)
    (tmp_path / "fast.toml").write_text(CPU_ASSIGNMENT.replace("LIMIT", "1000"))
    (tmp_path / "impossible.toml").write_text(CPU_ASSIGNMENT.replace("LIMIT", "0.000001"))
    course = tmp_path / "course.py"
    course.write_text(COURSE_TRACE)
    naive = tmp_path / "naive.py"
    naive.write_text("def apply_trace(sch):\n    pass\n")

    good = grade(load_assignment(tmp_path / "fast.toml"), course)
    assert good.error is None and good.score == 5 and good.correct is True
    assert good.latency_ms is not None and 0 < good.latency_ms < 1000
    fast = next(t for t in good.tasks if t.name == "fast")
    assert any("ms (at most 1000 ms asked)" in m for m in fast.messages)
    board = {e["name"]: e for e in good.to_gradescope()["leaderboard"]}
    assert board["Latency (ms)"]["order"] == "asc" and board["Latency (ms)"]["value"] == pytest.approx(
        good.latency_ms, rel=1e-3
    )
    jsonschema.validate(good.to_gradescope(), GRADESCOPE_SCHEMA)

    slow = grade(load_assignment(tmp_path / "impossible.toml"), course)
    assert slow.score == 2 and [t.name for t in slow.tasks if not t.passed] == ["fast"]
    assert any("this task asks for at most 1e-06 ms" in m for m in slow.tasks[1].messages)

    plain = grade(load_assignment(tmp_path / "fast.toml"), naive)
    assert plain.score == 0 and plain.latency_ms is not None  # timed, but neither parallel nor vectorized


def test_a_courses_own_pytest_autograder_uses_the_plugin(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["mlc_lab.grading.pytest_plugin"]\n')
    (tmp_path / "test_lab3.py").write_text(
        "from mlc_lab.grading.pytest_plugin import assert_task\n\n\n"
        "def test_thread_blocks(graded):\n    assert_task(graded, 'thread_blocks')\n\n\n"
        "def test_epilogue(graded):\n    assert_task(graded, 'epilogue')\n\n\n"
        "def test_score(graded):\n    assert graded.score == 15\n"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path),
            "--assignment",
            str(ASSIGNMENT),
            "--submission",
            str(LAB / "submissions" / "lab3.ipynb"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert "1 failed, 2 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Fuse ReLU + add into the GEMM kernel: block relu_add computes D in a kernel of its own" in r.stdout


@pytest.mark.usefixtures("kernels_only_in_the_sandbox")  # a hand-in's kernel: in the sandbox only
def test_numeric_check_at_a_smaller_size_fails_a_wrong_kernel(tmp_path):
    # The racing write-back: the static race check sees it, and so does running it (2048 -> 128).
    text = ASSIGNMENT.read_text().replace("hazards_fail = true", "hazards_fail = false")
    (tmp_path / "gemm_relu_add.py").write_text((LAB / "gemm_relu_add.py").read_text())
    # The budget counts the grader's process and its children: here the whole test run (TVM, the
    # suite's servers and workers, several GB in CI), nothing to do with the sizes this test is about.
    numeric = "[numeric]\nsize = 128\nmemory_mb = 65536\n\n[limits]"
    (tmp_path / "numeric.toml").write_text(text.replace("[limits]", numeric))
    assignment = load_assignment(tmp_path / "numeric.toml")
    assert assignment.numeric == {"sizes": 128, "rtol": 1e-3, "atol": 1e-3, "timeout_s": 120, "memory_mb": 65536}
    right = grade(assignment, LAB / "submissions" / "reference.py")
    assert right.score == 20 and right.numeric["ok"] and right.numeric["verdict"] == "match", right.numeric
    racing = grade(assignment, LAB / "submissions" / "racing.json")
    assert racing.score == 0 and racing.numeric["verdict"] == "mismatch"
    assert all(
        any(m.startswith("wrong result at a smaller size: ") and "elements of D are wrong" in m for m in t.messages)
        for t in racing.tasks
    )
    (tmp_path / "mm_relu.py").write_text(CPU_PROGRAM)
    (tmp_path / "cpu.toml").write_text(
        CPU_ASSIGNMENT.replace("LIMIT", "10").replace("[performance]", "[numeric]\nsize = 64\n\n[performance]")
    )
    with pytest.raises(AssignmentError, match=r"\[numeric\] runs GPU schedules on the CPU; for a cpu target"):
        load_assignment(tmp_path / "cpu.toml")


def test_a_schedule_file_in_the_courses_older_spelling_is_converted_before_it_runs(tmp_path):
    variant = (LAB / "submissions" / "schedule_variant.py").read_text()
    legacy = (  # `import math` makes it a schedule file (run in the sandbox), not a trace
        variant.replace("from tvm import s_tir", "import math\nimport tvm")
        .replace("def schedule(sch: s_tir.Schedule) -> s_tir.Schedule:", "def schedule(sch: tvm.tir.Schedule):")
        .replace("sch.get_sblock(", "sch.get_block(")
    )
    assert "get_block(" in legacy and "s_tir" not in legacy
    hand_in = tmp_path / "old_spelling.py"
    hand_in.write_text(legacy)
    result = grade(load_assignment(ASSIGNMENT), hand_in)
    assert result.kind == "schedule" and result.error is None and result.score == 20


def test_gradescope_mode_grades_the_students_folder_into_one_results_json(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "lab3.py").write_text((LAB / "submissions" / "reference.py").read_text())
    (folder / "notes.md").write_text("my notes: not a hand-in")
    target = tmp_path / "results" / "results.json"
    r, _ = _cli("grade", str(ASSIGNMENT), str(folder), "--gradescope", "--out", str(target))
    assert r.returncode == 0, r.stderr
    doc = json.loads(target.read_text())
    jsonschema.validate(doc, GRADESCOPE_SCHEMA)
    assert doc["score"] == 20 and [t["number"] for t in doc["tests"]] == ["1.1", "1.2", "1.3", "1.4"]
    two, _ = _cli("grade", str(ASSIGNMENT), str(folder), str(folder), "--gradescope")
    assert two.returncode == 2 and "--gradescope grades one hand-in" in two.stderr
