"""Exact memory-footprint analysis of a TensorIR loop (the TVM-facing half of the access view).

Semantics (the brute-force oracle in ``tests/unit/test_access.py`` implements the same ones):

* The iteration space of a query is the subtree of the chosen ``For`` node ``L``: ``L`` runs over
  its whole range, the loops that enclose ``L`` are fixed at the values given in ``at`` (0 when
  missing). Every ``BufferLoad`` and ``BufferStore`` executed there is one access; a block's
  ``T.init()`` runs when all its reduction variables are at their first value, a ``T.where``
  predicate or an ``if`` guards the accesses beneath it.
* Order: the program read sequentially, loops of every kind (vectorised, unrolled, parallel,
  thread-bound) running their iterations in order. A loop bound to a thread tag (``threadIdx.x``)
  that an enclosing loop already binds does not iterate: its variable is that thread's index (the
  per-thread program of CUDA). Each execution of a leaf statement (a ``BufferStore``) is one
  *step*; an ``if`` counts a step for each branch and a predicated-off iteration still counts, so
  the step of an iteration is a mixed-radix number of the loop indices. A block's init shares the
  step of the first statement of its body. ``first_touch`` is the step at which an element is
  first read or written, counted from 0 at the first step of ``L``.
* Scaling: every index expression is decomposed into a sum of ``coef * digit`` where a digit is
  ``floormod(floordiv(v, place), size)`` of one loop variable (splits and fuses produce exactly
  these). Digits that appear in no index and no predicate of an access neither change what it
  touches nor, being set to 0, delay its first touch: they are collapsed, only the others are
  enumerated (numpy, one axis per digit), and injective strided maps are written through a strided
  view instead of a scatter. Indices that are not of that form are evaluated numerically over all
  the iterations of the loops they use, up to ``MAX_POINTS`` points per access, beyond which
  ``AccessAnalysisError`` is raised. Affine maps that are not injective (``A[i + k]``) go through
  ``np.minimum.at`` over their relevant digits: exact, slower.
* GPU: ``thread`` / ``block`` are the ids (x fastest) of the first touch, carried along with the
  steps (no decoding). ``analyze_gpu`` looks at one warp of one block: a request is one execution
  of an access with the thread-bound and vectorised loops as its lanes; global memory is counted
  in 32-byte sectors (buffers assumed sector-aligned), shared memory in 4-byte banks over the
  layout TVM's buffer compaction gives it at build time (``CompactBufferAllocation``).

Limits: constant loop extents only; no ``match_buffer`` (tensorized blocks), no indirect
indices (``A[B[i]]``), no loops inside ``T.init()``; the per-buffer arrays cover the bounding
box of what the loop touches (dense, so a 1024x1024 float buffer costs a few MB per query).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import tirx
from tvm.s_tir import SBlockRealize

_LOAD = tvm.ir.TensorLoad   # what a BufferLoad is in 0.27 (buffer in .source)

__all__ = ["AccessAnalysisError", "analyze_footprint", "analyze_gpu", "MAX_POINTS"]

MAX_POINTS = 1 << 26          # per access, after collapsing the digits that do not matter
_BIG = np.iinfo(np.int64).max
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


class AccessAnalysisError(ValueError):
    """The loop nest cannot be analysed (unsupported construct, too large, bad ``at``)."""


def _key(obj) -> int:
    return obj.__chandle__()


# ----------------------------------------------------------------------------------------------
# The program model: a tree of loops, sequences and leaves, built once per function.


@dataclass(eq=False)
class _Loop:
    id: int
    name: str
    var: int                  # handle of the loop variable
    min: int
    extent: int
    kind: str                 # serial / parallel / vectorized / unrolled / thread_binding
    tag: str | None           # thread tag when bound
    alias: "_Loop | None"     # enclosing loop bound to the same tag: this loop does not iterate
    node: object
    body: object = None
    parent: "_Loop | None" = None

    @property
    def trips(self) -> int:
        return 1 if self.alias is not None else self.extent


@dataclass(eq=False)
class _Access:
    buffer: str
    kind: str                 # "read" / "write"
    indices: list
    preds: list               # tvm boolean expressions
    bind: dict                # var handle -> tvm expression (block iter vars, let vars)
    chain: list               # enclosing _Loop objects, outermost first
    block: str
    label: str


@dataclass(eq=False)
class _Seq:
    children: list


@dataclass(eq=False)
class _Leaf:
    accesses: list = field(default_factory=list)


@dataclass
class _BufInfo:
    name: str
    shape: tuple
    dtype: str
    scope: str
    itemsize: int


class _Program:
    def __init__(self, func):
        self.func = func
        self.buffers: dict[str, _BufInfo] = {}
        self._buf_names: dict[int, str] = {}
        self.loops: list[_Loop] = []
        self.loop_by_node: dict[int, _Loop] = {}
        for param in func.params:      # 0.27: buffer parameters are buffer-typed variables
            if hasattr(param, "shape") and hasattr(param, "dtype"):
                self._register(param)
        self.root = self._walk(func.body, [], [], {}, "")
        self.counts: dict[int, int] = {}
        self._count(self.root)

    # buffers --------------------------------------------------------------------------------
    def _register(self, buf) -> str:
        k = _key(buf)
        if k in self._buf_names:
            return self._buf_names[k]
        name = buf.name
        while name in self.buffers:
            name = name + "'"
        shape = tuple(int(s) for s in buf.shape)
        dtype = str(buf.dtype)
        bits = tvm.runtime.DataType(dtype).bits * max(1, tvm.runtime.DataType(dtype).lanes)
        self.buffers[name] = _BufInfo(name, shape, dtype, str(buf.scope()), max(1, bits // 8))
        self._buf_names[k] = name
        return name

    def buffer_name(self, buf) -> str:
        return self._register(buf)

    # walk -----------------------------------------------------------------------------------
    def _walk(self, stmt, chain, preds, bind, block):
        if isinstance(stmt, tirx.For):
            tag = None
            if stmt.thread_binding is not None:
                tag = str(stmt.thread_binding.thread_tag)
            alias = None
            if tag is not None:
                for outer in reversed(chain):
                    if outer.tag == tag and outer.alias is None:
                        alias = outer
                        break
            try:
                lo, ext = int(stmt.min), int(stmt.extent)
            except (TypeError, ValueError):
                raise AccessAnalysisError(
                    f"loop {stmt.loop_var.name} has a symbolic range; only constant extents are supported")
            kind = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled",
                    4: "thread_binding"}.get(int(stmt.kind), "serial")
            loop = _Loop(len(self.loops), str(stmt.loop_var.name), _key(stmt.loop_var), lo, ext, kind,
                         tag, alias, stmt, parent=chain[-1] if chain else None)
            self.loops.append(loop)
            self.loop_by_node[_key(stmt)] = loop
            loop.body = self._walk(stmt.body, chain + [loop], preds, bind, block)
            return loop
        if isinstance(stmt, tirx.SeqStmt):
            return _Seq([self._walk(s, chain, preds, bind, block) for s in stmt.seq])
        if isinstance(stmt, SBlockRealize):
            blk = stmt.block
            for buf in blk.alloc_buffers:
                self._register(buf)
            if len(blk.match_buffers):
                raise AccessAnalysisError(
                    f"block {blk.name_hint} uses match_buffer (tensorized); its accesses cannot be analysed")
            bind = dict(bind)
            reduce_conds = []
            for iv, val in zip(blk.iter_vars, stmt.iter_values):
                bind[_key(iv.var)] = val
                if int(iv.iter_type) == 2:
                    reduce_conds.append(tirx.EQ(iv.var, iv.dom.min))
            preds = list(preds)
            if not (isinstance(stmt.predicate, tirx.IntImm) and int(stmt.predicate) == 1):
                preds.append(stmt.predicate)
            body = self._walk(blk.body, chain, preds, bind, blk.name_hint)
            if blk.init is not None:
                init_leaf = _Leaf()
                self._collect(blk.init, chain, preds + reduce_conds, bind, blk.name_hint, init_leaf, "init")
                first = self._first_leaf(body)
                if first is None:
                    return init_leaf
                first.accesses[:0] = init_leaf.accesses
            return body
        if isinstance(stmt, tirx.IfThenElse):
            then = self._walk(stmt.then_case, chain, preds + [stmt.condition], bind, block)
            if stmt.else_case is None:
                return then
            other = self._walk(stmt.else_case, chain, preds + [tirx.Not(stmt.condition)], bind, block)
            return _Seq([then, other])
        if isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            leaf = _Leaf()
            self._collect(stmt, chain, preds, bind, block, leaf, "")
            return leaf
        if isinstance(stmt, tirx.Bind):
            bind = dict(bind)
            bind[_key(stmt.var)] = stmt.value
            if getattr(stmt, "body", None) is None:
                return _Seq([])
            return self._walk(stmt.body, chain, preds, bind, block)
        if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
            self._register(stmt.buffer)
            body = getattr(stmt, "body", None)
            return _Seq([]) if body is None else self._walk(body, chain, preds, bind, block)
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            return self._walk(body, chain, preds, bind, block)
        return _Seq([])

    def _first_leaf(self, node):
        if isinstance(node, _Leaf):
            return node
        if isinstance(node, _Loop):
            return self._first_leaf(node.body)
        for c in node.children:
            found = self._first_leaf(c)
            if found is not None:
                return found
        return None

    def _collect(self, stmt, chain, preds, bind, block, leaf, label):
        """Accesses of one statement (loads first, in evaluation order, then the store)."""
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self._collect(s, chain, preds, bind, block, leaf, label)
            return
        if isinstance(stmt, tirx.For):
            raise AccessAnalysisError(f"block {block} has loops inside its init; not supported")
        loads = []

        def visit(e):
            if isinstance(e, _LOAD):
                for ix in e.indices:
                    visit(ix)
                loads.append(e)
                return
            for name in ("a", "b", "value", "condition", "true_value", "false_value"):
                sub = getattr(e, name, None) if not isinstance(e, (tirx.Var, tirx.IntImm)) else None
                if isinstance(sub, tvm.ir.Expr):
                    visit(sub)
            if isinstance(e, tvm.ir.Call):
                for a in e.args:
                    visit(a)

        if isinstance(stmt, tirx.BufferStore):
            visit(stmt.value)
            for ix in stmt.indices:
                visit(ix)
        elif isinstance(stmt, tirx.Evaluate):
            visit(stmt.value)
        else:
            return
        for ld in loads:
            if any(_has_load(ix) for ix in ld.indices):
                raise AccessAnalysisError(f"block {block} has an indirect index ({ld}); not supported")
            leaf.accesses.append(_Access(self.buffer_name(ld.source), "read", list(ld.indices), preds,
                                         bind, chain, block, label))
        if isinstance(stmt, tirx.BufferStore):
            if any(_has_load(ix) for ix in stmt.indices):
                raise AccessAnalysisError(f"block {block} has an indirect index; not supported")
            leaf.accesses.append(_Access(self.buffer_name(stmt.buffer), "write", list(stmt.indices),
                                         preds, bind, chain, block, label))

    def _count(self, node) -> int:
        if isinstance(node, _Leaf):
            n = 1
        elif isinstance(node, _Loop):
            n = node.trips * self._count(node.body)
        else:
            n = sum(self._count(c) for c in node.children)
        self.counts[id(node)] = n
        return n

    def count(self, node) -> int:
        return self.counts[id(node)]


_PROGRAMS: dict[int, _Program] = {}


def _program(func) -> _Program:
    k = _key(func)
    prog = _PROGRAMS.get(k)
    if prog is None or not prog.func.same_as(func):
        prog = _Program(func)
        if len(_PROGRAMS) > 32:
            _PROGRAMS.clear()
        _PROGRAMS[k] = prog
    return prog


# ----------------------------------------------------------------------------------------------
# Affine decomposition into digits


class _NonAffine(Exception):
    pass


@dataclass(frozen=True)
class _Digit:
    loop: int       # _Loop.id of the iterating loop
    place: int
    size: int | None   # None: the top digit (no modulus)


class _Context:
    """What the variables of one query mean: inside loops, fixed outer values, bindings."""

    def __init__(self, prog: _Program, L: _Loop, at: dict[str, int]):
        self.prog = prog
        self.L = L
        chain = []
        p = L.parent
        while p is not None:
            chain.append(p)
            p = p.parent
        chain.reverse()
        self.enclosing = chain
        names = {lp.name: lp for lp in chain}
        unknown = set(at) - set(names)
        if unknown:
            raise AccessAnalysisError(
                f"'at' names loops that do not enclose {L.name}: {sorted(unknown)}; "
                f"enclosing loops are {[lp.name for lp in chain]}")
        self.fixed: dict[int, int] = {}        # var handle -> value
        for lp in chain:
            if lp.alias is not None:
                self.fixed[lp.var] = self.fixed[lp.alias.var]
                continue
            v = int(at.get(lp.name, lp.min))
            if not lp.min <= v < lp.min + lp.extent:
                raise AccessAnalysisError(
                    f"at[{lp.name!r}] = {v} is outside the loop's range [{lp.min}, {lp.min + lp.extent})")
            self.fixed[lp.var] = v
        self.inside: dict[int, _Loop] = {}      # var handle -> iterating loop (after aliasing)
        self.extra_bounds: list[tuple] = []     # (iterating loop, extent of an aliased inner loop)
        self.weights: dict[int, int] = {}       # loop id -> steps per iteration
        self.leaf_offset: dict[int, int] = {}   # id(_Leaf) -> first step
        self.leaves: list[_Leaf] = []
        self._layout(L, 0)

    def _layout(self, node, offset):
        prog = self.prog
        if isinstance(node, _Leaf):
            self.leaf_offset[id(node)] = offset
            self.leaves.append(node)
            return
        if isinstance(node, _Loop):
            self.weights[node.id] = prog.count(node.body)
            if node.alias is None:
                self.inside[node.var] = node
            self._layout(node.body, offset)
            return
        for c in node.children:
            self._layout(c, offset)
            offset += prog.count(c)

    def resolve(self, lp: _Loop):
        """(iterating loop or None, constant or None, bound) for a loop of an access chain."""
        target = lp
        while target.alias is not None:
            target = target.alias
        return target


def _digit_range(d: _Digit, loops) -> int:
    if d.size is not None:
        return d.size
    lp = loops[d.loop]
    return -(-lp.extent // d.place)


class _Aff:
    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms = terms or {}
        self.const = const

    def add(self, other, sign=1):
        t = dict(self.terms)
        for d, c in other.terms.items():
            t[d] = t.get(d, 0) + sign * c
            if t[d] == 0:
                del t[d]
        return _Aff(t, self.const + sign * other.const)

    def scale(self, c):
        if c == 0:
            return _Aff()
        return _Aff({d: v * c for d, v in self.terms.items()}, self.const * c)


class _Decomposer:
    def __init__(self, ctx: _Context, bind: dict, chain_vars: dict):
        self.ctx = ctx
        self.bind = bind
        self.chain_vars = chain_vars      # var handle -> _Loop of the access chain
        self.loops = ctx.prog.loops
        self.memo: dict[int, _Aff] = {}

    def var(self, v):
        k = _key(v)
        if k in self.memo:
            return self.memo[k]
        if k in self.bind:
            r = self.lin(self.bind[k])
        elif k in self.ctx.fixed:
            r = _Aff(const=self.ctx.fixed[k])
        elif k in self.chain_vars:
            lp = self.ctx.resolve(self.chain_vars[k])
            if lp.var in self.ctx.fixed:
                r = _Aff(const=self.ctx.fixed[lp.var])
            else:
                r = _Aff({_Digit(lp.id, 1, None): 1}, lp.min)
        else:
            raise AccessAnalysisError(f"variable {v.name} is neither a loop nor a block variable")
        self.memo[k] = r
        return r

    def lin(self, e) -> _Aff:
        if isinstance(e, tirx.IntImm):
            return _Aff(const=int(e))
        if isinstance(e, tirx.Var):
            return self.var(e)
        if isinstance(e, tirx.Add):
            return self.lin(e.a).add(self.lin(e.b))
        if isinstance(e, tirx.Sub):
            return self.lin(e.a).add(self.lin(e.b), -1)
        if isinstance(e, tirx.Mul):
            a, b = self.lin(e.a), self.lin(e.b)
            if not a.terms:
                return b.scale(a.const)
            if not b.terms:
                return a.scale(b.const)
            raise _NonAffine
        if isinstance(e, tirx.Cast) and "int" in str(e.dtype):
            return self.lin(e.value)
        if isinstance(e, (tirx.FloorDiv, tirx.FloorMod)):
            b = self.lin(e.b)
            if b.terms or b.const <= 0:
                raise _NonAffine
            q, r = self.divmod(self.lin(e.a), b.const)
            return q if isinstance(e, tirx.FloorDiv) else r
        raise _NonAffine

    def rng(self, d: _Digit) -> int:
        return _digit_range(d, self.loops)

    def divmod(self, a: _Aff, c: int):
        """a = c*q + r with 0 <= r < c, q and r sums of digits."""
        if c == 1:
            return a, _Aff()
        q, r = _Aff(const=a.const // c), _Aff(const=a.const % c)
        for d, coef in a.terms.items():
            if coef < 0:
                raise _NonAffine
            if coef % c == 0:
                q.terms[d] = q.terms.get(d, 0) + coef // c
            elif c % coef == 0:
                f = c // coef
                n = self.rng(d)
                if n <= f:
                    r.terms[d] = r.terms.get(d, 0) + coef
                else:
                    if d.size is not None and d.size % f:
                        raise _NonAffine
                    hi = _Digit(d.loop, d.place * f, None if d.size is None else d.size // f)
                    lo = _Digit(d.loop, d.place, f)
                    q.terms[hi] = q.terms.get(hi, 0) + 1
                    r.terms[lo] = r.terms.get(lo, 0) + coef
            else:
                r.terms[d] = r.terms.get(d, 0) + coef
        top = r.const + sum(coef * (self.rng(d) - 1) for d, coef in r.terms.items())
        if top >= c:
            raise _NonAffine
        return q, r


# ----------------------------------------------------------------------------------------------
# Numeric evaluation of expressions over numpy arrays (the general path and predicates)

def _eval(e, env: dict, bind: dict):
    if isinstance(e, tirx.IntImm):
        return int(e)
    if isinstance(e, tirx.Var):
        k = _key(e)
        if k in env:
            return env[k]
        if k in bind:
            val = _eval(bind[k], env, bind)
            env[k] = val
            return val
        raise AccessAnalysisError(f"variable {e.name} has no value")
    if isinstance(e, tirx.Cast):
        return _eval(e.value, env, bind)
    binops = {
        tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply,
        tirx.FloorDiv: np.floor_divide, tirx.FloorMod: np.mod, tirx.Min: np.minimum,
        tirx.Max: np.maximum, tirx.LT: np.less, tirx.LE: np.less_equal, tirx.GT: np.greater,
        tirx.GE: np.greater_equal, tirx.EQ: np.equal, tirx.NE: np.not_equal,
        tirx.And: np.logical_and, tirx.Or: np.logical_or,
    }
    for cls, fn in binops.items():
        if type(e) is cls:
            return fn(_eval(e.a, env, bind), _eval(e.b, env, bind))
    if isinstance(e, tirx.Div):
        a, b = _eval(e.a, env, bind), _eval(e.b, env, bind)
        return np.trunc(np.true_divide(a, b)).astype(np.int64)
    if isinstance(e, tirx.Mod):
        a, b = _eval(e.a, env, bind), _eval(e.b, env, bind)
        return np.fmod(a, b)
    if isinstance(e, tirx.Not):
        return np.logical_not(_eval(e.a, env, bind))
    if isinstance(e, tirx.Select):
        return np.where(_eval(e.condition, env, bind), _eval(e.true_value, env, bind),
                        _eval(e.false_value, env, bind))
    if isinstance(e, tvm.ir.Call) and str(e.op.name) in ("tirx.likely", "tir.likely"):
        return _eval(e.args[0], env, bind)
    if isinstance(e, tvm.ir.Call) and str(e.op.name) in ("tirx.if_then_else", "tir.if_then_else"):
        c, a, b = (_eval(x, env, bind) for x in e.args)
        return np.where(c, a, b)
    raise AccessAnalysisError(f"cannot evaluate index expression {e}")


# ----------------------------------------------------------------------------------------------
# One access over its relevant digits


@dataclass
class _Grid:
    """An access enumerated over its relevant digits (one numpy axis per digit)."""

    acc: _Access
    n_reads: int
    n_writes: int
    shape: tuple
    dims: list                # per buffer dim: (coefs per axis, const) or an evaluated array
    ev_aff: tuple             # step of a point = const + sum(weight[axis] * digit)
    mask: object              # bool array (broadcastable) or None
    mult: int                 # iterations collapsed into each point
    digits: list              # _Digit per axis
    who_aff: tuple = None     # ((const, weights) thread, (const, weights) block); GPU only
    dtype: object = np.int64

    def outer(self, aff, order=None):
        """An affine function of the axes as an array, axes in ``order`` (memory order of a view)."""
        c, w = aff
        order = list(range(len(self.shape))) if order is None else order
        nd = len(order)
        out = self.dtype(c)
        for j, i in enumerate(order):
            if w[i]:
                out = out + _axis(self.shape[i], j, nd, self.dtype) * self.dtype(w[i])
        return np.broadcast_to(out, tuple(self.shape[i] for i in order))

    @property
    def ev(self):
        return self.outer(self.ev_aff)

    @property
    def who(self):
        return None if self.who_aff is None else tuple(self.outer(a) for a in self.who_aff)


def _axis(arr_len: int, axis: int, ndim: int, dtype=np.int64):
    shape = [1] * ndim
    shape[axis] = arr_len
    return np.arange(arr_len, dtype=dtype).reshape(shape)


def _grid(ctx: _Context, acc: _Access, leaf_offset: int, n_reads: int, n_writes: int,
          lanes: frozenset = frozenset(), step_dtype=np.int64) -> _Grid:
    prog = ctx.prog
    loops = prog.loops
    chain_vars = {lp.var: lp for lp in acc.chain}
    inside_chain = []                       # iterating loops of this access inside L
    for lp in acc.chain:
        t = ctx.resolve(lp)
        if t.var in ctx.inside and t not in inside_chain:
            inside_chain.append(t)
    dec = _Decomposer(ctx, acc.bind, chain_vars)
    dims_aff: list = []
    full_vars: set[int] = set()
    # vars used by predicates / non-affine dims are enumerated whole
    pred_vars: set[int] = set()

    def vars_of(e):
        out = set()

        def f(x):
            if isinstance(x, tirx.Var):
                k = _key(x)
                if k in acc.bind:
                    out.update(vars_of(acc.bind[k]))
                elif k in chain_vars:
                    t = ctx.resolve(chain_vars[k])
                    if t.var in ctx.inside:
                        out.add(t.id)
        _visit(e, f)
        return out

    for ix in acc.indices:
        try:
            dims_aff.append(dec.lin(ix))
        except _NonAffine:
            dims_aff.append(None)
            full_vars |= vars_of(ix)
    preds = list(acc.preds)
    for p in preds:
        pred_vars |= vars_of(p)
    full_vars |= pred_vars
    # aliased inner loops narrower than their thread: an implicit bound
    bounds = []
    for lp in acc.chain:
        t = ctx.resolve(lp)
        if lp is not t and t.var in ctx.inside and lp.extent < t.extent:
            bounds.append((t.id, lp.extent))
            full_vars.add(t.id)
        elif lp is not t and t.var in ctx.fixed and not ctx.fixed[t.var] < lp.extent:
            return None
    # digit refinement per iterating loop
    marks: dict[int, set] = {lp.id: set() for lp in inside_chain}
    for aff in dims_aff:
        if aff is None:
            continue
        for d in aff.terms:
            marks[d.loop].add(d.place)
            if d.size is not None:
                marks[d.loop].add(d.place * d.size)
    refined: dict[int, list] = {}
    relevant_digits: dict[int, list] = {}
    for lp in inside_chain:
        pts = sorted({p for p in marks[lp.id] if p < lp.extent} | {1})
        ok = all(b % a == 0 for a, b in zip(pts, pts[1:]))
        if not ok:
            full_vars.add(lp.id)
            pts = [1]
        if lp.extent % pts[-1]:
            full_vars.add(lp.id)
        if lp.id in full_vars and not ok:
            digs = [_Digit(lp.id, 1, None)]
        else:
            digs = [_Digit(lp.id, a, b // a) for a, b in zip(pts, pts[1:])] + [_Digit(lp.id, pts[-1], None)]
        refined[lp.id] = digs
        if lp.id in full_vars:
            relevant_digits[lp.id] = list(digs)
        else:
            used = []
            for dg in digs:
                hi = None if dg.size is None else dg.place * dg.size
                for aff in dims_aff:
                    if aff is None:
                        continue
                    if any(t.loop == lp.id and t.place <= dg.place and
                           (t.size is None or (hi is not None and hi <= t.place * t.size))
                           for t in aff.terms):
                        used.append(dg)
                        break
            relevant_digits[lp.id] = used
    # axes: outer loop first, high place first -> steps increase along C order
    axes: list[_Digit] = []
    mult = 1
    for lp in inside_chain:
        if lp.id in lanes:
            continue
        rel = relevant_digits[lp.id]
        for dg in reversed(refined[lp.id]):
            if dg in rel:
                axes.append(dg)
            else:
                mult *= _digit_range(dg, loops)
    # loops of L's subtree that iterate but are not on this access's chain do not matter
    ndim = len(axes)
    shape = tuple(_digit_range(d, loops) for d in axes)
    npts = math.prod(shape)
    if npts > MAX_POINTS:
        raise AccessAnalysisError(
            f"access {acc.label} of block {acc.block} needs {npts} points to enumerate (limit {MAX_POINTS}); "
            f"its indices are not affine in the loops {[loops[d.loop].name for d in axes]}")
    if lanes:
        return _Grid(acc, n_reads, n_writes, shape, [], None, None, mult, axes)
    ev_aff = (leaf_offset, [ctx.weights[d.loop] * d.place for d in axes])
    ar = [_axis(n, i, ndim) for i, n in enumerate(shape)]
    ax_of = {d: i for i, d in enumerate(axes)}
    # step of each point

    def digit_expand(aff: _Aff):
        """coefs per axis + const."""
        coefs = np.zeros(ndim, dtype=np.int64)
        const = aff.const
        for t, c in aff.terms.items():
            hi = None if t.size is None else t.place * t.size
            for dg in refined[t.loop]:
                if dg.place >= t.place and (hi is None or dg.place < hi):
                    if dg in ax_of:
                        coefs[ax_of[dg]] += c * (dg.place // t.place)
        return coefs, const

    env: dict = None

    def get_env():
        nonlocal env
        if env is None:
            env = {}
            for lp in inside_chain:
                val = np.int64(lp.min)
                for dg in refined[lp.id]:
                    if dg in ax_of:
                        val = val + ar[ax_of[dg]] * dg.place
                env[lp.var] = val
            for k, v in ctx.fixed.items():
                env[k] = v
            for lp in acc.chain:
                t = ctx.resolve(lp)
                if lp is not t:
                    env[lp.var] = env[t.var]
        return env

    dims = []
    for ix, aff in zip(acc.indices, dims_aff):
        if aff is not None:
            dims.append(digit_expand(aff))
        else:
            dims.append(np.asarray(_eval(ix, dict(get_env()), acc.bind), dtype=np.int64))
    mask = None
    for p in preds:
        m = np.asarray(_eval(p, dict(get_env()), acc.bind), dtype=bool)
        mask = m if mask is None else (mask & m)
    for lid, ext in bounds:
        lp = loops[lid]
        m = (get_env()[lp.var] - lp.min) < ext
        mask = m if mask is None else (mask & m)
    for lp in inside_chain:
        if lp.extent % refined[lp.id][-1].place and len(refined[lp.id]) > 1:
            m = (get_env()[lp.var] - lp.min) < lp.extent
            mask = m if mask is None else (mask & m)
    if mask is not None and mask.ndim == 0:
        if not bool(mask):
            return None
        mask = None
    who = None
    launch = _launch(prog)
    if launch:
        tagval = {}
        for lp in acc.chain:
            t = ctx.resolve(lp)
            if t.tag is None or t.tag in tagval:
                continue
            if t.var in ctx.fixed:
                tagval[t.tag] = (ctx.fixed[t.var], np.zeros(ndim, dtype=np.int64))
            elif t.var in ctx.inside:
                w = np.zeros(ndim, dtype=np.int64)
                for dg in refined[t.id]:
                    if dg in ax_of:
                        w[ax_of[dg]] += dg.place
                tagval[t.tag] = (t.min, w)

        def linear(tags):
            if not any(t in tagval for t in tags):
                return (-1, np.zeros(ndim, dtype=np.int64))
            zero = (0, np.zeros(ndim, dtype=np.int64))
            (cx, wx), (cy, wy), (cz, wz) = (tagval.get(t, zero) for t in tags)
            nx, ny = launch.get(tags[0], 1), launch.get(tags[1], 1)
            return (cx + nx * (cy + ny * cz), wx + nx * (wy + ny * wz))

        who = (linear(THREAD_TAGS), linear(BLOCK_TAGS))
    return _Grid(acc, n_reads, n_writes, shape, dims, ev_aff, mask, mult, axes, who, step_dtype)


def _visit(e, f):
    f(e)
    if isinstance(e, (tirx.Var, tirx.IntImm, tirx.FloatImm)):
        return
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, name, None)
        if isinstance(sub, tvm.ir.Expr):
            _visit(sub, f)
    if isinstance(e, tvm.ir.Call):
        for a in e.args:
            _visit(a, f)
    if isinstance(e, _LOAD):
        for a in e.indices:
            _visit(a, f)


def _has_load(e) -> bool:
    found = []
    _visit(e, lambda x: found.append(x) if isinstance(x, _LOAD) else None)
    return bool(found)


# ----------------------------------------------------------------------------------------------
# Accumulation per buffer


def _groups(ctx: _Context):
    """Accesses of the subtree, identical ones merged (same leaf, buffer, indices, guards)."""
    out = []
    for leaf in ctx.leaves:
        seen: dict = {}
        for acc in leaf.accesses:
            key = (acc.buffer, acc.label, tuple(str(i) for i in acc.indices), tuple(str(p) for p in acc.preds),
                   tuple(lp.id for lp in acc.chain))
            if key in seen:
                g = seen[key]
                g[1 if acc.kind == "read" else 2] += 1
                continue
            g = [acc, int(acc.kind == "read"), int(acc.kind == "write"), ctx.leaf_offset[id(leaf)]]
            seen[key] = g
            out.append(g)
    return out


def _take_first(ev, who, axes):
    """``who`` at the first (smallest-step) point along ``axes``; ev holds BIG where masked."""
    keep = [i for i in range(ev.ndim) if i not in axes]
    perm = keep + list(axes)
    kshape = tuple(ev.shape[i] for i in keep)
    e = np.transpose(np.broadcast_to(ev, ev.shape), perm).reshape(kshape + (-1,))
    arg = e.argmin(axis=-1)[..., None]
    out = []
    for w in who:
        wf = np.transpose(np.broadcast_to(w, ev.shape), perm).reshape(kshape + (-1,))
        out.append(np.take_along_axis(wf, arg, axis=-1)[..., 0])
    return tuple(out)


def _dim_range(grid: _Grid, d: int):
    spec = grid.dims[d]
    if isinstance(spec, tuple):
        coefs, const = spec
        lo = const + sum(min(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        hi = const + sum(max(0, c * (n - 1)) for c, n in zip(coefs, grid.shape))
        return int(lo), int(hi)
    return int(spec.min()), int(spec.max())


class _BufAcc:
    """Per-buffer accumulators (flat, padded so that predicated-off points stay in memory)."""

    READ, WRITE = 1, 2

    def __init__(self, info: _BufInfo, ranges, dtype, counts: bool = True):
        self.info = info
        self.with_counts = counts
        self.dt = dtype
        self.big = np.iinfo(dtype).max
        # the working box: the union of the accesses' index ranges (it may stick out of the
        # buffer where a predicate masks the points; the result is clipped and checked)
        lo = [min(r[d][0] for r in ranges) for d in range(len(info.shape))]
        hi = [max(r[d][1] for r in ranges) for d in range(len(info.shape))]
        for r in ranges:
            for d, (a, b) in enumerate(r):
                lo[d] = min(lo[d], a)
                hi[d] = max(hi[d], b)
        self.lo = lo
        self.pshape = tuple(b - a + 1 for a, b in zip(lo, hi))
        self.size = math.prod(self.pshape)
        self.first = self.count = self.kinds = None     # allocated by the first access
        self.who = None           # thread / block of the first touch, when the kernel binds threads
        self.fresh = True
        st, s = [], 1
        for ext in reversed(self.pshape):
            st.append(s)
            s *= ext
        self.strides = list(reversed(st))
        self.n_reads = 0
        self.n_writes = 0

    def add(self, g: _Grid):
        ndim = len(g.shape)
        shape = tuple(g.shape)
        mask = None if g.mask is None else np.broadcast_to(g.mask, shape)
        if self.first is None:
            # an injective unmasked first access covering the whole box writes every element:
            # no need to pre-fill (memset of a 1024x1024 buffer is a visible cost)
            cover = mask is None and math.prod(shape) == self.size and all(isinstance(d, tuple) for d in g.dims)
            alloc = (lambda fill: np.empty(self.size, self.dt)) if cover else (
                lambda fill: np.full(self.size, fill, self.dt))
            self.first = alloc(self.big)
            if self.with_counts:
                self.count = np.empty(self.size, self.dt) if cover else np.zeros(self.size, self.dt)
            self.kinds = np.empty(self.size, np.uint8) if cover else np.zeros(self.size, np.uint8)
            if g.who_aff is not None:
                self.who = (alloc(-1), alloc(-1))
            self._cover = cover
        if g.who_aff is not None and self.who is None:
            self.who = (np.full(self.size, -1, self.dt), np.full(self.size, -1, self.dt))
        if all(isinstance(s, tuple) for s in g.dims):
            flat = np.zeros(ndim, dtype=np.int64)
            base = 0
            for d, (coefs, const) in enumerate(g.dims):
                flat += coefs * self.strides[d]
                base += (const - self.lo[d]) * self.strides[d]
            # axes that do not move the address (they come from predicates): fold them
            zero = tuple(i for i in range(ndim) if flat[i] == 0)
            if self.fresh and self._cover and not (not zero and self._injective(shape, [int(f) for f in flat])):
                self.first.fill(self.big)
                if self.count is not None:
                    self.count.fill(0)
                self.kinds.fill(0)
                if self.who is not None:
                    self.who[0].fill(-1)
                    self.who[1].fill(-1)
            if mask is None and not zero and self._injective(shape, [int(f) for f in flat]):
                # the common case: build steps (and threads) directly in the view's memory order
                perm = sorted(range(ndim), key=lambda i: -abs(int(flat[i])))
                pshape = tuple(shape[i] for i in perm)
                evm = g.outer(g.ev_aff, perm)
                who = None if g.who_aff is None else tuple(g.outer(a, perm) for a in g.who_aff)
                self._strided(int(base), pshape, [int(flat[i]) for i in perm], evm, g.mult, True, g, who)
                return
            ev = g.ev
            who = g.who
            if mask is not None:
                evm = np.where(mask, ev, self.big)
                cnt = mask.astype(self.dt)
                if zero:
                    if who is not None:
                        who = _take_first(evm, who, zero)
                    evm = evm.min(axis=zero)
                    cnt = cnt.sum(axis=zero, dtype=self.dt)
                if g.mult != 1:
                    cnt = cnt * self.dt(g.mult)
                anym = cnt > 0
            else:
                if zero and who is not None:
                    who = _take_first(ev, who, zero)
                evm = ev.min(axis=zero) if zero else ev
                cnt = g.mult * math.prod(shape[i] for i in zero)
                anym = True
            keep = [i for i in range(ndim) if i not in zero]
            kshape = tuple(shape[i] for i in keep)
            kflat = [int(flat[i]) for i in keep]
            inj = self._injective(kshape, kflat)
            if who is not None and zero:
                pass
            elif who is not None:
                who = tuple(np.broadcast_to(w, kshape) for w in who)
            if inj:
                self._strided(int(base), kshape, kflat, evm, cnt, anym, g, who)
                return
            offs = np.int64(base)
            for j, i in enumerate(keep):
                offs = offs + _axis(shape[i], j, len(keep)) * kflat[j]
            self._scatter(np.broadcast_to(offs, kshape), evm, cnt, anym, g, who)
            return
        ev, who = g.ev, g.who
        offs = np.int64(0)
        for d, spec in enumerate(g.dims):
            if isinstance(spec, tuple):
                coefs, const = spec
                idx = np.int64(const - self.lo[d])
                for i in range(ndim):
                    if coefs[i]:
                        idx = idx + _axis(shape[i], i, ndim) * int(coefs[i])
            else:
                idx = spec - self.lo[d]
            offs = offs + idx * self.strides[d]
        offs = np.broadcast_to(offs, shape)
        self._scatter(offs, ev, g.mult, True if mask is None else mask, g, who)

    @staticmethod
    def _injective(shape, flat) -> bool:
        """Sorted by |stride|, each stride exceeds the span of the smaller ones: no two points collide."""
        span = 0
        for i in sorted(range(len(flat)), key=lambda i: abs(flat[i])):
            if shape[i] == 1:
                continue
            if abs(flat[i]) <= span:
                return False
            span += abs(flat[i]) * (shape[i] - 1)
        return True

    def _bits(self, g: _Grid) -> int:
        return (self.READ if g.n_reads else 0) | (self.WRITE if g.n_writes else 0)

    def _strided(self, base, kshape, kflat, evm, cnt, anym, g, who):
        from numpy.lib.stride_tricks import as_strided

        def view(arr):
            return as_strided(arr[base:], shape=kshape, strides=[s * arr.itemsize for s in kflat], writeable=True)

        vf, vk = view(self.first), view(self.kinds)
        vc = None if self.count is None else view(self.count)
        per = g.n_reads + g.n_writes
        bits = self._bits(g)
        if who is not None:
            vt, vb = view(self.who[0]), view(self.who[1])
            if self.fresh:
                vt[...] = who[0]
                vb[...] = who[1]
            else:
                better = evm < vf
                np.copyto(vt, who[0], where=better)
                np.copyto(vb, who[1], where=better)
        if self.fresh:
            # nothing touched yet: plain assignments (an injective view writes each element once)
            vf[...] = evm
            if vc is not None:
                vc[...] = np.asarray(cnt) * per
            vk[...] = np.where(anym, bits, 0) if anym is not True else bits
        else:
            np.minimum(vf, evm, out=vf)
            if vc is not None:
                vc += np.asarray(cnt, dtype=self.dt) * self.dt(per)
            if anym is True:
                vk |= np.uint8(bits)
            else:
                vk |= np.where(anym, bits, 0).astype(np.uint8)
        self.fresh = False
        total = int(np.sum(cnt)) if np.ndim(cnt) else int(cnt) * math.prod(kshape)
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def _scatter(self, offs, evm, cnt, anym, g, who):
        shape = offs.shape
        offs = np.ascontiguousarray(offs).reshape(-1)
        evm = np.ascontiguousarray(np.broadcast_to(evm, shape)).reshape(-1)
        cnt = np.ascontiguousarray(np.broadcast_to(np.asarray(cnt, dtype=np.int64), shape)).reshape(-1)
        if who is not None:
            who = [np.ascontiguousarray(np.broadcast_to(w, shape)).reshape(-1) for w in who]
        if anym is not True:
            sel = np.ascontiguousarray(np.broadcast_to(anym, shape)).reshape(-1)
            offs, evm, cnt = offs[sel], evm[sel], cnt[sel]
            if who is not None:
                who = [w[sel] for w in who]
        per = g.n_reads + g.n_writes
        np.minimum.at(self.first, offs, evm.astype(self.dt))
        if who is not None:
            # the point whose step is now the element's first touch names the thread
            hit = self.first[offs] == evm
            self.who[0][offs[hit]] = who[0][hit]
            self.who[1][offs[hit]] = who[1][hit]
        if self.count is not None:
            self.count += np.bincount(offs, weights=cnt * per, minlength=self.count.size).astype(self.dt)
        self.kinds[offs] |= np.uint8(self._bits(g))
        self.fresh = False
        total = int(cnt.sum())
        self.n_reads += g.n_reads * total
        self.n_writes += g.n_writes * total

    def result(self):
        shape = self.pshape
        full = tuple(self.info.shape)
        kinds = self.kinds.reshape(shape)
        # box -> buffer: the part of the working box inside the buffer, on both sides
        src = tuple(slice(max(0, -a), min(p, s - a)) for a, p, s in zip(self.lo, shape, full))
        dst = tuple(slice(max(0, a), min(s, a + p)) for a, p, s in zip(self.lo, shape, full))
        inner = kinds[src]
        if int(np.count_nonzero(inner)) != int(np.count_nonzero(kinds)):
            raise AccessAnalysisError(f"buffer {self.info.name} is accessed out of its bounds {full}")
        untouched = inner == 0

        n_untouched = inner.size - int(np.count_nonzero(inner))
        whole = shape == full

        def place(arr, fill):
            if whole:   # the box is the buffer: fix up in place
                out = arr.reshape(full)
                if fill != 0 and n_untouched:
                    np.putmask(out, untouched, fill)
                return out
            box = arr.reshape(shape)[src]
            if fill == 0:
                out = np.zeros(full, dtype=arr.dtype)
            else:
                out = np.full(full, fill, dtype=arr.dtype)
                box = np.where(untouched, fill, box)
            out[dst] = box
            return out

        rd = np.zeros(full, dtype=bool)
        wr = np.zeros(full, dtype=bool)
        rd[dst] = (inner & self.READ) != 0
        wr[dst] = (inner & self.WRITE) != 0
        first = place(self.first, -1)
        count = None if self.count is None else place(self.count, 0)
        who = None if self.who is None else [place(w, -1) for w in self.who]
        return rd, wr, first, count, who


# ----------------------------------------------------------------------------------------------
# Public entry points


def _find_loop(prog: _Program, loop) -> _Loop:
    lp = prog.loop_by_node.get(_key(loop))
    if lp is None:
        for cand in prog.loops:
            if cand.node.same_as(loop):
                return cand
        raise AccessAnalysisError("the loop given is not part of this function")
    return lp


def _strides_table(prog: _Program, ctx: _Context, groups):
    """Stride in elements of each loop (enclosing ones included) in each access's flat index."""
    per_buf: dict[str, dict] = {}
    per_access: list[dict] = []
    for acc, nr, nw, off in groups:
        info = prog.buffers[acc.buffer]
        chain_vars = {lp.var: lp for lp in acc.chain}
        sym_ctx = _SymbolicCtx(ctx)
        dec = _Decomposer(sym_ctx, acc.bind, chain_vars)
        row = {}
        flat = {}
        ok = True
        rs = 1
        rstr = []
        for s in reversed(info.shape):
            rstr.append(rs)
            rs *= s
        rstr.reverse()
        for d, ix in enumerate(acc.indices):
            try:
                aff = dec.lin(ix)
            except _NonAffine:
                ok = False
                break
            for t, c in aff.terms.items():
                flat.setdefault(t.loop, []).append((t, c * rstr[d]))
        for lp in acc.chain:
            t = ctx.resolve(lp)
            if not ok:
                row[lp.name] = None
                continue
            terms = flat.get(t.id, [])
            if not terms:
                row[lp.name] = 0
            elif len(terms) == 1 and terms[0][0].place == 1 and terms[0][0].size is None:
                row[lp.name] = int(terms[0][1])
            else:
                row[lp.name] = None
        per_access.append({"buffer": acc.buffer, "block": acc.block,
                           "kind": "read" if nr else "write", "strides": row})
        cur = per_buf.setdefault(acc.buffer, {})
        for name, s in row.items():
            if name in cur and cur[name] != s:
                cur[name] = None
            else:
                cur.setdefault(name, s)
    return per_buf, per_access


class _SymbolicCtx:
    """A context where every loop (enclosing ones too) is a variable: for strides."""

    def __init__(self, ctx: _Context):
        self.prog = ctx.prog
        self.fixed = {}
        self.inside = {lp.var: lp for lp in ctx.prog.loops if lp.alias is None}
        self.resolve = ctx.resolve


def analyze_footprint(func, loop, at: dict | None = None, counts: bool = True) -> dict[str, dict]:
    """Footprint of every buffer over the iterations of ``loop`` (a ``For`` of ``func``).

    Returns ``{"buffers": {name: {...}}, "meta": {...}}``: per buffer numpy arrays of its shape
    (``reads``, ``writes``, ``first_touch``, ``count`` (None unless ``counts``), ``thread`` and
    ``block`` for GPU kernels) and scalars; see ``mlc_lab.core.access.Footprint``.
    Buffers not touched under ``loop`` are included with empty masks.
    """
    prog = _program(func)
    L = _find_loop(prog, loop)
    ctx = _Context(prog, L, dict(at or {}))
    steps = prog.count(L)
    groups = _groups(ctx)
    per_step = max([1] + [sum(1 for _ in leaf.accesses) for leaf in ctx.leaves])
    dt = np.int32 if steps * per_step < np.iinfo(np.int32).max - 1 else np.int64
    grids = []
    for acc, nr, nw, off in groups:
        g = _grid(ctx, acc, off, nr, nw, step_dtype=dt)
        if g is not None:
            grids.append(g)
    by_buf: dict[str, list] = {}
    for g in grids:
        by_buf.setdefault(g.acc.buffer, []).append(g)
    per_buf_strides, per_access = _strides_table(prog, ctx, groups)
    gpu = bool(_launch(prog))
    out = {}
    for name, info in prog.buffers.items():
        gs = by_buf.get(name, [])
        entry = {"shape": info.shape, "dtype": info.dtype, "scope": info.scope,
                 "itemsize": info.itemsize, "strides": per_buf_strides.get(name, {})}
        if gs:
            ranges = [[_dim_range(g, d) for d in range(len(info.shape))] for g in gs]
            acc = _BufAcc(info, ranges, dt, counts)
            for g in gs:
                acc.add(g)
            rd, wr, first, count, who_arr = acc.result()
            entry.update(reads=rd, writes=wr, first_touch=first, count=count,
                         n_reads=acc.n_reads, n_writes=acc.n_writes)
        else:   # untouched: read-only constant views cost nothing
            entry.update(reads=np.broadcast_to(False, info.shape), writes=np.broadcast_to(False, info.shape),
                         first_touch=np.broadcast_to(dt(-1), info.shape),
                         count=np.broadcast_to(dt(0), info.shape) if counts else None, n_reads=0, n_writes=0)
        if gpu:
            if gs and who_arr is not None:
                entry["thread"], entry["block"] = who_arr
            else:
                entry["thread"] = entry["block"] = np.broadcast_to(dt(-1), info.shape)
        out[name] = entry
    meta = {"loop": L.name, "steps": steps,
            "enclosing": {lp.name: ctx.fixed[lp.var] for lp in ctx.enclosing},
            "accesses": per_access, "launch": _launch(prog)}
    return {"buffers": out, "meta": meta}


# ----------------------------------------------------------------------------------------------
# GPU: who touches what, coalescing, bank conflicts


def _launch(prog: _Program) -> dict[str, int]:
    dims = {}
    for lp in prog.loops:
        if lp.tag and lp.alias is None:
            dims[lp.tag] = max(dims.get(lp.tag, 1), lp.extent)
    return dims


def _compacted_shapes(func) -> dict[str, tuple]:
    """Shapes (and strides) TVM gives shared/local buffers after compaction at build time."""
    try:
        mod = tvm.IRModule({"main": func})
        tr = tvm.s_tir.transform
        for p in (tr.LowerInitBlock(), tr.PlanAndUpdateBufferAllocationLocation(),
                  tr.ConvertBlocksToOpaque(), tr.CompactBufferAllocation()):
            mod = p(mod)
    except Exception:  # noqa: BLE001 - compaction is advisory
        return {}
    shapes = {}

    def f(stmt):
        if isinstance(stmt, SBlockRealize):
            for buf in stmt.block.alloc_buffers:
                strides = [int(s) for s in buf.strides] if len(buf.strides) else None
                shapes[buf.name] = (tuple(int(s) for s in buf.shape), strides)

    _walk_stmts(mod["main"].body, f)
    return shapes


def _walk_stmts(stmt, f):
    f(stmt)
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _walk_stmts(s, f)
    elif isinstance(stmt, SBlockRealize):
        _walk_stmts(stmt.block.body, f)
        if stmt.block.init is not None:
            _walk_stmts(stmt.block.init, f)
    elif isinstance(stmt, tirx.IfThenElse):
        _walk_stmts(stmt.then_case, f)
        if stmt.else_case is not None:
            _walk_stmts(stmt.else_case, f)
    else:
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            _walk_stmts(body, f)


def analyze_gpu(func, loop, at: dict | None = None, warp: int | None = None,
                block: dict | None = None, sector_bytes: int = 32, banks: int = 32,
                bank_bytes: int = 4) -> dict:
    """Per-access warp statistics under ``loop``, for one warp of one thread block.

    A *request* is one execution of an access by the warp: all loops other than the thread-bound
    ones and the vectorised ones fixed. Threads are linearised x fastest
    (``x + nx * (y + ny * z)``) and the warp holds 32 consecutive ones; ``warp`` defaults to the
    warp of the thread fixed by ``at``. ``block`` gives blockIdx values for block loops inside
    ``loop`` (0 otherwise). Global and local buffers: distinct ``sector_bytes`` sectors per
    request. Shared buffers (in TVM's compacted layout): the wavefronts a request needs with
    ``banks`` banks of ``bank_bytes`` bytes; an access of 8 or 16 bytes per thread is served in
    2 or 4 phases of 16 or 8 threads, as on NVIDIA GPUs; ``bank_conflicts`` = wavefronts - phases.
    """
    prog = _program(func)
    L = _find_loop(prog, loop)
    at = dict(at or {})
    ctx = _Context(prog, L, at)
    dims = _launch(prog)
    nx, ny, nz = (dims.get(t, 1) for t in THREAD_TAGS)
    nthreads = nx * ny * nz
    if warp is None:
        tvals = {}
        for lp in ctx.enclosing:
            if lp.tag in THREAD_TAGS:
                tvals[lp.tag] = ctx.fixed[lp.var]
        lin = tvals.get("threadIdx.x", 0) + nx * (tvals.get("threadIdx.y", 0) + ny * tvals.get("threadIdx.z", 0))
        warp = lin // 32
    tids = np.arange(warp * 32, min(nthreads, warp * 32 + 32))
    if tids.size == 0:
        raise AccessAnalysisError(f"warp {warp} is past the {nthreads} threads of a block")
    tcoord = {"threadIdx.x": tids % nx, "threadIdx.y": (tids // nx) % ny, "threadIdx.z": tids // (nx * ny)}
    compact = _compacted_shapes(func)
    results = []
    for acc, nr, nw, off in _groups(ctx):
        res = _warp_stats(prog, ctx, acc, nr, nw, tcoord, block or {}, compact,
                          sector_bytes, banks, bank_bytes)
        if res is not None:
            results.append(res)
    return {"warp": int(warp), "threads": [int(t) for t in tids],
            "launch": {k: int(v) for k, v in dims.items()}, "accesses": results}


def _warp_stats(prog, ctx, acc, nr, nw, tcoord, block, compact, sector_bytes, banks, bank_bytes):
    info = prog.buffers[acc.buffer]
    loops = prog.loops
    # lanes: thread-bound loops (any position) and vectorised loops of the chain
    lane_loops = []
    sub_fixed = dict(ctx.fixed)
    for lp in acc.chain:
        t = ctx.resolve(lp)
        if t.tag in THREAD_TAGS:
            if t not in lane_loops:
                lane_loops.append(t)
        elif t.tag in BLOCK_TAGS and t.var not in ctx.fixed:
            sub_fixed[t.var] = int(block.get(t.name, block.get(t.tag, t.min)))
        elif t.kind == "vectorized" and t not in lane_loops:
            lane_loops.append(t)
    # the per-request grid: a context where thread loops are fixed per lane
    ctx2 = _LaneCtx(ctx, sub_fixed, lane_loops)
    g = _grid(ctx2, acc, 0, nr, nw, lanes=frozenset(lp.id for lp in lane_loops))
    if g is None:
        return None
    # lane arrays: threads of the warp x vector lanes
    nthr = len(next(iter(tcoord.values())))
    vec = [lp for lp in lane_loops if lp.tag not in THREAD_TAGS]
    nvec = math.prod(lp.extent for lp in vec) if vec else 1
    env_lane = {}
    for lp in lane_loops:
        if lp.tag in THREAD_TAGS:
            val = np.repeat(tcoord[lp.tag], nvec)
        else:
            val = None
        env_lane[lp.id] = val
    if vec:
        idx = np.arange(nvec)
        rem = idx
        for lp in reversed(vec):
            env_lane[lp.id] = np.tile(lp.min + rem % lp.extent, nthr)
            rem = rem // lp.extent
    # thread-loop values outside the thread's own range of an aliased inner loop: inactive
    nl = nthr * nvec
    # compute addresses: evaluate each dim with lane axis appended
    axis_of = {d: i for i, d in enumerate(g.digits)}
    ndim = len(g.shape)
    lane_axis_vals = {}
    for lp in lane_loops:
        lane_axis_vals[lp.id] = env_lane[lp.id].reshape((1,) * ndim + (nl,))
    env = {}
    ar = [_axis(n, i, ndim + 1) for i, n in enumerate(g.shape)]
    for lp in ctx2.iter_chain(acc):
        if lp.id in lane_axis_vals:
            env[lp.var] = lane_axis_vals[lp.id]
            continue
        val = np.int64(lp.min)
        for d, i in axis_of.items():
            if d.loop == lp.id:
                val = val + ar[i] * d.place
        env[lp.var] = val
    for k, v in ctx2.fixed.items():
        env.setdefault(k, v)
    for lp in acc.chain:
        t = ctx.resolve(lp)
        if lp is not t and t.var in env:
            env[lp.var] = env[t.var]
    active = np.ones((1,) * (ndim + 1), dtype=bool)
    for p in acc.preds:
        active = active & np.asarray(_eval(p, dict(env), acc.bind), dtype=bool)
    for lp in acc.chain:
        t = ctx.resolve(lp)
        if lp is not t and t.id in lane_axis_vals and lp.extent < t.extent:
            active = active & (lane_axis_vals[t.id] < lp.extent)
    idx = [np.asarray(_eval(ix, dict(env), acc.bind), dtype=np.int64) for ix in acc.indices]
    shape = tuple(g.shape) + (nl,)
    scope = info.scope
    shared = scope.startswith("shared")
    if shared and info.name in compact:
        cshape, cstrides = compact[info.name]
    else:
        cshape, cstrides = info.shape, None
    if cstrides is None:
        cstrides, s = [], 1
        for ext in reversed(cshape):
            cstrides.append(s)
            s *= ext
        cstrides.reverse()
    if len(cstrides) != len(idx):
        cstrides, s = [], 1
        for ext in reversed(info.shape):
            cstrides.append(s)
            s *= ext
        cstrides.reverse()
    addr = 0
    for i, st in zip(idx, cstrides):
        addr = addr + i * st
    addr = np.broadcast_to(addr * info.itemsize, shape).reshape(-1, nl)
    act = np.broadcast_to(active, shape).reshape(-1, nl)
    rows = act.any(axis=1)
    addr, act = addr[rows], act[rows]
    nreq = int(rows.sum()) * g.mult * (nr + nw)
    out = {"buffer": acc.buffer, "block": acc.block, "scope": scope,
           "kind": "read+write" if nr and nw else ("read" if nr else "write"), "index": ", ".join(str(i) for i in acc.indices),
           "requests": nreq, "lanes": int(nl), "vector": int(nvec),
           "active_lanes": float(act.sum() / max(1, act.shape[0]))}
    if addr.shape[0] == 0:
        return out
    if scope.startswith("local"):
        out["note"] = "per-thread (registers or local memory): no coalescing figure"
        return out
    if not shared:
        sec = addr // sector_bytes
        first_act = np.where(act, sec, np.iinfo(np.int64).max).min(axis=1, keepdims=True)
        sec = np.where(act, sec, first_act)
        s = np.sort(sec, axis=1)
        distinct = 1 + (np.diff(s, axis=1) != 0).sum(axis=1)
        a2 = np.sort(np.where(act, addr, np.where(act, addr, np.iinfo(np.int64).max).min(axis=1, keepdims=True)), axis=1)
        useful = (1 + (np.diff(a2, axis=1) != 0).sum(axis=1)) * info.itemsize   # distinct bytes asked for
        out.update({"sectors_per_request": float(distinct.mean()),
                    "sectors": int(distinct.sum()) * g.mult * (nr + nw),
                    "bytes_per_request": float(useful.mean()),
                    "efficiency": float(useful.sum() / (distinct.sum() * sector_bytes))})
    else:
        per_thread = info.itemsize * nvec
        phases = 1 if per_thread <= bank_bytes else min(nthr, per_thread // bank_bytes)
        tpp = max(1, -(-nthr // phases))
        words = addr // bank_bytes
        wav = np.zeros(words.shape[0], dtype=np.int64)
        ways_max = np.zeros(words.shape[0], dtype=np.int64)
        for ph in range(phases):
            sl = slice(ph * tpp * nvec, min(nl, (ph + 1) * tpp * nvec))
            w = words[:, sl]
            a = act[:, sl]
            if w.shape[1] == 0:
                continue
            fill = np.where(a, w, np.iinfo(np.int64).max).min(axis=1, keepdims=True)
            w = np.where(a, w, fill)
            s = np.sort(w, axis=1)
            uniq = np.ones_like(s, dtype=bool)
            uniq[:, 1:] = np.diff(s, axis=1) != 0
            bank = s % banks
            rowid = np.repeat(np.arange(s.shape[0]), s.shape[1]).reshape(s.shape)
            cnt = np.bincount((rowid * banks + bank)[uniq], minlength=s.shape[0] * banks).reshape(-1, banks)
            ways = cnt.max(axis=1)
            has = a.any(axis=1)
            wav += np.where(has, ways, 0)
            ways_max = np.maximum(ways_max, np.where(has, ways, 0))
        m = g.mult * (nr + nw)
        out.update({"phases": int(phases), "wavefronts": int(wav.sum()) * m,
                    "bank_conflicts": int((wav - phases).clip(min=0).sum()) * m,
                    "ways": float(ways_max.mean()), "max_ways": int(ways_max.max()),
                    "layout": {"shape": [int(s) for s in cshape], "strides": [int(s) for s in cstrides]}})
    return out


class _LaneCtx:
    """A query context where thread-bound (and vectorised) loops are lanes, not enumerated."""

    def __init__(self, ctx: _Context, fixed: dict, lane_loops: list):
        self.prog = ctx.prog
        self.L = ctx.L
        self.fixed = dict(fixed)
        lane_ids = {lp.id for lp in lane_loops}
        for lp in lane_loops:
            self.fixed.pop(lp.var, None)
        self.inside = {k: v for k, v in ctx.inside.items() if v.id not in lane_ids
                       and v.tag not in BLOCK_TAGS}
        for lp in lane_loops:
            self.inside[lp.var] = lp
        self.weights = dict(ctx.weights)
        for lp in lane_loops:
            self.weights.setdefault(lp.id, 1)
        self.resolve = ctx.resolve
        self._lane_ids = lane_ids

    def iter_chain(self, acc):
        out = []
        for lp in acc.chain:
            t = self.resolve(lp)
            if t.var in self.inside and t not in out:
                out.append(t)
        return out
