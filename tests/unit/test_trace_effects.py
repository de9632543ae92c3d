"""Expressions in traces read by what they are (mlc_lab.tvm.trace_effects), the same in both channels:
every refused node type in every slot it can hide in is refused with its line or instruction and the
node named; TVM's JSON graph is judged before TVM reads it; what TVM's own rules write replays; deep,
huge and malformed graphs are refusals, never a crash; planted into corpus traces at random, every
hostile node is found."""

from __future__ import annotations

import ast
import json
import random
import re

import pytest
import tvm
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tvm import s_tir, tirx
from tvm.tirx.analysis import undefined_vars

from mlc_lab import Session
from mlc_lab.errors import TraceParseError
from mlc_lab.tvm import trace_effects, trace_io
from mlc_lab.tvm.program import load, structural_equal
from mlc_lab.tvm.schedule import to_plain
from tests.conformance import harness
from tests.fixtures import hostile_traces as H


def _parse(channel: str, text: str):
    if channel == "text":
        return trace_io.parse_trace_text(text)
    return trace_io.calls_from_json(trace_io.trace_data(text))


# --- every refused node, in every slot, in both channels ------------------------------------------


@pytest.mark.parametrize("channel, slot", [(c, s) for c in ("text", "json") for s in H.SLOTS])
def test_every_hostile_node_in_every_slot_is_refused_with_its_place_and_the_node_named(channel, slot):
    wrong = []
    for _c, _s, name, wrapper in [c for c in H.cases() if c[:2] == (channel, slot)]:
        node = H.NODES[name]
        text, where = (H.text_trace if channel == "text" else H.json_trace)(slot, node, wrapper)
        try:
            _parse(channel, text)
            wrong.append(f"{name} under {wrapper}: accepted")
        except TraceParseError as exc:
            if not H.refusal_pattern(where, node).search(str(exc)):
                wrong.append(f"{name} under {wrapper}: {exc}")
    assert not wrong, "\n".join(wrong)


def test_the_refusal_says_the_slot_the_node_and_what_it_would_do():
    text, _ = H.text_trace("pad value", H.NODES["call_extern"], "if_then_else")
    data, _ = H.json_trace("pad value", H.NODES["call_extern"], "if_then_else")
    for channel, trace, where in (("text", text, "line 3"), ("json", data, "instruction 2 (TransformLayout)")):
        with pytest.raises(TraceParseError) as info:
            _parse(channel, trace)
        assert str(info.value) == f'{where}: the pad value calls call_extern("system"), which calls out of the kernel'


def test_a_hostile_json_graph_is_refused_before_tvm_reads_it(monkeypatch):
    read, original = [], tvm.ir.load_json

    def load_json(text):
        read.append(text)
        return original(text)

    monkeypatch.setattr(tvm.ir, "load_json", load_json)
    for slot in H.SLOTS:
        data, _ = H.json_trace(slot, H.NODES["call_extern"], "Let")
        with pytest.raises(TraceParseError, match="call_extern"):
            _parse("json", data)
    assert read and not any("call_extern" in text for text in read)  # only the harmless maps were read


def test_switched_off_the_check_lets_the_pad_value_through_in_both_channels(monkeypatch):
    """``refuse_effects`` is the one door: with it switched off (as the sandbox's tests do), the
    call_extern pad value reaches the schedule from either channel."""
    monkeypatch.setattr(trace_effects, "refuse_effects", lambda *a, **k: None)
    text, _ = H.text_trace("pad value", H.NODES["call_extern"], "if_then_else")
    data, _ = H.json_trace("pad value", H.NODES["call_extern"], "if_then_else")
    for trace in (text, data):
        session = Session.from_trace(H.PROGRAM, trace)
        assert 'T.call_extern("int32", "system", "touch /tmp/pwned")' in session.script


def test_what_tvm_builds_at_replay_is_judged_again(monkeypatch):
    """A lambda TVM cannot build on the reader's placeholder variables is judged on what TVM builds
    when it calls it, with the same sentence, and the session is not changed."""
    from mlc_lab.tvm import trace_exprs

    monkeypatch.setattr(trace_exprs.IndexLambda, "expressions", lambda self: None)
    text, _ = H.text_trace("pad value", H.NODES["call_extern"], "Cast")
    session = Session(H.PROGRAM)
    with pytest.raises(TraceParseError) as info:
        session.replay(text)
    assert str(info.value) == 'line 3: the pad value calls call_extern("system"), which calls out of the kernel'
    assert len(session.steps) == 1 and "call_extern" not in session.script


# --- what TVM writes is accepted ------------------------------------------------------------------

_ALLOWED = {
    "arithmetic": lambda i, j: (i * 3 + j - 1) // 2 % 5,
    "typed": lambda i, j: tirx.Cast("int32", tirx.Cast("int64", i) + tirx.IntImm("int64", 3)),
    "logic": lambda i, j: tirx.if_then_else(tirx.And(i > 1, tirx.Or(j < 2, tirx.Not(i == j))), i, j),
    "compare": lambda i, j: tirx.if_then_else(tirx.And(i != j, tirx.And(i <= j, i >= 0)), i, j),
    "bits": lambda i, j: (
        tirx.bitwise_and(i, j)
        + tirx.bitwise_or(i, 3)
        + tirx.bitwise_xor(i, j)
        + tirx.shift_left(i, 1)
        + tirx.shift_right(j, 1)
        + tirx.bitwise_not(i)
    ),
    "min_max_trunc": lambda i, j: tirx.min(i, j) + tirx.max(i, 1) + tirx.truncdiv(i, 3) + tirx.truncmod(j, 3),
    "select_likely": lambda i, j: tirx.Select(tirx.likely(i < j), i, j),
    "float_literal": lambda i, j: tirx.Cast("int32", tirx.FloatImm("float32", 1.5)),
}


def _padded(pad):
    mod = load(H.PROGRAM)
    sch = s_tir.Schedule(mod, debug_mask="none")
    sch.transform_layout(sch.get_sblock("B"), ("write", 0), lambda i: [i // 4, i % 4], pad_value=pad)
    return mod, sch


@pytest.mark.parametrize("name", sorted(_ALLOWED))
def test_pad_values_of_every_allowed_node_type_replay_in_both_channels(name):
    mod, sch = _padded(_ALLOWED[name])
    for trace in (str(sch.trace), json.dumps(to_plain(sch.trace.as_json()))):
        assert structural_equal(Session.from_trace(mod, trace).module, sch.mod), (name, trace)


def test_a_let_replays_from_json_and_its_effects_are_judged_like_the_rest():
    t = tirx.Var("t", "int32")
    mod, sch = _padded(lambda i, j: tirx.Let(t, i + 1, t * 2))
    assert structural_equal(Session.from_trace(mod, json.dumps(to_plain(sch.trace.as_json()))).module, sch.mod)


@pytest.mark.parametrize(
    "key, value",
    [
        ("pragma_vectorize", True),  # dlight's GEMV
        ("tirx.manifest_shared_memory_local_stage", 1),  # meta_schedule's tensor-core sketches, dlight's tensorize
        ("meta_schedule.auto_tensorize", ""),
        ("test1", {"a": [1, 2.5], "b": "x"}),  # TVM's own schedule tests
        ("pragma_debug_skip_region", 1),
    ],
)
def test_annotations_tvm_writes_replay_in_both_channels(key, value):
    mod = load(H.PROGRAM)
    sch = s_tir.Schedule(mod, debug_mask="none")
    sch.annotate(sch.get_loops(sch.get_sblock("B"))[0], key, value)
    printed_keeps_it = not isinstance(value, (bool, dict))  # TVM's printer writes True as 1, dicts unquoted
    forms = [json.dumps(to_plain(sch.trace.as_json()))] + ([str(sch.trace)] if printed_keeps_it else [])
    for trace in forms:
        assert structural_equal(Session.from_trace(mod, trace).module, sch.mod), (key, trace)


@pytest.mark.parametrize("key", ["pragma_import_llvm", "pragma_import_c"])
def test_the_keys_tvm_reads_as_code_are_refused_whatever_the_value(key):
    for value in ("", "x.ll", 1):
        text = f"b0 = sch.get_sblock(name='B')\nsch.annotate(b0, {key!r}, {value!r})\n"
        with pytest.raises(TraceParseError, match=rf"^line 2: the annotation '{key}' is refused: it puts"):
            _parse("text", text)


# --- graphs that are not what TVM writes ----------------------------------------------------------


def _graph_trace(graph: dict | str) -> str:
    text = graph if isinstance(graph, str) else json.dumps(graph)
    i = tirx.Var("i", "int32")
    same = tvm.ir.save_json(tirx.IndexMap([i], [i], None))
    insts = [["GetSBlock", [], ["B", "main"], ["b0"]], ["TransformLayout", ["b0", same], [0, 1, text, 0], []]]
    return json.dumps([insts, []])


def _pad_graph() -> dict:
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    return json.loads(tvm.ir.save_json(tirx.IndexMap([i, j], [i + j], None)))


def _chain(depth: int) -> dict:
    """A pad value ``i + 1 + 1 + ... + 1``, ``depth`` additions deep, written as TVM writes graphs."""
    nodes = [
        {"type": "None"},
        {"type": "ir.PrimType", "data": {"span": 0, "dtype": "int32"}},
        {"type": "ffi.String", "data": "i"},
        {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 2}},
        {"type": "int", "data": 1},
        {"type": "ir.IntImm", "data": {"span": 0, "ty": 1, "value": 4}},
    ]
    last = 3
    for _ in range(depth):
        nodes.append({"type": "prim.Add", "data": {"span": 0, "ty": 1, "a": last, "b": 5}})
        last = len(nodes) - 1
    nodes += [{"type": "ffi.Array", "data": [3]}, {"type": "ffi.Array", "data": [last]}]
    nodes.append(
        {
            "type": "tirx.IndexMap",
            "data": {"initial_indices": last + 1, "final_indices": last + 2, "inverse_index_map": 0},
        }
    )
    return {"root_index": len(nodes) - 1, "nodes": nodes}


def _edit(change) -> dict:
    graph = _pad_graph()
    change(graph)
    return graph


def _set_data(graph: dict, kind: str, key: str, value) -> None:
    next(n for n in graph["nodes"] if n["type"] == kind)["data"][key] = value


@pytest.mark.parametrize(
    "graph, says",
    [
        (_chain(1_500), "nested more than 96 levels deep"),  # TVM's C++ reader would recurse 1500 deep
        (_chain(90), None),  # deep but within the limit: read
        ({"root_index": 0, "nodes": [{"type": "None"}] * 5000}, "more than 4096 nodes"),
        (_edit(lambda g: _set_data(g, "prim.Add", "a", len(g["nodes"]) - 1)), "not a node written before it"),
        (_edit(lambda g: g["nodes"][-1]["data"].update(final_indices=len(g["nodes"]) - 1)), "not a node written"),
        (_edit(lambda g: _set_data(g, "prim.Add", "extra", 0)), "does not have the fields TVM writes"),
        (_edit(lambda g: _set_data(g, "ir.PrimType", "dtype", "handle")), "not a scalar type"),
        (_edit(lambda g: _set_data(g, "ir.Var", "span", 1)), "other than a source position in its span"),
        (_edit(lambda g: g.update(extra=1)), "not an object graph as TVM writes one"),
        (_edit(lambda g: g["nodes"].__setitem__(0, {"type": "None", "data": {"x": 1}})), "does not hold what TVM"),
        ("[1, 2", "is not valid JSON"),
        (_edit(lambda g: g["nodes"][-1]["data"].update(inverse_index_map=g["root_index"] - 1)), "inverse map"),
    ],
)
def test_a_graph_that_is_not_what_tvm_writes_is_refused_before_tvm_reads_it(graph, says):
    trace = _graph_trace(graph)
    if says is None:
        assert [c.primitive for c in _parse("json", trace)] == ["get_sblock", "transform_layout"]
        return
    with pytest.raises(TraceParseError, match=re.escape(says)) as info:
        _parse("json", trace)
    assert str(info.value).startswith("instruction 1 (TransformLayout): the pad value ")


def test_tvm_objects_are_judged_too():
    i = tirx.Var("i", "int32")
    bad = tirx.IndexMap([i], [tirx.if_then_else(i > 1, tirx.call_extern("int32", "system", "ls"), 0)], None)
    with pytest.raises(TraceParseError, match=r'^line 7: the pad value calls call_extern\("system"\)'):
        trace_effects.refuse_effects(bad, what="pad value", where=7)
    trace_effects.refuse_effects(tirx.IndexMap([i], [i // 4, i % 4], None), what="index map", where=7)
    trace_effects.refuse_effects([1, "x", {"a": 2.5}, None], what="annotation value", where=7)
    for container in (tvm.runtime.convert([i + 1, bad]), tvm.runtime.convert({"k": bad.final_indices[0]})):
        with pytest.raises(TraceParseError, match="call_extern"):
            trace_effects.refuse_effects(container, what="annotation value", where=7)


def test_a_node_among_many_is_never_taken_for_one_already_seen():
    """TVM's Python wrappers are made anew at each field access; the walk keys nodes by the C object,
    so a wrapper's reused id never hides a node (found once as a flake of the hostile-node test)."""
    i = tirx.Var("i", "int32")
    terms = [tirx.Cast("int32", tirx.Cast("int64", i + k)) * (i % (k + 2)) for k in range(300)]
    first = tirx.Select(i > 1, i, tirx.call_extern("int32", "system", "ls"))  # walked last, after 300 others
    hostile = tirx.IndexMap([i], [first, *terms], None)
    for _ in range(30):
        with pytest.raises(TraceParseError, match="call_extern"):
            trace_effects.refuse_effects(hostile, what="pad value", where=1)


def test_every_operator_judged_by_its_effect_kind_from_tvm():
    """No operator TVM marks with an effect other than pure (or that it does not mark) is allowed."""
    for name in trace_effects.op_names():
        kind = trace_effects._effect_kind(name)
        if name in trace_effects.PURE_OPS:
            assert kind in (0, 1), name
        i = tirx.Var("i", "int32")
        call = tirx.call_intrin("int32", name, i) if name not in trace_effects.CALLS_OUT else None
        if call is None or name in trace_effects.PURE_OPS:
            continue
        with pytest.raises(TraceParseError, match=f"calls {re.escape(name.split('.', 1)[-1])}"):
            trace_effects.refuse_effects(call, what="pad value", where=1)


# --- planted into the corpus's own traces ---------------------------------------------------------

_MAPS = ("TransformLayout", "TransformBlockLayout")


def _plantable(entry: dict) -> bool:
    kinds = {inst[0] for inst in entry["json"][0]}
    return bool(kinds & {*_MAPS, "Annotate", "Split"})


_PLANTABLE = [e for e in harness.corpus() if _plantable(e)]


def _plant_json(entry: dict, node: H.Node, wrapper: str, rng: random.Random) -> tuple[str, str]:
    """The entry's JSON trace with the hostile node planted at a random place of an index map or pad
    value (in place of one result, or of a variable inside it), an annotation value or a split factor."""
    insts = json.loads(json.dumps(entry["json"][0]))
    spots = [(k, inst) for k, inst in enumerate(insts) if inst[0] in (*_MAPS, "Annotate", "Split")]
    k, inst = rng.choice(spots)
    if inst[0] in _MAPS:
        # TransformLayout: the map is input 1, the pad value attribute 2; TransformBlockLayout: attribute 0
        holders = [(inst[1], 1)] if inst[0] == "TransformLayout" else [(inst[2], 0)]
        if inst[0] == "TransformLayout" and isinstance(inst[2][2], str):
            holders.append((inst[2], 2))
        holder, at = rng.choice(holders)
        imap = tvm.ir.load_json(holder[at])
        initial, finals = list(imap.initial_indices), list(imap.final_indices)
        pick = rng.randrange(len(finals))
        used = [k for k, v in enumerate(initial) if any(x.same_as(v) for x in undefined_vars(finals[pick], []))]
        if used and rng.random() < 0.5:  # in place of a variable, wherever it stands in the result
            var = rng.choice(used)
            planted = [H.expression(node, wrapper, v) if k == var else v for k, v in enumerate(initial)]
            finals[pick] = tirx.IndexMap(initial, [finals[pick]], None).map_indices(planted)[0]
        else:  # in place of the result, which it holds
            finals[pick] = H.expression(node, wrapper, finals[pick])
        holder[at] = H.graph_text(tirx.IndexMap(initial, finals, None), node)
    else:
        pos = 1 if inst[0] == "Annotate" else rng.randrange(1, len(inst[1]))
        inst[1][pos] = H.graph_text(H.expression(node, wrapper, tirx.Var("v0", "int32")), node)
    return json.dumps([insts, entry["json"][1]]), f"instruction {k} ({inst[0]})"


def _plant_text(entry: dict, node: H.Node, wrapper: str, rng: random.Random) -> tuple[str, str] | None:
    lines = entry["text"].splitlines()
    spots = [n for n, ln in enumerate(lines) if "lambda" in ln or ".annotate(" in ln or ".split(" in ln]
    if not spots:
        return None
    n = rng.choice(spots)
    call = ast.parse(lines[n].strip()).body[0]
    if "lambda" in lines[n]:
        lam = rng.choice([x for x in ast.walk(call) if isinstance(x, ast.Lambda)])
        names = [x for x in ast.walk(lam.body) if isinstance(x, ast.Name) and x.id in {a.arg for a in lam.args.args}]
        if not names:
            return None
        target = rng.choice(names)
        replacement = ast.parse(H.expression_text(node, wrapper, target.id), mode="eval").body
        _replace(lam, target, replacement)
    else:
        value = next(kw for kw in ast.walk(call) if isinstance(kw, ast.keyword) and kw.arg in ("ann_val", "factors"))
        if not H.applies("text", "annotation value", name_of(node), wrapper):
            return None  # a bare string there is a plain value
        defined = re.search(r"^\s*(\w+)[\w, ]* = sch\.", entry["text"], re.M)
        text = H.expression_text(node, wrapper, defined.group(1) if defined else "b0")
        value.value = ast.parse(f"[{text}, 4]" if value.arg == "factors" else text, mode="eval").body
    indent = lines[n][: len(lines[n]) - len(lines[n].lstrip())]
    lines[n] = indent + ast.unparse(call)
    return "\n".join(lines) + "\n", f"line {n + 1}"


def name_of(node: H.Node) -> str:
    return next(k for k, v in H.NODES.items() if v is node)


def _replace(tree: ast.AST, target: ast.AST, replacement: ast.expr) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
            elif isinstance(value, list):
                for k, item in enumerate(value):
                    if item is target:
                        value[k] = replacement


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    entry=st.sampled_from(_PLANTABLE),
    name=st.sampled_from(sorted(H.NODES)),
    wrapper=st.sampled_from(sorted(H.WRAPPERS)),
    channel=st.sampled_from(["json", "text"]),
    seed=st.integers(0, 2**16),
)
def test_property_a_hostile_node_planted_in_a_corpus_trace_is_always_refused_and_named(
    entry, name, wrapper, channel, seed
):
    _check_planted(entry, name, wrapper, channel, seed)


def _check_planted(entry: dict, name: str, wrapper: str, channel: str, seed: int) -> None:
    node, rng = H.NODES[name], random.Random(seed)
    if channel == "text":
        assume(entry["text"] is not None)
        planted = _plant_text(entry, node, wrapper, rng)
        assume(planted is not None)
    else:
        try:
            planted = _plant_json(entry, node, wrapper, rng)
        except Exception:  # noqa: BLE001  (TVM will not build this mutant: types it cannot mix, a folded mark)
            assume(False)
    trace, where = planted
    original = entry["text"] if channel == "text" else json.dumps(entry["json"])
    assume(re.search(node.marker, trace) and not re.search(node.marker, original))  # TVM may fold a wrapper away
    with pytest.raises(TraceParseError) as info:
        _parse(channel, trace)
    assert H.refusal_pattern(where, node).search(str(info.value)), str(info.value)


@pytest.mark.full
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    entry=st.sampled_from(_PLANTABLE),
    name=st.sampled_from(sorted(H.NODES)),
    wrapper=st.sampled_from(sorted(H.WRAPPERS)),
    channel=st.sampled_from(["json", "text"]),
    seed=st.integers(0, 2**16),
)
def test_property_1000_planted_mutants_are_refused(entry, name, wrapper, channel, seed):
    _check_planted(entry, name, wrapper, channel, seed)
