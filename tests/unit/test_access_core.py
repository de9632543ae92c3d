"""The access analysis on hand-built access programs: no TVM, compared with a brute-force interpreter."""

from __future__ import annotations

import math
import random
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlc_lab.core.access import (
    Access,
    AccessAnalysisError,
    AccessProgram,
    BufferInfo,
    Budget,
    Leaf,
    Loop,
    Seq,
    Var,
    footprint,
    gpu_stats,
    op,
)
from mlc_lab.errors import MlcLabError
from tests.unit.access_oracle import PlainOracle


class Builder:
    """Loops and buffers of a hand-written program; ``program(root)`` closes it."""

    def __init__(self):
        self.loops: list[Loop] = []
        self.buffers: dict[str, BufferInfo] = {}
        self.shape_vars: dict[str, Var] = {}

    def buf(self, name, *shape, scope="global"):
        self.buffers[name] = BufferInfo(name, tuple(shape), "float32", scope, 4)
        return name

    def loop(self, name, extent, *, tag=None, kind="serial", role="loop", lo=0):
        lp = Loop(len(self.loops), name, lo, extent, kind if tag is None else "thread_binding", tag, role=role)
        self.loops.append(lp)
        return lp

    def sym(self, name):
        v = Var(-(len(self.shape_vars) + 1), name)
        self.shape_vars[name] = v
        return v

    def program(self, root):
        return AccessProgram("f", self.buffers, root, self.loops, dict(self.shape_vars))


def nest(*loops, body):
    for a, b in zip(loops, loops[1:]):
        a.body = b
    loops[-1].body = body
    return loops[0]


def R(buf, *ix, **kw):
    return Access(buf, "read", tuple(ix), **kw)


def W(buf, *ix, **kw):
    return Access(buf, "write", tuple(ix), **kw)


def assert_exact(prog, loop, at=None, shape_vars=None):
    got = footprint(prog, loop.id, at, counts=True, shape_vars=shape_vars)
    exp = PlainOracle(prog if not shape_vars else _bound(prog, shape_vars)).run(
        loop if not shape_vars else _bound(prog, shape_vars).loops[loop.id], at
    )
    for name, e in exp.items():
        g = got[name]
        for key in ("reads", "writes", "first_touch", "count"):
            np.testing.assert_array_equal(getattr(g, key), e[key], err_msg=f"{name}.{key} under {loop.name} at {at}")
        assert g.n_reads + g.n_writes == int(e["count"].sum())
        if g.gpu:
            np.testing.assert_array_equal(g.thread, e["thread"], err_msg=f"{name}.thread")
            np.testing.assert_array_equal(g.block, e["block"], err_msg=f"{name}.block")
    return got


def _bound(prog, shape_vars):
    from mlc_lab.core.access.shapes import bind_shapes

    return bind_shapes(prog, shape_vars)


def every_loop(prog, rng):
    from mlc_lab.core.access.space import ProgramIndex

    idx = ProgramIndex(prog)
    for lp in prog.loops:
        if lp.role != "loop":
            continue
        assert_exact(prog, lp)
        at = {o.id: rng.randrange(int(o.min), int(o.min) + int(o.extent)) for o in idx.enclosing(lp)}
        assert_exact(prog, lp, at)


# --- reduction init -------------------------------------------------------------------------------


def matmul_with_init(n=8, f=4, reorder=True):
    """C[i, j] += A[i, k] * B[k, j], k split by f, T.init() kept: init guarded by k == 0."""
    b = Builder()
    for name in "ABC":
        b.buf(name, n, n)
    i, j, k0, k1 = b.loop("i", n), b.loop("j", n), b.loop("k_0", n // f), b.loop("k_1", f)
    k = op("add", op("mul", k0.var, f), k1.var)
    leaf = Leaf(
        [
            W("C", i.var, j.var, guards=(op("eq", k, 0),), label="init", block="C"),
            R("C", i.var, j.var, block="C"),
            R("A", i.var, k, block="C"),
            R("B", k, j.var, block="C"),
            W("C", i.var, j.var, block="C"),
        ]
    )
    order = (i, k0, j, k1) if reorder else (i, j, k0, k1)
    return b.program(nest(*order, body=leaf)), b


def test_init_is_exact_at_every_loop():
    prog, _ = matmul_with_init()
    every_loop(prog, random.Random(1))


def test_init_is_analysed_as_a_sub_space_not_enumerated():
    """1024^3 with the init kept: the outermost loop answers without enumerating 2^30 points."""
    prog, b = matmul_with_init(1024, 4)
    t = time.perf_counter()
    fp = footprint(prog, "i")
    took = time.perf_counter() - t
    assert fp["C"].distinct == 1024 * 1024 and fp["C"].n_writes == 1024 * 1024 + 1024**3
    # C[0, j] is first touched by the init at step j * 4 (k_1 at 0: 4 steps per j, 256 k_0 ... )
    assert fp["C"].first_touch[0, 5] == 5 * 4
    assert took < 5.0


def test_init_with_loops_inside():
    """A blockize'd reduction: the outer block's init runs a 4-element loop within one step."""
    b = Builder()
    b.buf("A", 16, 16)
    b.buf("C", 16)
    io, ko, ii = b.loop("i_o", 4), b.loop("k_o", 4), b.loop("i_i_init", 4, role="inner")
    region = b.loop("region", 4, role="inner")
    ci = op("add", op("mul", io.var, 4), ii.var)
    leaf = Leaf(
        [
            W("C", ci, guards=(op("eq", ko.var, 0),), inner=(ii,), label="init", block="C_o"),
            R(
                "A",
                op("add", op("mul", io.var, 4), region.var),
                op("mul", ko.var, 4),
                inner=(region,),
                label="region",
                block="C_o",
            ),
            W("C", op("add", op("mul", io.var, 4), region.var), inner=(region,), label="region", block="C_o"),
        ]
    )
    prog = b.program(nest(io, ko, body=leaf))
    every_loop(prog, random.Random(2))
    fp = footprint(prog, "k_o", {"i_o": 2})
    assert fp["C"].bounds == [[8, 11]] and fp["A"].distinct == 16
    with pytest.raises(AccessAnalysisError, match="T.init"):
        footprint(prog, ii.id)


# --- guards ---------------------------------------------------------------------------------------


def test_padding_guard_touches_exactly_the_elements():
    """A[i - 1] read under if_then_else(1 <= i < 9): never out of bounds, exactly 8 elements."""
    b = Builder()
    b.buf("A", 8)
    b.buf("P", 10)
    i = b.loop("i", 10)
    ix = op("sub", i.var, 1)
    leaf = Leaf([R("A", ix, guards=(op("ge", i.var, 1), op("lt", i.var, 9))), W("P", i.var)])
    prog = b.program(nest(i, body=leaf))
    fp = assert_exact(prog, i)
    assert fp["A"].distinct == 8 and fp["P"].distinct == 10


def test_non_divisible_split_predicate():
    b = Builder()
    b.buf("A", 10)
    o, t = b.loop("o", 4), b.loop("t", 3)
    x = op("add", op("mul", o.var, 3), t.var)
    prog = b.program(nest(o, t, body=Leaf([W("A", x, guards=(op("lt", x, 10),))])))
    every_loop(prog, random.Random(3))


def transposed_conv_read():
    """A transposed convolution's padded read: A[(h + r // 64) // 2, r % 64] where
    (h + r // 64) % 2 == 0, r a fused loop of 4 x 64 iterations."""
    b = Builder()
    b.buf("A", 8, 64)
    b.buf("O", 16)
    h, r = b.loop("h", 12), b.loop("r", 256)
    hr = op("add", h.var, op("floordiv", r.var, 64))
    leaf = Leaf(
        [
            R("A", op("floordiv", hr, 2), op("floormod", r.var, 64), guards=(op("eq", op("floormod", hr, 2), 0),)),
            W("O", h.var),
        ]
    )
    return b.program(nest(h, r, body=leaf)), h, r


def test_evaluated_indices_span_only_the_digits_of_their_affine_parts():
    """``(h + r // 64) // 2`` is not affine, but its parts are: computed from their digits, the
    index and the condition span h and r's top digit, not r's 64 inner values; and exact."""
    from mlc_lab.core.access.footprint import index_of
    from mlc_lab.core.access.grid import build_grid, plan_access
    from mlc_lab.core.access.space import Query

    prog, h, r = transposed_conv_read()
    every_loop(prog, random.Random(5))
    q = Query(index_of(prog), prog.loop("h"), None)
    acc = prog.loop("r").body.accesses[0]
    g = build_grid(q, acc, 0, 1, 0, plan=plan_access(q, acc))
    assert math.prod(g.shape) == 12 * 256 and np.size(g.dims[0]) == 12 * 4
    assert all(np.size(m) == 12 * 4 for m in g.masks)
    from mlc_lab.core.access.accumulate import dim_range

    run = np.broadcast_to(g.mask, g.shape)
    for d in range(2):
        spec = g.dims[d]
        vals = np.broadcast_to(spec, g.shape) if not isinstance(spec, tuple) else None
        if vals is not None:  # the masked range, worked out over the index's own axes, is the grid's
            assert dim_range(g, d) == (int(vals[run].min()), int(vals[run].max()))


# --- symbolic shapes, budget, errors ----------------------------------------------------------------


def test_symbolic_shapes_need_values_and_then_work():
    b = Builder()
    n = b.sym("n")
    b.buf("A", n)
    b.buf("B", n)
    i = b.loop("i", n)
    prog = b.program(nest(i, body=Leaf([R("A", i.var), W("B", i.var)])))
    with pytest.raises(AccessAnalysisError, match="symbolic shapes n") as err:
        footprint(prog, "i")
    assert "shape_vars" in str(err.value).splitlines()[0]
    fp = assert_exact(prog, i, shape_vars={"n": 12})
    assert fp["A"].distinct == 12 and fp["A"].shape == (12,)
    with pytest.raises(AccessAnalysisError, match="does not have"):
        footprint(prog, "i", shape_vars={"n": 4, "m": 3})


def test_memory_budget_refuses_instead_of_allocating():
    b = Builder()
    b.buf("A", 1 << 15, 1 << 15)
    i, j = b.loop("i", 1 << 15), b.loop("j", 1 << 15)
    prog = b.program(nest(i, j, body=Leaf([W("A", i.var, j.var)])))
    with pytest.raises(AccessAnalysisError, match="budget") as err:
        footprint(prog, "i", budget=Budget(64 << 20))
    assert isinstance(err.value, MlcLabError)
    fp = footprint(prog, "j", {"i": 3})
    assert fp["A"].distinct == 1 << 15 and fp["A"].bounds == [[3, 3], [0, (1 << 15) - 1]]


def test_bad_at_values_are_plain_sentences():
    prog, _ = matmul_with_init()
    with pytest.raises(AccessAnalysisError, match="do not enclose"):
        footprint(prog, "k_1", {"zz": 1})
    with pytest.raises(AccessAnalysisError, match="outside the loop's range"):
        footprint(prog, "k_1", {"i": 99})


# --- GPU: aliased thread loops, who ---------------------------------------------------------------


def staged_copy():
    """A staged copy: threads fetch A into shared, then each thread reads its neighbours."""
    b = Builder()
    b.buf("A", 64)
    b.buf("S", 18, scope="shared")
    b.buf("B", 64)
    bx, tx = b.loop("bx", 4, tag="blockIdx.x"), b.loop("tx", 16, tag="threadIdx.x")
    f0, f1 = b.loop("f0", 2), b.loop("f1", 16, tag="threadIdx.x")
    e = op("add", op("mul", f0.var, 16), f1.var)
    fetch = nest(
        f0,
        f1,
        body=Leaf(
            [
                R(
                    "A",
                    op("add", op("mul", bx.var, 16), e),
                    guards=(op("lt", e, 18), op("lt", op("add", op("mul", bx.var, 16), e), 64)),
                ),
                W("S", e, guards=(op("lt", e, 18), op("lt", op("add", op("mul", bx.var, 16), e), 64))),
            ]
        ),
    )
    r = b.loop("r", 3)
    use = nest(
        r,
        body=Leaf(
            [
                R(
                    "S",
                    op("add", tx.var, r.var),
                    guards=(op("lt", op("add", op("add", op("mul", bx.var, 16), tx.var), r.var), 64),),
                ),
                W("B", op("add", op("mul", bx.var, 16), tx.var)),
            ]
        ),
    )
    tx.body = Seq([fetch, use])
    bx.body = tx
    return b.program(bx)


def test_gpu_thread_aliases_and_who():
    prog = staged_copy()
    every_loop(prog, random.Random(4))
    fp = footprint(prog, "tx", {"bx": 1})
    assert fp.gpu and fp.launch == {"blockIdx.x": 4, "threadIdx.x": 16}
    seg = np.flatnonzero(fp["A"].reads)
    assert seg.tolist() == list(range(16, 34)) and fp["A"].thread[seg].tolist() == list(range(16)) + [0, 1]
    stats = gpu_stats(prog, "tx", {"bx": 1})
    glob = [a for a in stats.accesses if a.buffer == "A"][0]
    assert glob.lanes == 16 and glob.sectors_per_request == pytest.approx(1.5)


def test_thread_and_block_are_decoded_on_first_use_exactly(monkeypatch):
    """footprint() leaves the thread / block of each first touch to the first caller that asks
    (decoding tens of millions of steps costs seconds); asked for, whole or cropped, they are the
    oracle's, and they are decoded once."""
    from mlc_lab.core.access.space import Query

    calls = []
    who = Query.who

    def counting(self, steps, launch):
        calls.append(np.asarray(steps).size)
        return who(self, steps, launch)

    monkeypatch.setattr(Query, "who", counting)
    prog = staged_copy()
    fp = footprint(prog, "tx", {"bx": 1}, counts=True)
    summaries = {name: f.summary() for name, f in fp.items()}
    assert calls == [] and summaries["A"]["distinct"] == 18 and fp.steps > 0
    expect = PlainOracle(prog).run(prog.loop("tx"), {"bx": 1})
    offset, arrays = fp["S"].crop()  # the panel's path: only the cropped part is decoded
    assert calls == [18] and offset == [0]
    np.testing.assert_array_equal(arrays["thread"], expect["S"]["thread"][:18])
    np.testing.assert_array_equal(arrays["block"], expect["S"]["block"][:18])
    for name in ("A", "S", "B"):
        np.testing.assert_array_equal(fp[name].thread, expect[name]["thread"], err_msg=name)
        np.testing.assert_array_equal(fp[name].block, expect[name]["block"], err_msg=name)
    n = len(calls)
    fp["A"].to_json(), fp["A"].crop()
    assert len(calls) == n
    import copy
    import pickle

    fresh = footprint(prog, "tx", {"bx": 1})["B"]  # copied or pickled: plain arrays, decoded
    for box in (pickle.loads(pickle.dumps(fresh.box)), copy.deepcopy(fresh.box)):
        assert type(box) is dict
        np.testing.assert_array_equal(box["thread"], expect["B"]["thread"][fresh.box_slices()])


@pytest.mark.parametrize("loop", ["f0", "r"])
def test_sweeping_the_thread_loop_colours_by_thread(loop):
    """With sweep_threads, the loops under tx run for every thread, thread after thread: the union
    of the per-thread footprints, each element naming the first thread that touches it."""
    prog = staged_copy()
    L = prog.loop(loop)
    got = footprint(prog, loop, {"bx": 2}, sweep_threads=True, counts=True)
    per = [PlainOracle(prog).run(L, {"bx": 2, "tx": t}) for t in range(16)]
    steps = footprint(prog, loop, {"bx": 2, "tx": 0}).total_steps
    assert got.total_steps == 16 * steps and "tx" not in got.at
    for name in ("A", "S", "B"):
        first = np.full(prog.buffers[name].shape, -1)
        thread = np.full(prog.buffers[name].shape, -1)
        for t in reversed(range(16)):
            hit = per[t][name]["first_touch"] >= 0
            first[hit] = per[t][name]["first_touch"][hit] + t * steps
            thread[hit] = t
        np.testing.assert_array_equal(got[name].first_touch, first, err_msg=name)
        np.testing.assert_array_equal(got[name].thread, thread, err_msg=name)
        np.testing.assert_array_equal(got[name].count, sum(p[name]["count"] for p in per), err_msg=name)


# --- the result carries what the views show ---------------------------------------------------------


def test_result_carries_steps_crop_and_launch():
    prog, _ = matmul_with_init(8, 4)
    fp = footprint(prog, "j", {"i": 2, "k_0": 1})
    assert fp.loop == "j" and fp.at == {"i": 2, "k_0": 1} and fp.launch == {} and not fp.gpu
    assert fp.total_steps == 8 * 4 and fp.steps == 8 * 4  # B[7, 7] is first read at the last step
    offset, arrays = fp["B"].crop()
    assert offset == [4, 0] and arrays["reads"].shape == (4, 8) and arrays["reads"].all()
    assert {a["buffer"] for a in fp.accesses} == {"A", "B", "C"}
    js = fp["B"].to_json()
    assert js["distinct"] == 32 and isinstance(js["reads"]["data"], bytes)


def test_core_does_not_import_tvm():
    import subprocess

    code = (
        "import sys, mlc_lab.core.access as a, tests.unit.access_oracle; "
        "assert 'tvm' not in sys.modules, sorted(m for m in sys.modules if m.startswith('tvm'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- random programs against the interpreter --------------------------------------------------------


@st.composite
def programs(draw):
    """A matmul-like nest: each axis whole or split (with a predicate when the factor does not divide),
    loops in any order, the two outermost optionally fused, the init kept, a window read sometimes."""
    b = Builder()
    sizes = {a: draw(st.sampled_from([3, 4, 6, 8])) for a in "xyr"}
    b.buf("A", sizes["x"] + sizes["r"], sizes["r"])
    b.buf("B", sizes["r"], sizes["y"])
    b.buf("C", sizes["x"], sizes["y"])
    parts, guards = [], []  # (name, extent) per loop, in creation order
    axis_terms = {}
    for a, n in sizes.items():
        f = draw(st.sampled_from([0, 2, 3, 4]))
        if f == 0 or f >= n:
            parts.append((a, n))
            axis_terms[a] = [(a, 1)]
        else:
            parts += [(a + "_0", -(-n // f)), (a + "_1", f)]
            axis_terms[a] = [(a + "_0", f), (a + "_1", 1)]
            if n % f:
                guards.append(a)
    order = draw(st.permutations(parts))
    fuse = draw(st.booleans()) and len(order) >= 2
    loops, value = [], {}
    if fuse:
        (n0, e0), (n1, e1) = order[0], order[1]
        fused = b.loop(f"{n0}_{n1}_fused", e0 * e1)
        loops.append(fused)
        value[n0], value[n1] = op("floordiv", fused.var, e1), op("floormod", fused.var, e1)
        order = order[2:]
    for name, ext in order:
        lp = b.loop(name, ext)
        loops.append(lp)
        value[name] = lp.var

    def axis(a):
        e = None
        for name, coef in axis_terms[a]:
            t = value[name] if coef == 1 else op("mul", value[name], coef)
            e = t if e is None else op("add", e, t)
        return e

    x, y, r = axis("x"), axis("y"), axis("r")
    g = tuple(op("lt", axis(a), sizes[a]) for a in guards)
    ax = op("add", x, r) if draw(st.booleans()) else x
    leaf = Leaf(
        [
            W("C", x, y, guards=g + (op("eq", r, 0),), label="init"),
            R("C", x, y, guards=g),
            R("A", ax, r, guards=g),
            R("B", r, y, guards=g),
            W("C", x, y, guards=g),
        ]
    )
    return b.program(nest(*loops, body=leaf))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.integers(0, 10**6))
def test_random_programs_match_the_interpreter(prog, seed):
    every_loop(prog, random.Random(seed))


def test_a_loop_whose_extent_depends_on_another_runs_to_its_bound():
    b = Builder()
    b.buf("A", 8, 8)
    b.buf("B", 8)
    i = b.loop("i", 8)
    j = b.loop("j", op("add", op("floormod", i.var, 3), 2))  # compute_at of a ragged tile writes these
    prog = b.program(nest(i, j, body=Leaf([R("B", j.var), W("A", i.var, j.var)])))
    every_loop(prog, random.Random(5))
    fp = footprint(prog, "i")
    assert fp["A"].distinct == sum(i % 3 + 2 for i in range(8)) and fp.total_steps == 8 * 4


def test_a_loop_whose_range_cannot_be_bounded_is_refused_in_words():
    b = Builder()
    b.buf("A", 8, 8)
    i = b.loop("i", 8)
    j = b.loop("j", 4, lo=op("add", i.var, 1))
    prog = b.program(nest(i, j, body=Leaf([W("A", i.var, j.var)])))
    with pytest.raises(AccessAnalysisError, match="loop j has a range that depends on i"):
        footprint(prog, "i")
