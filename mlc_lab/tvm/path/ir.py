"""One PrimFunc read once into what the path engine reasons about: its loops and blocks in
pre-order, each block's chain of loops, and the iterator bindings as TVM's own iter-map analysis
(``detect_iter_map``) sees them.

A ``FuncView`` is a snapshot: it holds TVM nodes of one program and is read again after every
primitive the engine applies (a few milliseconds for a course-sized function).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import s_tir, tirx
from tvm.sym import iter_affine_map as iam

_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}


def const(expr: Any) -> int | None:
    """The value of a constant integer expression, else None."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    return None


def plain(value: Any) -> Any:
    """An annotation value as plain data (ints, floats, strings, lists, dicts)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if isinstance(value, tirx.FloatImm):
        return float(value.value)
    if isinstance(value, tvm.ir.StringImm):
        return str(value.value)
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__len__") and not isinstance(value, (str, bytes)):
        return [plain(v) for v in value]
    return str(value)


@dataclass
class Loop:
    node: Any  # tirx.For
    order: int  # pre-order position among the function's loops
    depth: int  # number of loops above it
    parent: int | None  # order of the loop above it (None: the function's top or a block's body)
    blocks: list[str] = field(default_factory=list)  # blocks inside, nested ones too, in pre-order

    @property
    def var(self) -> Any:
        return self.node.loop_var

    @property
    def name(self) -> str:
        return str(self.node.loop_var.name)

    @property
    def extent(self) -> Any:
        value = const(self.node.extent)
        return value if value is not None else self.node.extent

    @property
    def kind(self) -> str:
        return _KINDS.get(int(self.node.kind), "serial")

    @property
    def thread(self) -> str | None:
        binding = self.node.thread_binding
        return None if binding is None else str(binding.thread_tag)

    @property
    def annotations(self) -> dict[str, Any]:
        return {str(k): plain(v) for k, v in self.node.annotations.items()}


@dataclass
class Block:
    name: str
    realize: Any  # s_tir.SBlockRealize
    chain: list[int]  # orders of the loops around it, outermost first (within its scope block)
    scope: str | None  # the block whose body holds it (None: the function's root block)
    order: int  # pre-order position among the function's blocks

    @property
    def block(self) -> Any:
        return self.realize.block

    @property
    def values(self) -> list[Any]:
        return list(self.realize.iter_values)

    @property
    def iter_kinds(self) -> list[int]:
        return [int(iv.iter_type) for iv in self.block.iter_vars]

    @property
    def iter_extents(self) -> list[Any]:
        return [
            const(iv.dom.extent) if const(iv.dom.extent) is not None else iv.dom.extent for iv in self.block.iter_vars
        ]

    @property
    def annotations(self) -> dict[str, Any]:
        return {str(k): plain(v) for k, v in self.block.annotations.items()}

    @property
    def has_init(self) -> bool:
        return self.block.init is not None

    def copy(self) -> tuple[str, str] | None:
        """(destination, source) buffer names when the block only copies one buffer into another."""
        body = self.block.body
        if self.has_init or not isinstance(body, tirx.BufferStore) or not isinstance(body.value, tvm.ir.TensorLoad):
            return None
        return str(body.buffer.name), str(body.value.source.name)

    def stage_copy(self) -> tuple[str, str] | None:
        """(destination, source) when the block, nested blocks and tensor intrinsics included, only
        moves one buffer's region into another: no reduction, no initial value, every store a bare
        load (a cache, reindex or wmma stage); None when it computes anything."""
        reads, writes = set(self.reads()), set(self.writes())
        if self.has_init or 2 in self.iter_kinds or len(reads) != 1 or len(writes) != 1 or reads == writes:
            return None
        if not _only_moves(self.block.body):
            return None
        return next(iter(writes)), next(iter(reads))

    def writes(self) -> list[str]:
        return [str(r.source.name) for r in self.block.writes]

    def reads(self) -> list[str]:
        return [str(r.source.name) for r in self.block.reads]


@dataclass
class FuncView:
    func: Any
    loops: list[Loop]
    blocks: list[Block]
    root: Any  # the root SBlock (None when the function has no root block)

    def block(self, name: str) -> Block | None:
        for b in self.blocks:
            if b.name == name:
                return b
        return None

    def chain(self, block: Block) -> list[Loop]:
        return [self.loops[o] for o in block.chain]

    def blocks_under(self, loop: Loop) -> list[Block]:
        return [b for b in self.blocks if b.name in loop.blocks]

    def allocs(self) -> list[Any]:
        """Every buffer the function's blocks allocate, the root's first, in order."""
        out = list(self.root.alloc_buffers) if self.root is not None else []
        for b in self.blocks:
            out.extend(b.block.alloc_buffers)
        return out

    def buffer(self, name: str) -> Any:
        for buf in self.allocs():
            if str(buf.name) == name:
                return buf
        for buf in self.func.params:
            if str(buf.name) == name:
                return buf
        return None


def alias(name: str, before: list[Any]) -> str:
    """A block's name as the engine and the session say it: TVM's own, or ``name#k`` for the k-th
    block (in pre-order) of a name that several share (a second ``rfactor`` of one block names its
    new block as the first did). ``before``: the names of the blocks before it."""
    k = sum(1 for b in before if str(b) == name)
    return name if k == 0 else f"{name}#{k + 1}"


def read(func: Any) -> FuncView:
    """The loops and blocks of ``func`` in pre-order."""
    loops: list[Loop] = []
    blocks: list[Block] = []
    root = None
    body = func.body
    if isinstance(body, s_tir.SBlockRealize) and str(body.block.name_hint) == "root":
        root = body.block
        body = body.block.body

    def walk(stmt: Any, chain: list[int], scope: str | None) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                walk(s, chain, scope)
        elif isinstance(stmt, tirx.For):
            loop = Loop(stmt, len(loops), len(chain), chain[-1] if chain else None)
            loops.append(loop)
            walk(stmt.body, chain + [loop.order], scope)
        elif isinstance(stmt, s_tir.SBlockRealize):
            name = alias(str(stmt.block.name_hint), [b.block.name_hint for b in blocks])
            blocks.append(Block(name, stmt, list(chain), scope, len(blocks)))
            for o in chain:
                loops[o].blocks.append(name)
            if stmt.block.init is not None:
                walk(stmt.block.init, [], name)
            walk(stmt.block.body, [], name)
            # loops inside a nested block count it as their outer blocks' too
            for o in chain:
                for b in blocks:
                    if b.scope == name and b.name not in loops[o].blocks:
                        loops[o].blocks.append(b.name)
        elif isinstance(stmt, tirx.IfThenElse):
            walk(stmt.then_case, chain, scope)
            if stmt.else_case is not None:
                walk(stmt.else_case, chain, scope)
        else:
            inner = getattr(stmt, "body", None)
            if isinstance(inner, tirx.Stmt):
                walk(inner, chain, scope)

    walk(body, [], None)
    return FuncView(func, loops, blocks, root)


# --- bindings as iter maps ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """One term of a block iterator's binding: ``(mark // lower) % extent * scale``, where the mark is
    a loop (``leaf``: its order) or a fused mark (``fused``: an index into ``IterMaps.fused``)."""

    leaf: int | None
    fused: int | None
    lower: Any
    extent: Any
    scale: Any


@dataclass
class Fused:
    """A mark made of several loops (a fuse, then split): its terms over loops and its extent."""

    terms: list[Term]
    extent: Any
    key: str  # structural identity, to find the same mark from two iterators


@dataclass
class IterMaps:
    """Each iterator of a block as terms over the loops given (the others count as constants)."""

    terms: list[list[Term]]  # per iterator, by scale, outermost first
    bases: list[Any]  # per iterator, the part that does not depend on the loops given
    fused: list[Fused]


def substitute(expr: Any, mapping: list[tuple[Any, Any]]) -> Any:
    """``expr`` with each variable of ``mapping`` (var, value) replaced: the arithmetic of bindings
    (+ - * // % min max) only; anything else is kept as it is."""
    if isinstance(expr, tirx.Var):
        for var, value in mapping:
            if var.same_as(expr):
                return value
        return expr
    if hasattr(expr, "a") and hasattr(expr, "b") and type(expr).__name__ in _BINARY:
        return type(expr)(substitute(expr.a, mapping), substitute(expr.b, mapping))
    return expr


_BINARY = {"Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Min", "Max"}


def iter_maps(view: FuncView, block: Block, own: list[int], values: list[Any] | None = None) -> IterMaps | None:
    """The block's bindings (or ``values`` in their place) over its loops ``own`` (orders), or None
    when TVM finds them not affine."""
    dom = {
        view.loops[o].var: tvm.ir.Range.from_min_extent(view.loops[o].node.min, view.loops[o].node.extent) for o in own
    }
    by_var = {view.loops[o].var: o for o in own}
    values = _padded_unit(block, list(block.values)) if values is None else values
    if not values:
        return IterMaps([], [], [])
    return maps_of(values, dom, by_var, block.realize.predicate)


def _padded_unit(block: Block, values: list[Any]) -> list[Any]:
    """The bindings, a unit iterator that TVM bound to a constant under a padding predicate
    (``where(f0 * 1024 + f1 < 1)``: its loop split past its extent) read as the predicate's pieces."""
    pred = block.realize.predicate
    if not isinstance(pred, tirx.LT) or const(pred.b) != 1:
        return values
    units = [
        k for k, (iv, v) in enumerate(zip(block.block.iter_vars, values)) if const(iv.dom.extent) == 1 and const(v) == 0
    ]
    if len(units) == 1:
        values[units[0]] = pred.a
    return values


def maps_of(values: list[Any], dom: dict, by_var: dict, predicate: Any = True) -> IterMaps | None:
    """``values`` as terms over the variables of ``dom`` (``by_var``: each variable's id in the terms)."""
    res = _detect(values, dom, predicate)
    if res is not None and len(res.indices) != len(values) and not (isinstance(predicate, bool) and predicate):
        # a padding predicate over a symbolic extent (i0 * 16 + i1 < n, i0 < (n + 15) // 16) TVM
        # cannot normalize: the bindings are read without it (every way is checked against the target)
        res = _detect(values, dom, True)
    if res is None or len(res.indices) != len(values):
        return None
    fused: list[Fused] = []
    out_terms, bases = [], []
    for index in res.indices:
        terms = _terms_of(index, by_var, fused)
        if terms is None:
            return None
        out_terms.append(terms)
        bases.append(index.base)
    return IterMaps(out_terms, bases, fused)


def _detect(values: list[Any], dom: dict, predicate: Any) -> Any:
    try:
        return iam.detect_iter_map(
            values, dom, predicate, iam.IterMapLevel.Surjective, simplify_trivial_iterators=False
        )
    except Exception:  # noqa: BLE001  (TVM could not analyse the bindings: not affine)
        return None


def _terms_of(index: Any, by_var: dict, fused: list[Fused]) -> list[Term] | None:
    """Flatten TVM's wrapping (each index is a sum holding one split of a mark made of the sum of
    its real terms) into the real terms."""
    out: list[Term] = []
    for split in index.args:
        mark = split.source
        src = mark.source
        if isinstance(src, iam.IterSumExpr) and _is_whole(split, mark):
            for inner in src.args:
                term = _term(inner, by_var, fused)
                if term is None:
                    return None
                out.append(term)
        else:
            term = _term(split, by_var, fused)
            if term is None:
                return None
            out.append(term)
    return out


def _is_whole(split: Any, mark: Any) -> bool:
    return const(split.lower_factor) == 1 and _same(split.extent, mark.extent)


def _same(a: Any, b: Any) -> bool:
    ca, cb = const(a), const(b)
    if ca is not None or cb is not None:
        return ca == cb
    import tvm_ffi

    return bool(tvm_ffi.structural_equal(a, b))


def _term(split: Any, by_var: dict, fused: list[Fused]) -> Term | None:
    src = split.source.source
    if isinstance(src, tirx.Var):
        if src not in by_var:
            return None
        return Term(by_var[src], None, _num(split.lower_factor), _num(split.extent), _num(split.scale))
    if isinstance(src, iam.IterSumExpr):
        key = str(split.source)
        for k, f in enumerate(fused):
            if f.key == key:
                return Term(None, k, _num(split.lower_factor), _num(split.extent), _num(split.scale))
        inner_terms = []
        for inner in src.args:
            t = _term(inner, by_var, fused)
            if t is None or t.fused is not None:
                return None  # a fuse of fused marks: beyond what the engine reads
            inner_terms.append(t)
        fused.append(Fused(inner_terms, _num(split.source.extent), key))
        return Term(None, len(fused) - 1, _num(split.lower_factor), _num(split.extent), _num(split.scale))
    return None


def outer_first(pieces: list[tuple[Any, Any]]) -> list[int] | None:
    """The order, outermost first, of pieces (lower factor, extent) of one mark: the innermost has
    lower factor 1, each next one that of the one inside it times its extent (symbolic ones too, as
    ``n`` over ``(n // 1) % n``); None when the pieces make no such chain."""
    from tvm.sym import Analyzer

    analyzer = Analyzer()
    left = list(range(len(pieces)))
    order: list[int] = []
    want: Any = 1
    while left:
        nxt = next((i for i in left if _equal(analyzer, pieces[i][0], want)), None)
        if nxt is None:
            return None
        order.append(nxt)
        left.remove(nxt)
        extent = pieces[nxt][1]
        if isinstance(want, int) and isinstance(extent, int):
            want = want * extent
        else:
            a, b = _typed_pair(want, extent)
            want = analyzer.simplify(a * b)
    return order[::-1]


def _typed_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Two index values as expressions of one type (an int takes the other's; int32 widens)."""
    if isinstance(a, int) and isinstance(b, int):
        return tirx.const(a, "int64"), tirx.const(b, "int64")
    if isinstance(a, int):
        return tirx.const(a, str(b.ty)), b
    if isinstance(b, int):
        return a, tirx.const(b, str(a.ty))
    if str(a.ty) != str(b.ty):
        return tirx.Cast("int64", a) if str(a.ty) != "int64" else a, tirx.Cast("int64", b) if str(
            b.ty
        ) != "int64" else b
    return a, b


def _equal(analyzer: Any, a: Any, b: Any) -> bool:
    """Whether two index values are equal (``nhead * seqlen`` and ``seqlen * nhead`` are)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        x, y = _typed_pair(a, b)
        return _same(analyzer.simplify(x), analyzer.simplify(y)) or bool(analyzer.can_prove_equal(x, y))
    except Exception:  # noqa: BLE001  (values TVM cannot compare: not known equal)
        return False


def _num(expr: Any) -> Any:
    value = const(expr)
    return value if value is not None else expr


def same_placement(cur: FuncView, cblock: Block, tgt: FuncView, tblock: Block, predicate: bool = True) -> bool:
    """Whether a block sits as the target's does: the same loops around it (extents) and the same
    bindings and predicate (unless ``predicate`` is False), the loops matched by place."""
    import tvm_ffi

    cchain, tchain = cur.chain(cblock), tgt.chain(tblock)
    if len(cchain) != len(tchain):
        return False
    mine = [[lp.var for lp in cchain], [lp.node.extent for lp in cchain], cblock.values]
    theirs = [[lp.var for lp in tchain], [lp.node.extent for lp in tchain], tblock.values]
    if predicate:
        mine.append(cblock.realize.predicate)
        theirs.append(tblock.realize.predicate)
    return bool(tvm_ffi.structural_equal(mine, theirs, map_free_vars=True))


def accesses(block: Block, buffer: str) -> list[tuple[str, list[Any]]]:
    """Where a block's statements touch ``buffer``: ("write" / "read", the indices), in order."""
    out: list[tuple[str, list[Any]]] = []
    for name, indices, kind in _accesses_kinds(block.block.body):
        if name == buffer:
            out.append((kind, indices))
    return out


def _accesses_kinds(stmt: Any) -> list[tuple[str, list[Any], str]]:
    found: list[tuple[str, list[Any]]] = []
    _stores(stmt, found)
    kinds = []
    stores = _store_positions(stmt)
    for n, (name, indices) in enumerate(found):
        kinds.append((name, indices, "write" if n in stores else "read"))
    return kinds


def _store_positions(stmt: Any) -> set[int]:
    """Which entries of ``_stores``' list are stores (the rest are loads)."""
    marks: list[bool] = []

    def walk(s: Any) -> None:
        if isinstance(s, tirx.BufferStore):
            marks.append(True)
            loads: list = []
            _every_load(s.value, loads)
            marks.extend([False] * len(loads))
        elif isinstance(s, tirx.SeqStmt):
            for sub in s.seq:
                walk(sub)
        elif isinstance(s, tirx.IfThenElse):
            loads = []
            _every_load(s.condition, loads)
            marks.extend([False] * len(loads))
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif hasattr(s, "body") and isinstance(getattr(s, "body", None), tirx.Stmt):
            if hasattr(s, "value") and hasattr(s.value, "same_as"):
                loads = []
                _every_load(s.value, loads)
                marks.extend([False] * len(loads))
            walk(s.body)
        elif _is_bind(s):
            loads = []
            _every_load(s.value, loads)
            marks.extend([False] * len(loads))

    walk(stmt)
    return {n for n, store in enumerate(marks) if store}


def _only_moves(stmt: Any) -> bool:
    """Whether every store under ``stmt`` (through loops, sequences and nested blocks) stores a bare
    load; a tensor intrinsic's call (no store) moves what its block's regions say."""
    if isinstance(stmt, tirx.BufferStore):
        return isinstance(stmt.value, tvm.ir.TensorLoad)
    if isinstance(stmt, tirx.SeqStmt):
        return all(_only_moves(sub) for sub in stmt.seq)
    if isinstance(stmt, s_tir.SBlockRealize):
        block = stmt.block
        return block.init is None and all(int(iv.iter_type) != 2 for iv in block.iter_vars) and _only_moves(block.body)
    if isinstance(stmt, tirx.IfThenElse):
        return _only_moves(stmt.then_case) and (stmt.else_case is None or _only_moves(stmt.else_case))
    body = getattr(stmt, "body", None)
    if isinstance(body, tirx.Stmt):
        return _only_moves(body)
    return isinstance(stmt, tirx.Evaluate)


def all_accesses(block: Block) -> list[tuple[str, list[Any]]]:
    """Every buffer access of a block's statements, in order: (buffer, indices); each store before
    the loads of its value."""
    out: list[tuple[str, list[Any]]] = []
    _stores(block.block.body, out)
    return out


def _stores(stmt: Any, out: list) -> None:
    if isinstance(stmt, tirx.BufferStore):
        out.append((str(stmt.buffer.name), list(stmt.indices)))
        _every_load(stmt.value, out)
    elif isinstance(stmt, tirx.SeqStmt):
        for sub in stmt.seq:
            _stores(sub, out)
    elif isinstance(stmt, tirx.IfThenElse):
        _every_load(stmt.condition, out)
        _stores(stmt.then_case, out)
        if stmt.else_case is not None:
            _stores(stmt.else_case, out)
    elif hasattr(stmt, "body") and isinstance(getattr(stmt, "body", None), tirx.Stmt):
        if hasattr(stmt, "value") and hasattr(stmt.value, "same_as"):
            _every_load(stmt.value, out)
        _stores(stmt.body, out)
    elif _is_bind(stmt):
        _every_load(stmt.value, out)


def _is_bind(stmt: Any) -> bool:
    """A let binding with no body of its own (``v: T.let = ...`` in a sequence, as argmax writes)."""
    return isinstance(stmt, tirx.Stmt) and hasattr(stmt, "value") and hasattr(stmt.value, "same_as")


def first_store(stmt: Any) -> Any:
    """The first ``BufferStore`` of a block's statements (a sequence's, past its let bindings), or None."""
    if isinstance(stmt, tirx.BufferStore):
        return stmt
    for sub in list(getattr(stmt, "seq", None) or []) + [getattr(stmt, "body", None)]:
        if isinstance(sub, tirx.Stmt):
            found = first_store(sub)
            if found is not None:
                return found
    return None


def _every_load(expr: Any, out: list) -> None:
    if isinstance(expr, tvm.ir.TensorLoad):
        out.append((str(expr.source.name), list(expr.indices)))
        return
    for attr in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(expr, attr, None)
        if sub is not None and hasattr(sub, "same_as"):
            _every_load(sub, out)
    for sub in getattr(expr, "args", None) or []:
        if hasattr(sub, "same_as"):
            _every_load(sub, out)


def _by_elimination(block: Block, other: Block, found: dict[int, Any]) -> None:
    """The iterators no access pairs up (a buffer laid out otherwise indexes them): the one left of
    ``other`` with the same kind and extent, when there is exactly one."""
    used = [v for v in found.values() if isinstance(v, tirx.Var)]
    free = [iv for iv in other.block.iter_vars if not any(iv.var.same_as(v) for v in used)]
    missing = [k for k in range(len(block.block.iter_vars)) if k not in found]
    for k in missing:
        mine = block.block.iter_vars[k]
        like = [
            iv
            for iv in free
            if int(iv.iter_type) == int(mine.iter_type) and const(iv.dom.extent) == const(mine.dom.extent) is not None
        ]
        if len(like) == 1 and len([m for m in missing if _alike(block.block.iter_vars[m], like[0])]) == 1:
            found[k] = like[0].var
            free.remove(like[0])


def _alike(a: Any, b: Any) -> bool:
    return int(a.iter_type) == int(b.iter_type) and const(a.dom.extent) == const(b.dom.extent) is not None


def by_loop_depth(view: FuncView, block: Block) -> list[Any] | None:
    """The block's iterators in the order of the loops they are bound to (None unless each is bound
    to one loop around it)."""
    loops = {d: loop.node.loop_var for d, loop in enumerate(view.chain(block))}
    places = []
    for iv, value in zip(block.block.iter_vars, block.realize.iter_values):
        place = next((d for d, var in loops.items() if value.same_as(var)), None)
        if place is None:
            return None
        places.append((place, iv.var))
    return [v for _, v in sorted(places, key=lambda p: p[0])]


def read_as(block: Block, other: Block, skip: set[str] | None = None) -> list[Any]:
    """How ``other`` (the target's form of ``block``) reads each iterator of ``block``: the index at
    the place of the same access where ``block`` uses the iterator alone (a constant when ``other``
    reads a unit iterator as one). Raises LookupError when an iterator is not found."""
    ivars = [iv.var for iv in block.block.iter_vars]
    found: dict[int, Any] = {}
    for (name, mine), (theirs_name, theirs) in zip(all_accesses(block), all_accesses(other)):
        if name != theirs_name or len(mine) != len(theirs) or name in (skip or ()):
            continue
        for e, te in zip(mine, theirs):
            for k, v in enumerate(ivars):
                if isinstance(e, tirx.Var) and e.same_as(v):
                    found.setdefault(k, te)
    for k, iv in enumerate(block.block.iter_vars):
        if k not in found and const(iv.dom.extent) == 1:
            extent = iv.dom.extent
            found[k] = tirx.IntImm(str(getattr(extent, "dtype", None) or extent.ty.dtype), 0)
    _by_elimination(block, other, found)
    if len(found) != len(ivars):
        raise LookupError(f"block {other.name} does not read every iterator of {block.name}")
    return [found[k] for k in range(len(ivars))]
