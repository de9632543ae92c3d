"""The exercise graders: right answers pass, wrong numbers fail with the error size, and a schedule
that differs from the target gets a report naming each difference (block, loop, kind, extent)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tvm.s_tir

import mlc_lab
from mlc_lab import exercises
from mlc_lab.exercises import GradeReport

HEADER = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
"""


def program(body: str) -> str:
    return HEADER + body


BROADCAST_OK = program("""
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"), C: T.Buffer((4, 4), "int64")):
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]
""")

BROADCAST_LEGACY = """
import tvm
from tvm.script import tir as T

@tvm.script.ir_module
class MyAdd:
    @T.prim_func
    def add(A: T.Buffer[(4, 4), "int64"], B: T.Buffer[(4,), "int64"], C: T.Buffer[(4, 4), "int64"]):
        T.func_attr({"global_symbol": "add", "tir.noalias": True})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]
"""

BROADCAST_WRONG_INDEX = BROADCAST_OK.replace("+ B[vj]", "+ B[vi]")
BROADCAST_WRONG_SHAPE = BROADCAST_OK.replace('B: T.Buffer((4,), "int64")', 'B: T.Buffer((4, 4), "int64")').replace(
    "B[vj]", "B[vi, vj]"
)

CONV_OK = program("""
    @T.prim_func(s_tir=True)
    def conv(A: T.Buffer((1, 1, 8, 8), "int64"), W: T.Buffer((2, 1, 3, 3), "int64"),
             Out: T.Buffer((1, 2, 6, 6), "int64")):
        for b, k, i, j, q, di, dj in T.grid(1, 2, 6, 6, 1, 3, 3):
            with T.sblock("conv"):
                vb, vk, vi, vj, vq, vdi, vdj = T.axis.remap("SSSSRRR", [b, k, i, j, q, di, dj])
                with T.init():
                    Out[vb, vk, vi, vj] = T.int64(0)
                Out[vb, vk, vi, vj] = Out[vb, vk, vi, vj] + A[vb, vq, vi + vdi, vj + vdj] * W[vk, vq, vdi, vdj]
""")


def target_schedule(session: mlc_lab.Session, *, upto: int = 99, jfactor: int = 8) -> mlc_lab.Session:
    """The course's answer to exercise 3, stopping after ``upto`` steps."""
    steps = [
        lambda s, r: r.update(j=s.apply("split", "Y/j", factors=[None, jfactor])),
        lambda s, r: r.update(k=s.apply("split", "k", factors=[None, 4])),
        lambda s, r: s.apply("reorder", r["j"][0], r["k"][0], r["k"][1], r["j"][1]),
        lambda s, r: s.apply("reverse_compute_at", "C", r["j"][0]),
        lambda s, r: s.apply("parallel", "Y/n"),
        lambda s, r: s.apply("unroll", r["k"][1]),
        lambda s, r: s.apply("decompose_reduction", "Y", r["k"][0]),
        lambda s, r: s.apply("vectorize", "j_1_init"),
        lambda s, r: s.apply("vectorize", "ax0"),
    ]
    names: dict = {}
    for step in steps[:upto]:
        step(session, names)
    return session


# ----------------------------------------------------------------------------------------- numeric


def test_broadcast_add_correct_passes():
    rep = exercises.check_broadcast_add(BROADCAST_OK)
    assert isinstance(rep, GradeReport)
    assert rep.passed and bool(rep)
    assert rep.max_abs_error == 0
    assert "PASSED" in str(rep) and "PASSED" in rep._repr_html_()


def test_broadcast_add_in_the_course_spelling_passes():
    assert exercises.check_broadcast_add(BROADCAST_LEGACY).passed


def test_wrong_numbers_fail_with_the_max_error():
    rep = exercises.check_broadcast_add(BROADCAST_WRONG_INDEX)
    assert not rep.passed
    check = rep.check("matches numpy")
    assert check is not None and not check.ok
    assert rep.max_abs_error == 3.0  # B[i] instead of B[j]: 4 - 1 at worst
    assert "max abs error 3" in check.message and "elements differ" in check.message
    assert check.message == "max abs error 3; 12 of 16 elements differ; the worst at index (0, 3): yours 7, numpy 4"
    assert rep.output is not None and rep.expected is not None
    assert "FAIL" in rep.text() and "&#10008;" in rep._repr_html_()


def test_an_exercises_grade_is_grading_s_type_and_its_checks_score_tasks():
    """The exercise's result is model.grading's ExerciseResult, its checks the named checks' verdicts: an
    assignment's task is scored from them as from the explorer's checks."""
    from mlc_lab.grading.assignment import Task
    from mlc_lab.grading.scoring import score_tasks
    from mlc_lab.model.checks import CheckReport, CheckResult
    from mlc_lab.model.grading import ExerciseResult

    assert exercises.Check is CheckResult
    rep = exercises.check_broadcast_add(BROADCAST_WRONG_INDEX)
    assert isinstance(rep, ExerciseResult) and all(type(c) is CheckResult for c in rep.checks)
    tasks = [Task("sig", "The signature", ("signature",), 1.0), Task("num", "The numbers", ("matches numpy",), 2.0)]
    sig, num = score_tasks(tasks, CheckReport(rep.checks, []))
    assert (sig.passed, sig.points) == (True, 1.0)
    assert (num.passed, num.points) == (False, 0.0) and any("12 of 16 elements differ" in m for m in num.messages)


def test_a_wrong_signature_is_named_before_anything_runs():
    rep = exercises.check_broadcast_add(BROADCAST_WRONG_SHAPE)
    assert not rep.passed
    assert rep.check("signature").message == "B is declared (4, 4) int64 but the exercise passes (4,) int64"
    assert rep.check("matches numpy") is None


def test_a_wrong_number_of_parameters_lists_both_sides():
    a, b = np.arange(16, dtype=np.int64).reshape(4, 4), np.arange(4, dtype=np.int64)
    rep = exercises.numeric_check(BROADCAST_OK, "add", [a, b], a + b)
    assert [(c.name, c.ok) for c in rep.checks] == [("signature", False)]
    assert rep.checks[0].message == (
        "add takes 3 parameter(s) (A: (4, 4) int64, B: (4,) int64, C: (4, 4) int64); "
        "the exercise passes 2: (4, 4) int64, (4,) int64"
    )


def test_a_nan_in_the_output_is_the_worst_element():
    """NaN everywhere, or in one element: the error is infinite and the first NaN is named."""
    floats = BROADCAST_OK.replace("int64", "float32")
    a, b = np.arange(16, dtype=np.float32).reshape(4, 4), np.arange(4, 0, -1, dtype=np.float32)
    all_nan = floats.replace("+ B[vj]", '+ B[vj] + T.float32("nan")')
    one_nan = floats.replace("+ B[vj]", '+ T.if_then_else(vi == 1 and vj == 2, T.float32("nan"), B[vj])')
    for text, worst in ((all_nan, "(0, 0): yours nan"), (one_nan, "(1, 2): yours nan")):
        rep = exercises.numeric_check(text, "add", [a, b, np.zeros((4, 4), np.float32)], a + b)
        check = rep.check("matches numpy")
        assert not rep.passed and rep.max_abs_error == float("inf") and not check.ok
        assert f"the worst at index {worst}, numpy " in check.message


def test_a_function_under_another_name_is_still_graded():
    rep = exercises.check_broadcast_add(BROADCAST_OK.replace("def add(", "def my_add("))
    assert rep.passed
    assert "grading the only one, 'my_add'" in rep.check("function").message


def test_text_that_does_not_parse_is_one_sentence():
    rep = exercises.check_broadcast_add("this is not TVMScript")
    assert not rep.passed and rep.check("loads") is not None


def test_conv_correct_and_wrong():
    assert exercises.check_conv(CONV_OK).passed
    wrong = exercises.check_conv(CONV_OK.replace("vj + vdj]", "vj]"))
    assert not wrong.passed and wrong.max_abs_error > 0
    assert "of 72 elements differ" in wrong.check("matches numpy").message


def test_conv_reference_matches_the_course_printout():
    data = np.arange(64, dtype=np.int64).reshape(1, 1, 8, 8)
    weight = np.arange(18, dtype=np.int64).reshape(2, 1, 3, 3)
    out = exercises.conv2d_reference(data, weight)
    assert out[0, 0, 0, :3].tolist() == [474, 510, 546] and out[0, 1, 5, 5] == 6468


def test_add_example_accepts_a_session_and_a_schedule():
    import tvm

    add = program("""
    @T.prim_func(s_tir=True)
    def add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4, 4), "int64"), C: T.Buffer((4, 4), "int64")):
        for i, j in T.grid(4, 4):
            with T.sblock("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]
""")
    s = mlc_lab.Session(add)
    i0, i1 = s.apply("split", "i", factors=[2, 2])
    s.apply("parallel", i0)
    s.apply("vectorize", "j")
    assert exercises.check_add(s).passed
    assert exercises.check_add(tvm.s_tir.Schedule(mlc_lab.load(add))).passed


# ----------------------------------------------------------------------------------------- structure


@pytest.fixture(scope="module")
def target_report():
    return exercises.check_bmm_relu(target_schedule(mlc_lab.Session(exercises.BMM_RELU)))


def test_the_course_schedule_passes_and_is_structurally_equal(target_report):
    rep = target_report
    assert rep.passed, rep.text()
    assert rep.structurally_equal is True and rep.distance == 0 and rep.similarity == 1.0
    assert rep.check("matches numpy").ok


def test_the_target_module_itself_passes():
    rep = exercises.compare_structure(exercises.BMM_RELU_TARGET, exercises.BMM_RELU_TARGET, func="bmm_relu")
    assert rep.passed and rep.distance == 0


def test_a_partial_schedule_gets_the_rest_of_the_way():
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=4)  # split, split, reorder, reverse_compute_at
    rep = exercises.check_bmm_relu(s, numeric=False)
    assert not rep.passed and rep.structurally_equal is False
    hints = [d.hint for d in rep.differences]
    assert sorted(hints) == sorted(
        [
            "sch.parallel(n)",
            "sch.unroll(k_1)",
            "sch.vectorize(ax0)",
            "sch.decompose_reduction(Y, k_0)",
            "sch.vectorize(j_1_init)",
        ]
    ), hints
    # TVM refuses parallel after decompose_reduction: the way lists it before
    assert hints.index("sch.parallel(n)") < hints.index("sch.decompose_reduction(Y, k_0)")
    parallel = rep.differences[hints.index("sch.parallel(n)")]
    assert parallel.where == "loop n" and parallel.what == "the target's loop i0 is parallel"
    assert parallel.line is not None and parallel.step.primitive == "parallel"
    assert rep.distance == 5 and rep.similarity == pytest.approx(4 / 9)
    text = rep.text()
    assert "5 structural difference(s)" in text and "your loop nests:" in text and "the target's loop nests:" in text
    html = rep._repr_html_()
    assert "sch.parallel(n)" in html and "sch.unroll(k_1)" in html and "<table" in html
    # every cell of the differences reads from the left (JupyterLab right-aligns table cells)
    cells = re.findall(r"<td style='([^']*)'", html.split("structural difference(s)")[1])
    assert cells and all("text-align:left" in c for c in cells)


def test_following_the_differences_in_the_order_listed_reaches_the_target():
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=4)
    rep = exercises.check_bmm_relu(s, numeric=False)
    for d in rep.differences:  # do what each one says, in order: none fails
        args, kwargs = d.step.call()
        s.apply(d.step.primitive, *args, **kwargs)
    assert exercises.check_bmm_relu(s).passed


def test_the_distance_shrinks_towards_the_target():
    distances = []
    for upto in (0, 4, 6, 8, 9):
        rep = exercises.compare_structure(
            target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=upto), exercises.BMM_RELU_TARGET
        )
        distances.append(rep.distance)
    assert distances == sorted(distances, reverse=True) and distances[-1] == 0 and distances[0] > distances[1]


def test_the_unscheduled_program_hears_about_the_splits_and_the_placement():
    rep = exercises.compare_structure(exercises.BMM_RELU, exercises.BMM_RELU_TARGET)
    by_hint = {d.hint: d for d in rep.differences}
    assert by_hint["sch.split(Y/j, factors=[16, 8])"].where == "loop Y/j"
    placement = next(d for d in rep.differences if d.hint.startswith("sch.reverse_compute_at(C, "))
    assert placement.where == "block C" and placement.what == "in the target, block C sits inside loop i2_0"
    assert rep.similarity == 0.0


def test_a_schedule_that_cannot_reach_the_target_hears_the_way_back():
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=4)
    s.apply("decompose_reduction", "Y", "j_0")  # too high: the target initialises above k_0
    rep = exercises.check_bmm_relu(s, numeric=False)
    first = rep.differences[0]
    assert (
        first.where == f"your step {s.current.id}" and first.hint == "go back: session.goto(4), or Undo in the explorer"
    )
    s.goto(4)
    for d in rep.differences[1:]:
        args, kwargs = d.step.call()
        s.apply(d.step.primitive, *args, **kwargs)
    assert exercises.check_bmm_relu(s).passed


def test_a_tvm_schedule_is_read_on_the_exercises_program():
    sch = tvm.s_tir.Schedule(mlc_lab.load(exercises.BMM_RELU))
    sch.work_on("bmm_relu")
    sch.parallel(sch.get_loops(sch.get_sblock("Y"))[0])
    rep = exercises.check_bmm_relu(sch, numeric=False)
    assert rep.distance == 8 and "sch.parallel(Y/n)" not in [d.hint for d in rep.differences]


def test_a_target_that_computes_something_else_says_so():
    other = exercises.BMM_RELU_TARGET.replace("T.max(", "T.min(")
    rep = exercises.compare_structure(exercises.BMM_RELU, other, func="bmm_relu")
    assert rep.check("structure").message.startswith("the target computes something else: block C computes")


def test_a_wrong_bmm_fails_on_numbers_before_structure():
    wrong = exercises.BMM_RELU.replace("T.max(Y[vn, vi, vj], T.float32(0))", "Y[vn, vi, vj]")
    rep = exercises.check_bmm_relu(wrong)
    assert not rep.passed and not rep.check("matches numpy").ok
    assert rep.check("structure") is None  # the structure is compared once the numbers are right
