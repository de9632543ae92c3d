"""The way from the middle of a schedule (issue 33, item 6): from a step the withheld trace passes
through, the target is reached from that step itself, not after going back, and the way claimed is
the whole schedule TVM replays to the target (TVM as the oracle)."""

from __future__ import annotations

from tvm import s_tir

from mlc_lab import Session
from mlc_lab.tvm.program import load
from tests.conformance import harness, path_pairs
from tests.unit.test_path import _same, _tvm_replay

COPY = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((64, 32), "float32"), B: T.Buffer((64, 32), "float32")):
    for i, j in T.grid(64, 32):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
"""


def _scheduled(*kinds: str):
    sch = s_tir.Schedule(load(COPY))
    i, _ = sch.get_loops(sch.get_sblock("B"))
    for kind in kinds:
        if kind == "unroll":
            sch.unroll(i)
        else:
            sch.bind(i, kind)
    return sch.mod


def test_a_loop_bound_here_is_unrolled_or_bound_again_as_the_target_has_it():
    """TVM re-marks a bound loop (unroll after bind, bind after bind): the way from the bound step is
    that one step, not a way back to the original program."""
    for second in ("unroll", "threadIdx.x"):
        s = Session(COPY)
        s.apply("bind", "i", thread_axis="blockIdx.x")
        target = _scheduled("blockIdx.x", second)
        answer = s.path_to(target)
        assert answer.reached and answer.undo_to is None, answer.why
        assert [st.primitive for st in answer.steps] == ["unroll" if second == "unroll" else "bind"]
        assert _same(_tvm_replay(COPY, "main", answer.trace), target["main"])


def test_a_bound_loop_the_target_runs_serially_goes_back_first():
    """No primitive makes a bound loop serial again: the way goes back to the original program."""
    s = Session(COPY)
    s.apply("bind", "i", thread_axis="blockIdx.x")
    s.apply("unroll", "i")  # unroll after bind: i is unrolled, no longer bound
    answer = s.path_to(_scheduled("threadIdx.x"))
    assert answer.reached and answer.undo_to is None, answer.why  # an unrolled loop is bound again
    answer = s.path_to(load(COPY))
    assert answer.reached and answer.undo_to == 0 and not answer.steps, answer.why


def test_from_a_step_the_way_from_the_original_program_passes_through_the_rest_of_it_is_the_way():
    """From the first loop_partition of a TVM test schedule the engine reads no way off the target
    (the pieces it partitions further); the way from the original program passes through that step's
    program, so its rest is the way from there: reached without going back, replayed by TVM."""
    entry = next(e for e in harness.corpus() if e["id"].endswith("::test_loop_partition/164"))
    func = entry.get("func") or "main"
    target = path_pairs.tvm_target(entry)
    s = Session.from_trace(entry["module"], entry["json"], func)
    middle = s.path()[1]
    answer = s.path_to(target, step=middle)
    assert answer.reached and answer.undo_to is None, answer.why
    assert len(answer.steps) == 1 and answer.steps[0].primitive == "loop_partition"
    assert _same(_tvm_replay(entry["module"], func, answer.trace), target[func])
    hint = s.hint(target, step=middle)
    assert hint.step is not None and hint.step.primitive == "loop_partition" and "go back" not in hint.sentence


def test_a_region_stated_here_is_stated_again_where_the_target_states_another():
    """TVM's test annotates one buffer's region twice: from the first annotation the way is the
    second (annotate_buffer_access overrides it), not a way back to the original program."""
    entry = next(e for e in harness.corpus() if e["id"].endswith("::test_double_annotate_buffer_access_read/5"))
    func = entry.get("func") or "main"
    target = path_pairs.tvm_target(entry)
    s = Session.from_trace(entry["module"], entry["json"], func)
    answer = s.path_to(target, step=s.path()[1])
    assert answer.reached and answer.undo_to is None, answer.why
    assert [st.primitive for st in answer.steps] == ["annotate_buffer_access"]
    assert _same(_tvm_replay(entry["module"], func, answer.trace), target[func])
    assert not s.path_to(target, step=s.path()[2]).steps  # stated as the target states it: nothing to do


UNIT_ROW = """
# from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def main(A: T.Buffer((1, 64), "float32"), C: T.Buffer((1, 64), "float32")):
    B = T.sblock_alloc_buffer((1, 64), "float32")
    for i, j in T.grid(1, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2.0)
    for i, j in T.grid(1, 64):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1.0)
"""


def test_the_normal_form_search_reads_only_its_own_layout_steps_not_the_starts_history():
    """A start whose history transforms a block's layout and then inlines the block (meta_schedule's
    tensor-core middles): the normal-form search looked that block up and TVM raised "The block no
    longer exists"; the answer is now a sentence."""
    s = Session(UNIT_ROW)
    s.apply("transform_block_layout", "B", index_map=lambda vi, vj: (vj, vi))
    s.apply("compute_inline", "B")
    answer = s.path_to(UNIT_ROW.replace("T.float32(1.0)", "T.float32(3.0)"))
    assert answer.status == "unreached" and answer.why.startswith("the target computes something else"), answer.why


def test_an_axis_aligned_here_is_aligned_again_as_the_target_aligns_it():
    """storage_align on a (buffer, axis) aligned already updates its entry (TVM's test does it twice):
    from the first alignment the way is the second, not "an alignment cannot be taken back"."""
    entry = next(e for e in harness.corpus() if e["id"].endswith("::test_storage_align_update/226"))
    func = entry.get("func") or "main"
    target = path_pairs.tvm_target(entry)
    s = Session.from_trace(entry["module"], entry["json"], func)
    answer = s.path_to(target, step=s.path()[1])
    assert answer.reached and answer.undo_to is None, answer.why
    assert [(st.primitive, st.arguments["offset"]) for st in answer.steps] == [("storage_align", 127)]
    assert _same(_tvm_replay(entry["module"], func, answer.trace), target[func])
