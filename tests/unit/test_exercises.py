"""The exercise graders: right answers pass, wrong numbers fail with the error size, and a schedule
that differs from the target gets a report naming each difference (block, loop, kind, extent)."""

from __future__ import annotations

import re

import numpy as np
import pytest

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


def test_a_partial_schedule_gets_its_differences_named():
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=4)  # split, split, reorder, reverse_compute_at
    rep = exercises.check_bmm_relu(s, numeric=False)
    assert not rep.passed and rep.structurally_equal is False
    by_what = {(d.where, d.what): d for d in rep.differences}
    init = by_what[("block Y", "the reduction's initialisation is still inside the block (T.init)")]
    assert "decompose_reduction" in init.hint and init.target == "Y_init + Y_update"
    kinds = [d for d in rep.differences if d.what == "the loop has another kind"]
    assert {d.target.split(": ")[1] for d in kinds} == {"parallel", "unrolled", "vectorized"}
    parallel = next(d for d in kinds if d.target.endswith("parallel"))
    assert parallel.where == "your block Y (the target's Y_update), loop 1 of 6" and parallel.yours == "n: serial"
    assert parallel.hint == "sch.parallel(n)" and parallel.line is not None
    assert any(d.where == "block C, loop 4 of 4" and "vectorize" in d.hint for d in kinds)
    assert rep.distance == len(rep.differences) == 4
    text = rep.text()
    assert "4 structural difference(s)" in text and "your loop nests:" in text and "the target's loop nests:" in text
    html = rep._repr_html_()
    assert "sch.parallel(n)" in html and "sch.unroll(k_1)" in html and "<table" in html
    # every cell of the differences reads from the left (JupyterLab right-aligns table cells)
    cells = re.findall(r"<td style='([^']*)'", html.split("structural difference(s)")[1])
    assert cells and all("text-align:left" in c for c in cells)
    assert "your block Y (the target&#x27;s Y_update), loop 1 of 6" in html


def test_following_the_hints_in_the_order_listed_works():
    """The grader lists what is left in an order that works: the loops' kinds, then
    decompose_reduction (TVM refuses parallel after it), whose hint names its loop."""
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=4)
    rep = exercises.check_bmm_relu(s, numeric=False)
    hints = [d.hint for d in rep.differences]
    assert hints[-1].startswith("sch.decompose_reduction('Y', 'Y/k_0')"), hints
    assert "after parallel" in hints[-1]
    for hint in hints:  # do what each one says, in order: none fails
        call = re.match(r"sch\.(\w+)\((.*?)\)(:|$)", hint)
        assert call, hint
        args = [a.strip().strip("'") for a in call.group(2).split(",")]
        if call.group(1) in ("parallel", "unroll", "vectorize"):
            args = [a if "/" in a else f"Y/{a}" if a != "ax0" else "C/ax0" for a in args]
        s.apply(call.group(1), *args)
    left = exercises.check_bmm_relu(s, numeric=False)
    assert [d.what for d in left.differences] == ["the loop has another kind"]  # only the init's vectorize


def test_the_distance_shrinks_towards_the_target():
    distances = []
    for upto in (0, 4, 6, 8, 9):
        rep = exercises.compare_structure(
            target_schedule(mlc_lab.Session(exercises.BMM_RELU), upto=upto), exercises.BMM_RELU_TARGET
        )
        distances.append(rep.distance)
    assert distances == sorted(distances, reverse=True) and distances[-1] == 0 and distances[0] > distances[1]


def test_the_unscheduled_program_hears_about_placement_and_splits():
    rep = exercises.compare_structure(exercises.BMM_RELU, exercises.BMM_RELU_TARGET)
    placement = next(d for d in rep.differences if "sits at a different place" in d.what)
    assert placement.where == "block C" and "reverse_compute_at" in placement.hint
    assert "its own loop nest" in placement.yours and "inside i2_0" in placement.target
    depth = next(
        d for d in rep.differences if d.where == "your block Y (the target's Y_update)" and "loop(s)" in d.what
    )
    assert depth.what == "it is inside 4 loop(s), the target 6"


def test_another_split_factor_is_an_extent_difference():
    s = target_schedule(mlc_lab.Session(exercises.BMM_RELU), jfactor=16)
    rep = exercises.check_bmm_relu(s)
    assert rep.check("matches numpy").ok and not rep.passed
    extents = [d for d in rep.differences if d.what == "the loop has another extent"]
    assert extents and all("split factors" in d.hint for d in extents)
    assert any(d.yours.endswith(": 8") and d.target.endswith(": 16") for d in extents)  # j_0 has 8, the target 16
    assert any(d.yours.endswith(": 16") and d.target.endswith(": 8") for d in extents)  # the inner piece


def test_decomposing_when_the_target_does_not():
    plain = exercises.BMM_RELU
    s = mlc_lab.Session(plain)
    s.apply("decompose_reduction", "Y", "k")
    rep = exercises.compare_structure(s, plain, func="bmm_relu")
    assert any(d.what == "the reduction is decomposed here but not in the target" for d in rep.differences)


def test_a_wrong_bmm_fails_on_numbers_before_structure():
    wrong = exercises.BMM_RELU.replace("T.max(Y[vn, vi, vj], T.float32(0))", "Y[vn, vi, vj]")
    rep = exercises.check_bmm_relu(wrong)
    assert not rep.passed and not rep.check("matches numpy").ok
    assert rep.check("structure") is None  # the structure is compared once the numbers are right
