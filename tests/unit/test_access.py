"""Access analysis: exactness against a brute-force oracle, the course's acceptance cases.

The oracle below walks the IR and evaluates every index per iteration. It is deliberately
independent of ``mlc_lab.tvm.access`` and ``mlc_lab.core.access`` (its own walker, step counting and integer evaluator) and
slow: use it on shapes of 16..64.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tvm import tirx
from tvm.s_tir import SBlockRealize

from tests.fixtures.tir_loops import all_loops

_LOAD = tvm.ir.TensorLoad  # what a BufferLoad is in 0.27 (buffer in .source)


def _ev(e, env):
    if isinstance(e, tirx.IntImm):
        return int(e)
    if isinstance(e, tirx.Var):
        return env[e.__chandle__()]
    if isinstance(e, tirx.FloatImm):
        return np.dtype(str(e.ty)).type(e.value)
    if isinstance(e, tirx.Cast):
        to = str(getattr(e, "dtype", None) or e.ty)
        v = _ev(e.value, env)
        return np.dtype(to).type(v) if to.startswith("float") else int(np.trunc(v))
    if isinstance(e, tvm.ir.Call) and str(e.op.name).rpartition(".")[2] == "floor":
        return np.floor(_ev(e.args[0], env))
    ops = {
        tirx.Add: lambda a, b: a + b,
        tirx.Sub: lambda a, b: a - b,
        tirx.Mul: lambda a, b: a * b,
        tirx.FloorDiv: lambda a, b: a // b,
        tirx.FloorMod: lambda a, b: a % b,
        tirx.Min: min,
        tirx.Max: max,
        tirx.LT: lambda a, b: a < b,
        tirx.LE: lambda a, b: a <= b,
        tirx.GT: lambda a, b: a > b,
        tirx.GE: lambda a, b: a >= b,
        tirx.EQ: lambda a, b: a == b,
        tirx.NE: lambda a, b: a != b,
        tirx.And: lambda a, b: a and b,
        tirx.Or: lambda a, b: a or b,
    }
    for cls, fn in ops.items():
        if type(e) is cls:
            return fn(_ev(e.a, env), _ev(e.b, env))
    if isinstance(e, tirx.Not):
        return not _ev(e.a, env)
    if isinstance(e, tirx.Select):
        return _ev(e.true_value, env) if _ev(e.condition, env) else _ev(e.false_value, env)
    if isinstance(e, tvm.ir.Call) and str(e.op.name).endswith("likely"):
        return _ev(e.args[0], env)
    if isinstance(e, tvm.ir.Call) and str(e.op.name).endswith("if_then_else"):
        return _ev(e.args[1], env) if _ev(e.args[0], env) else _ev(e.args[2], env)
    raise NotImplementedError(str(type(e)))


class Oracle:
    def __init__(self, func):
        self.func = func
        self.shapes = {}
        self.dims = {}
        for buf in func.params:
            self.shapes[buf.name] = tuple(int(s) for s in buf.shape)

        def reg(stmt):
            if isinstance(stmt, SBlockRealize):
                for b in stmt.block.alloc_buffers:
                    self.shapes[b.name] = tuple(int(s) for s in b.shape)
            if isinstance(stmt, tirx.For) and stmt.thread_binding is not None:
                tag = str(stmt.thread_binding.thread_tag)
                self.dims[tag] = max(self.dims.get(tag, 1), int(stmt.extent))

        self._visit_all(func.body, reg, [])

    def _visit_all(self, stmt, f, chain):
        f(stmt)
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self._visit_all(s, f, chain)
        elif isinstance(stmt, SBlockRealize):
            self._visit_all(stmt.block.body, f, chain)
        elif isinstance(stmt, tirx.IfThenElse):
            self._visit_all(stmt.then_case, f, chain)
            if stmt.else_case is not None:
                self._visit_all(stmt.else_case, f, chain)
        else:
            body = getattr(stmt, "body", None)
            if isinstance(body, tirx.Stmt):
                self._visit_all(body, f, chain)

    def _chain_to(self, target, blocks=False):
        """Loops enclosing ``target``, outermost first (and the blocks between them with ``blocks``)."""
        out = []

        def rec(stmt, chain):
            if stmt.same_as(target):
                out.extend(chain)
                return True
            if isinstance(stmt, tirx.For):
                return rec(stmt.body, chain + [stmt])
            if isinstance(stmt, tirx.SeqStmt):
                return any(rec(s, chain) for s in stmt.seq)
            if isinstance(stmt, SBlockRealize):
                return rec(stmt.block.body, chain + [stmt] if blocks else chain)
            if isinstance(stmt, tirx.IfThenElse):
                return rec(stmt.then_case, chain) or (stmt.else_case is not None and rec(stmt.else_case, chain))
            body = getattr(stmt, "body", None)
            return isinstance(body, tirx.Stmt) and rec(body, chain)

        rec(self.func.body, [])
        return out

    def run(self, loop, at=None):
        at = dict(at or {})
        env, tags = {}, {}
        for lp in self._chain_to(loop, blocks=True):
            if isinstance(lp, SBlockRealize):
                for iv, val in zip(lp.block.iter_vars, lp.iter_values):
                    env[iv.var.__chandle__()] = _ev(val, env)
                continue
            tag = str(lp.thread_binding.thread_tag) if lp.thread_binding is not None else None
            if tag is not None and tag in tags:
                env[lp.loop_var.__chandle__()] = tags[tag]
                continue
            v = at.get(lp.loop_var.name, int(lp.min))
            env[lp.loop_var.__chandle__()] = v
            if tag is not None:
                tags[tag] = v
        self.res = {
            name: {"reads": set(), "writes": set(), "first": {}, "count": {}, "who": {}} for name in self.shapes
        }
        self.step = 0
        self.serial, self.block = {}, ""
        self._stmt(loop, env, tags)
        out = {}
        for name, r in self.res.items():
            shape = self.shapes[name]
            rd = np.zeros(shape, bool)
            wr = np.zeros(shape, bool)
            ft = np.full(shape, -1, np.int64)
            cnt = np.zeros(shape, np.int64)
            th = np.full(shape, -1, np.int64)
            bl = np.full(shape, -1, np.int64)
            for ix in r["reads"]:
                rd[ix] = True
            for ix in r["writes"]:
                wr[ix] = True
            for ix, s in r["first"].items():
                ft[ix] = s
                th[ix], bl[ix] = r["who"][ix]
            for ix, c in r["count"].items():
                cnt[ix] = c
            out[name] = {"reads": rd, "writes": wr, "first_touch": ft, "count": cnt, "thread": th, "block": bl}
        return out

    def _who(self, tags):
        d = self.dims

        def lin(names):
            vals = [tags.get(n) for n in names]
            if all(v is None for v in vals):
                return -1
            x, y, z = (v or 0 for v in vals)
            nx, ny = d.get(names[0], 1), d.get(names[1], 1)
            return x + nx * (y + ny * z)

        return (lin(("threadIdx.x", "threadIdx.y", "threadIdx.z")), lin(("blockIdx.x", "blockIdx.y", "blockIdx.z")))

    trace = None  # a list to record every access with its loop values (warp oracle)

    def _touch(self, buf, indices, kind, env, tags):
        ix = tuple(_ev(i, env) for i in indices)
        if self.trace is not None:
            self.trace.append(
                (self.block, buf.name, kind, str(list(indices)), tuple(sorted(self.serial.items())), dict(tags), ix)
            )
        shape = self.shapes[buf.name]
        assert all(0 <= a < s for a, s in zip(ix, shape)), (buf.name, ix)
        r = self.res[buf.name]
        r["reads" if kind == "read" else "writes"].add(ix)
        if ix not in r["first"]:
            r["first"][ix] = self.step
            r["who"][ix] = self._who(tags)
        r["count"][ix] = r["count"].get(ix, 0) + 1

    def _leaf(self, stmt, env, tags):
        loads = []

        def f(e):
            if isinstance(e, _LOAD):
                loads.append(e)

        def walk(e):
            if isinstance(e, (tirx.Var, tirx.IntImm, tirx.FloatImm)):
                return
            if isinstance(e, tvm.ir.Call) and str(e.op.name).endswith("if_then_else"):
                walk(e.args[0])  # only the branch taken loads
                walk(e.args[1] if _ev(e.args[0], env) else e.args[2])
                return
            for name in ("a", "b", "value", "condition", "true_value", "false_value"):
                sub = getattr(e, name, None)
                if isinstance(sub, tvm.ir.Expr):
                    walk(sub)
            if isinstance(e, tvm.ir.Call):
                for a in e.args:
                    walk(a)
            f(e)

        walk(stmt.value)
        for ld in loads:
            self._touch(ld.source, ld.indices, "read", env, tags)
        if isinstance(stmt, tirx.BufferStore):
            self._touch(stmt.buffer, stmt.indices, "write", env, tags)

    def _extent(self, stmt) -> int:
        """A loop's extent; for one that depends on enclosing loops (a non-divisible compute_at),
        the largest it takes, as the analysis numbers the steps (iterations past it are skipped)."""
        if isinstance(stmt.extent, tirx.IntImm):
            return int(stmt.extent)
        from mlc_lab.core.access.space import ProgramIndex

        if not hasattr(self, "_bounds"):
            self._bounds = ProgramIndex(lower(self.func)).extents
        return self._bounds[loop_id(self.func, stmt)]

    def _stmt(self, stmt, env, tags):
        if isinstance(stmt, tirx.For):
            tag = str(stmt.thread_binding.thread_tag) if stmt.thread_binding is not None else None
            key = stmt.loop_var.__chandle__()
            if tag is not None and tag in tags:
                if tags[tag] < _ev(stmt.extent, env):
                    env[key] = tags[tag]
                    self._stmt(stmt.body, env, tags)
                else:
                    self.step += self._count(stmt.body, tags)
                return
            lane = (tag is not None and tag.startswith("threadIdx")) or int(stmt.kind) == 2
            real = _ev(stmt.extent, env)
            for v in range(int(stmt.min), int(stmt.min) + self._extent(stmt)):
                env[key] = v
                if tag is not None:
                    tags[tag] = v
                if not lane:
                    self.serial[key] = v
                if v - int(stmt.min) >= real:  # past a variable extent: steps counted, nothing runs
                    self.step += self._count(stmt.body, tags)
                    continue
                self._stmt(stmt.body, env, tags)
            env.pop(key, None)
            self.serial.pop(key, None)
            if tag is not None:
                tags.pop(tag, None)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self._stmt(s, env, tags)
        elif isinstance(stmt, SBlockRealize):
            blk = stmt.block
            self.block = blk.name_hint
            for iv, val in zip(blk.iter_vars, stmt.iter_values):
                env[iv.var.__chandle__()] = _ev(val, env)
            if not _ev(stmt.predicate, env):
                self.step += self._count(stmt, tags)
                return
            if blk.init is not None and all(
                env[iv.var.__chandle__()] == int(iv.dom.min) for iv in blk.iter_vars if int(iv.iter_type) == 2
            ):
                self._init(blk.init, env, tags)
            if len(blk.match_buffers):  # tensorized: its regions, in one step
                self._regions(blk, env, tags)
                self.step += 1
                return
            self._stmt(blk.body, env, tags)
        elif isinstance(stmt, tirx.IfThenElse):
            n_then = self._count(stmt.then_case, tags)
            n_else = self._count(stmt.else_case, tags) if stmt.else_case is not None else 0
            if _ev(stmt.condition, env):
                self._stmt(stmt.then_case, env, tags)
                self.step += n_else
            else:
                self.step += n_then
                if stmt.else_case is not None:
                    self._stmt(stmt.else_case, env, tags)
        elif isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            self._leaf(stmt, env, tags)
            self.step += 1
        else:
            body = getattr(stmt, "body", None)
            if isinstance(body, tirx.Stmt):
                self._stmt(body, env, tags)

    def _regions(self, blk, env, tags):
        for kind, regions in (("read", blk.reads), ("write", blk.writes)):
            for region in regions:
                ranges = [range(_ev(r.min, env), _ev(r.min, env) + _ev(r.extent, env)) for r in region.region]
                for ix in itertools.product(*ranges):
                    self._touch(region.source, [tirx.IntImm("int32", v) for v in ix], kind, env, tags)

    def _init(self, stmt, env, tags):
        """A T.init() subtree: every statement runs within the step of the block's first statement."""
        if isinstance(stmt, tirx.For):
            key = stmt.loop_var.__chandle__()
            for v in range(int(stmt.min), int(stmt.min) + _ev(stmt.extent, env)):
                env[key] = v
                self._init(stmt.body, env, tags)
            env.pop(key, None)
        elif isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self._init(s, env, tags)
        elif isinstance(stmt, SBlockRealize):
            blk = stmt.block
            for iv, val in zip(blk.iter_vars, stmt.iter_values):
                env[iv.var.__chandle__()] = _ev(val, env)
            if not _ev(stmt.predicate, env):
                return
            if blk.init is not None and all(
                env[iv.var.__chandle__()] == int(iv.dom.min) for iv in blk.iter_vars if int(iv.iter_type) == 2
            ):
                self._init(blk.init, env, tags)
            if len(blk.match_buffers):
                self._regions(blk, env, tags)
            else:
                self._init(blk.body, env, tags)
        elif isinstance(stmt, tirx.IfThenElse):
            if _ev(stmt.condition, env):
                self._init(stmt.then_case, env, tags)
            elif stmt.else_case is not None:
                self._init(stmt.else_case, env, tags)
        elif isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            self._leaf(stmt, env, tags)

    def _count(self, stmt, tags):
        """Steps of a subtree, a loop re-binding a bound thread tag counting once."""
        if isinstance(stmt, tirx.For):
            tag = str(stmt.thread_binding.thread_tag) if stmt.thread_binding is not None else None
            if tag is not None and tag in tags:
                return self._count(stmt.body, tags)
            inner = dict(tags)
            if tag is not None:
                inner[tag] = 0
            return self._extent(stmt) * self._count(stmt.body, inner)
        if isinstance(stmt, tirx.SeqStmt):
            return sum(self._count(s, tags) for s in stmt.seq)
        if isinstance(stmt, SBlockRealize):
            return 1 if len(stmt.block.match_buffers) else self._count(stmt.block.body, tags)
        if isinstance(stmt, tirx.IfThenElse):
            return self._count(stmt.then_case, tags) + (
                self._count(stmt.else_case, tags) if stmt.else_case is not None else 0
            )
        if isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            return 1
        body = getattr(stmt, "body", None)
        return self._count(body, tags) if isinstance(body, tirx.Stmt) else 0


# ==============================================================================================
# Tests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures import programs_access as P  # noqa: E402
from mlc_lab.core import access  # noqa: E402
from mlc_lab.errors import AccessAnalysisError, MlcLabError  # noqa: E402
from mlc_lab.tvm.access import loop_id, lower  # noqa: E402


def footprint(func, loop, at=None, **kw):
    """The analysis on a PrimFunc and one of its ``For`` nodes (``at`` by loop name)."""
    return access.footprint(lower(func), loop_id(func, loop), at, **kw)


def gpu_stats(func, loop, at=None, **kw):
    return access.gpu_stats(lower(func), loop_id(func, loop), at, **kw)


def enclosing(func, loop):
    return Oracle(func)._chain_to(loop)


def assert_exact(func, loop, at=None):
    try:
        exp = Oracle(func).run(loop, at)
    except AssertionError:  # TVM wrote a program that indexes out of a buffer
        with pytest.raises(AccessAnalysisError, match="is accessed out of its bounds"):
            footprint(func, loop, at, counts=True)
        return
    got = footprint(func, loop, at, counts=True)
    assert set(got) == set(exp)
    for name, e in exp.items():
        g = got[name]
        for key in ("reads", "writes", "first_touch", "count"):
            np.testing.assert_array_equal(
                getattr(g, key), e[key], err_msg=f"{name}.{key} under {loop.loop_var.name} at {at}"
            )
        assert g.n_reads + g.n_writes == int(e["count"].sum())
        if g.gpu:
            np.testing.assert_array_equal(g.thread, e["thread"], err_msg=f"{name}.thread")
            np.testing.assert_array_equal(g.block, e["block"], err_msg=f"{name}.block")


def assert_every_loop(func, rng=None):
    oracle = Oracle(func)
    for loop in all_loops(func):
        assert_exact(func, loop, {})
        if rng is not None:
            at = {
                lp.loop_var.name: rng.randrange(int(lp.min), int(lp.min) + oracle._extent(lp))
                for lp in enclosing(func, loop)
            }
            assert_exact(func, loop, at)


# ---- fixed schedules: every loop level, compared with brute force --------------------------------

SMALL = {
    "mm_relu_split": lambda: P.sched_mm_relu_split(16).mod["mm_relu"],
    "mm_relu_split3": lambda: P.sched_mm_relu_split(10, 3).mod["mm_relu"],  # predicate
    "vector_add": lambda: P.sched_vector_add(64, 16).mod["main"],
    "window_sum": lambda: P.sched_window_sum(64, 16).mod["main"],
    "gpu_local": lambda: P.sched_gpu_local(32, 2, 2, 4, 4, 4).mod["main"],
    "gpu_shared": lambda: P.sched_gpu_shared(32, 2, 2, 4, 4, 4, 2).mod["main"],
    "cpu_tiled": lambda: P.sched_cpu_tiled(32, 8, (2, 4), 4).mod["main"],
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_exact_every_loop(name):
    assert_every_loop(SMALL[name](), random.Random(name))


# ---- random schedules ----------------------------------------------------------------------------


def _random_schedule(data):
    kind = data.draw(st.sampled_from(["matmul", "mm_relu", "window", "gpu"]))
    n = data.draw(st.sampled_from([6, 8, 12]))
    if kind == "matmul":
        sch = tvm.s_tir.Schedule(P.matmul(n))
        name, blk = "main", "C"
    elif kind == "mm_relu":
        sch = tvm.s_tir.Schedule(P.mm_relu(n))
        name, blk = "mm_relu", "Y"
    else:
        sch = tvm.s_tir.Schedule(P.window_sum(2 * n))
        name, blk = "main", "C"
    b = sch.get_sblock(blk, func_name=name)
    if kind == "gpu":
        (i,) = sch.get_loops(b)
        f = data.draw(st.sampled_from([3, 4, 5]))
        i0, i1 = sch.split(i, [None, f])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
        if data.draw(st.booleans()):
            sh = sch.cache_read(b, 0, "shared")
            sch.compute_at(sh, i1)
            ax = sch.get_loops(sh)[-1]
            _, t = sch.split(ax, [None, f])
            sch.bind(t, "threadIdx.x")
        return sch.mod[name]
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["split", "reorder", "fuse", "cache_read", "cache_write", "compute_at"]))
        try:
            loops = sch.get_loops(b)
            if op == "split":
                lp = loops[data.draw(st.integers(0, len(loops) - 1))]
                sch.split(lp, [None, data.draw(st.sampled_from([2, 3, 4, 5]))])
            elif op == "reorder":
                perm = data.draw(st.permutations(list(range(len(loops)))))
                sch.reorder(*[loops[p] for p in perm])
            elif op == "fuse" and len(loops) >= 2:
                k = data.draw(st.integers(0, len(loops) - 2))
                sch.fuse(loops[k], loops[k + 1])
            elif op == "cache_read":
                c = sch.cache_read(b, data.draw(st.integers(0, 1)), data.draw(st.sampled_from(["shared", "global"])))
                sch.compute_at(c, loops[data.draw(st.integers(0, len(loops) - 1))])
            elif op == "cache_write":
                c = sch.cache_write(b, 0, "local")
                sch.reverse_compute_at(c, loops[data.draw(st.integers(0, len(loops) - 1))])
            elif op == "compute_at" and kind == "mm_relu":
                cb = sch.get_sblock("C", func_name=name)
                sch.reverse_compute_at(cb, loops[data.draw(st.integers(0, len(loops) - 1))])
        except Exception:  # noqa: BLE001 - an illegal primitive is skipped, not a failure
            pass
    return sch.mod[name]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(st.data())
def test_exact_random_schedules(data):
    func = _random_schedule(data)
    assert_every_loop(func, random.Random(data.draw(st.integers(0, 10**6))))


# ---- acceptance cases ----------------------------------------------------------------------------


def test_mm_relu_split_reorder_j1():
    """Chapter 2: j_1 at i=0, j_0=0, k=3 touches B[3, 0:4], Y[0, 0:4] and one element of A."""
    func = P.sched_mm_relu_split(128).mod["mm_relu"]
    j1 = P.find_loop(func, "j_1", block="Y")
    fp = footprint(func, j1, {"i": 0, "j_0": 0, "k": 3})
    assert fp["B"].distinct == 4 and np.array_equal(np.argwhere(fp["B"].reads), [[3, 0], [3, 1], [3, 2], [3, 3]])
    assert fp["Y"].distinct == 4 and np.array_equal(np.argwhere(fp["Y"].writes), [[0, 0], [0, 1], [0, 2], [0, 3]])
    assert fp["A"].distinct == 1 and fp["A"].reads[0, 3] and fp["A"].accesses == 4
    assert fp["B"].bounds == [[3, 3], [0, 3]]
    assert list(fp["B"].first_touch[3, :4]) == [0, 1, 2, 3]
    assert fp["C"].distinct == 0
    assert fp["B"].strides["j_1"] == 1 and fp["B"].strides["k"] == 128
    assert fp["A"].strides["j_1"] == 0 and fp["A"].reuse == 4.0
    assert fp["B"].cache_lines == 1
    js = fp["B"].to_json()
    assert js["distinct"] == 4 and isinstance(js["reads"]["data"], bytes)


def test_window_sum_shared_segment_and_fetching_threads():
    """Chapter 6.3: each block stages nthread + 2 elements of A; thread t fetches t and t + 128."""
    nthread = 128
    func = P.sched_window_sum(1024, nthread).mod["main"]
    i1 = P.find_loop(func, "i_1")
    for b in (0, 3, 7):
        fp = footprint(func, i1, {"i_0": b})
        seg = np.flatnonzero(fp["A"].reads)
        assert seg.tolist() == list(range(b * nthread, b * nthread + nthread + 2))
        assert fp["A_shared"].distinct == nthread + 2 and fp["A_shared"].writes.sum() == nthread + 2
        who = fp["A"].thread[seg]
        assert who.tolist() == list(range(nthread)) + [0, 1]
        assert (fp["A"].block[seg] == b).all()
        assert fp["A"].accesses == nthread + 2  # each element fetched once from global
        assert fp["A_shared"].n_reads == 3 * nthread  # and read three times from shared
    stats = gpu_stats(func, i1, {"i_0": 0})
    fetch = [a for a in stats.accesses if a.block == "A_shared" and a.buffer == "A_shared"][0]
    assert fetch.layout["shape"] == [nthread + 2] and fetch.bank_conflicts == 0


def test_gpu_matmul_local_vs_shared():
    """Chapter 6.4/6.5: 8x8 C tile per thread, A/B stripes per k step, different coalescing."""
    local = P.sched_gpu_local().mod["main"]
    shared = P.sched_gpu_shared().mod["main"]
    # one thread's C tile: an 8x8 block at (8*ty, 8*tx) in the thread block's 64x64 tile
    fp = footprint(local, P.find_loop(local, "k_0"), {"i_0": 1, "j_0": 2, "i_1": 3, "j_1": 5})
    rows, cols = np.nonzero(fp["C_local"].writes)
    assert fp["C_local"].distinct == 64
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (64 + 24, 64 + 31, 128 + 40, 128 + 47)
    assert fp["A"].bounds == [[88, 95], [0, 1023]] and fp["B"].bounds == [[0, 1023], [168, 175]]
    # per k step (k_0 = 5) the block's 64 threads stage a 64x8 stripe of A and an 8x64 one of B,
    # each thread 2 rounds of float4 (loops under the thread loop are per thread: one query each)
    fetch_a = P.find_loop(shared, "ax0_ax1_fused_0")
    fetch_b = [lp for lp in all_loops(shared) if lp.loop_var.name == "ax0_ax1_fused_0"][1]
    seen_a, seen_b = np.zeros((1024, 1024), bool), np.zeros((1024, 1024), bool)
    for t in range(64):
        at = {"i_0": 1, "j_0": 2, "i_1_j_1_fused": t, "k_0": 5}
        fa, fb = footprint(shared, fetch_a, at), footprint(shared, fetch_b, at)
        assert fa["A"].distinct == 8 and not (seen_a & fa["A"].reads).any()
        assert (fa["A"].thread[fa["A"].reads] == t).all()
        seen_a |= fa["A"].reads
        seen_b |= fb["B"].reads
    assert np.array_equal(np.argwhere(seen_a).min(0), [64, 40]) and np.array_equal(
        np.argwhere(seen_a).max(0), [127, 47]
    )
    assert seen_a.sum() == 512 and seen_b.sum() == 512
    assert np.array_equal(np.argwhere(seen_b).min(0), [40, 128]) and np.array_equal(
        np.argwhere(seen_b).max(0), [47, 191]
    )
    fk2 = footprint(shared, P.find_loop(shared, "k_1"), {"i_0": 1, "j_0": 2, "i_1_j_1_fused": 9, "k_0": 5})
    assert fk2["A_shared"].bounds == [[72, 79], [40, 47]] and fk2["B_shared"].bounds == [[40, 47], [136, 143]]
    assert np.count_nonzero(fk2["C_local"].writes) == 64
    # coalescing: the local schedule reads A/B straight from global, 4 and 8 sectors per request
    # for 16 and 32 useful bytes; the shared schedule's float4 fetch moves 512 bytes in 16 sectors
    gl = {(a.block, a.buffer): a for a in gpu_stats(local, P.find_loop(local, "i_0")).accesses}
    gs = {(a.block, a.buffer): a for a in gpu_stats(shared, P.find_loop(shared, "i_0")).accesses}
    assert gl[("C_update", "A")].sectors_per_request == 4.0
    assert gl[("C_update", "B")].sectors_per_request == 8.0
    assert gs[("A_shared", "A")].sectors_per_request == 16.0 and gs[("A_shared", "A")].lanes == 128
    assert gs[("A_shared", "A")].efficiency == 1.0 and gl[("C_update", "A")].efficiency < 0.2
    assert gs[("C_update", "A_shared")].max_ways == 4 and gs[("C_update", "B_shared")].max_ways == 2
    assert gs[("A_shared", "A_shared")].layout["shape"] == [64, 8]


def test_outer_loop_of_1024_matmul_is_exact_in_closed_form():
    """The whole 1024^3 kernel: first_touch order without enumerating 10^9 iterations."""
    func = P.sched_cpu_tiled(1024).mod["main"]
    fp = footprint(func, P.find_loop(func, "i_0"))
    assert fp["A"].distinct == 1024 * 1024 and fp["A"].accesses == 1024**3
    # C_global[i, j] is first written by C_init of tile (i//32, j//64)
    steps_per_tile = 32 * 64 + 32 * 256 * 4 * 4 * 16 + 32 * 64
    ft = fp["C_global"].first_touch
    assert ft[0, 0] == 0 and ft[0, 64] == steps_per_tile and ft[32, 0] == 16 * steps_per_tile
    assert ft[1, 5] == 1 * 64 + 5
    # A[i, k] first read in tile (i//32, 0), update loop order i_1, k_0, j_1, k_1, j_2
    fa = fp["A"].first_touch
    assert fa[0, 0] == 32 * 64 and fa[1, 4] == 32 * 64 + 1 * 256 * 256 + 1 * 256


def test_errors_are_plain_sentences():
    assert issubclass(AccessAnalysisError, MlcLabError)
    func = P.sched_mm_relu_split(16).mod["mm_relu"]
    with pytest.raises(AccessAnalysisError, match="do not enclose"):
        footprint(func, P.find_loop(func, "j_1", block="Y"), {"zz": 1})
    with pytest.raises(AccessAnalysisError, match="outside the loop's range"):
        footprint(func, P.find_loop(func, "j_1", block="Y"), {"i": 99})


@pytest.mark.parametrize("name", ["vector_add", "window_sum", "gpu_local", "gpu_shared"])
def test_coalescing_matches_brute_force(name):
    """Sectors per request of every global access, warp 0 of block 0, against the trace."""
    func = SMALL[name]()
    loop = all_loops(func)[0]
    oracle = Oracle(func)
    oracle.trace = []
    oracle.run(loop, {})
    d = oracle.dims
    nx, ny = d.get("threadIdx.x", 1), d.get("threadIdx.y", 1)
    requests: dict = {}
    for blk, buf, kind, idx, serial, tags, ix in oracle.trace:
        if any(tags.get(t, 0) for t in ("blockIdx.x", "blockIdx.y", "blockIdx.z")):
            continue
        tid = tags.get("threadIdx.x", 0) + nx * (tags.get("threadIdx.y", 0) + ny * tags.get("threadIdx.z", 0))
        if tid >= 32:
            continue
        shape = oracle.shapes[buf]
        flat = int(np.ravel_multi_index(ix, shape))
        requests.setdefault((blk, buf, kind, idx), {}).setdefault(serial, set()).add(flat * 4 // 32)
    stats = gpu_stats(func, loop)
    checked = 0
    for a in stats.accesses:
        if a.scope != "global":
            continue
        reqs = [v for k, v in requests.items() if k[0] == a.block and k[1] == a.buffer and k[2] == a.kind]
        assert len(reqs) == 1, (a.block, a.buffer)
        sectors = [len(v) for v in reqs[0].values()]
        assert a.requests == len(sectors)
        assert a.sectors_per_request == pytest.approx(np.mean(sectors))
        checked += 1
    assert checked


# ---- what TVM writes beyond the course: init, tensorize, guards, symbolic shapes -----------------

MORE = {
    "matmul_init": lambda: P.sched_matmul_init(16, 4, 4, 2).mod["main"],
    "blockized": lambda: P.sched_blockized(16, 4).mod["main"],
    "tensorized": lambda: P.sched_tensorized_row_sum(8, 16).mod["main"],
    "padded": lambda: P.padded_copy(8, 2)["main"],
}


@pytest.mark.parametrize("name", sorted(MORE))
def test_exact_every_loop_beyond_the_course(name):
    assert_every_loop(MORE[name](), random.Random(name))


def test_matmul_1024_with_init_at_every_level():
    """The course's case: 1024^3, i/j/k split and reordered, T.init() kept: every level answers
    (the init is its sub-space k == 0, never enumerated). Timings: benchmarks/access.py."""
    func = P.sched_matmul_init(1024).mod["main"]
    for loop in all_loops(func):
        fp = footprint(func, loop)
        assert fp["C"].distinct > 0
    top = footprint(func, all_loops(func)[0])
    assert top["C"].distinct == 1024 * 1024 and top["A"].accesses == 1024**3
    assert top["C"].n_writes == 1024 * 1024 + 1024**3  # the init once per element, then every update
    # C[i, j] of the first tile is first written by its init, in the k_0 = 0 pass (i_1, k_1 = 0, j_1)
    assert top["C"].first_touch[0, 0] == 0 and top["C"].first_touch[0, 5] == 5
    assert top["C"].first_touch[1, 0] == 4 * 32 and top["C"].first_touch[0, 32] == 1 << 20


def test_tensorized_block_touches_its_regions():
    func = P.sched_tensorized_row_sum(8, 16).mod["main"]
    fp = footprint(func, P.find_loop(func, "k_0"), {"i": 3})
    assert np.argwhere(fp["A"].reads).tolist() == [[3, k] for k in range(16)]
    assert fp["A"].first_touch[3].tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    assert fp["C"].reads[3] and fp["C"].writes[3] and fp["C"].distinct == 1


def test_guarded_load_is_never_out_of_bounds():
    func = P.padded_copy(8, 2)["main"]
    fp = footprint(func, all_loops(func)[0])
    assert fp["A"].distinct == 8 and fp["A"].accesses == 8 and fp["P"].distinct == 12
    assert fp["A"].first_touch.tolist() == list(range(2, 10))


def test_symbolic_shapes_through_the_session():
    from mlc_lab.core.session import Session

    s = Session(P.symbolic_add())
    with pytest.raises(AccessAnalysisError, match=r"symbolic shapes n.*shape_vars") as refused:
        s.footprint("i")
    assert refused.value.shape_vars == ["n"]  # a view asks for exactly these
    fp = s.footprint("i", shape_vars={"n": 64})
    assert fp["C"].distinct == 64 and fp["A"].shape == (64,)


def test_at_keeps_the_users_qualification():
    """mm_relu has loops Y/i and C/i: a value for Y/i is not a value for C/i (it used to be)."""
    from mlc_lab.core.session import Session

    s = Session(P.mm_relu(16), "mm_relu")
    fp = s.footprint("C/j", at={"C/i": 5})
    assert np.argwhere(fp["C"].writes)[:, 0].tolist() == [5] * 16
    with pytest.raises(AccessAnalysisError, match="do not enclose"):
        s.footprint("C/j", at={"Y/i": 5})
    with pytest.raises(MlcLabError, match="no loop named 'zz'"):
        s.footprint("C/j", at={"zz": 5})


# ---- TVM's own design spaces, on small shapes --------------------------------------------------


@contextlib.contextmanager
def _without_tensor_intrinsics():
    """TuneContext runs `import tvm.s_tir.tensor_intrin`, which parses every backend's TVMScript
    intrinsics (20-30 s of CPU); the default llvm and cuda rules name none of them. While this lasts,
    that package is an empty module (its __init__ not run); afterwards it is as it was, so a later
    import registers them all."""
    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        yield
        return
    import tvm.s_tir as parent

    spec = importlib.util.find_spec(name)
    assert spec is not None
    sys.modules[name] = importlib.util.module_from_spec(spec)
    try:
        yield
    finally:
        del sys.modules[name]
        parent.__dict__.pop("tensor_intrin", None)


def _small_design_spaces():
    """Sketches meta_schedule writes for small te workloads (llvm AVX-512 and CUDA)."""
    from tvm import te
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing import te_workload as tw
    from tvm.s_tir.meta_schedule.testing.space_generation import generate_design_space

    funcs = {
        "GMM": te.create_prim_func(tw.matmul(8, 8, 8)),
        "C1D": te.create_prim_func(tw.conv1d_nlc(1, 8, 2, 4, 3, 2, 1)),
    }
    targets = {
        "llvm": {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4},
        "cuda": {
            "kind": "cuda",
            "arch": "sm_80",
            "max_threads_per_block": 1024,
            "max_shared_memory_per_block": 49152,
            "thread_warp_size": 32,
        },
    }
    out = []
    for name, func in funcs.items():
        for kind, target in targets.items():
            mod = tvm.IRModule({"main": func})
            with _without_tensor_intrinsics():
                spaces = generate_design_space(kind, mod, tvm.target.Target(target), types=ms.ScheduleRule)
            out += [(f"{name}/{kind}/{i}", sch.mod["main"]) for i, sch in enumerate(spaces)]
    return out


@pytest.mark.slow
def test_design_spaces_match_brute_force():
    """Outermost, middle and innermost loop of each sketch (as the corpus benchmark picks them)."""
    spaces = _small_design_spaces()
    assert len(spaces) >= 8
    rng = random.Random(13)
    for _name, func in spaces:
        loops = all_loops(func)
        for loop in {id(x): x for x in (loops[0], loops[len(loops) // 2], loops[-1])}.values():
            at = {
                lp.loop_var.name: rng.randrange(int(lp.min), int(lp.min) + int(lp.extent))
                for lp in enclosing(func, loop)
            }
            assert_exact(func, loop, at)
