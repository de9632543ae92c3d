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
import re
from dataclasses import dataclass, field

import tvm
from tvm import s_tir, tirx

from mlc_lab.core.model import LoopTree

_LOOP_FUNCS = {
    "grid": "serial",
    "range": "serial",
    "serial": "serial",
    "parallel": "parallel",
    "vectorized": "vectorized",
    "unroll": "unrolled",
    "thread_binding": "thread_binding",
}
_AXIS_KINDS = {"spatial": "spatial", "reduce": "reduce", "scan": "ordered", "opaque": "opaque", "S": "spatial",
               "R": "reduce", "O": "opaque"}


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


@dataclass
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

    def by_plain_name(self, name: str) -> LoopInfo | None:
        found = self.loops_named(name)
        return found[0] if len(found) == 1 else None

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
    index = LoopIndex(tree=LoopTree(), mod=mod)
    scanner = _Scanner(script.splitlines(), index)
    functions = scanner.run()
    _qualify(index, scanner.loop_nodes)
    index.tree = LoopTree(func=focus or (functions[0]["name"] if functions else None), functions=functions)
    index.info_of = dict(zip(map(id, scanner.loop_nodes), index.loops))
    index.tree.index_names(scanner.preorder)
    return index


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
    """Reads the functions of a printed script into their trees, the LoopInfos and the BlockInfos.

    The walk over a function's lines is one loop with its state in local variables: it runs once
    per step over every line, and method calls and attribute look-ups per line were most of its
    cost. A stack entry is ``[indent, kind, children, in_init, node, extra]``: ``children`` is the
    list a statement nested under it joins (``in_init``: and is marked ``in_init``); ``node`` the
    function or block it opens; ``extra`` what closing it needs (``for``: its loop nodes;
    ``block``: the loops open outside it and its ``T.init()`` children)."""

    def __init__(self, lines: list[str], index: LoopIndex):
        self.lines = lines
        self.parsed = list(map(_line, lines))
        self.index = index
        self.loop_nodes: list[dict] = []  # the node of each of index.loops, in the same order
        self.preorder: list[tuple[dict, dict]] = []  # (loop or block node, its function) as made

    def run(self) -> list[dict]:
        functions: list[dict] = []
        i = 0
        while i < len(self.lines):
            m = _DEF.match(self.lines[i])
            if m:
                i = self.function(i, m, functions)
            else:
                i += 1
        return functions

    def function(self, start: int, m: re.Match, functions: list) -> int:
        fname = m.group(2)
        base = len(m.group(1))
        func: dict = {"kind": "func", "name": fname, "buffers": [], "children": []}
        buffers = func["buffers"]
        for pname, args_text in _parse_params(m.group(3)):
            buffers.append(_buffer(pname, args_text, "param"))
        functions.append(func)
        all_loops, all_blocks = self.index.loops, self.index.blocks
        loop_nodes, preorder = self.loop_nodes, self.preorder
        order = 0  # pre-order position of the next loop in the function
        open_loops: list[LoopInfo] = []  # loops since the last block boundary, outer first
        all_open: list[LoopInfo] = []  # every enclosing loop
        open_blocks: list[str] = []  # every enclosing block, outer first
        extents: dict[str, object] = {}
        top = [base, "func", func["children"], False, func, None]
        stack = [top]
        parsed = self.parsed
        last = start + 1  # 1-based number of the last statement read: where a closing suite ends
        for i in range(start + 1, len(parsed)):
            line = parsed[i]
            if line is None:
                continue
            indent, tag, payload = line
            if indent <= base:
                break
            while indent <= top[0]:  # close every suite this line is not inside
                kind = top[1]
                if kind == "for":
                    for node in top[5]:
                        node["end_line"] = last
                    del open_loops[len(open_loops) - len(top[5]):]
                    del all_open[len(all_open) - len(top[5]):]
                elif kind == "block":
                    block = top[4]
                    block["end_line"] = last
                    open_loops, init = top[5]
                    if init:
                        block["children"] = init + block["children"]
                    open_blocks.pop()
                stack.pop()
                top = stack[-1]
            last = i + 1

            if tag == "for":  # one line may hold several loops: `for i, j in T.grid(4, 8)`
                loop_kind, thread, annotations, specs = payload
                scope = open_blocks[-1] if open_blocks else None
                children, in_init = top[2], top[3]
                chain = []
                for loop_name, extent, lo in specs:
                    info = LoopInfo(fname, loop_name, order, None, len(open_loops), loop_name, [], scope)
                    order += 1
                    all_loops.append(info)
                    open_loops.append(info)
                    all_open.append(info)
                    extents[loop_name] = extent
                    node = {
                        "kind": "loop", "name": loop_name, "qualified": loop_name, "extent": extent, "min": lo,
                        "loop_kind": loop_kind, "thread": thread,
                        "annotations": dict(annotations) if annotations else {},
                        "line": last, "end_line": last, "children": [],
                    }
                    if in_init:  # only the first loop of the line sits directly in T.init()
                        node["in_init"] = True
                        in_init = False
                    loop_nodes.append(node)
                    preorder.append((node, func))
                    children.append(node)
                    children = node["children"]
                    chain.append(node)
                top = [indent, "for", children, False, None, chain]
                stack.append(top)
            elif tag == "block":
                name = payload
                for lp in open_loops:
                    if lp.anchor_block is None:
                        lp.anchor_block = name
                for lp in all_open:
                    lp.blocks.append(name)
                all_blocks.append(BlockInfo(fname, name))
                block = {
                    "kind": "block", "name": name, "iter_vars": [], "reads": [], "writes": [], "has_init": False,
                    "predicate": None, "alloc_buffers": [], "annotations": {}, "line": last, "end_line": last,
                    "children": [],
                }
                if top[3]:
                    block["in_init"] = True
                top[2].append(block)
                preorder.append((block, func))
                top = [indent, "block", block["children"], False, block, (open_loops, [])]
                stack.append(top)
                open_loops = []  # get_loops stops at a block boundary
                open_blocks.append(name)
            elif tag == "init" and top[1] == "block":
                top[4]["has_init"] = True
                top = [indent, "init", top[5][1], True, top[4], None]
                stack.append(top)
            elif tag != "line":
                # if / else / any other with-statement: nesting only. What is under it joins the
                # node around it (a T.init() around it marks nothing in_init: the block's children).
                children = top[4]["children"] if top[1] == "init" else top[2]
                top = [indent, "other", children, False, None, None]
                stack.append(top)
            elif top[1] == "block":
                what, value, _ = payload
                if what is not None:
                    self._block_line(top[4], what, value, extents, buffers)
            elif top[1] == "func" and payload[2] is not None:
                buffers.append(_buffer(*payload[2], "alloc"))
        else:
            i = len(parsed)
        while len(stack) > 1:  # the function's last suites end at its last statement
            kind = top[1]
            if kind == "for":
                for node in top[5]:
                    node["end_line"] = last
            elif kind == "block":
                block = top[4]
                block["end_line"] = last
                if top[5][1]:
                    block["children"] = top[5][1] + block["children"]
            stack.pop()
            top = stack[-1]
        return i

    @staticmethod
    def _block_line(block: dict, what: str, value: object, extents: dict, buffers: list) -> None:
        if what == "axis":
            iter_vars = block["iter_vars"]
            for name, kind, extent, binding, remapped in value:
                iter_vars.append({"name": name, "kind": kind, "extent": extents.get(binding) if remapped else extent,
                                  "binding": binding})
        elif what == "reads" or what == "writes":
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
    return {"name": name, "shape": list(shape) if isinstance(shape, tuple) else shape, "dtype": dtype,
            "scope": scope, "origin": origin}


@functools.lru_cache(maxsize=65536)
def _line(raw: str) -> tuple[int, str, object] | None:
    """(indentation, tag, payload) of one printed line, None for blank lines and comments. Tags:
    ``for`` (payload: :func:`_parse_for`), ``block`` (its name), ``init``, ``other`` (any other line
    that opens a nested suite), ``line`` (a statement; payload: what it says inside a block, as
    ``(what, value)`` of :func:`_parse_block_line` or ``(None, None)``, then ``(name, arguments)``
    when it allocates a buffer at a function's top, else None). Steps reprint mostly the same
    lines, so each is read once."""
    stripped = raw.lstrip()
    text = stripped.rstrip()
    if not text or text[0] == "#":
        return None
    indent = len(raw) - len(stripped)
    if text.startswith("for "):
        parsed = _parse_for(text)
        if parsed is not None:
            return indent, "for", parsed
    elif text.startswith("with T.sblock("):
        bm = _SBLOCK.match(text)
        if bm:
            return indent, "block", bm.group(1)
    if text == "with T.init():":
        return indent, "init", None
    if text.endswith(":"):
        return indent, "other", None
    what, value = _parse_block_line(text) or (None, None)
    am = _ALLOC.match(text)
    return indent, "line", (what, value, (am.group(1), am.group(2)) if am else None)


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
            return "axis", ((targets[0], _AXIS_KINDS.get(axis, axis), _num(args[0]),
                             args[1] if len(args) > 1 else "", False),)
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
    """(shape, dtype, scope) of a buffer's arguments; shape a tuple, or text when symbolic."""
    args, kwargs = _kwargs(_split_args(args_text))
    shape = _lit(args[0]) if args else _lit(kwargs.get("shape", "()"))
    if isinstance(shape, int):
        shape = (shape,)
    dtype = _lit(args[1]) if len(args) > 1 else _lit(kwargs.get("dtype", '"float32"'))
    scope = _lit(kwargs.get("scope", '"global"'))
    return tuple(shape) if isinstance(shape, (tuple, list)) else str(shape), dtype, scope


def _qualify(index: LoopIndex, nodes: list[dict]) -> None:
    """Give every loop a name that is unique in the module: `name`, `block/name` or `func:block/name`.

    `block` is the loop's first block inside (what `get_loops(block)` reaches it from). A loop with
    no block inside (the copy loops that `read_at` / `write_at` write in a block's body) is named
    by the block it runs in instead; should two loops still share a name, the later ones take the
    block's name with a counter (`A_shared.2/ax0`). Every such name is found by rule 1 of
    ``LoopTree.match`` (an exact qualified name). ``nodes[k]`` is the tree node of ``index.loops[k]``;
    the scanner named both by their plain name already, so only loops sharing a name are renamed."""
    counts = collections.Counter(lp.name for lp in index.loops)
    if len(counts) == len(index.loops):
        return
    funcs = {lp.func for lp in index.loops}
    taken: dict[str, int] = {}
    for lp, node in zip(index.loops, nodes):
        if counts[lp.name] == 1:
            continue
        where = lp.anchor_block or lp.scope_block or "root"
        prefix = f"{lp.func}:" if len(funcs) > 1 else ""
        qualified = f"{prefix}{where}/{lp.name}"
        k = taken.get(qualified, 0) + 1
        taken[qualified] = k
        lp.qualified = node["qualified"] = qualified if k == 1 else f"{prefix}{where}.{k}/{lp.name}"
