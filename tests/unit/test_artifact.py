"""Built here, run there (`mlc_lab.tvm.measure.artifact`): a CUDA program exported for another machine
carries its kernels compiled (a fat binary for the target's arch), not as CUDA source; a process with
TVM's runtime alone and no compiler loads it, as far as a machine without a GPU can (a stand-in
``libcuda.so.1`` answers every driver call "no device"); the same program exported the usual way
cannot be loaded there. The blob's reading and writing are held to TVM's own on every shape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm
from mlc_lab.tvm.measure import artifact
from tvm.runtime import _ffi_api
from tvm.script import tirx as T

HAS_NVCC = shutil.which("nvcc") is not None
CUDART_DIRS = ("/usr/local/cuda-13.0/lib", "/usr/local/cuda/lib64", "/usr/local/cuda-13.0/targets/x86_64-linux/lib")
SM_90 = tvm.target.Target({"kind": "cuda", "arch": "sm_90"}, host="llvm")


@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
    T.func_attr({"tirx.noalias": True})
    for i0 in T.thread_binding(8, thread="blockIdx.x"):
        for i1 in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("B"):
                vi = T.axis.spatial(1024, i0 * 128 + i1)
                B[vi] = A[vi] + T.float32(1)


@T.prim_func(s_tir=True)
def add_one_cpu(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)


@pytest.fixture(scope="module")
def cuda_build():
    return tvm.compile(tvm.IRModule({"main": add_one}), target=SM_90)


def test_a_cpu_artifact_is_its_host_code_and_runs_here(tmp_path):
    path = str(tmp_path / "cpu.so")
    facts = artifact.export_artifact(tvm.compile(tvm.IRModule({"main": add_one_cpu}), target="llvm"), path, "cpu")
    assert facts["device"] == "cpu" and artifact.library_imports(path) == []
    mod = tvm.runtime.load_module(path)
    a = tvm.runtime.tensor(np.arange(64, dtype="float32"))
    b = tvm.runtime.empty((64,), "float32")
    mod["main"](a, b)
    assert np.array_equal(b.numpy(), np.arange(64, dtype="float32") + 1)


def test_the_usual_export_of_a_cuda_program_carries_source(tmp_path, cuda_build):
    path = str(tmp_path / "source.so")
    cuda_build.export_library(path)
    assert artifact.library_imports(path) == [{"kind": "cuda", "format": "cuda", "bytes": pytest.approx(1900, rel=0.5)}]
    assert artifact.carries_cuda_source(path)
    assert b'extern "C" __global__' in Path(path).read_bytes()


@pytest.mark.skipif(not HAS_NVCC, reason="the CUDA toolkit (nvcc) is not installed")
def test_a_cuda_artifact_carries_a_fat_binary_for_the_targets_arch(tmp_path, cuda_build):
    path = str(tmp_path / "binary.so")
    facts = artifact.export_artifact(cuda_build, path, SM_90)
    assert facts["format"] == "fatbin" and facts["arch"] == "sm_90"
    (cuda,) = artifact.library_imports(path)
    assert cuda["kind"] == "cuda" and cuda["format"] == "fatbin"
    data = Path(path).read_bytes()
    assert b"__global__" not in data and not artifact.carries_cuda_source(path)
    # the fat binary's own header (magic 0xBA55ED50), with SASS for sm_90 and its PTX inside
    assert (0xBA55ED50).to_bytes(4, "little") in data
    assert b".target sm_90" in data or b"sm_90" in data


def test_a_program_without_a_kernel_is_refused_in_one_sentence(tmp_path):
    ex = tvm.compile(tvm.IRModule({"main": add_one_cpu}), target=SM_90)  # unbound: host code only
    with pytest.raises(artifact.ArtifactError, match="host code only"):
        artifact.export_artifact(ex, str(tmp_path / "x.so"), SM_90)


def test_without_nvcc_a_cuda_artifact_says_what_to_install(tmp_path, cuda_build, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(artifact.ArtifactError, match="nvcc was not found on PATH"):
        artifact.export_artifact(cuda_build, str(tmp_path / "x.so"), SM_90)


# ----------------------------------------------------------------------------------------- the blob


def test_split_and_join_give_back_tvms_own_blob(cuda_build):
    blob = bytes(_ffi_api.ModulePackImportsToTensor(cuda_build.mod).numpy())
    tree, modules = artifact.split_blob(blob)
    assert [k for k, _ in modules] == ["_lib", "cuda"]
    assert artifact.join_blob(tree, modules) == blob
    fmt, table, code = artifact.split_cuda_module(modules[1][1])
    assert fmt == "cuda" and code.decode() == cuda_build.mod.imports[0].inspect_source()
    assert b"add_one_kernel" in table and b"threadIdx.x" in table


@settings(max_examples=60, deadline=None)
@given(code=st.binary(min_size=0, max_size=3000))
def test_a_rewritten_cuda_module_reads_back_whatever_its_code(code):
    ex = _CUDA_BUILD[0]
    blob = bytes(_ffi_api.ModulePackImportsToTensor(ex.mod).numpy())
    rewritten = artifact.rewrite_cuda_imports(blob, [code])
    _tree, modules = artifact.split_blob(rewritten)
    fmt, table, back = artifact.split_cuda_module(modules[1][1])
    _fmt0, table0, _ = artifact.split_cuda_module(artifact.split_blob(blob)[1][1][1])
    assert (fmt, table, back) == ("fatbin", table0, code)


_CUDA_BUILD = [tvm.compile(tvm.IRModule({"main": add_one}), target=SM_90)]


def test_a_library_that_is_not_elf_is_refused(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"not a library")
    with pytest.raises(artifact.ArtifactError, match="not a 64-bit little-endian ELF"):
        artifact.library_imports(str(bad))


# ----------------------------------------------------------------------------------------- runtime-only


STUB_DRIVER = textwrap.dedent(
    """
    /* libcuda.so.1 for a machine without a GPU: every driver call answers CUDA_ERROR_NO_DEVICE (100). */
    typedef int CUresult;
    CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = "CUDA_ERROR_NO_DEVICE"; return 0; }
    CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = "no CUDA device (stand-in driver)"; return 0; }
    #define NO_DEVICE(f) CUresult f() { return 100; }
    NO_DEVICE(cuInit) NO_DEVICE(cuDriverGetVersion) NO_DEVICE(cuDeviceGetName) NO_DEVICE(cuFuncSetAttribute)
    NO_DEVICE(cuLaunchKernelEx) NO_DEVICE(cuModuleGetFunction) NO_DEVICE(cuModuleLoadData)
    NO_DEVICE(cuModuleUnload) NO_DEVICE(cuTensorMapEncodeTiled)
    """
)

LOAD_THERE = textwrap.dedent(
    """
    import ctypes, json, os, sys
    import tvm
    out = {"runtime_only": os.environ.get("TVM_USE_RUNTIME_LIB") == "1",
           "compiler": tvm.get_global_func("target.build.cuda", allow_missing=True) is not None}
    ctypes.CDLL(os.path.join(os.path.dirname(tvm.__file__), "lib", "libtvm_runtime_cuda.so"), ctypes.RTLD_GLOBAL)
    for name in sys.argv[1:]:
        try:
            mod = tvm.runtime.load_module(name)
            out[name] = {"loaded": True, "imports": [m.kind for m in mod.imports], "main": mod["main"] is not None}
        except Exception as exc:
            out[name] = {"loaded": False, "error": str(exc).strip().splitlines()[-1]}
    print(json.dumps(out))
    """
)


@pytest.mark.skipif(not HAS_NVCC, reason="the CUDA toolkit (nvcc) is not installed")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler for the stand-in driver")
def test_a_runtime_only_process_loads_the_binary_and_not_the_source(tmp_path, cuda_build):
    cudart = next((d for d in CUDART_DIRS if Path(d, "libcudart.so.13").exists()), None)
    if cudart is None:
        pytest.skip("libcudart.so.13 (the CUDA 13 toolkit's runtime) is not installed")
    (tmp_path / "stub.c").write_text(STUB_DRIVER)
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(tmp_path / "libcuda.so.1"),
            "-Wl,-soname,libcuda.so.1",
            str(tmp_path / "stub.c"),
        ],
        check=True,
    )
    binary, source = str(tmp_path / "binary.so"), str(tmp_path / "source.so")
    artifact.export_artifact(cuda_build, binary, SM_90)
    cuda_build.export_library(source)
    empty = tmp_path / "bin"
    empty.mkdir()  # no compiler, no nvcc on the PATH
    env = {
        "PATH": str(empty),
        "TVM_USE_RUNTIME_LIB": "1",
        "LD_LIBRARY_PATH": f"{tmp_path}:{cudart}",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_THERE, binary, source], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["runtime_only"] and not out["compiler"]  # TVM's compiler was not loaded there
    assert out[binary] == {"loaded": True, "imports": ["cuda"], "main": True}
    assert out[source]["loaded"] is False  # the source asks for a compiler (NVRTC) at load time
    assert "cuda" in out[source]["error"].lower() or "nvrtc" in out[source]["error"].lower()
