"""measure() and sweep(): build, verify against the original, time, in a persistent worker that
may crash or hang without taking the test process (the "kernel") with it."""

from __future__ import annotations

import os
import time

import pytest

import mlc_lab
from mlc_lab.core.measure import Measurement, measure, sweep, worker
from mlc_lab.errors import MeasureError, MlcLabError
from tests.fixtures.programs import MM_RELU, matmul

ADD = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in range(64):
            with T.sblock("C"):
                vi = T.axis.spatial(64, i)
                C[vi] = A[vi] OP B[vi]
"""

CRASH = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.spatial(16, i)
                T.evaluate(T.call_extern("int32", "raise", 11))
                B[vi] = A[vi]
"""

# 2^60 dependent float updates: runs "forever" unless stopped.
HANG = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((16,), "float32"), B: T.Buffer((1,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j in T.grid(1 << 30, 1 << 30):
            with T.sblock("B"):
                vi = T.axis.spatial(1 << 30, i)
                vj = T.axis.reduce(1 << 30, j)
                with T.init():
                    B[0] = T.float32(0)
                B[0] = B[0] * T.float32(0.5) + A[vj % 16]
"""


def course_schedule(s: mlc_lab.Session, jfactor: int = 8) -> mlc_lab.Session:
    j0, j1 = s.apply("split", "Y/j", factors=[None, jfactor])
    s.apply("reorder", "Y/i", j0, "Y/k", j1)
    s.apply("parallel", "Y/i")
    s.apply("vectorize", j1)
    return s


def test_measure_checks_and_times_a_scheduled_step():
    s = course_schedule(mlc_lab.Session(MM_RELU))
    m = measure(s.module, s.original, s.func_name, "cpu", repeats=5)
    assert isinstance(m, Measurement) and m.ok
    assert m.latency_s > 0 and m.std_s >= 0 and m.repeats == 5 and len(m.results_s) == 5
    assert m.min_s <= m.latency_s <= m.max_s
    assert m.flops == 2 * 128**3 + 128**2  # TVM's estimate: multiply-add = 2, plus the ReLU's max
    assert m.gflops == pytest.approx(m.flops / m.latency_s / 1e9)
    assert m.max_abs_error is not None and m.max_abs_error < 1e-3 and m.correct
    assert '"kind":"llvm"' in m.target and "mcpu" in m.target  # the native CPU, not generic x86-64
    assert m.func_name == "mm_relu"


def test_a_warm_measurement_of_one_step_is_fast():
    s = course_schedule(mlc_lab.Session(MM_RELU))
    measure(s.module, s.original, s.func_name)  # warm the worker and its reference cache
    t0 = time.perf_counter()
    m = measure(s.module, s.original, s.func_name)
    # < 1 s on an idle 2-core machine; allow for a loaded CI box, which may also make measure take
    # its repeats again (up to 3 rounds) while a round was not quiet
    assert time.perf_counter() - t0 < 2.0 * m.rounds


def test_a_wrong_program_shows_its_error():
    good = mlc_lab.load(ADD.replace("OP", "+"))
    bad = mlc_lab.load(ADD.replace("OP", "-"))
    m = measure(bad, good, "main")
    assert m.ok and m.correct is False
    assert m.max_abs_error > 0.01  # inputs are uniform in [0, 1): a - b differs from a + b


def test_without_reference_nothing_is_checked():
    m = measure(mlc_lab.load(ADD.replace("OP", "+")))
    assert m.ok and m.max_abs_error is None and m.correct is None and m.latency_s > 0


def test_a_segfault_costs_the_worker_not_the_caller():
    measure(mlc_lab.load(ADD.replace("OP", "+")))
    pid_before = worker().pid
    with pytest.raises(MeasureError) as info:
        measure(mlc_lab.load(CRASH))
    assert info.value.kind == "crash"
    assert "SIGSEGV" in str(info.value) and "fresh worker" in str(info.value)
    assert isinstance(info.value, MlcLabError)
    # the next measurement starts a fresh worker and works
    m = measure(mlc_lab.load(ADD.replace("OP", "+")))
    assert m.ok and worker().pid not in (None, pid_before)


@pytest.mark.slow
def test_a_hang_is_stopped_after_the_time_limit():
    measure(mlc_lab.load(ADD.replace("OP", "+")))  # warm worker: the limit is about the program
    pid_before = worker().pid
    t0 = time.perf_counter()
    with pytest.raises(MeasureError) as info:
        measure(mlc_lab.load(HANG), timeout=2)
    assert info.value.kind == "timeout" and "more than 2 s" in str(info.value)
    assert time.perf_counter() - t0 < 15
    with pytest.raises(ProcessLookupError):
        os.kill(pid_before, 0)  # the hung worker is gone
    assert measure(mlc_lab.load(ADD.replace("OP", "+"))).ok


def test_errors_can_come_back_as_data():
    m = measure(mlc_lab.load(ADD.replace("OP", "+")), func_name="nope", raise_errors=False)
    assert not m.ok and "nope" in m.error and m.latency_s is None


def test_sweep_measures_a_family_of_schedules():
    def make(jfactor):
        s = mlc_lab.Session(MM_RELU)
        j0, j1 = s.apply("split", "Y/j", factors=[None, jfactor])
        s.apply("reorder", "Y/i", j0, "Y/k", j1)
        return s

    seen = []
    results = sweep(make, [4, 16, 0], target="cpu", repeats=3, on_result=lambda v, m: seen.append(v))
    assert [v for v, _ in results] == [4, 16, 0] == seen
    for _, m in results[:2]:
        assert m.ok and m.correct and m.repeats == 3
    bad = results[2][1]
    assert not bad.ok and bad.error_kind == "schedule" and "0" in bad.error


def test_sweep_accepts_plain_modules():
    results = sweep(lambda n: mlc_lab.load(matmul(n)), [16, 32], repeats=2)
    assert [m.flops for _, m in results] == [2 * 16**3, 2 * 32**3]
    assert all(m.ok and m.max_abs_error is None for _, m in results)


def test_a_missing_relu_is_caught_by_the_check():
    # Inputs are centred on zero, so dropping the max(., 0) changes the output.
    import mlc_lab
    from mlc_lab.core.measure import measure
    from tests.fixtures.programs import MM_RELU

    broken = mlc_lab.load(MM_RELU.replace("T.max(Y[vi, vj], T.float32(0))", "Y[vi, vj]"))
    m = measure(broken, mlc_lab.load(MM_RELU), "mm_relu", raise_errors=False)
    assert m.correct is False or m.error_kind == "check"


def test_time_callable_times_python_code_by_measures_method():
    from mlc_lab.core.measure import time_callable

    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.002)

    r = time_callable(fn, repeats=4, min_repeat_ms=10, warmup=2)
    assert r["repeats"] == 4 and len(r["results_s"]) == 4 and r["number"] >= 2
    # warm-up, the call that sizes a repeat, then the repeats of each round (a round that was not quiet,
    # on a busy machine, is taken again: up to `rounds`, 3 by default): the calls say how many were taken
    taken, rest = divmod(len(calls) - 2 - 1, 4 * r["number"])
    assert rest == 0 and taken == r["rounds"] and taken in (1, 2, 3)
    calls.clear()
    one = time_callable(fn, repeats=2, min_repeat_ms=10, warmup=0, rounds=1)  # never taken again
    assert one["rounds"] == 1 and len(calls) == 1 + 2 * one["number"]
    assert r["number"] * r["min_s"] >= 0.008  # each repeat lasted about min_repeat_ms
    assert 0.002 <= r["min_s"] <= r["latency_s"] <= r["max_s"]
    assert r["others_cores"] is not None and r["others_cores"] >= 0 and "median of 4" in r["method"]


def test_the_errors_are_measured_against_the_reference_absolute_and_relative():
    # C = A * 0 * B against C = A + B: every error is the whole answer, so the relative error is 1
    zero = measure(mlc_lab.load(ADD.replace("OP", "* T.float32(0) *")), mlc_lab.load(ADD.replace("OP", "+")))
    assert zero.ok and zero.correct is False and zero.max_abs_error > 0 and zero.max_rel_error == 1.0
    # a NaN anywhere is an infinite error, never a small one
    nan = measure(mlc_lab.load(ADD.replace("OP", '* T.float32("nan") +')), mlc_lab.load(ADD.replace("OP", "+")))
    assert nan.ok and nan.correct is False and nan.max_abs_error == float("inf") == nan.max_rel_error
    same = measure(mlc_lab.load(ADD.replace("OP", "+")), mlc_lab.load(ADD.replace("OP", "+")))
    assert same.correct is True and same.max_abs_error == 0.0 == same.max_rel_error


def test_what_cannot_be_measured_is_refused_before_it_runs():
    wider = mlc_lab.load(ADD.replace("OP", "+").replace("64", "128"))
    with pytest.raises(MeasureError, match="parameters differ from the reference") as info:
        measure(wider, mlc_lab.load(ADD.replace("OP", "+")))
    assert info.value.kind == "check"
    s = mlc_lab.Session(ADD.replace("OP", "+"))
    i0, i1 = s.apply("split", "C/i", factors=[None, 32])
    s.apply("bind", i1, "threadIdx.x")
    with pytest.raises(MeasureError, match="binds loops to GPU threads") as info:
        measure(s.module)
    assert info.value.kind == "build" and info.value.detail == "bound loops: i_1->threadIdx.x"
    with pytest.raises(MeasureError, match="target kind 'opencl' is not supported") as info:
        measure(mlc_lab.load(ADD.replace("OP", "+")), target="opencl")
    assert info.value.kind == "build"
