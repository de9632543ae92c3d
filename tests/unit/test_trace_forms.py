"""Traces in every form TVM writes them, each cause of issue 13 reproduced: JSON read as data (not
through TVM's printer), index maps with trace values / typed literals / literal results, sampled
compute locations and dynamic tiles, every primitive of Schedule 0.27, Trace objects and tuning
records, and replays that never disturb another step."""

from __future__ import annotations

import json

import pytest
import tvm
from tvm import s_tir

from mlc_lab import MlcLabError, Session, TraceParseError, load
from mlc_lab.tvm import trace_io
from mlc_lab.tvm.primitives import PRIMITIVES
from mlc_lab.tvm.program import structural_equal
from mlc_lab.tvm.schedule import to_plain
from tests.conformance.primitive_schedules import SCHEDULES
from tests.fixtures.programs import MATMUL, MM_RELU


def _scheduled(name: str, seed: int = 7) -> tuple[tvm.IRModule, s_tir.Schedule]:
    mod, fn = SCHEDULES[name]
    sch = s_tir.Schedule(mod, seed=seed, debug_mask="none")
    fn(sch)
    return mod, sch


def _json(sch: s_tir.Schedule) -> list:
    return json.loads(json.dumps(to_plain(sch.trace.as_json())))


def _replays_equal(name: str, forms=("json", "text")) -> None:
    mod, sch = _scheduled(name)
    for form in forms:
        trace = _json(sch) if form == "json" else str(sch.trace)
        replayed = Session.from_trace(mod, trace)
        assert structural_equal(replayed.module, sch.mod), (name, form)


# --- JSON read as JSON -----------------------------------------------------------------------------


def test_json_keeps_a_boolean_annotation_that_the_printer_turns_into_1():
    mod, sch = _scheduled("annotate_kinds")
    assert "ann_val=1" in str(sch.trace)  # TVM's printer loses the bool ...
    replayed = Session.from_trace(mod, _json(sch))  # ... its JSON does not
    assert structural_equal(replayed.module, sch.mod)
    assert '"warp_execution": True' in replayed.script
    assert '"warp_execution": 1' in Session.from_trace(mod, str(sch.trace)).script  # what the printed form gives


def test_json_replays_decompose_padding_which_tvm_cannot_print():
    mod, sch = _scheduled("decompose_padding")
    with pytest.raises(TypeError):
        sch.trace.as_python()  # TVM 0.27's printer fails here; str(trace) is "Trace(<address>)"
    replayed = Session.from_trace(mod, _json(sch))
    assert structural_equal(replayed.module, sch.mod)
    assert [s.primitive for s in replayed.steps[1:]] == ["decompose_padding"]
    # the session prints it all the same (written from the JSON), and that text replays
    assert "b2 = sch.decompose_padding(block=b0, loop=l1)" in replayed.trace
    assert structural_equal(Session.from_trace(mod, replayed.trace).module, sch.mod)


def test_json_of_main_replays_on_a_function_with_another_global_symbol():
    s = Session(MM_RELU)  # the function is called mm_relu
    s.apply("split", "Y/j", factors=[None, 4])
    data = s.trace_json
    as_tuned = json.loads(json.dumps(data).replace('"mm_relu"', '"main"'))
    assert '"main"' in json.dumps(as_tuned)
    replayed = Session.from_trace(MM_RELU, as_tuned)
    assert structural_equal(replayed.module, s.module)


def test_json_calls_are_the_printed_calls():
    _, sch = _scheduled("cache_and_compute_at")
    calls = trace_io.calls_from_json(_json(sch))
    printed = [line.strip() for line in sch.trace.as_python()]
    assert [c.text for c in calls] == printed


# --- index maps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "transform_sampled_var",
        "transform_typed_cast",
        "transform_layouts",
        "transform_pad_value",
        "reindex_cache",
        "annotate_buffer_access",
    ],
)
def test_index_maps_replay_from_json(name):
    _replays_equal(name, forms=("json",))


def test_index_map_with_a_sampled_variable_replays_from_text():
    mod, sch = _scheduled("transform_sampled_var")
    text = str(sch.trace)
    assert "lambda i, k: (i // v4, k, i % v4,)" in text
    # TVM's own exec of this text fails (v4 is a trace value, not a Python name it can see)
    replayed = Session.from_trace(mod, text)
    assert structural_equal(replayed.module, sch.mod)


def test_index_map_with_a_literal_result_replays_from_text():
    # dlight's matmul rule writes `lambda i0, i1: (0, i0, i1)`; TVM's own exec of it fails
    mod, sch = _scheduled("transform_layouts")
    assert "(0, i, j,)" in str(sch.trace)
    assert structural_equal(Session.from_trace(mod, str(sch.trace)).module, sch.mod)


def test_pad_value_lambda_and_typed_literals_replay_from_text():
    mod, sch = _scheduled("transform_pad_value")
    assert "pad_value=lambda a, b, c, d: (T.float32(0.0),)" in str(sch.trace)
    assert structural_equal(Session.from_trace(mod, str(sch.trace)).module, sch.mod)
    s = Session(MATMUL)
    s.replay(
        'b0 = sch.get_sblock(name="C", func_name="main")\n'
        'sch.transform_layout(block=b0, buffer=("write", 0), '
        "index_map=lambda i, j: (i // T.int32(8), j, i % T.int32(8),), pad_value=None)"
    )
    assert "T.Buffer((16, 128, 8)" in s.script


@pytest.mark.parametrize(
    "body, message",
    [
        ("lambda i, j: (i, j, os)", "not allowed in an index map"),
        ("lambda i, j: (i, T.evil(3))", "not allowed in an index map"),
        ("lambda i, j: (i, j.__class__)", "not allowed in an index map"),
        ("lambda i, j: (i, v9)", "not allowed in an index map"),  # v9: not defined by the trace
    ],
)
def test_index_maps_evaluate_nothing_else(body, message):
    s = Session(MATMUL)
    with pytest.raises(TraceParseError, match=message):
        s.replay(
            f'b0 = sch.get_sblock(name="C", func_name="main")\n'
            f'sch.transform_layout(block=b0, buffer=("write", 0), index_map={body})'
        )
    assert len(s.steps) == 1


def test_a_json_index_map_naming_an_undefined_value_is_refused():
    _, sch = _scheduled("transform_sampled_var")
    data = _json(sch)
    del data[0][2]  # the sample_categorical that defines v4
    data[1] = []
    with pytest.raises(TraceParseError, match="v4, which the trace does not define"):
        Session.from_trace(SCHEDULES["transform_sampled_var"][0], data)


# --- sampled decisions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["compute_location_root", "compute_location_inline", "compute_location_loop", "compute_location_sampled"]
)
def test_sampled_compute_locations_replay(name):
    _replays_equal(name)


def test_a_dynamic_perfect_tile_replays_and_lists_its_decision():
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    n = te.var("n")
    mod = tvm.IRModule({"main": te.create_prim_func(te_workload.matmul(n, 64, 64))})
    sch = s_tir.Schedule(mod, seed=3, debug_mask="none")
    i, _, _ = sch.get_loops(sch.get_sblock("C"))
    tiles = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8)
    sch.split(i, factors=tiles)
    assert "decision=[-1," in str(sch.trace)
    for trace in (str(sch.trace), _json(sch)):
        s = Session.from_trace(mod, trace)
        assert structural_equal(s.module, sch.mod)
        assert s.decisions[0]["value"][0] == -1


# --- every primitive -----------------------------------------------------------------------------

# Methods of tvm.s_tir.Schedule that are not schedule primitives recorded in a trace.
_NOT_PRIMITIVES = {
    "copy",
    "get",
    "get_sref",
    "remove_rv",
    "seed",
    "fork_seed",
    "show",
    "work_on",
    "mod",
    "state",
    "trace",
    "func_working_on",
    "can_decompose_padding",
    "id_",
    "is_",
    "same_as",
}


def test_every_primitive_of_the_schedule_is_applicable_and_read_from_json():
    public = {m for m in dir(s_tir.Schedule) if not m.startswith("_") and callable(getattr(s_tir.Schedule, m))}
    public -= {m for m in public if m[0].isupper()} | _NOT_PRIMITIVES
    assert public <= PRIMITIVES, sorted(public - PRIMITIVES)
    json_primitives = {k.primitive for k in trace_io.KINDS.values()}
    assert PRIMITIVES <= json_primitives, sorted(PRIMITIVES - json_primitives)


def test_primitives_apply_by_name_from_python():
    s = Session(SCHEDULES["read_write_at"][0])
    s.apply("read_at", "i", "C", 0, "shared")
    assert 'T.sblock("A_shared")' in s.script
    t = Session(SCHEDULES["unsafe_dtype_iter_order"][0])
    t.apply("unsafe_set_dtype", "B", 0, "float16")
    assert 'T.sblock_alloc_buffer((64, 64), "float16")' in t.script
    assert t.apply("get_output_blocks", "root") == ["C"]


# --- what a user holds in hand -------------------------------------------------------------------


def test_from_trace_accepts_a_trace_object_and_as_json_objects():
    mod, sch = _scheduled("split_tiles")
    for trace in (sch.trace, sch.trace.as_json()):
        s = Session.from_trace(mod, trace)
        assert structural_equal(s.module, sch.mod)


def test_from_trace_accepts_a_tuning_database_record():
    mod, sch = _scheduled("split_tiles")
    record = [0, [_json(sch), [1.5e-05], {"kind": "llvm"}, [["TENSOR", "float32", [64, 64]]]]]
    for text in (json.dumps(record), json.dumps(record[1])):
        s = Session.from_trace(mod, text)
        assert structural_equal(s.module, sch.mod)
    with pytest.raises(TraceParseError, match="whole tuning database .2 records"):
        Session.from_trace(mod, json.dumps(record) + "\n" + json.dumps(record))


def test_an_unknown_object_is_refused_in_plain_words():
    with pytest.raises(TraceParseError, match="a trace is its printed text, its JSON"):
        Session.from_trace(MATMUL, 42)


# --- replays never disturb another step ----------------------------------------------------------


def test_a_json_replay_leaves_every_other_step_working():
    s = Session(MATMUL)
    s.apply("split", "i", factors=[None, 8])
    first = s.current.id
    script, tree = s.script, json.dumps(s.loop_tree())
    other = Session(MATMUL)
    other.apply("fuse", "i", "j")
    s.replay(other.trace_json)
    s.replay(json.dumps(other.trace_json))
    s.goto(first)
    assert s.script == script and json.dumps(s.loop_tree()) == tree
    s.apply("split", "i_1", factors=[2, 4])  # its loops still resolve in TVM
    assert "i_1_0" in s.script


# --- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "trace, message",
    [
        ('[[["Split", ["l9", "None", 4], [1, 0], ["l1", "l2"]]], []]', "instruction 0 .Split.: `l9` is not defined"),
        ('[[["Bind", ["b0"], [], []]], []]', "instruction 0 .Bind.: expected 1 attribute"),
        ('[[["GetSBlock", [], ["Z", "main"], ["b0"]], ["Parallel", ["b0"], [], []]], []]', "instruction 0"),
        ('[[["TransformBlockLayout", ["b0"], ["{\\"root_index\\": 0}"]]], []]', "instruction 0"),
    ],
)
def test_bad_json_fails_with_a_plain_first_line_and_changes_nothing(trace, message):
    s = Session(MATMUL)
    s.apply("split", "i", factors=[None, 8])
    before = (s.current.id, s.script, len(s.steps))
    with pytest.raises(MlcLabError, match=message) as info:
        s.replay(trace)
    first = str(info.value).splitlines()[0]
    assert "Traceback" not in first and len(first) < 300
    assert (s.current.id, s.script, len(s.steps)) == before


def test_run_with_the_courses_get_block_says_what_to_use():
    s = Session(MATMUL)

    def schedule(sch):
        sch.get_block("C")

    with pytest.raises(MlcLabError, match="get_sblock.*mlc_lab.convert") as info:
        s.run(schedule)
    assert not isinstance(info.value.__cause__, AttributeError) or "get_block" in str(info.value)
    assert len(s.steps) == 1


# --- modules TVM prints --------------------------------------------------------------------------


def test_every_module_tvm_prints_loads_symbolic_shapes_included():
    from tvm import te

    n = te.var("n", "int64")
    a = te.placeholder((n, 128), name="A")
    b = te.compute((n, 128), lambda i, j: a[i, j] * 2, name="B")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b])})
    text = mod.script()
    assert 'n = TypeVar("n")' in text  # printed above the module
    loaded = load(text)
    assert "n" in loaded["main"].script()
    m = te.var("m")
    c = te.placeholder((m,), name="C")
    d = te.compute((m,), lambda i: c[i] + 1, name="D")
    assert load(te.create_prim_func([c, d]).script())
