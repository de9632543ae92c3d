"""The packed-panel GEMM sketch that the tuner adds to meta_schedule's default CPU space
(mlc_lab.tvm.tuning.cpu_space): which blocks it recognises, that every sample of it replays, builds and
computes the right product, and that a fresh "auto" job measures it in its first batch."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import s_tir
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.schedule import Trace

import mlc_lab
from mlc_lab.core.tuning import tune
from mlc_lab.tvm.tuning import cpu_space
from mlc_lab.tvm.measure.build import param_specs
from tests.fixtures.programs import CONV, MM_RELU, matmul

AVX512 = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})
GENERIC = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64", "num-cores": 2})
AVX2 = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})

BATCHED = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((3, 96, 48), "float32"), B: T.Buffer((3, 48, 80), "float32"), C: T.Buffer((3, 96, 80), "float32")):
        for b, i, j, k in T.grid(3, 96, 80, 48):
            with T.sblock("C"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.float32(0)
                C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vb, vk, vj]
"""

B_TRANSPOSED = """
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Mod:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
        for i, j, k in T.grid(64, 64, 64):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
"""


def task(src: str):
    mod = mlc_lab.load(src)
    name = [gv.name_hint for gv in mod.get_global_vars()][0]
    return ms.tune_context._normalize_mod(mod[name])  # what the job hands meta_schedule: "main"


def test_recognises_matrix_products_and_nothing_else():
    plain = cpu_space.find_matmul_block(task(matmul(512))["main"], AVX512)
    assert plain == cpu_space.MatmulBlock("C", batch=0, lanes=16, a_index=0, b_index=1)
    assert cpu_space.find_matmul_block(task(MM_RELU)["main"], AVX512).name == "Y"
    batched = cpu_space.find_matmul_block(task(BATCHED)["main"], AVX512)
    assert batched.batch == 1 and batched.lanes == 16  # 80 columns: 16 divides them
    assert cpu_space.find_matmul_block(task(B_TRANSPOSED)["main"], AVX512) is None  # B[j, k]: not this layout
    assert cpu_space.find_matmul_block(task(CONV)["main"], AVX512) is None
    # the vector width comes from the target: 4 fp32 lanes on plain x86-64 (SSE), 8 on AVX2
    assert cpu_space.find_matmul_block(task(matmul(64))["main"], GENERIC).lanes == 4
    assert cpu_space.find_matmul_block(task(matmul(64))["main"], AVX2).lanes == 8
    assert (
        cpu_space.packed_panel_space(task(matmul(64))["main"], tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
        is None
    )


@pytest.mark.parametrize("src", [matmul(128), MM_RELU, BATCHED], ids=["matmul", "mm_relu", "batched"])
def test_every_sample_replays_builds_and_computes_the_product(src):
    mod = task(src)
    info = cpu_space.find_matmul_block(mod["main"], AVX512)
    sketch = s_tir.Schedule(mod, seed=1)
    cpu_space.PackedPanelSketch(info)(sketch)
    assert "cache_read" in str(sketch.trace) and "sample_perfect_tile" in str(sketch.trace)
    reference = tvm.tirx.build(mod, target=AVX512)
    seen = set()
    for seed in range(1, 25):
        sch = s_tir.Schedule(mod, seed=seed)
        Trace(sketch.trace.insts, {}).apply_to_schedule(sch, remove_postproc=False)  # fresh samples
        seen.add(str(sch.trace))
        if seed > 4:
            continue
        built = tvm.tirx.build(sch.mod, target=AVX512)
        shapes = [shape for _, shape, _ in param_specs(mod, "main")]
        rng = np.random.default_rng(seed)
        ins = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
        outs = []
        for fn in (reference, built):
            args = [tvm.runtime.tensor(x) for x in ins] + [tvm.runtime.tensor(np.zeros(shapes[-1], "float32"))]
            fn["main"](*args)
            outs.append(args[-1].numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-3)
    assert (
        len(seen) > 5
    )  # the samples differ (decisions are part of the printed trace): tiles and unrolling are searched


@pytest.mark.slow
def test_a_fresh_auto_job_on_a_matmul_measures_the_sketch_first(tmp_path):
    job = tune(
        mlc_lab.Session(matmul(64)),
        trials=6,
        work_dir=str(tmp_path),
        num_trials_per_iter=3,
        seed=3,
        confirm=False,
        strategy="replay-trace",
        cost_model="random",
    )
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert len(recs) == 6 and all(r.ok for r in recs)
    packed = ["max_innermost_factor=4" in r.trace and "sch.cache_read" in r.trace for r in recs]
    assert packed[:3] == [True, True, True]  # the first batch: the packed-panel sketch
