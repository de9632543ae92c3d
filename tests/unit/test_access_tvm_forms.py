"""Forms of TensorIR that TVM's own schedule tests and design spaces write and that the access
analysis once refused: each answers now, exactly (brute force, or the compiled kernel itself)."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T

from mlc_lab.core import access
from mlc_lab.errors import AccessAnalysisError
from mlc_lab.tvm.access import loop_id, lower
from tests.unit.test_access import all_loops, assert_every_loop, assert_exact


def _footprint(func, loop, **kw):
    return access.footprint(lower(func), loop_id(func, loop), **kw)


# ---- a float index (an image resize's source pixel) ---------------------------------------------


@T.prim_func(s_tir=True)
def resize(x: T.Buffer((1, 1, 32, 32), "float32"), out: T.Buffer((1, 1, 12, 12), "float32")):
    for i0, i1, i2, i3 in T.grid(1, 1, 12, 12):
        with T.sblock("resize"):
            v0, v1, v2, v3 = T.axis.remap("SSSS", [i0, i1, i2, i3])
            out[v0, v1, v2, v3] = x[
                v0,
                v1,
                T.max(
                    T.min(
                        T.Cast(
                            "int32",
                            T.floor((T.Cast("float32", v2) + T.float32(0.5)) * T.float32(2.67) - T.float32(0.5)),
                        ),
                        31,
                    ),
                    0,
                ),
                T.max(
                    T.min(
                        T.Cast(
                            "int32",
                            T.floor((T.Cast("float32", v3) + T.float32(0.5)) * T.float32(2.67) - T.float32(0.5)),
                        ),
                        31,
                    ),
                    0,
                ),
            ]


def test_float_index_is_read_as_the_compiled_kernel_reads_it():
    """The source pixel of every output pixel, from the analysis and from the kernel TVM builds
    (each input pixel holds its own flat index, so the output names the pixel it was read from).
    Before: 'the function could not be read (AttributeError: 'Cast' object has no attribute 'dtype')'."""
    ex = tvm.compile(tvm.IRModule({"main": resize}), target="llvm")
    x = np.arange(32 * 32, dtype="float32").reshape(1, 1, 32, 32)
    out = tvm.runtime.tensor(np.zeros((1, 1, 12, 12), "float32"))
    ex["main"](tvm.runtime.tensor(x), out)
    src = out.numpy().astype(np.int64).reshape(-1)  # output pixel (in step order) -> input pixel
    expected_first = np.full(32 * 32, -1)
    for step, pixel in reversed(list(enumerate(src))):
        expected_first[pixel] = step
    fp = _footprint(resize, all_loops(resize)[0])["x"]
    np.testing.assert_array_equal(fp.reads.reshape(-1), expected_first >= 0)
    np.testing.assert_array_equal(fp.first_touch.reshape(-1), expected_first)
    assert fp.n_reads == 144


# ---- a split far past the loop's extent (the predicate leaves most iterations dead) ------------


def _elementwise(n: int):
    @T.prim_func(s_tir=True)
    def func(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (n, n, n))
        B = T.match_buffer(b, (n, n, n))
        for i, j, k in T.grid(n, n, n):
            with T.sblock("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * 2.0

    return func


def _split_with_predicate(n: int, i_factors, j_factor, k_outer):
    sch = tvm.s_tir.Schedule(_elementwise(n))
    i, j, k = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=i_factors)
    sch.split(j, factors=[None, j_factor])
    sch.split(k, factors=[k_outer, None])
    return sch.mod["main"]


def test_split_far_past_the_extent_is_exact():
    """Brute force on a small instance: the dead iterations are cut away, the steps kept."""
    assert_every_loop(_split_with_predicate(7, [5, 2, 3], 8, 3), random.Random(7))


def test_split_far_past_the_extent_answers_at_full_size():
    """TVM's test_split_with_predicate: 6000 x 129 x 129 iterations for 128^3 elements.
    Before: refused (3 GB to enumerate the access A[...] of block B)."""
    func = _split_with_predicate(128, [1000, 2, 3], 129, 3)
    t0 = time.perf_counter()
    fp = _footprint(func, all_loops(func)[0])
    assert time.perf_counter() - t0 < 5
    assert fp["A"].distinct == fp["B"].distinct == 128**3 and fp["A"].n_reads == 128**3
    # B[1, 0, 0]: i = 1 is (i_0, i_1, i_2) = (0, 0, 1), after the 129 * 129 steps of i = 0
    assert fp["B"].first_touch[1, 0, 0] == 129 * 129 and fp["B"].first_touch[0, 1, 0] == 129


# ---- a padded convolution's whole nest (overlapping windows, padding guard) --------------------


def test_whole_padded_convolution_answers():
    """The outermost loop of a 3-D convolution sketch at full size (C3D/llvm/sketch2 of the
    corpus): 610 million points, reduced per group of independent axes. Before: refused."""
    from mlc_lab import Session
    from tests.conformance import harness

    entry = next(e for e in harness.corpus() if e["id"] == "C3D/llvm/sketch2")
    s = Session.from_trace(entry["module"], entry["json"], entry.get("func"))
    fp = s.footprint("n_0")
    assert fp["PadInput"].distinct > 0 and fp["conv3d_ndhwc"].distinct > 0


# ---- a variable TVM wrote outside its scope (cache_inplace) --------------------------------------


@T.prim_func(s_tir=True)
def _inplace(A: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("A"):
            vi = T.axis.spatial(16, i)
            A[vi] = A[vi] + T.float32(1)


def test_variable_out_of_scope_is_not_a_symbolic_shape():
    """cache_inplace copies with the block variable vi outside its block: the program is
    ill-formed there, and asking for vi's value as a 'symbolic shape' (before) was wrong."""
    sch = tvm.s_tir.Schedule(_inplace)
    sch.cache_inplace(sch.get_sblock("A"), 0, "local")
    func = sch.mod["main"]
    prog = lower(func)
    assert prog.shape_vars == {}
    with pytest.raises(AccessAnalysisError, match="variable vi outside any scope") as err:
        _footprint(func, all_loops(func)[0])
    assert "shape_vars" not in str(err.value)


def test_float_guard_and_index_agree_with_brute_force():
    """A float computation inside a guard and an index, against the brute-force oracle."""
    sch = tvm.s_tir.Schedule(resize)
    i2, i3 = sch.get_loops(sch.get_sblock("resize"))[2:]
    sch.split(i3, factors=[None, 5])
    func = sch.mod["main"]
    for loop in all_loops(func):
        assert_exact(func, loop, {})


# ---- accesses too large to enumerate at once, added slice by slice ------------------------------


def test_slices_of_a_large_access_add_up_to_the_whole(monkeypatch):
    """With a budget too small for whole grids, accesses go in slice by slice: every loop of
    guarded, fused, GPU and convolution programs gives the same arrays as without slicing (and
    those match brute force, test_access). Before: a refusal ("needs N MB ... beyond the budget")."""
    import importlib

    fp_module = importlib.import_module("mlc_lab.core.access.footprint")
    from mlc_lab.core.access.budget import BudgetExceeded
    from mlc_lab.core.access.grid import plan_access
    from tests.unit.test_access import MORE, SMALL

    sliced = []
    real_build = fp_module.build_grid

    def build(q, acc, *args, chunk=None, **kw):  # every access of a grid too large to enumerate
        if chunk is None and kw.get("plan") is None and getattr(plan_access(q, acc), "shape", None):
            raise BudgetExceeded("forced")
        sliced.append(chunk)
        return real_build(q, acc, *args, chunk=chunk, **kw)

    funcs = {**SMALL, **MORE, "split_past_extent": lambda: _split_with_predicate(7, [5, 2, 3], 8, 3)}
    for name, make in funcs.items():
        func = make()
        prog = lower(func)
        for loop in all_loops(func):
            whole = access.footprint(prog, loop_id(func, loop), counts=True)
            with monkeypatch.context() as m:
                m.setattr(fp_module, "build_grid", build)
                m.setattr(fp_module, "SLICE_BYTES_PER_POINT", 1 << 40)  # one value of the axis a slice
                part = access.footprint(prog, loop_id(func, loop), counts=True)
            for buf, f in whole.items():
                for key in ("reads", "writes", "first_touch", "count", "thread", "block"):
                    a, b = getattr(f, key), getattr(part[buf], key)
                    if a is None:
                        assert b is None
                    else:
                        np.testing.assert_array_equal(a, b, err_msg=f"{name} {loop.loop_var.name} {buf}.{key}")
                assert (f.n_reads, f.n_writes) == (part[buf].n_reads, part[buf].n_writes)
    assert len(sliced) > 100


def test_an_access_past_the_budget_even_in_slices_says_so():
    from mlc_lab.core.access.budget import Budget

    func = _split_with_predicate(7, [5, 2, 3], 8, 3)
    with pytest.raises(AccessAnalysisError, match="beyond the analysis's budget"):
        access.footprint(lower(func), loop_id(func, all_loops(func)[0]), budget=Budget(300))
