"""What an expression in a trace can do, judged by the node types it is made of.

A trace carries expressions: index maps and pad values (``transform_layout``), the ranges of
``annotate_buffer_access``, and whatever TVM's JSON can hold in an instruction's slot. An expression is
compiled into the kernel, so one that calls ``call_extern("int32", "system", CMD)`` runs a shell
command wherever the kernel runs. Every expression passes through one door, ``refuse_effects``, in
both channels: in a JSON trace its object graph is judged by the node types it lists *before*
``tvm.ir.load_json`` builds anything, and the objects built are judged again; in a printed trace the
``ast`` whitelist of ``trace_exprs`` builds the expression and the same check judges it.

Allowed (``EXPRESSIONS``, ``PURE_OPS``): the map's variables and the trace's sampled values
(``ir.Var`` of a scalar type), literals and typed literals (``ir.IntImm``, ``ir.FloatImm``,
``prim.Cast``), arithmetic, comparisons and logic (``prim.Add`` ... ``prim.FloorMod``, ``prim.Min``,
``prim.Max``, bitwise and shifts, ``prim.EQ`` ... ``prim.GE``, ``prim.And``/``Or``/``Not``),
``prim.Select``, ``prim.Let`` (its parts judged like the rest), and calls of the pure operators TVM's
schedule rules, dlight and meta_schedule write into index maps and predicates (``prim.if_then_else``,
``prim.likely``; TVM's own attribute ``TCallEffectKind`` must also say pure). Everything else is
refused with the node named: ``call_extern``, ``call_pure_extern``, ``call_packed`` and the other
calls out of the kernel (``CALLS_OUT``), LLVM intrinsics by name, any operator TVM marks as having
side effects, a pure operator no schedule writes, a string inside a computation, a ``BufferLoad``
(TVM allows only the transformed buffer there, and a trace cannot name it), vectors, calls of
functions, and any type the table does not list. Depth and size are bounded (``MAX_DEPTH``,
``MAX_NODES``): a deep or huge expression is a refusal, never a ``RecursionError`` or a crash in TVM's
C++ reader (which recurses along the graph's references).
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any, Callable

from mlc_lab.errors import TraceParseError
from mlc_lab.text import trace_limits
from mlc_lab.text.trace_tables import Ref

MAX_DEPTH = trace_limits.MAX_AST_DEPTH  # nodes inside nodes along any path
MAX_NODES = 4096  # nodes of one expression's object graph

_BINARY = (
    "Add Sub Mul Div Mod FloorDiv FloorMod Min Max EQ NE LT LE GT GE And Or BitwiseAnd BitwiseOr BitwiseXor "
    "LShift RShift"
).split()
# Node type (TVM's type key, as the JSON graph lists it) -> the fields that hold sub-expressions.
EXPRESSIONS: dict[str, tuple[str, ...]] = {
    **{f"prim.{name}": ("a", "b") for name in _BINARY},
    "prim.Not": ("a",),
    "prim.BitwiseNot": ("a",),
    "prim.Select": ("condition", "true_value", "false_value"),
    "prim.Cast": ("value",),
    "prim.Let": ("var", "value", "body"),
    "ir.Call": ("args",),
    "ir.Var": (),
    "ir.IntImm": (),
    "ir.FloatImm": (),
}
# The pure operators TVM's schedule rules, dlight and meta_schedule write into index maps and
# predicates (src/s_tir/meta_schedule/schedule_rule/, python/tvm/s_tir/dlight/, the layout
# transformations of src/s_tir/schedule/primitive/layout_transformation.cc).
PURE_OPS = frozenset({"prim.if_then_else", "prim.likely"})
# Calls whose callee the expression itself names: code outside the kernel, or an instruction by name.
CALLS_OUT = {
    "tirx.call_extern": "calls out of the kernel",
    "tirx.call_pure_extern": "calls out of the kernel",
    "tirx.call_ffi_kernel": "calls out of the kernel",
    "tirx.tvm_call_packed": "calls out of the kernel",
    "tirx.tvm_call_cpacked": "calls out of the kernel",
    "tirx.tvm_call_packed_lowered": "calls out of the kernel",
    "tirx.tvm_call_cpacked_lowered": "calls out of the kernel",
    "tirx.tvm_call_trace_packed": "calls out of the kernel",
    "tirx.tvm_call_trace_packed_lowered": "calls out of the kernel",
    "tirx.anylist_setitem_call_packed": "calls out of the kernel",
    "tirx.anylist_setitem_call_cpacked": "calls out of the kernel",
    "tirx.call_llvm_intrin": "puts an LLVM intrinsic of its choosing into the kernel",
    "tirx.call_llvm_pure_intrin": "puts an LLVM intrinsic of its choosing into the kernel",
    "tirx.call_spirv_pure_glsl450": "puts a GLSL instruction of its choosing into the kernel",
}
# The fields TVM writes for the node types beyond "span", "ty" and the sub-expressions.
_FIELDS = {
    "ir.Var": ("span", "ty", "name"),
    "ir.IntImm": ("span", "ty", "value"),
    "ir.FloatImm": ("span", "ty", "value"),
    "ir.Call": ("span", "ty", "op", "args", "attrs", "ty_args"),
    "tirx.IndexMap": ("initial_indices", "final_indices", "inverse_index_map"),
}
_EFFECT_KINDS = {2: "kReadState", 3: "kUpdateState", 4: "kSpecialCallArg", 5: "kEmbedInfo", 6: "kControlJump"}
_DTYPE = re.compile(r"(int|uint|float|bfloat)(8|16|32|64)|bool|float8_e4m3fn|float8_e5m2")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class ObjectGraph:
    """TVM's JSON object graph of an expression, as text (``tvm.ir.save_json``): what a JSON trace
    holds for an index map. Wrapped so that ``refuse_effects`` judges it as a graph, not a string."""

    def __init__(self, text: str):
        self.text = text


def refuse_effects(value: Any, *, what: str = "expression", where: str | int | None = None) -> None:
    """Refuse ``value`` if any expression in it is not made of the allowed node types (see the module's
    docstring); the ``TraceParseError`` names ``where`` (``line 4`` as an int, or ``instruction 3
    (TransformLayout)``), ``what`` (``pad value``) and the node:
    ``line 4: the pad value calls call_extern("system"), which calls out of the kernel``.

    ``value``: an ``ObjectGraph`` (judged before anything is built), a TVM object (``IndexMap``, an
    expression, an array of them), an index-map lambda of a printed trace (judged on the expression it
    builds, through its ``expressions()``), or plain data (lists, tuples, dicts, numbers, strings,
    trace variables), whose expressions are judged wherever they hide."""
    problem = _judge(value)
    if problem is None:
        return
    message = f"the {what} {problem}"
    if isinstance(where, int):
        raise TraceParseError(message, line=where)
    raise TraceParseError(f"{where}: {message}" if where else message)


def _judge(value: Any) -> str | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, (bool, int, float, str, Ref)):
            continue
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, ObjectGraph):
            problem = _judge_graph(item.text)
            if problem:
                return problem
        elif hasattr(item, "expressions"):  # an index map of a printed trace: what it builds
            built = item.expressions()
            if built is not None:
                stack.append(built)
        elif _type_key(item) in ("ffi.Array", "ffi.List"):
            stack.extend(list(item))
        elif _type_key(item) in ("ffi.Map", "ffi.Dict"):
            stack.extend(list(item.values()))
        elif _type_key(item) is not None:
            problem = _Walk(_Objects()).judge(item)
            if problem:
                return problem
        else:
            return f"holds a {type(item).__name__}, which a trace never holds"
    return None


# --- the walk, over a JSON graph or over TVM objects ---------------------------------------------


class _Objects:
    """TVM objects seen as graph nodes: type key, fields by name, items, scalar values."""

    def kind(self, node: Any) -> str | None:
        if node is None:
            return "None"
        for python, key in ((bool, "bool"), (int, "int"), (float, "float"), (str, "ffi.String")):
            if isinstance(node, python):
                return key
        return _type_key(node)

    def field(self, node: Any, name: str) -> Any:
        return getattr(node, name, None)

    def items(self, node: Any) -> list:
        return list(node)

    def scalar(self, node: Any) -> Any:
        kind = _type_key(node)
        if kind == "ir.Op":
            return str(node.name)
        if kind == "ir.PrimType":
            return str(node.dtype)
        if kind in ("ir.IntImm", "ir.FloatImm", "ir.StringImm"):
            return node.value
        return node

    def key(self, node: Any) -> int:
        # The C object's address: Python's wrappers are made anew at each field access, and the id of
        # one that is gone may be given to the next (a node would then be taken for one already seen).
        handle = getattr(node, "__chandle__", None)
        return handle() if handle is not None else id(node)

    def shape(self, node: Any, kind: str) -> str | None:  # noqa: ARG002 - built by TVM: its own fields
        return None


class _Graph:
    """A JSON object graph (``{"root_index": N, "nodes": [...]}``) seen node by node, checked as it is
    read: a reference is an index below the node's own (TVM writes children first), so the graph has
    no cycle and its depth is known without recursion."""

    def __init__(self, nodes: list):
        self.nodes = nodes

    def node(self, index: Any, parent: int) -> dict:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < parent:
            raise _Malformed(f"node {parent} refers to {index!r}, which is not a node written before it")
        node = self.nodes[index]
        if not isinstance(node, dict) or not isinstance(node.get("type"), str) or set(node) - {"type", "data"}:
            raise _Malformed(f"node {index} is not a node (a type and its data)")
        check = _LEAVES.get(node["type"])
        if check is not None and not check(node.get("data")):
            raise _Malformed(f"node {index} ({node['type']}) does not hold what TVM writes for its type")
        if node["type"] == "ir.PrimType":
            self.span((index, node))
        return node

    def span(self, ref: tuple) -> None:
        """A node's span is empty, or where in a source file the node was written (TVMScript's parser
        keeps it): a file name and four numbers."""
        index, node = ref
        span_ref = self.field(ref, "span")
        if self.kind(span_ref) == "None":
            return
        data = span_ref[1].get("data")
        numbers = ("line", "column", "end_line", "end_column")
        if (
            self.kind(span_ref) != "ir.Span"
            or not isinstance(data, dict)
            or set(data) != {"source_name", *numbers}
            or not all(isinstance(data[k], int) and not isinstance(data[k], bool) for k in numbers)
            or self.kind(self.field(span_ref, "source_name")) != "ir.SourceName"
        ):
            raise _Malformed(f"node {index} ({node['type']}) holds something other than a source position in its span")

    def kind(self, ref: tuple) -> str:
        return ref[1]["type"]

    def field(self, ref: tuple, name: str) -> Any:
        index, node = ref
        data = node.get("data")
        if not isinstance(data, dict) or name not in data:
            raise _Malformed(f"node {index} ({node['type']}) has no field {name!r}")
        value = data[name]
        if name == "value" and node["type"] == "ir.FloatImm":
            return value  # written in place: a number, not a reference
        if name == "dtype":
            return value
        return (value, self.node(value, index))

    def items(self, ref: tuple) -> list:
        index, node = ref
        data = node.get("data")
        if not isinstance(data, list):
            raise _Malformed(f"node {index} ({node['type']}) is not a list of references")
        return [(i, self.node(i, index)) for i in data]

    def scalar(self, ref: tuple) -> Any:
        kind = ref[1]["type"]
        if kind in ("ir.IntImm", "ir.StringImm"):
            return self.scalar(self.field(ref, "value"))
        if kind == "ir.FloatImm":
            return self.field(ref, "value")
        if kind == "ir.PrimType":
            return self.field(ref, "dtype")
        return ref[1].get("data")

    def key(self, ref: tuple) -> int:
        return ref[0]

    def shape(self, ref: tuple, kind: str) -> str | None:
        """The node's fields are the ones TVM writes for its type, its span and extra slots empty (TVM's
        reader builds every field of a node it reads, so none may hide anything)."""
        index, node = ref
        data = node.get("data")
        expected = _FIELDS.get(kind, ("span", "ty") + EXPRESSIONS.get(kind, ()))
        if not isinstance(data, dict) or set(data) != set(expected):
            raise _Malformed(f"node {index} ({kind}) does not have the fields TVM writes ({', '.join(expected)})")
        if "attrs" in data and self.kind(self.field(ref, "attrs")) != "None":
            raise _Malformed(f"node {index} ({kind}) holds something in its attrs")
        if "span" in data:
            self.span(ref)
        if kind == "ir.Call" and self.items(self.field(ref, "ty_args")):
            raise _Malformed(f"node {index} (ir.Call) holds type arguments")
        return None


def _is_index_list(data: Any) -> bool:
    return isinstance(data, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in data)


# What the data of a helper node is: checked as the node is read (TVM builds every field it reads).
_LEAVES: dict[str, Callable[[Any], bool]] = {
    "None": lambda data: data is None,
    "int": lambda data: isinstance(data, int) and not isinstance(data, bool),
    "bool": lambda data: isinstance(data, bool),
    "ffi.String": lambda data: isinstance(data, str),
    "ffi.Array": _is_index_list,
    "ir.Op": lambda data: isinstance(data, str) and len(data) <= 128,
    "ir.SourceName": lambda data: isinstance(data, str),
    "ir.PrimType": lambda data: isinstance(data, dict) and set(data) == {"span", "dtype"},
}


class _Malformed(Exception):
    """A graph that is not the shape TVM writes (said in the refusal)."""


class _Walk:
    """Judge one expression (or index map) reached from its root, node by node, with an explicit
    stack: the first node not allowed is named in a sentence (``calls call_extern("system"), ...``)."""

    def __init__(self, view: Any):
        self.view = view
        self.seen: set[tuple[int, str]] = set()
        self.count = 0

    def judge(self, root: Any) -> str | None:
        role = "index map" if self.view.kind(root) == "tirx.IndexMap" else "expr"
        stack: list[tuple[Any, str, int]] = [(root, role, 0)]
        while stack:
            node, role, depth = stack.pop()
            if depth > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep; a trace is refused past that depth"
            mark = (self.view.key(node), role)
            if mark in self.seen:
                continue
            self.seen.add(mark)
            self.count += 1
            if self.count > MAX_NODES:
                return f"has more than {MAX_NODES} nodes; a trace is refused past that size"
            problem = self.visit(node, role, depth, stack)
            if problem:
                return problem
        return None

    def visit(self, node: Any, role: str, depth: int, stack: list) -> str | None:
        view, kind = self.view, self.view.kind(node)
        if role == "index map":
            if kind != "tirx.IndexMap":
                return f"holds a {kind} where an index map belongs"
            problem = view.shape(node, kind)
            if problem:
                return problem
            inverse = view.field(node, "inverse_index_map")
            if view.kind(inverse) not in ("None", None, "tirx.IndexMap"):
                return f"holds a {view.kind(inverse)} as its inverse map"
            if view.kind(inverse) == "tirx.IndexMap":
                stack.append((inverse, "index map", depth + 1))
            stack += [(v, "var", depth + 1) for v in view.items(view.field(node, "initial_indices"))]
            stack += [(e, "expr", depth + 1) for e in view.items(view.field(node, "final_indices"))]
            return None
        if role == "var" and kind != "ir.Var":
            return f"holds a {kind} where a variable belongs"
        if kind not in EXPRESSIONS:
            return _refused_node(view, node, kind)
        problem = (_refused_call(view, node) if kind == "ir.Call" else None) or view.shape(node, kind)
        problem = problem or self.typed(node, kind)
        if problem:
            return problem
        if kind == "ir.Call":
            stack += [(a, "expr", depth + 1) for a in view.items(view.field(node, "args"))]
            return None
        for name in EXPRESSIONS[kind]:
            stack.append((view.field(node, name), "var" if name == "var" else "expr", depth + 1))
        return None

    def typed(self, node: Any, kind: str) -> str | None:
        """The node's type is a scalar one; a variable's name, an integer's and a float's value are plain."""
        view = self.view
        ty = view.field(node, "ty")
        if view.kind(ty) != "ir.PrimType":
            return f"holds a {kind} of type {view.kind(ty)}, not a scalar"
        dtype = view.scalar(ty)
        if not (isinstance(dtype, str) and _DTYPE.fullmatch(dtype)):
            return f"holds a {kind} of type {str(dtype)[:40]}, which is not a scalar type"
        if kind == "ir.Var":
            name = view.field(node, "name")
            text = view.scalar(name) if view.kind(name) == "ffi.String" else None
            if not isinstance(text, str) or not _NAME.fullmatch(text):
                return "holds a variable whose name is not a plain name"
        elif kind == "ir.IntImm":
            value = view.scalar(node)
            if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**64:
                return "holds an integer literal that is not a 64-bit integer"
        elif kind == "ir.FloatImm":
            value = view.scalar(node)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                return "holds a float literal that is not a number"
        return None


def _refused_node(view: Any, node: Any, kind: str | None) -> str:
    if kind == "ir.StringImm":
        return f"holds the string {_quoted(view.scalar(node))} inside a computation, where no string belongs"
    if kind in ("ir.TensorLoad", "prim.BufferLoad", "tirx.BufferLoad"):
        return f"reads buffer {_buffer_name(view, node)}, which the index map does not own"
    if kind is None:
        return "holds something that is not a TVM node"
    return f"holds a {kind} node, which is not arithmetic on the map's variables"


def _refused_call(view: Any, node: Any) -> str | None:
    op = view.field(node, "op")
    if view.kind(op) != "ir.Op":
        return f"calls a {view.kind(op)}, which is not one of TVM's operators"
    name = view.scalar(op)
    if not isinstance(name, str):
        return "calls an operator without a name"
    short = name.split(".", 1)[-1]
    if name in CALLS_OUT:
        return f"calls {short}({_callee(view, node)}), which {CALLS_OUT[name]}"
    effect = _effect_kind(name)
    if effect is None:
        return f"calls {name[:80]}, which is not an operator TVM knows"
    if effect < 0:
        return f"calls {short}, which TVM does not mark as pure"
    if effect > 1:
        return f"calls {short}, which TVM marks as having side effects ({_EFFECT_KINDS.get(effect, effect)})"
    if name not in PURE_OPS:
        allowed = ", ".join(sorted(op.split(".", 1)[-1] for op in PURE_OPS))
        return f"calls {short}, which is not one of the pure operators an index map may use ({allowed})"
    return None


def _callee(view: Any, node: Any) -> str:
    """The first argument of an extern call as written (``"system"``), or ``...``."""
    try:
        args = view.items(view.field(node, "args"))
        if args and view.kind(args[0]) == "ir.StringImm":
            return _quoted(view.scalar(args[0]))
    except _Malformed:
        pass
    return "..."


def _buffer_name(view: Any, node: Any) -> str:
    """The name of the buffer a load reads (``TensorLoad.source`` in TVM 0.27, a ``Var`` of buffer type)."""
    for field in ("source", "buffer"):
        try:
            buffer = view.field(node, field)
            text = view.scalar(view.field(buffer, "name"))
        except (_Malformed, AttributeError, TypeError, IndexError):
            continue
        if isinstance(text, str):
            return text[:40]
    return "(unnamed)"


def _quoted(text: Any) -> str:
    return json.dumps(str(text)[:40])


def _type_key(obj: Any) -> str | None:
    info = getattr(type(obj), "__tvm_ffi_type_info__", None)
    return getattr(info, "type_key", None)


@lru_cache(maxsize=None)
def _effect_kind(name: str) -> int | None:
    """TVM's ``TCallEffectKind`` of an operator (0 annotation, 1 pure, 2+ effects); None if unknown."""
    import tvm

    if name not in op_names():
        return None
    kind = tvm.ir.Op.get(name).get_attr("TCallEffectKind")
    return -1 if kind is None else int(kind)


@lru_cache(maxsize=1)
def op_names() -> frozenset:
    """The names of every operator TVM registers (``tirx.call_extern``, ``prim.if_then_else``, ...)."""
    import tvm

    return frozenset(str(n) for n in tvm.ir.Op.list_op_names())


# --- a JSON graph, before TVM reads it -----------------------------------------------------------


def _judge_graph(text: str) -> str | None:
    """Judge TVM's JSON object graph of an expression without building it."""
    if not isinstance(text, str):
        return "is not an object graph"
    try:
        trace_limits.check_text(text, json_text=True)
        data = json.loads(text)
    except TraceParseError as exc:
        return f"cannot be read: {exc}"
    except (ValueError, RecursionError):
        return "is not valid JSON"
    if not isinstance(data, dict) or set(data) - {"root_index", "nodes", "metadata"}:
        return "is not an object graph as TVM writes one (root_index, nodes, metadata)"
    nodes, root = data.get("nodes"), data.get("root_index")
    if not isinstance(nodes, list) or not isinstance(root, int) or isinstance(root, bool):
        return "is not an object graph as TVM writes one (root_index, nodes, metadata)"
    if len(nodes) > MAX_NODES:
        return f"has more than {MAX_NODES} nodes; a trace is refused past that size"
    graph = _Graph(nodes)
    try:
        root_ref = (root, graph.node(root, len(nodes)))
        return _Walk(graph).judge(root_ref)
    except _Malformed as exc:
        return f"is not an object graph as TVM writes one: {exc}"


# --- every value of every call --------------------------------------------------------------------

# What a slot is called in a refusal (``the pad value calls ...``).
SLOT_NAMES = {
    "pad_value": "pad value",
    "index_map": "index map",
    "gen_new_ranges": "range map",
    "ann_val": "annotation value",
    "factors": "split factor",
    "decision": "decision",
    "candidates": "candidate",
    "probs": "probability",
    "padding": "padding",
}


def check_calls(calls: list) -> None:
    """Every value of every parsed call (``trace_io.TraceCall``, either channel) through
    ``refuse_effects``, named by its parameter; every ``annotate`` through ``trace_limits``'s
    check of keys by effect and values by size."""
    from mlc_lab.tvm.primitives import bind_call

    for call in calls:
        where: str | int = call.line if not call.where or call.where.startswith("line") else call.where
        try:
            named = [(p, v) for p, _kind, v in bind_call(call.primitive, tuple(call.args), call.kwargs).bound]
        except Exception:  # noqa: BLE001  (arguments that do not fit: the replay says so; judge them by place)
            named = [(f"argument {i + 1}", v) for i, v in enumerate(call.args)] + list(call.kwargs.items())
        for param, value in named:
            what = SLOT_NAMES.get(param, param if param.startswith("argument") else f"argument {param}")
            if hasattr(value, "what") and hasattr(value, "expressions"):
                value.what = what  # an index-map lambda says which slot it fills when TVM calls it
            refuse_effects(value, what=what, where=where)
        if call.primitive == "annotate":
            values = dict(named)
            trace_limits.check_annotation(
                values.get("ann_key"), values.get("ann_val"), call.where or f"line {call.line}", is_expression
            )


def is_expression(value: Any) -> bool:
    """A TVM expression object (an annotation may hold one, judged by ``refuse_effects``)."""
    kind = _type_key(value)
    return kind is not None and (kind in EXPRESSIONS or kind.startswith("prim."))
