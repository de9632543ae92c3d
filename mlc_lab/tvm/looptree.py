"""The loop nest of a program as plain data, read from its printed TVMScript.

The user reads names in the printed script, so the tree is built from that text: every name,
line and expression is exactly what is on screen, and no TVM object is touched per node (walking
the IR through the FFI costs several times more than printing it). The IR is visited only when a
caller needs the ``For`` node behind a loop (``LoopIndex.for_node``).
"""

from __future__ import annotations

import ast
import collections
import functools
import itertools
import re
from dataclasses import dataclass, field

import tvm
from tvm import s_tir, tirx

from mlc_lab.model.steps import LoopTree

_LOOP_FUNCS = {
    "grid": "serial",
    "range": "serial",
    "serial": "serial",
    "parallel": "parallel",
    "vectorized": "vectorized",
    "unroll": "unrolled",
    "thread_binding": "thread_binding",
}
_AXIS_KINDS = {
    "spatial": "spatial",
    "reduce": "reduce",
    "scan": "ordered",
    "opaque": "opaque",
    "S": "spatial",
    "R": "reduce",
    "O": "opaque",
}


@dataclass(slots=True)
class LoopInfo:
    """What the session needs to turn a loop name back into a LoopRV: a block under it and a depth."""

    func: str
    name: str
    order: int  # pre-order position among the function's loops (the IR walk visits them the same way)
    anchor_block: str | None  # first block inside the loop, in the loop's block scope
    depth: int  # index of this loop in get_loops(anchor_block)
    qualified: str = ""
    blocks: list[str] = field(default_factory=list)  # every block inside, nested ones too
    scope_block: str | None = None  # the block whose body holds the loop (None: the function's root)


@dataclass(slots=True)
class BlockInfo:
    func: str
    name: str


@dataclass
class LoopIndex:
    """Per-step lookup tables, built together with the JSON tree."""

    tree: LoopTree
    mod: object = None
    loops: list[LoopInfo] = field(default_factory=list)
    blocks: list[BlockInfo] = field(default_factory=list)
    info_of: dict[int, LoopInfo] = field(default_factory=dict)  # id(loop node) -> its LoopInfo

    def loops_named(self, name: str) -> list[LoopInfo]:
        return [lp for lp in self.loops if lp.name == name]

    def for_node(self, info: LoopInfo) -> object:
        """The ``tirx.For`` behind ``info`` (walks the IR of its function in pre-order)."""
        func = self.mod[info.func]
        found: list = []
        _collect_fors(func.body, found, info.order + 1)
        return found[info.order]


def _collect_fors(stmt: object, out: list, limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _collect_fors(s, out, limit)
    elif isinstance(stmt, tirx.For):
        out.append(stmt)
        _collect_fors(stmt.body, out, limit)
    elif isinstance(stmt, s_tir.SBlockRealize):
        if stmt.block.init is not None:
            _collect_fors(stmt.block.init, out, limit)
        _collect_fors(stmt.block.body, out, limit)
    elif isinstance(stmt, tirx.IfThenElse):
        _collect_fors(stmt.then_case, out, limit)
        if stmt.else_case is not None:
            _collect_fors(stmt.else_case, out, limit)
    else:
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            _collect_fors(body, out, limit)


def build(mod: tvm.IRModule, script: str, focus: str | None = None) -> LoopIndex:
    scanner = _Scanner(script.splitlines())
    functions = scanner.run()
    if scanner.shared_names:
        _qualify(scanner.loops, scanner.loop_nodes)
    tree = LoopTree(func=focus or (functions[0]["name"] if functions else None), functions=functions)
    tree.adopt_names(*scanner.name_index())
    return LoopIndex(
        tree=tree,
        mod=mod,
        loops=scanner.loops,
        blocks=scanner.blocks,
        info_of=dict(zip(map(id, scanner.loop_nodes), scanner.loops)),
    )


# The printer's output is regular: one statement a line, nesting by indentation. A line scanner
# reads it in a fraction of the time `ast.parse` takes (and far less than walking the IR). A step
# rewrites a few lines of a script: what a line says is parsed once (cached by its text) and only
# the nesting is walked again.
_DEF = re.compile(r"^(\s*)def (\w+)\((.*)\)(?:\s*->.*)?:\s*$")
_PARAM = re.compile(r"(\w+): T\.Buffer\(")
_FOR = re.compile(r"^for (.+?) in (T\.\w+|range)\((.*)\):$")
_SBLOCK = re.compile(r'^with T\.sblock\("([^"]*)"\):$')
_AXIS = re.compile(r"^(.+?) = T\.axis\.(\w+)\((.*)\)$")
_CALL = re.compile(r"^T\.(reads|writes|where|sblock_attr)\((.*)\)$")
_ALLOC = re.compile(r"^(\w+) = T\.sblock_alloc_buffer\((.*)\)$")
_INT = re.compile(r"^-?\d+$")


def _split_args(text: str) -> list[str]:
    """Split on top-level commas (not inside brackets or strings)."""
    out, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _num(text: str) -> int | str:
    return int(text) if _INT.match(text) else text


def _kwargs(parts: list[str]) -> tuple[list[str], dict[str, str]]:
    args, kwargs = [], {}
    for part in parts:
        key, eq, value = part.partition("=")
        if eq and key.strip().isidentifier() and not value.startswith("="):
            kwargs[key.strip()] = value.strip()
        else:
            args.append(part)
    return args, kwargs


_STR = re.compile(r'^"([^"\\]*)"$')
_INT_TUPLE = re.compile(r"^\((-?\d+(?:, -?\d+)*),?\)$")


def _lit(text: str) -> object:
    # The printer's common literals, without the cost of compiling them.
    if _INT.match(text):
        return int(text)
    m = _STR.match(text)
    if m:
        return m.group(1)
    m = _INT_TUPLE.match(text)
    if m:
        return tuple(int(x) for x in m.group(1).split(", "))
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


class _Scanner:
    """Reads the functions of a printed script into their trees, LoopInfos, BlockInfos and the
    tree's name index (:meth:`LoopTree.adopt_names`), all in one pass.

    It runs once per step over every line of the script, so the walk over a function's lines is
    one loop with its state in local variables, the most common lines (a block's statements and
    axes) tested first and read in place (method calls and attribute look-ups per line were most
    of its cost); a line that opens or closes suites calls a method, with the state those need in
    a :class:`_Walk`. A stack entry is
    ``[indent, kind, children, in_init, node, extra]``: ``children`` is the list a node nested
    under it joins (``in_init``: and is marked ``in_init``); ``node`` the function or block it
    opens; ``extra`` what closing it needs (``for``: where its loops are in ``loops`` and where its
    blocks start in ``block_names``; ``block``: the loops open outside it and its ``T.init()``
    children)."""

    def __init__(self, lines: list[str]):
        self.parsed = _parse_lines(lines)
        self.loops: list[LoopInfo] = []
        self.loop_nodes: list[dict] = []  # the node of each of self.loops, in the same order
        self.blocks: list[BlockInfo] = []
        self.block_names: list[str] = []  # of self.blocks: a loop's blocks are a slice of it
        self._seen_names: dict[tuple[str, str], list[int]] = {}  # (function, block name) -> how many so far
        self.nodes: list[dict] = []  # every loop and block node, in pre-order
        self.refs: dict[str, list[dict]] = {}  # name -> nodes: the reference index while names are plain
        self.names: dict[str, list[tuple[dict, dict]]] = {}  # name -> (node, its function)
        # A loop has the name of a node before it: _qualify may have to give it a longer one.
        self.shared_names = False

    def run(self) -> list[dict]:
        functions: list[dict] = []
        parsed = self.parsed
        i = 0
        while i < len(parsed):
            if parsed[i][1] == "def":
                i = self.function(i, functions)
            else:
                i += 1
        return functions

    def name_index(self) -> tuple[dict, dict]:
        """(reference -> nodes, name -> (node, function)), as ``LoopTree._names`` builds them."""
        if not self.shared_names:
            return self.refs, self.names  # every reference is the node's plain name
        refs: dict[str, list[dict]] = {}
        for n in self.nodes:
            refs.setdefault(n.get("qualified") or n["name"], []).append(n)
        return refs, self.names

    def _index(self, node: dict, name: str, func: dict, loop: bool) -> None:
        """Enter a loop or block node in the name index as it is made (two loops of one name make
        the qualifying pass run)."""
        same = self.refs.get(name)
        if same is None:
            self.refs[name] = [node]
            self.names[name] = [(node, func)]
        else:
            same.append(node)
            self.names[name].append((node, func))
            self.shared_names = self.shared_names or loop

    def function(self, start: int, functions: list) -> int:
        """Read the function whose ``def`` is line ``start``; returns the index of the line after it."""
        parsed = self.parsed
        base, _, (fname, params) = parsed[start]
        func: dict = {"kind": "func", "name": fname, "buffers": [], "children": []}
        buffers = func["buffers"]
        for pname, args_text in _parse_params(params):
            buffers.append(_buffer(pname, args_text, "param"))
        functions.append(func)
        walk = _Walk(func)
        extents = walk.extents
        top = [base, "func", func["children"], False, func, None]
        top_kind = "func"
        stack = [top]
        lines = itertools.chain(itertools.islice(parsed, start + 1, None), _END)
        for lineno, (indent, tag, payload) in enumerate(lines, start + 2):  # lineno: 1-based
            if indent <= top[0]:  # the line is not inside the innermost suite (a blank line never)
                self._close_suites(stack, indent, _last_statement(parsed, lineno), walk)
                top = stack[-1]
                top_kind = top[1]
                if indent <= base:  # the function ends here
                    return lineno - 1

            if top_kind == "block":  # most lines: what a block says
                if tag == "stmt":
                    continue
                if tag == "axis":
                    iter_vars = top[4]["iter_vars"]
                    for name, kind, extent, binding, remapped in payload[0]:
                        iter_vars.append(
                            {
                                "name": name,
                                "kind": kind,
                                "extent": extents.get(binding) if remapped else extent,
                                "binding": binding,
                            }
                        )
                    continue
                if tag in _STATEMENTS:
                    _block_line(top[4], tag, payload[0], buffers)
                    continue
            if tag in _STATEMENTS:
                if top_kind == "func" and payload[1] is not None:
                    buffers.append(_buffer(*payload[1], "alloc"))
                continue
            if tag == "for":  # one line may hold several loops: `for i, j in T.grid(4, 8)`
                top = self._open_loops(walk, top, indent, payload, lineno)
            elif tag == "block":
                top = self._open_block(walk, top, indent, payload, lineno)
            elif tag == "init" and top_kind == "block":
                top[4]["has_init"] = True
                top = [indent, "init", top[5][1], True, top[4], None]
            else:
                # if / else / any other with-statement or def: nesting only. What is under it joins
                # the node around it (a T.init() around it marks nothing in_init: the block's children).
                top = [indent, "other", top[4]["children"] if top_kind == "init" else top[2], False, None, None]
            top_kind = top[1]
            stack.append(top)
        raise AssertionError("the function's lines end with _END")

    def _close_suites(self, stack: list[list], indent: int, last: int, walk: _Walk) -> None:
        """Close the suites that a line at ``indent`` ends (they end at line ``last``), innermost
        first: a loop's nodes get their last line and its blocks, a block its last line and its
        ``T.init()`` children first; the function's own entry stays."""
        top = stack[-1]
        while indent <= top[0] and top[1] != "func":
            if top[1] == "for":
                first, end, first_block = top[5]
                for node in self.loop_nodes[first:end]:
                    node["end_line"] = last
                for info in self.loops[first:end]:
                    info.blocks = self.block_names[first_block:]  # the blocks opened while it was open
                del walk.loops[len(walk.loops) - (end - first) :]
            elif top[1] == "block":
                block = top[4]
                block["end_line"] = last
                walk.loops, init = top[5]
                if init:
                    block["children"] = init + block["children"]
                walk.blocks.pop()
            stack.pop()
            top = stack[-1]

    def _open_loops(self, walk: _Walk, top: list, indent: int, payload: tuple, lineno: int) -> list:
        """The loops a ``for`` line opens, each nested in the one before; returns the stack entry
        that the line's suite is (its children: the innermost loop's)."""
        annotations, loops = payload
        func, order, open_loops, extents = walk.func, walk.order, walk.loops, walk.extents
        scope = walk.blocks[-1] if walk.blocks else None
        children, in_init = top[2], top[3]
        first = len(self.loops)
        for name, extent, template in loops:
            # blocks: filled in when the loop closes (a slice of block_names)
            info = LoopInfo(func["name"], name, order, None, len(open_loops), name, None, scope)
            order += 1
            self.loops.append(info)
            open_loops.append(info)
            extents[name] = extent
            node = template.copy()  # what the line says; then what is this node's own
            node["annotations"] = dict(annotations) if annotations else {}
            node["line"] = node["end_line"] = lineno
            node["children"] = []
            if in_init:  # only the first loop of the line sits directly in T.init()
                node["in_init"] = True
                in_init = False
            self.loop_nodes.append(node)
            children.append(node)
            children = node["children"]
            self.nodes.append(node)
            self._index(node, name, func, loop=True)
        walk.order = order
        return [indent, "for", children, False, None, (first, len(self.loops), len(self.block_names))]

    def _open_block(self, walk: _Walk, top: list, indent: int, name: str, lineno: int) -> list:
        """The block a ``with T.sblock(...)`` line opens; returns its stack entry (which keeps the
        loops open outside it: ``get_loops`` stops at a block boundary)."""
        # a block whose name an earlier one has is reached as ``name#k`` (``block_names``)
        seen = self._seen_names.setdefault((walk.func["name"], name), [0])
        seen[0] += 1
        anchor = name if seen[0] == 1 else f"{name}#{seen[0]}"
        for lp in walk.loops:
            if lp.anchor_block is None:
                lp.anchor_block = anchor
        self.blocks.append(BlockInfo(walk.func["name"], name))
        self.block_names.append(name)
        block = {
            "kind": "block",
            "name": name,
            "iter_vars": [],
            "reads": [],
            "writes": [],
            "has_init": False,
            "predicate": None,
            "alloc_buffers": [],
            "annotations": {},
            "line": lineno,
            "end_line": lineno,
            "children": [],
        }
        if top[3]:
            block["in_init"] = True
        top[2].append(block)
        self.nodes.append(block)
        self._index(block, name, walk.func, loop=False)
        entry = [indent, "block", block["children"], False, block, (walk.loops, [])]
        walk.loops = []
        walk.blocks.append(name)
        return entry


@dataclass(slots=True)
class _Walk:
    """What the walk over one function's lines has open at the current line."""

    func: dict
    order: int = 0  # pre-order position of the next loop in the function
    loops: list[LoopInfo] = field(default_factory=list)  # loops since the last block boundary, outer first
    blocks: list[str] = field(default_factory=list)  # every enclosing block, outer first
    extents: dict[str, object] = field(default_factory=dict)  # loop name -> extent (for remapped axes)


def _last_statement(parsed: list[tuple], lineno: int) -> int:
    """The 1-based number of the last line before line ``lineno`` that is not blank: where the
    suites that line ``lineno`` closes end. (Looked up when suites close rather than remembered at
    every line.) The function's ``def`` line stops the search."""
    k = lineno - 2
    while parsed[k] is _BLANK:
        k -= 1
    return k + 1


def _block_line(block: dict, what: str, value: object, buffers: list) -> None:
    """What a line directly in a block says, other than its iterators (see :func:`_parse_block_line`)."""
    if what == "reads" or what == "writes":
        block[what] = list(value)
    elif what == "where":
        block["predicate"] = value
    elif what == "annotations":
        block["annotations"] = dict(value)
    else:  # an allocation inside the block
        name, args_text = value
        buffers.append(_buffer(name, args_text, f"alloc in {block['name']}"))
        block["alloc_buffers"].append(name)


def _buffer(name: str, args_text: str, origin: str) -> dict:
    shape, dtype, scope = _parse_buffer(args_text)
    return {
        "name": name,
        "shape": list(shape),
        "dtype": dtype,
        "scope": scope,
        "origin": origin,
    }


# raw line -> _line(raw). A dict rather than functools.lru_cache: a step looks up every line of
# its script, and a dict's get (mapped over the lines in C) costs a fraction of a cached call.
_LINES: dict[str, tuple] = {}
_LINES_MAX = 65536
# A blank line or a comment: a statement that says nothing, indented deeper than anything, so
# that it never ends a suite (see _last_statement).
_BLANK = (1 << 30, "stmt", (None, None))
_END = ((-1, "end", None),)  # after a script's last line: it ends every function
_STATEMENTS = frozenset({"stmt", "axis", "reads", "writes", "where", "annotations", "alloc"})  # tags


def _parse_lines(lines: list[str]) -> list[tuple]:
    parsed = list(map(_LINES.get, lines))
    if None in parsed:  # lines not seen before
        if len(_LINES) > _LINES_MAX:
            _LINES.clear()
        for k, raw in enumerate(lines):
            if parsed[k] is None:
                parsed[k] = _LINES[raw] = _line(raw)
    return parsed


def _line(raw: str) -> tuple[int, str, object]:
    """(indentation, tag, payload) of one printed line, :data:`_BLANK` for blank lines and comments.
    Tags: ``def`` (payload: (name, parameters)), ``for`` (payload: :func:`_loop_templates`), ``block`` (its
    name), ``init``, ``other`` (any other line that opens a nested suite); a statement: what it says
    inside a block, as :func:`_parse_block_line` tells it (``axis``, ``reads``...), or ``stmt``
    (nothing), with the payload ``(value, (name, arguments))`` when it allocates a buffer at a
    function's top, ``(value, None)`` otherwise."""
    stripped = raw.lstrip()
    text = stripped.rstrip()
    if not text or text[0] == "#":
        return _BLANK
    indent = len(raw) - len(stripped)
    if text.startswith("for "):
        parsed = _parse_for(text)
        if parsed is not None:
            return indent, "for", _loop_templates(*parsed)
    elif text.startswith("with T.sblock("):
        bm = _SBLOCK.match(text)
        if bm:
            return indent, "block", bm.group(1)
    if text == "with T.init():":
        return indent, "init", None
    if text.startswith("def "):
        dm = _DEF.match(raw)
        if dm:
            return indent, "def", (dm.group(2), dm.group(3))
    if text.endswith(":"):
        return indent, "other", None
    what, value = _parse_block_line(text) or ("stmt", None)
    am = _ALLOC.match(text)
    return indent, what, (value, (am.group(1), am.group(2)) if am else None)


@functools.lru_cache(maxsize=1024)
def _parse_params(params: str) -> tuple[tuple[str, str], ...]:
    """((buffer name, its T.Buffer arguments), ...) of a function's parameter list."""
    out = []
    for pm in _PARAM.finditer(params):
        j, depth = pm.end(), 1  # the buffer's arguments run to the matching parenthesis
        while j < len(params) and depth:
            depth += {"(": 1, ")": -1}.get(params[j], 0)
            j += 1
        out.append((pm.group(1), params[pm.end() : j - 1]))
    return tuple(out)


def _loop_templates(kind: str, thread: object, annotations: dict, loops: tuple) -> tuple:
    """(annotations, ((name, extent, node template), ...)) of a `for` line: a loop's node is a copy of
    its template (copying a dict costs less than building it) with its own annotations, lines and
    children. The keys are in the order of a node's JSON."""
    templates = tuple(
        (
            name,
            extent,
            {
                "kind": "loop",
                "name": name,
                "qualified": name,
                "extent": extent,
                "min": lo,
                "loop_kind": kind,
                "thread": thread,
                "annotations": None,
                "line": 0,
                "end_line": 0,
                "children": None,
            },
        )
        for name, extent, lo in loops
    )
    return annotations, templates


@functools.lru_cache(maxsize=16384)
def _parse_for(text: str) -> tuple | None:
    """(loop kind, thread, annotations, ((name, extent, min), ...)) of a `for` line."""
    fm = _FOR.match(text)
    if fm is None:
        return None
    targets = [t.strip() for t in fm.group(1).split(",") if t.strip()]
    fname = fm.group(2).rsplit(".", 1)[-1]
    args, kwargs = _kwargs(_split_args(fm.group(3)))
    kind = "serial" if fname == "grid" else _LOOP_FUNCS.get(fname, "serial")
    thread = _lit(kwargs["thread"]) if "thread" in kwargs else None
    annotations = _lit(kwargs["annotations"]) if "annotations" in kwargs else {}
    if not isinstance(annotations, dict):
        annotations = {"_": str(annotations)}
    if fname == "grid":
        ranges = [("0", a) for a in args]
    elif len(args) >= 2:
        ranges = [(args[0], args[1])]
    else:
        ranges = [("0", args[0] if args else "0")]
    ranged = fname != "grid" and len(args) >= 2
    loops = []
    for loop_name, (lo, hi) in zip(targets, ranges):
        lo_v, hi_v = _num(lo), _num(hi)
        if ranged and isinstance(lo_v, int) and isinstance(hi_v, int):
            extent: object = hi_v - lo_v
        else:
            extent = hi_v if not ranged else f"{hi} - {lo}"
        loops.append((loop_name, extent, lo_v))
    return kind, thread, annotations, tuple(loops)


@functools.lru_cache(maxsize=16384)
def _parse_block_line(text: str) -> tuple | None:
    """What one line inside a block says: ("axis", iter vars) | ("reads"/"writes", regions) |
    ("where", predicate) | ("annotations", dict) | ("alloc", (name, arguments)) | None."""
    am = _AXIS.match(text)
    if am:
        targets = [t.strip() for t in am.group(1).split(",")]
        axis = am.group(2)
        args = _split_args(am.group(3))
        if axis == "remap" and len(args) == 2:
            kinds = str(_lit(args[0]))
            values = _split_args(args[1].strip()[1:-1])
            return "axis", tuple((t, _AXIS_KINDS.get(k, k), None, v, True) for t, k, v in zip(targets, kinds, values))
        if args:
            return "axis", (
                (targets[0], _AXIS_KINDS.get(axis, axis), _num(args[0]), args[1] if len(args) > 1 else "", False),
            )
        return None
    cm = _CALL.match(text)
    if cm:
        what, inner = cm.group(1), cm.group(2)
        if what in ("reads", "writes"):
            return what, tuple(_split_args(inner))
        if what == "where":
            return "where", inner
        attrs = _lit(inner)
        return "annotations", attrs if isinstance(attrs, dict) else {"_": inner}
    al = _ALLOC.match(text)
    if al:
        return "alloc", (al.group(1), al.group(2))
    return None


@functools.lru_cache(maxsize=4096)
def _parse_buffer(args_text: str) -> tuple:
    """(shape, dtype, scope) of a buffer's arguments; the shape a tuple of extents, each an int or,
    when symbolic, its expression's text: TVM prints one symbolic shape three ways (``(n, 128)``,
    ``("n", 128)`` for the parameter that defines ``n``, a bare ``n``), all read as ``("n", 128)``."""
    args, kwargs = _kwargs(_split_args(args_text))
    text = args[0] if args else kwargs.get("shape", "()")
    shape = _lit(text)
    if isinstance(shape, int):
        shape = (shape,)
    elif isinstance(shape, str):  # symbolic: split it at its top-level commas
        inner = text.strip()
        inner = inner[1:-1] if inner.startswith(("(", "[")) and inner.endswith((")", "]")) else inner
        shape = tuple(_lit(part) for part in _split_args(inner))
    dims = tuple(d if isinstance(d, int) else str(d) for d in shape)
    dtype = _lit(args[1]) if len(args) > 1 else _lit(kwargs.get("dtype", '"float32"'))
    scope = _lit(kwargs.get("scope", '"global"'))
    return dims, dtype, scope


def _qualify(loops: list[LoopInfo], nodes: list[dict]) -> None:
    """Give every loop a name that is unique in the module: `name`, `block/name` or `func:block/name`.

    `block` is the loop's first block inside (what `get_loops(block)` reaches it from). A loop with
    no block inside (the copy loops that `read_at` / `write_at` write in a block's body) is named
    by the block it runs in instead; should two loops still share a name, the later ones take the
    block's name with a counter (`A_shared.2/ax0`). Every such name is found by rule 1 of
    ``LoopTree.match`` (an exact qualified name). ``nodes[k]`` is the tree node of ``loops[k]``; the
    scanner named both by their plain name, which is the answer for every name no other loop has."""
    counts = collections.Counter(lp.name for lp in loops)
    funcs = {lp.func for lp in loops}
    taken: dict[str, int] = {}
    for lp, node in zip(loops, nodes):
        if counts[lp.name] == 1:
            continue
        where = lp.anchor_block or lp.scope_block or "root"
        prefix = f"{lp.func}:" if len(funcs) > 1 else ""
        qualified = f"{prefix}{where}/{lp.name}"
        k = taken.get(qualified, 0) + 1
        taken[qualified] = k
        lp.qualified = node["qualified"] = qualified if k == 1 else f"{prefix}{where}.{k}/{lp.name}"
