"""Session.path_to and Session.hint (issue 33): the way to a target, read off it with TVM as the oracle.

Every way said reached is checked here as a user would: TVM's own replay of its ``apply_trace`` gives
the target, and so do its steps applied one by one through ``Session.apply``. Targets no schedule
reaches are said not reached, in one sentence of the right kind; a wrong step is answered with the
way back; a target whose blocks are named otherwise is "equal up to block names".
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import tvm_ffi

from mlc_lab import Session
from mlc_lab.model.path import Hint, PathAnswer
from mlc_lab.tvm.course_programs import BMM_RELU, BMM_RELU_TARGET, MM_RELU
from tests.conformance import path_pairs


def _same(a, b) -> bool:
    return bool(tvm_ffi.structural_equal(a.with_attr("global_symbol", "f"), b.with_attr("global_symbol", "f")))


def _target_func(target, name: str):
    return Session(target, name).module[name] if not hasattr(target, "functions") else target[name]


def _tvm_replay(program, func: str, trace: str):
    """TVM's own replay of an apply_trace text (the engine's output, trusted in a test)."""
    from tvm import s_tir

    from mlc_lab.tvm.program import load

    sch = s_tir.Schedule(load(program), debug_mask="none")
    env: dict = {}
    exec(compile(trace, "<apply_trace>", "exec"), env)  # noqa: S102
    env["apply_trace"](sch)
    return sch.mod[func]


def assert_way(program, target, answer: PathAnswer, func: str) -> None:
    """The way replays to the target on TVM alone, and step by step through Session.apply."""
    assert answer.reached, answer.why
    goal = _target_func(target, func)
    assert _same(_tvm_replay(program, func, answer.trace), goal)
    s = Session(program)
    for step in answer.steps:
        args, kwargs = step.call()
        s.apply(step.primitive, *args, **kwargs)
    assert _same(s.module[func], goal)


def reach_corpus_entry(entry_id: str, *, step: int | None = None) -> tuple[dict, Any, PathAnswer]:
    """A corpus schedule's target reached from its program (from the ``step``-th step of its withheld
    trace when given), TVM's replay of the printed way equal to the target: (entry, target, answer)."""
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == entry_id)
    func = entry.get("func") or "main"
    target = path_pairs.tvm_target(entry)
    if step is None:
        answer = Session(entry["module"], func).path_to(target)
    else:
        s = Session.from_trace(entry["module"], entry["json"], func)
        answer = s.path_to(target, step=s.path()[step])
    assert answer.reached, answer.why
    assert _same(_tvm_replay(entry["module"], func, answer.trace), target[func])
    return entry, target, answer


COURSE = {p.id: p for p in path_pairs.course_pairs()}


@pytest.mark.parametrize(
    "pair_id",
    [
        "course/chapter2_step4",
        "course/exercise3",
        "course/gpu_lab/reference",
        "course/gpu_lab/course_blocking_with_shared",
    ],
)
def test_the_course_pairs_are_reached_and_replay_on_tvm(pair_id):
    pair = COURSE[pair_id]
    s = Session(pair.program, pair.func)
    answer = s.path_to(pair.target)
    assert_way(pair.program, pair.target, answer, s.func_name)
    assert len(answer.steps) <= pair.withheld, (len(answer.steps), pair.withheld)
    assert answer.seconds < 30


def test_a_step_names_its_loops_as_the_script_before_it_and_says_why():
    answer = Session(BMM_RELU).path_to(BMM_RELU_TARGET)
    first = answer.steps[0]
    assert (first.primitive, first.arguments) == ("split", {"loop": "Y/j", "factors": [16, 8]})
    assert first.label == "split(Y/j, factors=[16, 8])"
    assert first.reason == "j runs 16 x 8 in the target: its loops i2_0 (16) and ax0 (8) around block Y_update"
    assert first.call() == ([], {"loop": "Y/j", "factors": [16, 8]})
    reorder = next(s for s in answer.steps if s.primitive == "reorder")
    args, kwargs = reorder.call()
    assert args == reorder.arguments["ordered_loops"] and kwargs == {}
    kinds = [s.primitive for s in answer.steps]
    # TVM refuses parallel after decompose_reduction: the way puts it before
    assert kinds.index("parallel") < kinds.index("decompose_reduction")
    json.dumps(answer.to_json())


def test_hints_alone_reach_exercise_3():
    s = Session(BMM_RELU)
    for _ in range(20):
        hint = s.hint(BMM_RELU_TARGET)
        assert isinstance(hint, Hint)
        if hint.step is None:
            break
        assert hint.sentence.startswith(hint.step.label + ": ")
        args, kwargs = hint.step.call()
        s.apply(hint.step.primitive, *args, **kwargs)
    assert hint.status == "reached" and hint.sentence == "the program is the target"
    assert _same(s.module["bmm_relu"], _target_func(BMM_RELU_TARGET, "bmm_relu"))


def test_after_a_wrong_step_the_way_goes_back_first():
    s = Session(BMM_RELU)
    s.apply("split", "Y/j", factors=[16, 8])
    good = s.current.id
    s.apply("decompose_reduction", "Y", "Y/k")  # the target initialises above k_0, once per j: no way on from here
    answer = s.path_to(BMM_RELU_TARGET)
    assert answer.reached and answer.undo_to == good and answer.start == s.current.id
    hint = s.hint(BMM_RELU_TARGET)
    assert hint.undo_to == good
    assert f"go back to step {good} (split(Y/j, factors=[16, 8]))" in hint.sentence, hint.sentence
    s.goto(good)
    for step in answer.steps:
        args, kwargs = step.call()
        s.apply(step.primitive, *args, **kwargs)
    assert _same(s.module["bmm_relu"], _target_func(BMM_RELU_TARGET, "bmm_relu"))


@pytest.mark.parametrize("pair", path_pairs.unreachable_pairs(), ids=lambda p: p.id)
def test_targets_no_schedule_reaches_are_said_not_reached_in_one_sentence(pair):
    answer = Session(pair.program).path_to(pair.target)
    assert answer.status == "unreached" and not answer.steps and not answer.trace
    assert "\n" not in answer.why
    kinds = ("the target computes something else: ", "the target needs a transformation no primitive makes: ")
    assert answer.why.startswith(kinds), answer.why
    if "computation" in pair.id or "block" in pair.id:
        assert answer.why.startswith(kinds[0]), answer.why
    assert Session(pair.program).hint(pair.target).sentence == answer.why


def test_another_computation_names_the_block_and_the_expression():
    target = BMM_RELU_TARGET.replace("T.max(", "T.min(")
    why = Session(BMM_RELU).path_to(target).why
    assert re.search(r"block C computes C\[.*T\.min\(.* in the target but .*T\.max\(", why), why


def test_block_names_that_differ_give_equal_up_to_block_names():
    target = BMM_RELU_TARGET.replace('"Y_init"', '"init"').replace('"Y_update"', '"update"')
    answer = Session(BMM_RELU).path_to(target)
    assert answer.status == "names" and not answer.reached
    assert answer.renamed == {"init": "Y_init", "update": "Y_update"}
    assert answer.why.startswith("equal up to block names")
    assert len(answer.steps) == 9 and answer.trace


def test_a_target_already_reached_has_no_steps():
    s = Session(MM_RELU)
    answer = s.path_to(MM_RELU)
    assert answer.reached and answer.steps == () and s.hint(MM_RELU).step is None


def test_the_target_may_be_a_trace_of_the_program_a_module_or_another_session():
    trace = 'b0 = sch.get_sblock(name="Y", func_name="mm_relu")\nl1, l2, l3 = sch.get_loops(block=b0)\nsch.parallel(loop=l1)\n'
    s = Session(MM_RELU)
    by_trace = s.path_to(trace)
    assert by_trace.reached and [x.label for x in by_trace.steps] == ["parallel(Y/i)"]
    other = Session(MM_RELU)
    other.apply("vectorize", "C/j")
    assert s.path_to(other).reached
    assert s.path_to(other.module).reached


def test_the_way_from_the_middle_of_a_corpus_schedule():
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == "GMM/cuda/sketch0")
    target = path_pairs.tvm_target(entry)
    s = Session.from_trace(entry["module"], entry["json"], "main")
    steps = s.path()[1:]
    for sid in steps[:: max(1, len(steps) // 5)]:
        answer = s.path_to(target, step=sid)
        assert answer.reached and answer.undo_to is None, (sid, answer.why)
        assert _same(_tvm_replay(entry["module"], "main", answer.trace), target["main"])


# --- random schedules as targets ---------------------------------------------------------------------


def random_targets_are_reached_or_honestly_not(name, data, seed):
    """A random schedule (the fuzz generator's calls) as the target, from the original program: the way
    is confirmed by TVM's own replay, or the answer says in one sentence why there is none."""
    from hypothesis import strategies as st

    from mlc_lab import ScheduleStepError
    from tests.unit.test_fuzz_session import PROGRAMS, draw_call

    s = Session(PROGRAMS[name], seed=seed)
    sampled: list = []
    for _ in range(data.draw(st.integers(1, 5))):
        prim, args, kwargs = draw_call(data, s, sampled)
        try:
            out = s.apply(prim, *args, **kwargs)
        except ScheduleStepError:
            continue
        if prim == "sample_perfect_tile":
            sampled.extend(out)
    answer = Session(PROGRAMS[name]).path_to(s.module)
    if answer.reached:
        assert _same(_tvm_replay(PROGRAMS[name], s.func_name, answer.trace), s.module[s.func_name])
        assert len(answer.steps) <= len([x for x in s.path() if x]) + 2
    else:
        assert answer.status in ("names", "unreached") and answer.why and "\n" not in answer.why


def _property(examples: int):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from tests.unit.test_fuzz_session import PROGRAMS

    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )(
        given(name=st.sampled_from(sorted(PROGRAMS)), data=st.data(), seed=st.integers(1, 1000))(
            random_targets_are_reached_or_honestly_not
        )
    )


test_random_targets_are_reached_or_honestly_not = _property(8)
test_random_targets_are_reached_or_honestly_not_full = pytest.mark.full(_property(300))


@pytest.mark.parametrize(
    "entry_id",
    [
        "primitive/transform_typed_cast",  # an index map with typed literals: the apply_trace imports T
        "primitive/blockize_bind",
        "primitive/fuse_reduction_epilogue",
        "NRM/llvm/sketch0",  # rfactor over a fused reduction
        "C1D/cuda/sketch0",  # a cache of a buffer whose block is inlined after
        "course/split_predicate",  # a split with padding (the target's block under T.where)
        # rfactor of argmax: let bindings before the stores, two partial buffers from one rfactor
        "tvm-tests/schedule/test_tir_schedule_rfactor.py::test_reduction_rfactor_argmax/192",
        # rfactor of a loop not split: the partial block has no reduction left (no init, no self-read)
        "tvm-tests/schedule/test_tir_schedule_rfactor.py::test_reduction_rfactor_zero_dim/188",
        # dlight's rules first put each block in TVM's normal form (transform_block_layout), then rfactor
        "tvm-tests/dlight/test_gpu_reduction.py::test_decode_gemv_1/424",
        # reindex of a read and of a write
        "tvm-tests/schedule/test_tir_schedule_reindex.py::test_reindex_read_basic[block_obj-buffer_index]/80",
        "tvm-tests/schedule/test_tir_schedule_reindex.py::test_matmul_reindex_write[block_obj-buffer_index]/83",
        # a cache_write of a cache_write; a cache_write whose copy goes back after a block reading the cache
        "tvm-tests/schedule/test_tir_schedule_cache_read_write.py::test_continuous_cache_write[block_obj]/35",
        "tvm-tests/schedule/test_tir_schedule_cache_read_write.py::test_cache_write_location[block_obj]/32",
        # a block no one reads is removed by compute_inline
        "tvm-tests/schedule/test_tir_schedule_compute_inline.py::test_compute_inline_as_dce[block_obj]/65",
        # pad_einsum to constant extents, and to a symbolic one ((n + 31) // 32 * 32)
        "primitive/pad_einsum",
        "tvm-tests/schedule/test_tir_schedule_pad_einsum.py::test_pad_matmul/161",
        # a block's iterators reordered (transform_block_layout) with layouts read by them, and an index
        # map with a literal result (TVM prints T.int32(0) as 0; the apply_trace types it again)
        "primitive/transform_layouts",
        # a loop fused from a symbolic one (v0 = f // n, v1 = f % n): n's piece is outside 1's
        "tvm-tests/dlight/test_gpu_general_reduction.py::test_softmax_1/397",
        # transform_block_layout to a unit iterator typed int64 (T.int64(0), not the inverse's int32 0)
        "tvm-tests/dlight/test_gpu_general_reduction.py::test_softmax_2/398",
        # rfactor over a reduction split by 16 under a predicate on a symbolic extent (i0 * 16 + i1 < n)
        "tvm-tests/dlight/test_gpu_reduction.py::test_reduction_inner_spatial_choose_perfect_factor/435",
        # a fuse of three symbolic loops (lower factors nhead * seqlen, seqlen, 1; int32 variables)
        "tvm-tests/dlight/test_gpu_fallback.py::test_fallback_irregular_spatial/384",
        # an annotation value True (TVM prints it as 1: the apply_trace writes True again)
        "primitive/annotate_kinds",
        # dlight's rmsnorm: every block moved after the first (reverse_compute_at), each owning the loops
        # it shares with those after it
        "tvm-tests/dlight/test_gpu_rmsnorm.py::test_rms_norm_without_casting/440",
        # the start is scheduled already: of the owners that reach the target, the shortest way is said
        # (one reverse_compute_at, not a split and bind of the other block's loops first)
        "tvm-tests/schedule/test_tir_schedule_compute_at.py::test_reverse_compute_at_factorized[block_obj]/56",
        # rfactor whose outermost loop holds several blocks: they keep their own nests
        "tvm-tests/schedule/test_tir_schedule_rfactor.py::test_reduction_rfactor_outermost_loop_multiple_children/189",
        # loops around a block with no iterators, read through the block inside it
        "tvm-tests/schedule/test_tir_schedule_split_fuse.py::test_fuse_with_opaque_block/218",
        # blockize of loops that are the target's already, its unit iterator bound to 0 (int64 extents)
        "tvm-tests/schedule/test_tir_schedule_blockize.py::test_blockize_outer_int64_shape[False]/13",
        # an outer factor larger than the extent needs (1000 x 2 x 3 for 128): TVM pads it, so does the way
        "tvm-tests/schedule/test_tir_schedule_split_fuse.py::test_split_with_predicate/217",
        # a loop bound inside a block that holds its own loops and block
        "tvm-tests/schedule/test_tir_schedule_for_kind.py::test_nested_block_bind/142",
        # a split of a symbolic loop whose inner piece is symbolic: [10, None], TVM infers the rest
        "tvm-tests/schedule/test_tir_schedule_split_fuse.py::test_split_symbolic/223",
        # an iterator offset by a constant that the program has already (vi = 8 + i)
        "tvm-tests/schedule/test_tir_schedule_for_kind.py::test_scatter_parallelize/145",
        # dlight's reduction: a unit loop only add_unit_loop makes (int32 among int64 loops), and an
        # epilogue's unit iterator bound to 0 under a padding split (its loop fused alone, then split)
        "tvm-tests/dlight/test_gpu_reduction.py::test_gemv_output_one_element/438",
        # a fuse of a split's outer piece with a loop that another piece lies before (moved after them)
        "tvm-tests/dlight/test_gpu_reduction.py::test_repeat_transpose_gemv/436",
    ],
)
def test_corpus_schedules_with_their_trace_withheld_are_reached(entry_id):
    entry, _, answer = reach_corpus_entry(entry_id)
    assert len(answer.steps) <= len(path_pairs.transforming(entry["json"]))


def test_a_way_with_a_split_past_its_loop_is_reached_and_applied_while_a_hand_typed_one_is_refused():
    """TVM's CUDA softmax sketch splits a loop of 256 by 512 (one outer iteration, half of the inner
    one skipped by a predicate). The session refuses that split to a person; the way the engine reads
    off the target has it, TVM confirms it, and the session that found the way applies it (the Hint's
    Apply), on that program only."""
    from mlc_lab.errors import SplitPastLoopError
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == "SFM/cuda/sketch1")
    func = entry.get("func") or "main"
    target = path_pairs.tvm_target(entry)
    s = Session(entry["module"], func)
    answer = s.path_to(target)
    assert answer.reached, answer.why
    assert _same(_tvm_replay(entry["module"], func, answer.trace), target[func])
    past = [st for st in answer.steps if st.primitive == "split" and 512 in st.arguments["factors"]]
    assert len(past) == 1
    hand = Session(entry["module"], func)  # no way found here: a person typing the same split
    with pytest.raises(SplitPastLoopError, match="the factor 512 is larger than loop k, which has 256"):
        for step in answer.steps[: answer.steps.index(past[0]) + 1]:
            args, kwargs = step.call()
            hand.apply(step.primitive, *args, **kwargs)
    assert hand.current.label == answer.steps[0].label  # the refused step changed nothing
    for step in answer.steps:
        args, kwargs = step.call()
        s.apply(step.primitive, *args, **kwargs)
    assert _same(s.module[func], target[func])
    s.goto(0)  # the same split on another program than the way's is a person's again: refused
    args, kwargs = past[0].call()
    with pytest.raises(SplitPastLoopError):
        s.apply("split", *args, **kwargs)


def test_a_decomposed_block_gets_the_annotations_of_the_targets_update_block():
    """The target annotates the reduction, then decomposes it: the annotations sit on ``Y_update``
    (the block the program's ``Y`` becomes here once decomposed)."""
    other = Session(MM_RELU)
    other.apply("annotate", "Y", "meta_schedule.tiling_structure", "SSRSRS")
    other.apply("decompose_reduction", "Y", "Y/k")
    answer = Session(MM_RELU).path_to(other)
    assert_way(MM_RELU, other.module, answer, "mm_relu")
    assert answer.steps[0].primitive == "decompose_reduction"
    assert {s.primitive for s in answer.steps[1:]} == {"annotate"}


def test_a_copy_stage_the_engine_cannot_read_is_said_so_not_another_computation():
    from tests.conformance import harness

    # an anchor trace replayed on another workload (inlines first): no sketch of the rule makes it
    entry = next(
        e for e in harness.corpus() if e["id"].endswith("test_meta_schedule_trace_apply.py::test_inline_order/371")
    )
    target = path_pairs.tvm_target(entry)
    answer = Session(entry["module"]).path_to(target)
    assert answer.status == "unreached" and not answer.steps and "\n" not in answer.why
    assert "computes something else" not in answer.why, answer.why
    assert answer.why.startswith("the target has a stage the path engine does not read yet: block "), answer.why
    assert re.search(
        r"copies pad_temp_reindex_shared into pad_temp_reindex_shared_wmma\.matrix_a \(wmma\.matrix_a\)", answer.why
    )


def test_only_a_block_that_moves_one_buffer_into_another_is_a_copy_stage():
    from mlc_lab.tvm.course_programs import MATMUL
    from mlc_lab.tvm.path.ir import read
    from mlc_lab.tvm.program import load

    def block_of(value: str):
        extra = (
            '        D = T.alloc_buffer((128, 128), "float32")\n'
            "        for i2, j2 in T.grid(128, 128):\n"
            '            with T.sblock("D"):\n'
            '                vi, vj = T.axis.remap("SS", [i2, j2])\n'
            f"                D[vi, vj] = {value}\n"
        )
        mod = load(MATMUL.rstrip("\n") + "\n" + extra)
        return read(mod[next(iter(mod.functions)).name_hint]).block("D")

    assert block_of("C[vi, vj]").stage_copy() == ("D", "C")
    assert block_of("C[vj, vi]").stage_copy() == ("D", "C")  # a reindex or transposing stage moves too
    for computed in ("C[vi, vj] * T.float32(2)", "C[vi, vj] + A[vi, vj]", "T.float32(0)"):
        assert block_of(computed).stage_copy() is None, computed
    matmul = read(load(MATMUL)[next(iter(load(MATMUL).functions)).name_hint])
    assert all(b.stage_copy() is None for b in matmul.blocks)  # a reduction computes


@pytest.mark.parametrize(
    ("pair_id", "said"),
    [
        (
            "tvm-tests/dlight/test_gpu_gemv.py::test_blockized_gemv/393",
            "block w_local has 4 iterators here, 3 in the target",  # the copy's reader read as a reindexing one
        ),
        # TVM's withheld trace reaches each of these: not "no primitive makes", not "computes something else"
        # (test_reduction_decompose1/109 and test_reorder_with_partial_affineness/180 are reached now:
        # test_path_rare2.py)
    ],
)
def test_what_the_engine_does_not_follow_yet_is_not_called_another_computation(pair_id, said):
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == pair_id)
    answer = Session(entry["module"]).path_to(path_pairs.tvm_target(entry))
    assert answer.status == "unreached" and "computes something else" not in answer.why, answer.why
    assert answer.why.startswith("the path engine does not follow this change of the target yet: "), answer.why
    assert said in answer.why, answer.why


def test_pieces_of_a_loop_are_ordered_by_their_lower_factors_symbolic_ones_too():
    from tvm import tirx

    from mlc_lab.tvm.path.ir import outer_first

    n = tirx.Var("n", "int64")
    assert outer_first([(n, 32), (1, n)]) == [0, 1]
    assert outer_first([(1, n), (n, 32)]) == [1, 0]
    assert outer_first([(1, 8), (128, 4), (8, 16)]) == [1, 2, 0]
    assert outer_first([(n * 4, 2), (1, 4), (4, n)]) == [0, 2, 1]
    assert outer_first([(2, 8), (1, 4)]) is None  # 4 * 1 is not 2: no chain
    h, s = tirx.Var("h", "int32"), tirx.Var("s", "int32")
    assert outer_first([(s, h), (h * s, 7), (1, s)]) == [1, 0, 2]  # s * h is h * s


def _scheduled(program, func: str, fn):
    """The program scheduled by TVM itself (``fn(sch)``): a target the withheld trace reaches."""
    from tvm import s_tir

    from mlc_lab.tvm.program import load

    sch = s_tir.Schedule(load(program), debug_mask="none")
    sch.work_on(func)
    fn(sch)
    return sch.mod


@pytest.mark.parametrize(
    "change, primitive",
    [
        (lambda sch: sch.unsafe_set_dtype(sch.get_sblock("Y"), 0, "float16"), "unsafe_set_dtype"),
        (lambda sch: sch.loop_partition(sch.get_loops(sch.get_sblock("C"))[0], [32, None]), "loop_partition"),
    ],
)
def test_a_target_a_type_or_partition_primitive_makes_is_reached_and_another_operation_is_not(change, primitive):
    """A target a primitive makes (a buffer's type, a loop partitioned) is reached by that primitive;
    another operation stays another computation."""
    target = _scheduled(MM_RELU, "mm_relu", change)
    answer = Session(MM_RELU).path_to(target)
    assert_way(MM_RELU, target, answer, "mm_relu")
    assert [s.primitive for s in answer.steps] == [primitive]
    other = MM_RELU.replace("T.max(Y[vi, vj], T.float32(0))", "T.min(Y[vi, vj], T.float32(0))")
    assert other != MM_RELU
    assert Session(MM_RELU).path_to(other).why.startswith("the target computes something else: block C computes")


def test_a_region_the_target_states_is_reached_by_annotate_buffer_access_as_lambda_text():
    """The target states the region block C reads of Y (``annotate_buffer_access``): the way has that
    step, its ranges a lambda's text that Session.apply reads with the trace's safe parser."""
    target = _scheduled(
        MM_RELU,
        "mm_relu",
        lambda sch: sch.annotate_buffer_access(sch.get_sblock("C"), 0, "read", lambda vi, vj: ((vi, vi + 2), vj)),
    )
    answer = Session(MM_RELU).path_to(target)
    assert_way(MM_RELU, target, answer, "mm_relu")
    (step,) = answer.steps
    assert step.primitive == "annotate_buffer_access" and step.arguments["buf_type"] == "read"
    assert isinstance(step.arguments["gen_new_ranges"], str) and step.arguments["gen_new_ranges"].startswith("lambda")
    json.dumps(answer.cli_json())  # plain data all the way


@pytest.mark.parametrize(
    "entry_id",
    [
        # cache_index: two index blocks, read only inside the indices of another load
        "tvm-tests/schedule/test_tir_schedule_cache_index.py::test_basic_cache_index/15",
        # rolling_buffer after compute_at: the folded buffer is no transform_layout, its loops are compute_at's
        "tvm-tests/schedule/test_tir_schedule_rolling_buffer.py::test_1d_rolling_buffer/197",
    ],
)
def test_cache_index_and_rolling_buffer_ways_are_taken_step_by_step_by_the_session(entry_id):
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == entry_id)
    target = path_pairs.tvm_target(entry)
    answer = Session(entry["module"]).path_to(target)
    assert_way(entry["module"], target, answer, "main")
    assert {"cache_index", "rolling_buffer"} & {s.primitive for s in answer.steps}


def test_from_the_middle_of_a_dlight_reduction_the_way_is_an_answer_not_a_crash():
    """From the 7th step of dlight's norm schedule the engine's normal-form search could end before it
    made its start, and ``path_to`` raised AttributeError; it now answers, and the way it claims
    (back to an earlier step, then on) is the whole schedule TVM replays to the target."""
    reach_corpus_entry("dlight/Reduction/norm/0", step=7)


INLINED_AFTER_LAYOUT = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 32), "float32"), C: T.Buffer((16, 32), "float32")):
    B = T.sblock_alloc_buffer((16, 32))
    for i, j in T.grid(16, 32):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
    for i, j in T.grid(16, 32):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1.0)
"""


def test_from_a_step_whose_trace_touched_a_block_now_gone_the_way_goes_back():
    """The normal-form search read every ``transform_block_layout`` of the start's trace, its own steps
    included, and asked TVM for a block an inline had removed ("The block no longer exists"): it reads
    only what the normal form adds. From the inlined step the target (B kept) is reached by going back."""
    from tvm import s_tir

    from mlc_lab.tvm.program import load

    s = Session(INLINED_AFTER_LAYOUT)
    s.apply("transform_block_layout", "B", lambda i, j: (j, i))
    s.apply("compute_inline", "B")
    sch = s_tir.Schedule(load(INLINED_AFTER_LAYOUT))
    sch.split(sch.get_loops(sch.get_sblock("C"))[1], [None, 8])
    answer = s.path_to(sch.mod)
    assert answer.reached and answer.undo_to is not None, answer.why
    assert _same(_tvm_replay(INLINED_AFTER_LAYOUT, "main", answer.trace), sch.mod["main"])
