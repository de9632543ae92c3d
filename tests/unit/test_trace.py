"""Traces: every primitive round-trips (trace -> text/JSON -> replay -> equal program); hostile
traces are refused without running anything; edited traces fail at their line."""

from __future__ import annotations

import json

import pytest

from mlc_lab import Session, TraceParseError
from mlc_lab.tvm.program import structural_equal
from tests.fixtures.programs import CONV, GPU_TWO_BLOCKS, MATMUL, MM_RELU, TWO_STAGE

# (program, [(primitive, args, kwargs), ...]) for every primitive the course uses.
SCENARIOS = {
    "split": (MATMUL, [("split", ("i",), {"factors": [None, 8]})]),
    "split_predicate": (MATMUL, [("split", ("j",), {"factors": [None, 3]})]),
    "reorder": (MATMUL, [("split", ("j",), {"factors": [None, 4]}), ("reorder", ("i", "j_0", "k", "j_1"), {})]),
    "fuse": (MATMUL, [("fuse", ("i", "j"), {})]),
    "parallel": (MATMUL, [("parallel", ("i",), {})]),
    "vectorize": (MATMUL, [("split", ("j",), {"factors": [None, 8]}), ("vectorize", ("j_1",), {})]),
    "unroll": (MATMUL, [("unroll", ("k",), {})]),
    "bind": (
        TWO_STAGE,
        [
            ("split", ("C/i",), {"factors": [None, 128]}),
            ("bind", ("i_0", "blockIdx.x"), {}),
            ("bind", ("i_1", "threadIdx.x"), {}),
        ],
    ),
    "compute_at": (TWO_STAGE, [("split", ("C/i",), {"factors": [None, 64]}), ("compute_at", ("D", "i_0"), {})]),
    "reverse_compute_at": (
        MM_RELU,
        [("split", ("Y/j",), {"factors": [None, 4]}), ("reverse_compute_at", ("C", "j_0"), {})],
    ),
    "cache_read": (MATMUL, [("cache_read", ("C", "A", "shared"), {})]),
    "cache_write": (MATMUL, [("cache_write", ("C", 0, "local"), {}), ("reverse_compute_at", ("C_local", "i"), {})]),
    "decompose_reduction": (MATMUL, [("decompose_reduction", ("C", "k"), {})]),
    "compute_inline": (TWO_STAGE, [("compute_inline", ("D",), {})]),
    "reverse_compute_inline": (TWO_STAGE, [("reverse_compute_inline", ("C",), {})]),
    "rfactor": (MATMUL, [("split", ("k",), {"factors": [None, 4]}), ("rfactor", ("k_1", 0), {})]),
    "blockize": (
        MATMUL,
        [
            ("split", ("i",), {"factors": [None, 16]}),
            ("split", ("j",), {"factors": [None, 16]}),
            ("reorder", ("i_0", "j_0", "i_1", "j_1"), {}),
            ("blockize", ("i_1",), {}),
        ],
    ),
    "annotate": (
        MATMUL,
        [
            ("annotate", ("i", "meta_schedule.tiling_structure", "hello"), {}),
            ("annotate", ("C", "pragma_auto_unroll_max_step", 3), {}),
        ],
    ),
    "set_scope": (MM_RELU, [("set_scope", ("Y", 0, "shared"), {})]),
    "storage_align": (MM_RELU, [("storage_align", ("Y", 0), {"axis": 0, "factor": 128, "offset": 1})]),
    "transform_layout": (MM_RELU, [("transform_layout", ("Y", ("write", 0), lambda i, j: (j // 32, i, j % 32)), {})]),
    "sample_perfect_tile": (MATMUL, [("sample_perfect_tile", ("j",), {"n": 2}), ("split", ("j",), {"factors": "$0"})]),
    "sample_categorical": (
        MATMUL,
        [
            ("sample_categorical", (), {"candidates": [0, 16, 64], "probs": [0.3, 0.3, 0.4]}),
            ("annotate", ("C", "meta_schedule.unroll_explicit", "$0"), {}),
        ],
    ),
    "conv_tiles": (CONV, [("split", ("i",), {"factors": [None, 2]}), ("fuse", ("b", "k"), {})]),
    "gpu_program": (GPU_TWO_BLOCKS, [("compute_inline", ("D",), {})]),
}


def run_scenario(name: str, seed: int = 11) -> Session:
    prog, calls = SCENARIOS[name]
    s = Session(prog, seed=seed)
    last = None
    for prim, args, kwargs in calls:
        kwargs = {k: (last if v == "$0" else v) for k, v in kwargs.items()}
        args = tuple(last if a == "$0" else a for a in args)
        last = s.apply(prim, *args, **kwargs)
    return s


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_trace_round_trips_through_text_and_json(name):
    s = run_scenario(name)
    prog = SCENARIOS[name][0]
    from_text = Session.from_trace(prog, s.trace)
    assert structural_equal(from_text.module, s.module)
    as_json = json.loads(json.dumps(s.trace_json))
    from_json = Session.from_trace(prog, as_json)
    assert structural_equal(from_json.module, s.module)
    assert from_json.trace == s.trace
    from_json_text = Session.from_trace(prog, json.dumps(s.trace_json))
    assert structural_equal(from_json_text.module, s.module)


def test_replayed_trace_becomes_undoable_steps():
    s = run_scenario("reorder")
    t = Session.from_trace(MATMUL, s.trace)
    assert [st.primitive for st in t.steps] == [None, "split", "reorder"]
    t.undo()
    assert structural_equal(t.module, Session(MATMUL).module) is False
    assert "T.grid(128, 32, 4, 128)" in t.script


def test_replay_in_a_session_is_a_new_branch_from_the_original():
    s = run_scenario("vectorize")
    trace = s.trace
    s.replay(trace.replace("factors=[None, 8]", "factors=[None, 16]"))
    assert "T.vectorized(16)" in s.script
    assert s.steps[0].children == [1, 3]


def test_a_trace_replays_into_a_module_without_a_session(tmp_path):
    from mlc_lab.tvm.state_trace import replayed_module

    s = run_scenario("reorder")
    assert structural_equal(replayed_module(MATMUL, s.trace), s.module)
    assert structural_equal(replayed_module(MATMUL, s.trace_json), s.module)
    looked_up = 'b0 = sch.get_sblock(name="C", func_name="main")'
    assert structural_equal(replayed_module(MATMUL, looked_up), Session(MATMUL).module)  # nothing but look-ups
    bad = tmp_path / "bad.trace"
    bad.write_text(s.trace.replace("sch.reorder(l6, l7, l9, l8)", "sch.reorder(l6, l7, l99, l8)"))
    with pytest.raises(TraceParseError, match="line 7: `l99` is not defined") as info:
        replayed_module(MATMUL, bad)
    assert str(info.value).startswith(str(bad))


def test_copy_as_python_is_an_equivalent_schedule_function():
    s = run_scenario("rfactor")
    code = s.trace_python
    assert code.startswith("from tvm import s_tir") and "def schedule(sch: s_tir.Schedule)" in code
    body = code.split("def schedule", 1)[1]
    t = Session.from_trace(MATMUL, "def schedule" + body)
    assert structural_equal(t.module, s.module)


def test_user_schedule_function_is_recorded_as_steps():
    s = Session(MM_RELU)

    def course_schedule(sch):
        block_y = sch.get_sblock("Y", func_name="mm_relu")
        i, j, k = sch.get_loops(block_y)
        j0, j1 = sch.split(j, factors=[None, 4])
        sch.reorder(j0, k, j1)
        sch.reverse_compute_at(sch.get_sblock("C", func_name="mm_relu"), j0)

    s.run(course_schedule)
    assert [st.primitive for st in s.steps] == [None, "split", "reorder", "reverse_compute_at"]
    assert s.script.strip() == open("tests/golden/mm_relu_step3.py").read().strip()
    s.undo()
    assert "for ax0" not in s.script


# --- hostile and broken traces -------------------------------------------------------------------

HOSTILE = [
    ("__import__('os').system('touch /tmp/mlc_lab_pwned')", 1, "only methods of `sch`"),
    ("sch.split(loop=__import__('os'), factors=[1])", 1, "not allowed in a trace"),
    ("import os\nsch.parallel(loop=l1)", 1, "not an import"),
    ("b0 = sch.get_sblock(name='C', func_name='main')\nsch.__class__.__init__(b0)", 2, "only methods of `sch`"),
    ("sch.__init__(None)", 1, "`__init__` is not a schedule primitive"),
    ("b0 = sch.get_sblock(name='C', func_name='main')\nb0.__dict__", 2, "each statement"),
    ("sch.mod.__class__", 1, "each statement"),
    ("open('/etc/passwd').read()", 1, "only methods of `sch`"),
    ("x = [c for c in ().__class__.__base__.__subclasses__()]", 1, "each statement of a trace must be a call"),
    (
        "b0 = sch.get_sblock(name='C')\nsch.annotate(block_or_loop=b0, ann_key='k', ann_val=eval('1'))",
        2,
        "not allowed in a trace",
    ),
    ("def apply_trace(sch):\n    exec('print(1)')", 2, "only methods of `sch`"),
    ("@decorator\ndef apply_trace(sch):\n    pass", 2, "decorators"),
    (
        "b0 = sch.get_sblock(name='C')\nsch.transform_layout(block=b0, buffer=('write', 0), "
        "index_map=lambda i: __import__('os'))",
        2,
        "not allowed in an index map",
    ),
    ("sch.split(loop=l9, factors=[None, 4])", 1, "`l9` is not defined"),
    ("for i in range(3):\n    sch.parallel(loop=l1)", 1, "not a for loop"),
    ("sch.split(*args)", 1, "`*args`"),
    ("sch.split(**kw)", 1, "`**kwargs`"),
    ("lambda: 0", 1, "each statement"),
]


@pytest.mark.parametrize("text, line, message", HOSTILE)
def test_hostile_traces_are_refused_with_their_line_and_never_run(text, line, message, tmp_path):
    s = Session(MATMUL)
    with pytest.raises(TraceParseError) as info:
        s.replay(text)
    assert info.value.line == line
    assert message in str(info.value)
    assert len(s.steps) == 1
    import os

    assert not os.path.exists("/tmp/mlc_lab_pwned")


def test_a_trace_that_fails_to_apply_names_its_line_and_changes_nothing():
    s = run_scenario("vectorize")
    lines = s.trace.splitlines()
    assert lines[-1].startswith("  sch.vectorize(loop=")
    lines[-1] = "  sch.vectorize(loop=l9)"  # k, the reduction loop
    text = "\n".join(lines)
    before = len(s.steps)
    with pytest.raises(TraceParseError) as info:
        s.replay(text)
    assert info.value.line == len(lines)
    assert "reduction loop" in str(info.value)
    assert len(s.steps) == before


@pytest.mark.parametrize(
    "data, message",
    [
        ("[1, 2", "not valid JSON"),
        ('{"a": 1}', "list of two lists"),
        ('[[["Split", [], []]], []]', "instruction 0"),
        ('[[["__import__", [], [], []]], []]', "instruction 0 has a bad kind"),
        ('[[["GetSBlock", [], ["C", "main"], ["b0"]]], [[5, 1]]]', "bad decision"),
        ('[[["NoSuchKind", [], [], []]], []]', "does not replay"),
    ],
)
def test_broken_json_traces(data, message):
    with pytest.raises(TraceParseError, match=message):
        Session.from_trace(MATMUL, data)


def test_legacy_spelling_in_traces_is_accepted():
    legacy = """
# from tvm import tir
def apply_trace(sch: tir.Schedule) -> None:
  b0 = sch.get_block(name="C", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True)
  sch.reorder(l1, l4, l3, l5)
  b6 = sch.decompose_reduction(block=b0, loop=l3)
"""
    s = Session.from_trace(MATMUL, legacy)
    assert 'T.sblock("C_init")' in s.script and "for k, j_1 in T.grid(128, 4):" in s.script


def test_a_tuning_trace_of_main_replays_on_the_named_function():
    # meta_schedule tunes the function as "main"; its traces name that.
    s = Session(MM_RELU)
    s.apply("split", "Y/j", factors=[None, 4])
    tuned = s.trace.replace('func_name="mm_relu"', 'func_name="main"')
    assert structural_equal(Session.from_trace(MM_RELU, tuned).module, s.module)
