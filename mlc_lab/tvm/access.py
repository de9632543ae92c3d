"""Lowering a PrimFunc into the plain access program that ``mlc_lab.core.access`` analyses.

The one place where the access analysis touches TVM: the function is walked once, and every loop,
block, guard and buffer access becomes plain data (``mlc_lab.model.access.program``). Decisions
taken here:

* block iteration variables and let-bound variables are replaced by their values, so index
  expressions mention loop variables only (and symbolic shape variables);
* a block predicate (``T.where``), an ``if`` and the branch of ``T.if_then_else`` guard the
  accesses beneath them (``T.likely`` is dropped: it is a hint);
* ``T.init()`` is guarded by "every reduction variable at its first value" and shares the step of
  the first statement of its block's body; loops inside it run within that step (role "inner");
* a block with ``match_buffer`` (tensorized) is one step whose accesses are its read and write
  regions, one inner loop per dimension of extent > 1;
* an index the analysis cannot evaluate (a load inside an index, a float) becomes ``Opaque`` and
  is refused only if a query needs it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import tvm
from tvm import tirx
from tvm.s_tir import SBlockRealize

from mlc_lab.model.access.program import Access, AccessProgram, BufferInfo, Const, Leaf, Loop, Op, Opaque, Seq, Var
from mlc_lab.errors import AccessAnalysisError

__all__ = ["lower", "loop_id"]

_LOAD = tvm.ir.TensorLoad  # what a BufferLoad is in 0.27 (buffer in .source)
_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}
_BINOPS = {
    tirx.Add: "add",
    tirx.Sub: "sub",
    tirx.Mul: "mul",
    tirx.FloorDiv: "floordiv",
    tirx.FloorMod: "floormod",
    tirx.Div: "div",
    tirx.Mod: "mod",
    tirx.Min: "min",
    tirx.Max: "max",
    tirx.LT: "lt",
    tirx.LE: "le",
    tirx.GT: "gt",
    tirx.GE: "ge",
    tirx.EQ: "eq",
    tirx.NE: "ne",
    tirx.And: "and",
    tirx.Or: "or",
}
_LETS = tuple(c for c in (getattr(tirx, "Bind", None), getattr(tirx, "LetStmt", None)) if c is not None)


_FLOATS = ("float16", "float32", "float64")
_FLOAT_CALLS = ("floor", "ceil", "trunc", "round", "nearbyint", "fabs")


def _dtype(e) -> str:
    """An expression's type (``dtype`` on most nodes; 0.27's Cast has only ``ty``)."""
    dt = getattr(e, "dtype", None)
    return str(dt if dt is not None else e.ty)


def _is_float(e) -> bool:
    try:
        return _dtype(e).startswith(("float", "bfloat"))
    except AttributeError:
        return False


def _key(obj) -> int:
    return obj.__chandle__()


def _call_name(e) -> str:
    return str(getattr(e.op, "name", e.op)).rpartition(".")[2]


def sub_exprs(e):
    """The expressions directly inside ``e``: its operands, and a call's arguments."""
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, name, None)
        if isinstance(sub, tvm.ir.Expr):
            yield sub
    if isinstance(e, tvm.ir.Call):
        yield from e.args


class _Lowering:
    def __init__(self, func):
        self.func = func
        self.buffers: dict[str, BufferInfo] = {}
        self._buf_names: dict[int, str] = {}
        self.loops: list[Loop] = []
        self.node_ids: dict[int, int] = {}  # For handle -> loop id
        self.shape_vars: dict[str, Var] = {}
        self._shape_var_of: dict[int, Var] = {}
        self._declared = _declared_vars(func)  # parameters and the variables of buffer shapes
        for param in func.params:  # 0.27: buffer parameters are buffer-typed variables
            if hasattr(param, "shape") and hasattr(param, "dtype"):
                self.register(param)
        for buf in func.buffer_map.values() if hasattr(func, "buffer_map") else ():
            self.register(buf)
        self.root = self.walk(func.body, (), {}, "")

    # --- buffers and symbolic shapes ------------------------------------------------------------
    def register(self, buf) -> str:
        k = _key(buf)
        if k in self._buf_names:
            return self._buf_names[k]
        name = str(buf.name)
        while name in self.buffers:
            name = name + "'"
        dt = tvm.runtime.DataType(str(buf.dtype))
        shape = tuple(self.size(s) for s in buf.shape)
        self.buffers[name] = BufferInfo(
            name, shape, str(buf.dtype), str(buf.scope()), max(1, dt.bits * max(1, dt.lanes) // 8)
        )
        self._buf_names[k] = name
        return name

    def size(self, e, env: dict | None = None):
        """An extent or shape: an int, or an expression (over symbolic shapes, or over enclosing
        loops for a loop whose range depends on them)."""
        if isinstance(e, tirx.IntImm):
            return int(e)
        out = self.expr(e, env or {})
        return out.value if isinstance(out, Const) else out

    def shape_var(self, v) -> Var:
        k = _key(v)
        if k not in self._shape_var_of:
            name = str(v.name)
            while name in self.shape_vars:
                name = name + "'"
            var = Var(-(len(self._shape_var_of) + 1), name)
            self._shape_var_of[k] = var
            self.shape_vars[name] = var
        return self._shape_var_of[k]

    # --- expressions ------------------------------------------------------------------------------
    def expr(self, e, env: dict):
        if isinstance(e, tirx.IntImm):
            return Const(int(e))
        if isinstance(e, tirx.Var):
            k = _key(e)
            if k in env:
                return env[k]
            if k in self._declared:
                return self.shape_var(e)
            # neither a loop, a block variable, a parameter nor a shape: TVM wrote the variable
            # outside its scope (cache_inplace does); only a query that needs it is refused
            return Opaque(f"variable {e.name} outside any scope that defines it (an ill-formed program)")
        name = _BINOPS.get(type(e))
        if name is not None:
            if name == "div" and _is_float(e):
                name = "fdiv"  # a true division (Div of integers truncates)
            return Op(name, (self.expr(e.a, env), self.expr(e.b, env)))
        if isinstance(e, tirx.Not):
            return Op("not", (self.expr(e.a, env),))
        if isinstance(e, tirx.Cast):
            to, inner = _dtype(e), self.expr(e.value, env)
            if _is_float(e.value):  # float -> int truncates, float -> float rounds
                return Op("cast:" + ("int64" if "int" in to else to), (inner,))
            if "int" in to or to == "bool":
                return inner
            if to in _FLOATS:
                return Op("cast:" + to, (inner,))
            return Opaque(f"a cast to {to}")
        if isinstance(e, tirx.Select):
            return Op("select", tuple(self.expr(x, env) for x in (e.condition, e.true_value, e.false_value)))
        if isinstance(e, tirx.Let):
            inner = dict(env)
            inner[_key(e.var)] = self.expr(e.value, env)
            return self.expr(e.body, inner)
        if isinstance(e, tvm.ir.Call):
            cname = _call_name(e)
            if cname == "likely":
                return self.expr(e.args[0], env)
            if cname == "if_then_else":
                return Op("select", tuple(self.expr(x, env) for x in e.args))
            if cname in _FLOAT_CALLS and len(e.args) == 1 and _dtype(e) in _FLOATS:
                return Op(cname, (self.expr(e.args[0], env),))
            return Opaque(f"a call to {cname}")
        if isinstance(e, _LOAD):
            return Opaque(f"an indirect index (a value loaded from buffer {e.source.name})")
        if isinstance(e, tirx.FloatImm) and _dtype(e) in _FLOATS:
            # rounded to its type when evaluated, as the compiled code holds it
            return Op("cast:" + _dtype(e), (Const(float(e.value)),))
        return Opaque(f"an expression of type {type(e).__name__}")

    def guards(self, cond, env: dict) -> tuple:
        """A condition as a tuple of conjuncts (``T.likely`` dropped); () when always true."""
        c = self.expr(cond, env)
        out, stack = [], [c]
        while stack:
            x = stack.pop()
            if isinstance(x, Op) and x.op == "and":
                stack.extend(reversed(x.args))
            elif not (isinstance(x, Const) and x.value):
                out.append(x)
        return tuple(out)

    # --- accesses of one statement ---------------------------------------------------------------
    def accesses(self, stmt, env, guards, inner, block, label) -> list:
        """Accesses of a store or evaluate (loads first, in evaluation order, then the store)."""
        out: list[Access] = []

        def add(buffer, kind, indices, gs):
            out.append(
                Access(self.register(buffer), kind, tuple(self.expr(i, env) for i in indices), block, gs, inner, label)
            )

        def visit(e, gs):
            if isinstance(e, _LOAD):
                for ix in e.indices:
                    visit(ix, gs)
                add(e.source, "read", e.indices, gs)
                return
            if isinstance(e, tvm.ir.Call) and _call_name(e) == "if_then_else" and len(e.args) == 3:
                c = self.expr(e.args[0], env)
                visit(e.args[0], gs)
                visit(e.args[1], gs + (c,))
                visit(e.args[2], gs + (Op("not", (c,)),))
                return
            if isinstance(e, (tirx.Var, tirx.IntImm, tirx.FloatImm)):
                return
            for sub in sub_exprs(e):
                visit(sub, gs)

        if isinstance(stmt, tirx.BufferStore):
            visit(stmt.value, guards)
            for ix in stmt.indices:
                visit(ix, guards)
            add(stmt.buffer, "write", stmt.indices, guards)
        elif isinstance(stmt, tirx.Evaluate):
            visit(stmt.value, guards)
        return out

    def regions(self, blk, env, guards, inner, label) -> list:
        """A tensorized block's read and write regions as accesses over inner loops."""
        out = []
        for kind, regions in (("read", blk.reads), ("write", blk.writes)):
            for region in regions:
                name = self.register(_region_buffer(region))
                idx, loops = [], list(inner)
                for d, rng in enumerate(region.region):
                    lo = self.expr(rng.min, env)
                    ext = self.size(rng.extent, env)
                    if isinstance(ext, int) and ext == 1:
                        idx.append(lo)
                        continue
                    lp = self.new_loop(f"{name}_region{d}", 0, ext, "serial", None, role="inner")
                    loops.append(lp)
                    idx.append(Op("add", (lo, lp.var)))
                out.append(Access(name, kind, tuple(idx), blk.name_hint, guards, tuple(loops), label or "region"))
        return out

    # --- the step tree -----------------------------------------------------------------------------
    def new_loop(self, name, lo, ext, kind, tag, role="loop", node=None) -> Loop:
        lp = Loop(len(self.loops), name, lo, ext, kind, tag, role=role)
        self.loops.append(lp)
        if node is not None:
            self.node_ids[_key(node)] = lp.id
        return lp

    def for_loop(self, stmt, role, env: dict) -> Loop:
        tag = str(stmt.thread_binding.thread_tag) if stmt.thread_binding is not None else None
        return self.new_loop(
            str(stmt.loop_var.name),
            self.size(stmt.min, env),
            self.size(stmt.extent, env),
            _KINDS.get(int(stmt.kind), "serial"),
            tag,
            role,
            stmt,
        )

    def block_env(self, realize, env, guards):
        blk = realize.block
        for buf in blk.alloc_buffers:
            self.register(buf)
        inner_env = dict(env)
        reduce = []
        for iv, val in zip(blk.iter_vars, realize.iter_values):
            inner_env[_key(iv.var)] = self.expr(val, env)
            if int(iv.iter_type) == 2:
                reduce.append(Op("eq", (inner_env[_key(iv.var)], self.expr(iv.dom.min, env))))
        guards = guards + self.guards(realize.predicate, env)
        for mb in blk.match_buffers:  # the matched buffer names the source region's buffer
            self._buf_names[_key(mb.buffer)] = self.register(_region_buffer(mb.source))
        return blk, inner_env, guards, tuple(reduce)

    def walk(self, stmt, guards, env, block):
        if isinstance(stmt, tirx.For):
            lp = self.for_loop(stmt, "loop", env)
            inner = dict(env)
            inner[_key(stmt.loop_var)] = lp.var
            lp.body = self.walk(stmt.body, guards, inner, block)
            return lp
        if isinstance(stmt, tirx.SeqStmt):
            return Seq([self.walk(s, guards, env, block) for s in stmt.seq])
        if isinstance(stmt, SBlockRealize):
            return self.realize(stmt, guards, env)
        if isinstance(stmt, tirx.IfThenElse):
            c = self.expr(stmt.condition, env)
            then = self.walk(stmt.then_case, guards + self.guards(stmt.condition, env), env, block)
            if stmt.else_case is None:
                return then
            return Seq([then, self.walk(stmt.else_case, guards + (Op("not", (c,)),), env, block)])
        if isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            return Leaf(self.accesses(stmt, env, guards, (), block, ""))
        if _LETS and isinstance(stmt, _LETS):
            inner = dict(env)
            inner[_key(stmt.var)] = self.expr(stmt.value, env)
            body = getattr(stmt, "body", None)
            return Seq([]) if body is None else self.walk(body, guards, inner, block)
        if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
            self.register(stmt.buffer)
        body = getattr(stmt, "body", None)
        if isinstance(body, tirx.Stmt):
            return self.walk(body, guards, env, block)
        return Seq([])

    def realize(self, stmt, guards, env):
        blk, benv, bguards, reduce = self.block_env(stmt, env, guards)
        if len(blk.match_buffers):
            body = Leaf(self.regions(blk, benv, bguards, (), ""))
        else:
            body = self.walk(blk.body, bguards, benv, blk.name_hint)
        if blk.init is None:
            return body
        found = _first_leaf(body, ())
        if found is None:
            return Leaf(self.collect(blk.init, benv, bguards + reduce, (), blk.name_hint, "init"))
        first, path = found
        # the init runs once, at the first iteration of the body's loops (blockize'd bodies have some)
        at_first = tuple(Op("eq", (lp.var, lp.min if not isinstance(lp.min, int) else Const(lp.min))) for lp in path)
        init = self.collect(blk.init, benv, bguards + reduce + at_first, (), blk.name_hint, "init")
        first.accesses[:0] = [replace(a, body_loops=tuple(lp.id for lp in path)) for a in init]
        return body

    def collect(self, stmt, env, guards, inner, block, label) -> list:
        """Accesses of a subtree that runs within one step (a T.init()), loops as inner loops."""
        if isinstance(stmt, tirx.For):
            lp = self.for_loop(stmt, "inner", env)
            benv = dict(env)
            benv[_key(stmt.loop_var)] = lp.var
            return self.collect(stmt.body, benv, guards, inner + (lp,), block, label)
        if isinstance(stmt, tirx.SeqStmt):
            return [a for s in stmt.seq for a in self.collect(s, env, guards, inner, block, label)]
        if isinstance(stmt, SBlockRealize):
            blk, benv, bguards, reduce = self.block_env(stmt, env, guards)
            if len(blk.match_buffers):
                out = self.regions(blk, benv, bguards, inner, label)
            else:
                out = self.collect(blk.body, benv, bguards, inner, blk.name_hint, label)
            if blk.init is not None:
                out = self.collect(blk.init, benv, bguards + reduce, inner, blk.name_hint, label) + out
            return out
        if isinstance(stmt, tirx.IfThenElse):
            c = self.expr(stmt.condition, env)
            out = self.collect(stmt.then_case, env, guards + self.guards(stmt.condition, env), inner, block, label)
            if stmt.else_case is not None:
                out += self.collect(stmt.else_case, env, guards + (Op("not", (c,)),), inner, block, label)
            return out
        if isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            return self.accesses(stmt, env, guards, inner, block, label)
        if _LETS and isinstance(stmt, _LETS):
            benv = dict(env)
            benv[_key(stmt.var)] = self.expr(stmt.value, env)
            body = getattr(stmt, "body", None)
            return [] if body is None else self.collect(body, benv, guards, inner, block, label)
        body = getattr(stmt, "body", None)
        return self.collect(body, env, guards, inner, block, label) if isinstance(body, tirx.Stmt) else []


def _declared_vars(func) -> set:
    """Handles of the variables a function declares: its scalar parameters and every variable in
    the shape, strides or offset of a buffer it names (symbolic shapes)."""
    exprs = [p for p in func.params if not hasattr(p, "shape")]
    buffers = [p for p in func.params if hasattr(p, "shape")]
    buffers += list(func.buffer_map.values()) if hasattr(func, "buffer_map") else []

    def visit(node):
        if isinstance(node, SBlockRealize):
            buffers.extend(node.block.alloc_buffers)
            buffers.extend(mb.buffer for mb in node.block.match_buffers)
        elif isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)):
            buffers.append(node.buffer)

    _visit_stmts(func.body, visit)
    for buf in buffers:
        exprs += list(buf.shape) + list(getattr(buf, "strides", ()) or ())
        if getattr(buf, "elem_offset", None) is not None:
            exprs.append(buf.elem_offset)
    out = set()
    for e in exprs:
        if isinstance(e, tirx.Var):
            out.add(_key(e))
        elif isinstance(e, tvm.ir.Expr) and not isinstance(e, tirx.IntImm):
            out.update(_key(v) for v in tirx.analysis.undefined_vars(e))
    return out


def _region_buffer(region):
    """The buffer of a region (0.27: ``TensorRegion.source``; older: ``BufferRegion.buffer``)."""
    return region.source if hasattr(region, "source") else region.buffer


def _first_leaf(node, path: tuple):
    """The first leaf under ``node`` and the loops on the way to it."""
    if isinstance(node, Leaf):
        return node, path
    if isinstance(node, Loop):
        return _first_leaf(node.body, path + (node,))
    for c in node.children:
        found = _first_leaf(c, path)
        if found is not None:
            return found
    return None


def compacted_layouts(func) -> dict[str, tuple]:
    """Shapes (and strides) TVM gives shared/local buffers after compaction at build time."""
    try:
        mod = tvm.IRModule({"main": func})
        tr = tvm.s_tir.transform
        for p in (  # TVM's own pipeline up to the compaction (s_tir/pipeline.py)
            tr.CanonicalizeLoop(),
            tr.LowerCrossThreadReduction(),
            tr.LowerInitBlock(),
            tr.PlanAndUpdateBufferAllocationLocation(),
            tr.ConvertBlocksToOpaque(),
            tr.LiftThreadBinding(),  # one thread variable per axis: a write-back bound as its compute is per thread
            tr.ManifestSharedMemoryLocalStage(),
            tr.CompactBufferAllocation(),
        ):
            mod = p(mod)
    except Exception:  # noqa: BLE001 - compaction is advisory (symbolic shapes, odd programs)
        return {}
    shapes = {}

    def visit(node):
        if isinstance(node, SBlockRealize):
            for buf in node.block.alloc_buffers:
                try:
                    strides = [int(s) for s in buf.strides] if len(buf.strides) else None
                    shapes[str(buf.name)] = (tuple(int(s) for s in buf.shape), strides)
                except (TypeError, ValueError):
                    pass

    _visit_stmts(mod["main"].body, visit)
    return shapes


def _visit_stmts(stmt, f) -> None:
    f(stmt)
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _visit_stmts(s, f)
    elif isinstance(stmt, SBlockRealize):
        _visit_stmts(stmt.block.body, f)
        if stmt.block.init is not None:
            _visit_stmts(stmt.block.init, f)
    elif isinstance(stmt, tirx.IfThenElse):
        _visit_stmts(stmt.then_case, f)
        if stmt.else_case is not None:
            _visit_stmts(stmt.else_case, f)
    elif isinstance(getattr(stmt, "body", None), tirx.Stmt):
        _visit_stmts(stmt.body, f)


_CACHE: dict[int, tuple] = {}


def lowered(func):
    k = _key(func)
    hit = _CACHE.get(k)
    if hit is not None and hit[0].same_as(func):
        return hit
    try:
        low = _Lowering(func)
    except AccessAnalysisError:
        raise
    except Exception as exc:  # noqa: BLE001 - an IR shape the walker does not know: say so plainly
        raise AccessAnalysisError(
            f"the function could not be read for the access analysis ({type(exc).__name__}: {exc})"
        ) from exc
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    prog = AccessProgram(name, low.buffers, low.root, low.loops, dict(low.shape_vars))
    if any(b.scope.startswith("shared") for b in prog.buffers.values()):
        for bname, layout in compacted_layouts(func).items():
            if bname in prog.buffers:
                prog.buffers[bname].layout = layout
    if len(_CACHE) > 32:
        _CACHE.clear()
    hit = _CACHE[k] = (func, prog, low.node_ids)
    return hit


def lower(func) -> AccessProgram:
    """The access program of a PrimFunc (cached per function object)."""
    return lowered(func)[1]


def loop_id(func, node) -> int:
    """The id, in ``lower(func)``, of the loop whose ``For`` node is ``node``."""
    _, prog, ids = lowered(func)
    lid = ids.get(_key(node))
    if lid is None:
        raise AccessAnalysisError("the loop given is not part of this function")
    return lid


def query(state: Any, loop: str, at: dict[str, int] | None) -> tuple[AccessProgram, int, dict[int, int] | None]:
    """What an access analysis is asked about ``loop`` (a name as in the script) of a schedule state
    (``schedule.State``): the access program of its function, the loop's id in it, and the enclosing
    loops' values ``at`` keyed by their ids. An unknown name raises NameResolutionError."""
    func, node = state.loop_node(state.find_loop(loop))
    return lower(func), loop_id(func, node), _at_ids(state, func, at)


def _at_ids(state: Any, func: Any, at: dict[str, int] | None) -> dict[int, int] | None:
    """Enclosing-loop values keyed by the analysis's loop ids: each name (``i``, ``Y/i``,
    ``func:Y/i``) is looked up like the loop argument, so a qualification picks its own loop."""
    if not at:
        return None
    out: dict[int, int] = {}
    for name, value in at.items():
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise AccessAnalysisError(f"the value of loop {name} in 'at' must be an integer, not {value!r}") from None
        owner, node = state.loop_node(state.find_loop(str(name)))
        if not owner.same_as(func):
            raise AccessAnalysisError(f"loop {name} in 'at' belongs to another function")
        out[loop_id(func, node)] = value
    return out
