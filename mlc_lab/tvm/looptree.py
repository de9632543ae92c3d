"""The loop nest of a program as plain data, plus the bookkeeping to find loops and blocks by name.

Names are the ones the user reads in the printed TVMScript. Loops are matched to the printed
``for`` headers in order (the printer emits them in pre-order), so a name the printer changed to
keep it unique is still the name we show and accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import tvm
from tvm import s_tir, tirx

_FOR_LINE = re.compile(r"^(\s*)for (.+?) in ")
_BLOCK_LINE = re.compile(r'^(\s*)with T\.sblock\("([^"]*)"')

_LOOP_KINDS = {
    tirx.ForKind.SERIAL: "serial",
    tirx.ForKind.PARALLEL: "parallel",
    tirx.ForKind.VECTORIZED: "vectorized",
    tirx.ForKind.UNROLLED: "unrolled",
    tirx.ForKind.THREAD_BINDING: "thread_binding",
}
# IterVar.iter_type codes used by TensorIR blocks.
_ITER_KINDS = {0: "spatial", 1: "thread", 2: "reduce", 3: "ordered", 4: "opaque", 5: "unrolled", 6: "vectorized", 7: "parallel", 8: "tensorized"}


@dataclass
class LoopInfo:
    """What the session needs to turn a loop name back into a LoopRV: a block under it and a depth."""

    func: str
    name: str
    node: object  # the tirx.For
    anchor_block: str | None  # first block inside the loop, in the loop's block scope
    depth: int  # index of this loop in get_loops(anchor_block)
    qualified: str = ""


@dataclass
class BlockInfo:
    func: str
    name: str
    node: object  # the s_tir.SBlock
    realize: object  # the s_tir.SBlockRealize


@dataclass
class LoopIndex:
    """Per-step lookup tables, built together with the JSON tree."""

    tree: dict
    loops: list[LoopInfo] = field(default_factory=list)
    blocks: list[BlockInfo] = field(default_factory=list)

    def loops_named(self, name: str) -> list[LoopInfo]:
        return [lp for lp in self.loops if lp.name == name]

    def loop_for_node(self, node: object) -> LoopInfo | None:
        for lp in self.loops:
            if lp.node.same_as(node):
                return lp
        return None


def build(mod: tvm.IRModule, script: str, focus: str | None = None) -> LoopIndex:
    lines = script.splitlines()
    cursor = _ScriptCursor(lines)
    functions = []
    index = LoopIndex(tree={})
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        name = gv.name_hint
        cursor.seek_function(name)
        walker = _Walker(name, cursor, index)
        buffers = [_buffer_info(p, "param") for p in func.params if _is_buffer(p)]
        root = func.body
        children: list[dict] = []
        if isinstance(root, s_tir.SBlockRealize):
            buffers += [_buffer_info(b, "alloc") for b in root.block.alloc_buffers]
            walker.block_stack.append(_collect_alloc_scope(root.block))
            children = walker.stmt(root.block.body)
        else:
            children = walker.stmt(root)
        functions.append({"kind": "func", "name": name, "buffers": buffers + walker.inner_buffers, "children": children})
    _qualify(index)
    index.tree = {"func": focus or (functions[0]["name"] if functions else None), "functions": functions}
    return index


def _collect_alloc_scope(block: object) -> str:
    return block.name_hint


def _is_buffer(var: object) -> bool:
    return hasattr(var, "shape") and hasattr(var, "scope")


def _buffer_info(buf: object, origin: str) -> dict:
    return {
        "name": buf.name,
        "shape": [_int_or_str(s) for s in buf.shape],
        "dtype": str(buf.dtype),
        "scope": str(buf.scope()),
        "origin": origin,
    }


def _int_or_str(e: object) -> int | str:
    return int(e.value) if isinstance(e, tirx.IntImm) else expr_text(e)


class _ScriptCursor:
    """Walks the printed script in step with the IR walk to find each node's line numbers."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.pos = 0
        self.pending: list[tuple[str, int]] = []  # targets left on the current `for a, b in T.grid` line

    def seek_function(self, name: str) -> None:
        pattern = re.compile(rf"^\s*def {re.escape(name)}\(")
        for i in range(len(self.lines)):
            if pattern.match(self.lines[i]):
                self.pos = i + 1
                self.pending = []
                return

    def next_loop(self) -> tuple[str | None, int | None]:
        if self.pending:
            return self.pending.pop(0)
        for i in range(self.pos, len(self.lines)):
            m = _FOR_LINE.match(self.lines[i])
            if m:
                self.pos = i + 1
                targets = [t.strip() for t in m.group(2).split(",") if t.strip()]
                self.pending = [(t, i + 1) for t in targets[1:]]
                return targets[0], i + 1
        return None, None

    def next_block(self, name: str) -> int | None:
        self.pending = []
        for i in range(self.pos, len(self.lines)):
            m = _BLOCK_LINE.match(self.lines[i])
            if m and m.group(2) == name:
                self.pos = i + 1
                return i + 1
        return None

    def end_of(self, line: int | None) -> int | None:
        """Last line of the indented suite that starts after header ``line`` (1-based)."""
        if line is None:
            return None
        header = self.lines[line - 1]
        indent = len(header) - len(header.lstrip())
        end = line
        for i in range(line, len(self.lines)):
            text = self.lines[i]
            if text.strip() and len(text) - len(text.lstrip()) <= indent:
                break
            if text.strip():
                end = i + 1
        return end


class _Walker:
    def __init__(self, func: str, cursor: _ScriptCursor, index: LoopIndex):
        self.func = func
        self.cursor = cursor
        self.index = index
        self.block_stack: list[str] = []
        self.open_loops: list[LoopInfo] = []  # loops since the last block boundary, outer first
        self.inner_buffers: list[dict] = []

    def stmt(self, node: object) -> list[dict]:
        if isinstance(node, tirx.SeqStmt):
            out: list[dict] = []
            for s in node.seq:
                out += self.stmt(s)
            return out
        if isinstance(node, tirx.For):
            return [self.loop(node)]
        if isinstance(node, s_tir.SBlockRealize):
            return [self.block(node)]
        if isinstance(node, tirx.IfThenElse):
            out = self.stmt(node.then_case)
            if node.else_case is not None:
                out += self.stmt(node.else_case)
            return out
        body = getattr(node, "body", None)
        if body is not None and isinstance(body, tirx.Stmt):
            return self.stmt(body)
        return []

    def loop(self, node: object) -> dict:
        printed, line = self.cursor.next_loop()
        name = printed or node.loop_var.name
        info = LoopInfo(self.func, name, node, None, len(self.open_loops))
        self.index.loops.append(info)
        self.open_loops.append(info)
        kind = _LOOP_KINDS.get(node.kind, str(node.kind))
        thread = None
        if node.thread_binding is not None:
            thread = str(node.thread_binding.thread_tag)
        children = self.stmt(node.body)
        self.open_loops.pop()
        return {
            "kind": "loop",
            "name": name,
            "qualified": name,  # filled by _qualify
            "extent": _int_or_str(node.extent),
            "min": _int_or_str(node.min),
            "loop_kind": kind,
            "thread": thread,
            "annotations": _annotations(node.annotations),
            "line": line,
            "end_line": self.cursor.end_of(line),
            "children": children,
            "_info": info,
        }

    def block(self, realize: object) -> dict:
        blk = realize.block
        name = blk.name_hint
        line = self.cursor.next_block(name)
        for lp in self.open_loops:
            if lp.anchor_block is None:
                lp.anchor_block = name
        self.index.blocks.append(BlockInfo(self.func, name, blk, realize))
        self.inner_buffers += [_buffer_info(b, f"alloc in {name}") for b in blk.alloc_buffers]
        saved = self.open_loops
        self.open_loops = []
        init_children = self.stmt(blk.init) if blk.init is not None else []
        children = self.stmt(blk.body)
        self.open_loops = saved
        for child in init_children:
            child["in_init"] = True
        iter_vars = []
        for iv, value in zip(blk.iter_vars, realize.iter_values):
            iter_vars.append(
                {
                    "name": iv.var.name,
                    "kind": _ITER_KINDS.get(int(iv.iter_type), str(iv.iter_type)),
                    "extent": _int_or_str(iv.dom.extent),
                    "binding": expr_text(value),
                }
            )
        predicate = realize.predicate
        return {
            "kind": "block",
            "name": name,
            "iter_vars": iter_vars,
            "reads": [region_text(r) for r in blk.reads],
            "writes": [region_text(r) for r in blk.writes],
            "has_init": blk.init is not None,
            "predicate": None if _is_true(predicate) else expr_text(predicate),
            "alloc_buffers": [b.name for b in blk.alloc_buffers],
            "annotations": _annotations(blk.annotations),
            "line": line,
            "end_line": self.cursor.end_of(line),
            "children": init_children + children,
        }


def _is_true(e: object) -> bool:
    return isinstance(e, tirx.IntImm) and int(e.value) == 1


def _annotations(ann: object) -> dict:
    out = {}
    for k, v in ann.items():
        if isinstance(v, (tirx.IntImm, tirx.FloatImm)):
            out[str(k)] = v.value
        elif isinstance(v, (int, float, str, bool)):
            out[str(k)] = v
        else:
            out[str(k)] = str(v)
    return out


def _qualify(index: LoopIndex) -> None:
    """Give every loop a name that is unique in the module: `name`, `block/name` or `func:block/name`."""
    counts: dict[str, int] = {}
    for lp in index.loops:
        counts[lp.name] = counts.get(lp.name, 0) + 1
    funcs = {lp.func for lp in index.loops}
    for lp in index.loops:
        if counts[lp.name] == 1:
            lp.qualified = lp.name
        else:
            lp.qualified = f"{lp.anchor_block}/{lp.name}"
            if len(funcs) > 1:
                lp.qualified = f"{lp.func}:{lp.qualified}"


def finish_tree(tree: dict) -> dict:
    """Copy ``qualified`` names into the JSON nodes and drop the private links."""

    def visit(nodes: list[dict]) -> None:
        for n in nodes:
            info = n.pop("_info", None)
            if info is not None:
                n["qualified"] = info.qualified
            visit(n["children"])

    for f in tree["functions"]:
        visit(f["children"])
    return tree


# --- expression text -----------------------------------------------------------------------
# str(PrimExpr) goes through the script printer (about 30 us each); the loop tree shows many
# small index expressions, so the common forms are written out here.

_BINOPS = [
    (tirx.Add, "+", 4),
    (tirx.Sub, "-", 4),
    (tirx.Mul, "*", 5),
    (tirx.FloorDiv, "//", 5),
    (tirx.FloorMod, "%", 5),
]


def expr_text(e: object, parent_prec: int = 0) -> str:
    if isinstance(e, tirx.IntImm):
        return str(int(e.value))
    if isinstance(e, (tirx.Var, tvm.ir.expr.Var)) and not isinstance(e, tirx.IntImm):
        name = getattr(e, "name", None)
        if name is not None:
            return str(name)
    for cls, op, prec in _BINOPS:
        if isinstance(e, cls):
            text = f"{expr_text(e.a, prec)} {op} {expr_text(e.b, prec + 1)}"
            return f"({text})" if prec < parent_prec else text
    return str(e)


def region_text(region: object) -> str:
    buf = region.source
    parts = []
    for r in region.region:
        if isinstance(r.extent, tirx.IntImm) and int(r.extent.value) == 1:
            parts.append(expr_text(r.min))
        else:
            lo = expr_text(r.min)
            hi = expr_text(tirx.Add(r.min, r.extent)) if not isinstance(r.min, tirx.IntImm) else str(
                int(r.min.value) + int(r.extent.value)
            ) if isinstance(r.extent, tirx.IntImm) else f"{lo} + {expr_text(r.extent)}"
            parts.append(f"{lo}:{hi}")
    return f"{buf.name}[{', '.join(parts)}]"
