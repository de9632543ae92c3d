"""The trace parser's limits and annotation allowlist (mlc_lab.text.trace_limits): large, deep and
annotated traces are refused with their line and the limit, in bounded time, with no other error."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlc_lab.errors import TraceParseError
from mlc_lab.tvm import trace_io


from mlc_lab.text import trace_limits


def _parse(text: str):
    if trace_io.looks_like_json(text):
        return trace_io.calls_from_json(trace_io.trace_data(text))
    return trace_io.parse_trace_text(text)


def test_a_400_kB_trace_is_refused_before_parsing_with_its_line_and_the_limit():
    text = "b0 = sch.get_sblock(name='gemm', func_name='main')\n" * 8000
    assert len(text) > 400_000
    with pytest.raises(TraceParseError) as info:
        _parse(text)
    line = text.count("\n", 0, trace_limits.MAX_TRACE_BYTES) + 1
    assert str(info.value).startswith(f"line {line}: the trace is {len(text)} bytes")
    assert str(trace_limits.MAX_TRACE_BYTES) in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "x = sch.split(l0, " + "[" * 400 + "]" * 400 + ")\n",
        "[" * 100_000 + "]" * 100_000,
        '[[["Split", [' + "{" * 300 + "}" * 300 + "], [], []]], []]",
    ],
)
def test_nested_brackets_are_refused_at_the_depth_limit(text):
    with pytest.raises(TraceParseError, match=f"nested more than {trace_limits.MAX_NESTING} deep"):
        _parse(text)


def test_brackets_inside_strings_and_comments_do_not_count():
    text = "# " + "(" * 200 + "\nb0 = sch.get_sblock(name='" + "[" * 10 + "x', func_name='main')\n"
    calls = trace_io.parse_trace_text(text)
    assert calls[0].kwargs["name"] == "[" * 10 + "x"


def test_a_long_operator_chain_is_refused_not_a_recursion_error():
    text = "l0 = sch.get_loops(" + "+".join(["1"] * 60_000) + ")\n"
    with pytest.raises(TraceParseError, match="nested too deeply|levels deep"):
        _parse(text)


def test_a_deep_index_map_is_refused_with_its_line():
    text = (
        "b0 = sch.get_sblock(name='gemm')\nsch.transform_layout(b0, ('read', 0), lambda i, j: ("
        + "-" * 300
        + "i, j))\n"
    )
    with pytest.raises(TraceParseError, match=r"^line 2: an expression is nested more than 96"):
        _parse(text)


@pytest.mark.parametrize("key", ["pragma_import_llvm", "pragma_import_c"])
def test_code_splicing_annotations_are_refused_in_text_and_json(key):
    text = f"b0 = sch.get_sblock(name='gemm')\nsch.annotate(b0, {key!r}, 'define void @f() {{ ret void }}')\n"
    with pytest.raises(TraceParseError, match=rf"^line 2: the annotation '{key}' is refused: it puts"):
        _parse(text)
    data = [[["GetSBlock", [], ["gemm", "main"], ["b0"]], ["Annotate", ["b0", '"x"'], [key], []]], []]
    with pytest.raises(TraceParseError, match=rf"instruction 1 \(Annotate\): the annotation '{key}' is refused"):
        _parse(json.dumps(data))


@pytest.mark.parametrize(
    "key",
    ["pragma_debug_skip_region", "pragma_vectorize", "test_annotation", "meta_schedule.auto_tensorize", "my:key-1"],
)
def test_keys_that_put_no_code_into_the_build_are_accepted(key):
    """Annotations are judged by what they do: only the keys TVM reads as code are refused."""
    text = f"b0 = sch.get_sblock(name='gemm')\nsch.annotate(b0, ann_key={key!r}, ann_val=1)\n"
    assert [c.primitive for c in _parse(text)] == ["get_sblock", "annotate"]


@pytest.mark.parametrize("key", ["has space", "x" * 129, ""])
def test_a_key_that_is_not_a_short_printable_name_is_refused(key):
    text = f"b0 = sch.get_sblock(name='gemm')\nsch.annotate(b0, ann_key={key!r}, ann_val=1)\n"
    with pytest.raises(
        TraceParseError, match=r"^line 2: the annotation key .* is refused: a key is a name of at most 128"
    ):
        _parse(text)


def test_the_keys_schedules_use_pass_with_plain_values():
    text = (
        "b0 = sch.get_sblock(name='gemm')\n"
        "v1 = sch.sample_categorical(candidates=[0, 16, 64], probs=[0.3, 0.3, 0.4], decision=1)\n"
        "sch.annotate(block_or_loop=b0, ann_key='meta_schedule.unroll_explicit', ann_val=v1)\n"
        "sch.annotate(b0, 'pragma_auto_unroll_max_step', 64)\n"
        "sch.annotate(b0, 'software_pipeline_stage', [0, 0, 1])\n"
        "sch.annotate(b0, 'meta_schedule.tiling_structure', 'SSSRRSRS')\n"
        "sch.annotate(b0, 'meta_schedule.auto_tensorize', '')\n"
        "sch.annotate(b0, 'pragma_vectorize', True)\n"
        "sch.annotate(b0, 'my_notes', {'a': [1, 2.5, 'x'], 'b': {'c': None}})\n"
        "sch.annotate(b0, 'a_comment', 'define void @f() { ret void }')\n"
    )
    assert [c.primitive for c in _parse(text)].count("annotate") == 8


@pytest.mark.parametrize(
    "value, says",
    [
        ("'x' * 3", 'holds the string "x" inside a computation'),
        ("'" + "a" * 4097 + "'", "at most 4096 characters"),
        ("[[[[[[1]]]]]]", "nest at most 4 deep"),
        ("[0] * 3", "is not allowed in a trace"),
        ("list(range(2000))", "is not allowed in a trace"),
        ("[" + ", ".join(["1"] * 1100) + "]", "at most 1024 values"),
        ("1e400", "finite"),
        ("{1: 2}", "dictionary keys in a trace must be strings"),
    ],
)
def test_annotation_values_other_than_plain_ones_of_reasonable_size_are_refused(value, says):
    text = f"b0 = sch.get_sblock(name='gemm')\nsch.annotate(b0, 'pragma_unroll_explicit', {value})\n"
    with pytest.raises(TraceParseError, match="^line 2: ") as info:
        _parse(text)
    assert says in str(info.value)


def test_a_non_utf8_trace_file_is_told_so_with_the_byte(tmp_path):
    path = tmp_path / "trace.py"
    path.write_bytes(b"b0 = sch.get_sblock(name='g\xe9mm')\n")
    with pytest.raises(TraceParseError, match=r"not UTF-8 text at byte 27$"):
        trace_io.read_trace_source(path)


_PIECES = st.sampled_from(
    ["(", ")", "[", "]", "{", "}", "-", "+", "1", "sch.split(", "lambda i: ", "'", '"', "\n", ",", "#", " "]
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    unit=st.lists(_PIECES, min_size=1, max_size=8).map("".join),
    repeat=st.integers(min_value=1, max_value=60_000),
    prefix=st.sampled_from(["", "l0 = sch.get_loops(", "[[", "x = sch.split(l0, factors=["]),
)
def test_fuzz_large_and_deep_inputs_are_refused_in_bounded_time_with_the_parsers_own_error(unit, repeat, prefix):
    text = prefix + unit * repeat
    started = time.monotonic()
    try:
        _parse(text)
    except TraceParseError:
        pass
    assert time.monotonic() - started < 5.0


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(depth=st.integers(min_value=1, max_value=5000), kind=st.sampled_from(["[]", "{}", "()"]))
def test_fuzz_nesting_never_escapes_as_anything_but_a_refusal(depth, kind):
    text = "l0 = sch.get_loops(" + kind[0] * depth + "1" + kind[1] * depth + ")\n"
    try:
        _parse(text)
    except TraceParseError as exc:
        if depth > trace_limits.MAX_NESTING:
            assert "nested" in str(exc)
