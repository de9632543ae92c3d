"""CUDA without a GPU: source without the preamble, unbound loops and GPU limits caught before
building, PTX through nvcc when present, a clear refusal to *run* without a GPU. The GPU-present
measuring path is exercised with a stand-in device (no GPU on the machines that run these tests)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import mlc_lab
from mlc_lab.core.measure import cuda_source, measure
from mlc_lab.errors import MeasureError, NoGPUError
from mlc_lab.tvm.measure import build
from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU, TWO_STAGE, matmul

HAS_GPU = build.gpu_present()


def blocking_with_shared(s: mlc_lab.Session, local=8, block=8, tile_k=8) -> mlc_lab.Session:
    """The course's shared-memory matmul schedule (chapter 6), through the Session API."""
    c_local = s.apply("cache_write", "C", 0, "local")
    i0, i1, i2 = s.apply("split", "C/i", factors=[None, block, local])
    j0, j1, j2 = s.apply("split", "C/j", factors=[None, block, local])
    k0, k1 = s.apply("split", "C/k", factors=[None, tile_k])
    s.apply("reorder", i0, j0, i1, j1, k0, k1, i2, j2)
    s.apply("reverse_compute_at", c_local, j1)
    s.apply("bind", i0, "blockIdx.y")
    s.apply("bind", j0, "blockIdx.x")
    tx = s.apply("fuse", i1, j1)
    s.apply("bind", tx, "threadIdx.x")
    nthread = block * block
    for index in (0, 1):
        cache = s.apply("cache_read", "C", index, "shared")
        s.apply("compute_at", cache, k0)
        inner0, inner1 = s.apply("get_loops", cache)[-2:]
        inner = s.apply("fuse", inner0, inner1)
        _, t, vec = s.apply("split", inner, factors=[None, nthread, 4])
        s.apply("vectorize", vec)
        s.apply("bind", t, "threadIdx.x")
    s.apply("decompose_reduction", "C", k0)
    return s


@pytest.fixture(scope="module")
def gpu_mm():
    return blocking_with_shared(mlc_lab.Session(matmul(1024)))


def test_cuda_source_has_the_kernel_without_the_preamble(gpu_mm):
    out = cuda_source(gpu_mm.module, gpu_mm.func_name)
    assert out.source.startswith('extern "C" __global__ void __launch_bounds__(64) main_kernel(')
    assert "__CUDACC_RTC__" not in out.source and "#include" not in out.source
    assert out.source.count("main_kernel(") == 1  # the forward declaration is gone too
    assert "__shared__" in out.source and "__syncthreads();" in out.source
    assert "__CUDACC_RTC__" in out.full_source
    (kernel,) = out.kernels
    assert kernel["threads_per_block"] == 64 and kernel["blocks"] == 256
    assert kernel["shared_bytes"] == 2 * 512 * 4  # compacted to the tile actually used


def test_unbound_loops_are_reported_by_name():
    s = mlc_lab.Session(MM_RELU)
    with pytest.raises(MeasureError) as info:
        cuda_source(s.module, s.func_name)
    text = str(info.value)
    assert info.value.kind == "gpu_check" and "unbound" in text
    assert "block 'Y'" in text and "block 'C'" in text and "i, j, k" in text


def test_a_partly_bound_program_names_only_the_unbound_block():
    s = mlc_lab.Session(MM_RELU)
    i0, i1 = s.apply("split", "C/i", factors=[None, 32])
    s.apply("bind", i0, "blockIdx.x")
    s.apply("bind", i1, "threadIdx.x")
    with pytest.raises(MeasureError) as info:
        cuda_source(s.module, s.func_name)
    assert "block 'Y'" in str(info.value) and "block 'C'" not in str(info.value)


def test_too_many_threads_per_block_is_refused_before_building():
    s = blocking_with_shared(mlc_lab.Session(matmul(1024)), local=4, block=64, tile_k=64)  # 4096 threads
    with pytest.raises(MeasureError) as info:
        cuda_source(s.module, s.func_name)
    assert "4096 threads per block" in str(info.value) and "1024" in str(info.value)


def test_shared_memory_limit_is_checked_and_configurable():
    s = blocking_with_shared(mlc_lab.Session(matmul(1024)), local=8, block=8, tile_k=128)  # 2 x 64 KiB... of shared
    with pytest.raises(MeasureError) as info:
        cuda_source(s.module, s.func_name)
    assert "bytes of shared memory" in str(info.value) and "49152" in str(info.value)
    roomy = {"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": 228 * 1024}
    out = cuda_source(s.module, s.func_name, target=roomy)
    assert out.kernels[0]["shared_bytes"] > 48 * 1024


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_ptx_with_nvcc(gpu_mm):
    out = cuda_source(gpu_mm.module, gpu_mm.func_name, ptx=True)
    assert out.ptx_error is None
    assert ".target sm_90" in out.ptx and ".entry main_kernel" in out.ptx


def test_ptx_without_nvcc_says_so(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    out = build.cuda_build(mlc_lab.load(GPU_TWO_BLOCKS), None, "cuda", ptx=True)
    assert out.ptx is None and "nvcc was not found" in out.ptx_error
    assert out.source.count("__global__") == 2  # two kernels, one per block


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_measure_on_cuda_without_a_gpu_is_a_clear_refusal(gpu_mm):
    with pytest.raises(NoGPUError) as info:
        measure(gpu_mm.module, gpu_mm.original, gpu_mm.func_name, target="cuda")
    assert "no CUDA GPU found" in str(info.value) and "inspect" in str(info.value)
    # the static checks still come first: an unbound program is named as such
    s = mlc_lab.Session(MM_RELU)
    with pytest.raises(MeasureError) as info2:
        measure(s.module, s.original, s.func_name, target="cuda")
    assert not isinstance(info2.value, NoGPUError) and "unbound" in str(info2.value)


def test_gpu_present_path_with_a_stand_in_device(monkeypatch):
    """With a GPU, measure_request builds for CUDA, runs on the device and compares with the
    reference run on the CPU. Here the 'device' is the CPU and the 'CUDA build' a CPU build of the
    same computation."""
    import tvm

    calls = []

    def fake_compile(mod, target):
        calls.append(target.kind.name)
        # TWO_STAGE is GPU_TWO_BLOCKS with its loops unbound: the same sums, runnable on the CPU
        ex = tvm.compile(mlc_lab.load(TWO_STAGE), target=build.cpu_target())

        class WithCudaImport:  # looks like a CUDA build to the host-code check
            def __init__(self, inner):
                self.inner = inner
                self.imports = [type("M", (), {"kind": "cuda"})()]

            def __getattr__(self, name):
                return getattr(self.inner, name)

        class Ex:
            mod = WithCudaImport(ex.mod)

        return Ex()

    monkeypatch.setattr(build, "gpu_present", lambda: True)
    monkeypatch.setattr(build, "_device", lambda kind: tvm.cpu())
    monkeypatch.setattr(build, "_compile", fake_compile)
    gpu_text = build.module_to_text(mlc_lab.load(GPU_TWO_BLOCKS))
    ref_text = build.module_to_text(mlc_lab.load(TWO_STAGE))
    result = build.measure_request(
        {
            "module": gpu_text,
            "reference": ref_text,
            "func_name": "main",
            "target": {"kind": "cuda", "arch": "sm_90"},
            "repeats": 3,
        }
    )
    assert calls == ["cuda"]
    assert result["max_abs_error"] == 0.0 and result["correct"]
    assert result["repeats"] == 3 and result["latency_s"] > 0
    assert '"kind":"cuda"' in result["target"]


def test_a_gpu_program_measured_on_the_cpu_says_so(gpu_mm):
    with pytest.raises(MeasureError) as info:
        measure(gpu_mm.module, gpu_mm.original, gpu_mm.func_name, target="cpu")
    assert "runs only on a GPU" in str(info.value) and "->blockIdx.y" in str(info.value)


def test_random_inputs_follow_the_parameters():
    specs = build.param_specs(mlc_lab.load(GPU_TWO_BLOCKS), None)
    assert specs == [("A", (1024,), "float32"), ("B", (1024,), "float32"), ("C", (1024,), "float32")]
    a, b, _ = build.random_inputs(specs, seed=0)
    # Centred on zero, so that a missing max(x, 0) changes the result.
    assert a.dtype == np.float32 and -1 <= a.min() < 0 < a.max() < 1 and not np.array_equal(a, b)
