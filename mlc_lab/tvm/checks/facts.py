"""The facts of a scheduled function that the named checks read, as plain data.

One walk over the PrimFunc gives every block (its loops, the kind of each iteration variable and the
loops its binding uses, whether it has an init, what it reads and writes) and every loop annotation;
the access program (``access.lower``) gives loops, accesses and buffers; TVM's own buffer
compaction gives the size each shared (per thread block) and local (per thread) buffer is allocated
with at build time. Loop ids are the access program's.
"""

from __future__ import annotations

from tvm import tirx
from tvm.s_tir import SBlockRealize

from mlc_lab.model.checks.facts import BlockFact, ScheduleFacts
from mlc_lab.tvm import access

__all__ = ["of_module", "of_function"]

_ITER_KINDS = {0: "S", 2: "R"}


def of_module(mod, func_name: str) -> ScheduleFacts:
    return of_function(mod[func_name], func_name)


def of_function(func, name: str = "main") -> ScheduleFacts:
    _, prog, node_ids = access.lowered(func)  # the same cached walk, with its For ids
    walker = _Walker(node_ids, prog)
    walker.walk(func.body, (), {})
    allocated = _allocated_shapes(func)
    params = tuple(str(b.name) for b in func.buffer_map.values()) if hasattr(func, "buffer_map") else ()
    params += tuple(str(p.name) for p in func.params if hasattr(p, "shape") and str(p.name) not in params)
    return ScheduleFacts(
        name=name,
        program=prog,
        blocks=walker.blocks,
        annotations=walker.annotations,
        allocated=allocated,
        params=params,
    )


class _Walker:
    def __init__(self, node_ids: dict, prog):
        self.node_ids = node_ids
        self.prog = prog
        self.blocks: dict[str, BlockFact] = {}
        self.annotations: dict[int, dict] = {}

    def walk(self, stmt, loops: tuple, var_loop: dict) -> None:
        if isinstance(stmt, tirx.For):
            lid = self.node_ids.get(stmt.__chandle__())
            inner = dict(var_loop)
            if lid is not None:
                inner[stmt.loop_var.__chandle__()] = lid
                if stmt.annotations is not None and len(stmt.annotations):
                    self.annotations[lid] = {str(k): _plain(v) for k, v in stmt.annotations.items()}
                loops = loops + (lid,)
            self.walk(stmt.body, loops, inner)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.walk(s, loops, var_loop)
        elif isinstance(stmt, SBlockRealize):
            blk = stmt.block
            if blk.name_hint != "root" or len(blk.iter_vars):
                iters = []
                for iv, val in zip(blk.iter_vars, stmt.iter_values):
                    used = {var_loop[k] for k in _var_keys(val) if k in var_loop}
                    iters.append((_ITER_KINDS.get(int(iv.iter_type), "O"), frozenset(used)))
                name = str(blk.name_hint)
                self.blocks[name] = BlockFact(
                    name=name,
                    loops=loops,
                    iters=tuple(iters),
                    has_init=blk.init is not None,
                    reads=tuple(dict.fromkeys(str(_buf(r).name) for r in blk.reads)),
                    writes=tuple(dict.fromkeys(str(_buf(r).name) for r in blk.writes)),
                    tensorized=bool(len(blk.match_buffers)),
                    annotations=tuple((str(k), _plain(v)) for k, v in (blk.annotations or {}).items()),
                )
            self.walk(blk.body, loops, var_loop)
            if blk.init is not None:
                self.walk(blk.init, loops, var_loop)
        elif isinstance(stmt, tirx.IfThenElse):
            self.walk(stmt.then_case, loops, var_loop)
            if stmt.else_case is not None:
                self.walk(stmt.else_case, loops, var_loop)
        else:
            body = getattr(stmt, "body", None)
            if isinstance(body, tirx.Stmt):
                self.walk(body, loops, var_loop)


def _var_keys(e, out: set | None = None) -> set:
    """Handles of the variables an expression mentions."""
    out = set() if out is None else out
    if isinstance(e, tirx.Var):
        out.add(e.__chandle__())
        return out
    for sub in access.sub_exprs(e):
        _var_keys(sub, out)
    return out


def _buf(region):
    return region.source if hasattr(region, "source") else region.buffer


def _plain(v):
    if isinstance(v, (tirx.IntImm,)):
        return int(v)
    if isinstance(v, tirx.FloatImm):
        return float(v)
    if isinstance(v, (int, float, str, bool)):
        return v
    return str(v)


def _allocated_shapes(func) -> dict:
    """Buffer name -> the shape TVM allocates it with (after compaction): per thread block for
    shared buffers, per thread for local ones."""
    try:
        return {name: tuple(shape) for name, (shape, _strides) in access.compacted_layouts(func).items()}
    except Exception:  # noqa: BLE001 - advisory: an odd program keeps its declared shapes
        return {}
