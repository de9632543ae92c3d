"""mlc_lab.machine(): the roofline from TVM-generated kernels, cached per machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlc_lab.core import machine as machine_mod
from mlc_lab.core.machine import Machine


def fake(peak: float, bw: float) -> dict:
    return {"cpu": "Test CPU", "cores": 2, "threads": 2, "vector_isa": "avx512f", "fp32_lanes": 16,
            "peak_gflops": peak, "bandwidth_gbs": bw, "caches": [{"level": 3, "type": "unified", "bytes": 32 << 20}],
            "gpu": {"present": False, "note": "no CUDA GPU found"}, "unknown_field": 1}


def test_the_roof_bends_at_the_ridge():
    m = Machine(**{k: v for k, v in fake(200.0, 10.0).items() if k != "unknown_field"})
    assert m.ridge_intensity == 20.0
    assert m.roof_gflops(2.0) == 20.0 and m.roof_gflops(100.0) == 200.0
    assert m.cache_bytes(3) == 32 << 20 and m.cache_bytes(2) is None
    assert "200 GFLOP/s" in str(m) and "no GPU" in str(m)
    assert json.loads(json.dumps(m.to_json()))["ridge_intensity"] == 20.0


def test_measured_once_then_cached_and_refresh_keeps_the_higher_peaks(tmp_path, monkeypatch):
    monkeypatch.setenv("MLC_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine_mod, "_cached", None)
    answers = [fake(100.0, 8.0), fake(80.0, 9.0)]
    calls = []

    class FakeWorker:
        def call(self, op, timeout=None, **payload):
            calls.append(op)
            return answers[len(calls) - 1]

    monkeypatch.setattr("mlc_lab.core.worker.worker", lambda: FakeWorker())
    first = machine_mod.machine()
    assert (first.peak_gflops, first.bandwidth_gbs) == (100.0, 8.0) and calls == ["machine"]
    assert machine_mod.machine() is first and calls == ["machine"]  # in-process cache
    monkeypatch.setattr(machine_mod, "_cached", None)
    assert machine_mod.machine().peak_gflops == 100.0 and calls == ["machine"]  # the file on disk
    again = machine_mod.machine(refresh=True)  # a busier second run: peaks only go up
    assert (again.peak_gflops, again.bandwidth_gbs) == (100.0, 9.0) and calls == ["machine", "machine"]
    assert machine_mod.cached_machine() == again


@pytest.mark.slow
def test_the_generated_kernels_measure_this_machine(tmp_path):
    code = (
        "import json, mlc_lab; m = mlc_lab.machine(); "
        "print(json.dumps({'peak': m.peak_gflops, 'bw': m.bandwidth_gbs, 'isa': m.vector_isa, 'lanes': m.fp32_lanes, "
        "'caches': m.caches, 'gpu': m.gpu, 'threads': m.threads}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True,
                         env={**__import__("os").environ, "MLC_LAB_CACHE_DIR": str(tmp_path)})
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["peak"] > 1.0 and m["bw"] > 0.1 and m["threads"] >= 1
    assert m["isa"] in ("avx512f", "avx2", "avx", "sse4.2", "neon", "sve", "scalar") and m["lanes"] >= 1
    assert any(c["level"] == 1 for c in m["caches"])
    assert "present" in m["gpu"] and (m["gpu"]["present"] or "no CUDA GPU" in m["gpu"]["note"])
    assert list(tmp_path.glob("machine-*.json"))  # cached for the next process
