"""mlc_lab.machine(): the roofline from TVM-generated kernels, cached per machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mlc_lab.core import machine as machine_mod
from mlc_lab.core.machine import Machine
from mlc_lab.core.worker import decode_result


def fake(peak: float, bw: float, others: float | None = 0.0) -> dict:
    """The worker's answer as its handler writes it (`Machine.to_json`)."""
    facts = {
        "cpu": "Test CPU",
        "cores": 2,
        "threads": 2,
        "vector_isa": "avx512f",
        "fp32_lanes": 16,
        "peak_gflops": peak,
        "bandwidth_gbs": bw,
        "caches": [{"level": 3, "type": "unified", "bytes": 32 << 20}],
        "gpu": {"present": False, "note": "no CUDA GPU found"},
        "others_cores": others,
        "measured_at": None if others is None else time.time(),
    }
    return Machine(**facts).to_json()


class FakeWorker:
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def call(self, op, timeout=None, **payload):
        self.calls.append(op)
        return decode_result(op, dict(self.answers[len(self.calls) - 1]))  # as Worker.call: the table's type


def test_the_roof_bends_at_the_ridge():
    m = Machine.from_json(fake(200.0, 10.0))
    assert m.ridge_intensity == 20.0
    assert m.roof_gflops(2.0) == 20.0 and m.roof_gflops(100.0) == 200.0
    assert m.cache_bytes(3) == 32 << 20 and m.cache_bytes(2) is None
    assert "200 GFLOP/s" in str(m) and "no GPU" in str(m)
    assert json.loads(json.dumps(m.to_json()))["ridge_intensity"] == 20.0


def test_measured_once_then_cached_and_refresh_keeps_the_higher_peaks(tmp_path, monkeypatch):
    monkeypatch.setenv("MLC_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine_mod, "_cached", None)
    monkeypatch.setattr(machine_mod, "_rechecked", False)
    w = FakeWorker([fake(100.0, 8.0), fake(80.0, 9.0)])
    calls = w.calls
    monkeypatch.setattr("mlc_lab.core.worker.worker", lambda: w)
    first = machine_mod.machine()
    assert (first.peak_gflops, first.bandwidth_gbs) == (100.0, 8.0) and calls == ["machine"]
    assert machine_mod.machine() is first and calls == ["machine"]  # in-process cache
    monkeypatch.setattr(machine_mod, "_cached", None)
    assert machine_mod.machine().peak_gflops == 100.0 and calls == ["machine"]  # the file on disk
    again = machine_mod.machine(refresh=True)  # a busier second run: peaks only go up
    assert (again.peak_gflops, again.bandwidth_gbs) == (100.0, 9.0) and calls == ["machine", "machine"]
    assert machine_mod.cached_machine() == again


def test_a_figure_from_a_busy_machine_is_measured_again_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MLC_LAB_CACHE_DIR", str(tmp_path))
    w = FakeWorker([fake(17.4, 2.8, others=None), fake(220.0, 7.4, others=0.9), fake(230.0, 7.0, others=0.0)])
    monkeypatch.setattr("mlc_lab.core.worker.worker", lambda: w)
    monkeypatch.setattr(machine_mod, "_cached", None)
    monkeypatch.setattr(machine_mod, "_rechecked", False)
    machine_mod.machine()  # as an older version cached it: no others_cores, no measured_at
    assert w.calls == ["machine"]
    monkeypatch.setattr(machine_mod, "_cached", None)
    monkeypatch.setattr(machine_mod, "_rechecked", False)  # a new process: the old figure is doubted
    m = machine_mod.machine()
    assert m.peak_gflops == 220.0 and m.bandwidth_gbs == 7.4 and w.calls == ["machine"] * 2
    assert not m.measured_quiet and "0.90 cores" in m.when() and "UTC" in str(m)
    monkeypatch.setattr(machine_mod, "_cached", None)
    assert machine_mod.machine().peak_gflops == 220.0 and len(w.calls) == 2  # once per process
    # a busy figure younger than STALE_BUSY_S is kept by the next process too
    monkeypatch.setattr(machine_mod, "_cached", None)
    monkeypatch.setattr(machine_mod, "_rechecked", False)
    assert machine_mod.machine().peak_gflops == 220.0 and len(w.calls) == 2
    monkeypatch.setattr(machine_mod, "STALE_BUSY_S", 0.0)
    monkeypatch.setattr(machine_mod, "_cached", None)
    assert machine_mod.machine().peak_gflops == 230.0 and len(w.calls) == 3
    assert machine_mod.machine().measured_quiet


def test_a_kernel_faster_than_the_peak_is_believed_over_the_cached_peak(tmp_path, monkeypatch):
    monkeypatch.setenv("MLC_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine_mod, "_cached", None)
    monkeypatch.setattr(machine_mod, "_rechecked", False)
    w = FakeWorker([fake(17.4, 2.8), fake(20.0, 3.0)])
    monkeypatch.setattr("mlc_lab.core.worker.worker", lambda: w)
    machine_mod._write_cache(machine_mod.cache_path(), Machine.from_json(fake(17.4, 2.8)))
    assert machine_mod.observed(10.0, "numpy").peak_gflops == 17.4 and w.calls == []  # no contradiction
    m = machine_mod.observed(155.0, "numpy's 512^3 matmul")
    assert w.calls == ["machine"]  # measured again at once ...
    assert m.peak_gflops == 155.0 and "numpy's 512^3 matmul" in m.peak_note  # ... and still beaten
    assert machine_mod.cached_machine().peak_gflops == 155.0
    monkeypatch.setattr(machine_mod, "_cached", None)
    assert machine_mod.machine().peak_gflops == 155.0  # on disk for the next process


@pytest.mark.slow
def test_the_generated_kernels_measure_this_machine(tmp_path):
    code = (
        "import json, mlc_lab; m = mlc_lab.machine(); "
        "print(json.dumps({'peak': m.peak_gflops, 'bw': m.bandwidth_gbs, 'isa': m.vector_isa, 'lanes': m.fp32_lanes, "
        "'caches': m.caches, 'gpu': m.gpu, 'threads': m.threads, 'one': m.peak_one_core_gflops, "
        "'others': m.others_cores, 'when': m.when()}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env={**__import__("os").environ, "MLC_LAB_CACHE_DIR": str(tmp_path)},
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["peak"] > 1.0 and m["bw"] > 0.1 and m["threads"] >= 1
    assert m["isa"] in ("avx512f", "avx2", "avx", "sse4.2", "neon", "sve", "scalar") and m["lanes"] >= 1
    assert any(c["level"] == 1 for c in m["caches"])
    assert "present" in m["gpu"] and (m["gpu"]["present"] or "no CUDA GPU" in m["gpu"]["note"])
    assert list(tmp_path.glob("machine-*.json"))  # cached for the next process
    assert "measured" in m["when"] and m["others"] is not None and m["one"] > 0
    if m["others"] < 0.25:  # quiet: all cores together do what one core does, times the threads
        assert m["peak"] >= 0.7 * m["threads"] * m["one"], m
    # nothing that runs here beats the peak: numpy's matmul (OpenBLAS, all cores), the best of 10
    import numpy as np

    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    for _ in range(3):
        a @ a
    best = min(_timed(lambda: a @ a) for _ in range(10))
    assert 2 * 512**3 / best / 1e9 < m["peak"], (2 * 512**3 / best / 1e9, m)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def test_an_all_core_peak_below_the_cores_times_one_core_was_disturbed(monkeypatch):
    from mlc_lab.tvm import machine as tvm_machine

    def flops(chunks: int) -> float:
        return 2.0 * chunks * tvm_machine.FMA_ITERS * tvm_machine.ACCUMULATORS * 16

    def fake_fastest(all_gflops: float):
        def fastest(ex, name, args, calls, bursts=1):
            chunks = args[0].shape[0]
            gflops = all_gflops if chunks == 2 else 114.6
            return [flops(chunks) / gflops / 1e9], 0.0

        return fastest

    monkeypatch.setattr(tvm_machine, "_fastest", fake_fastest(225.4))  # quiet: 225.4 ~ 2 x 114.6
    quiet = tvm_machine.peak_gflops(2, 16)
    assert quiet["gflops"] == pytest.approx(225.4) and quiet["source"] == "all cores at once"
    monkeypatch.setattr(tvm_machine, "_fastest", fake_fastest(110.4))  # another process held a core
    busy = tvm_machine.peak_gflops(2, 16)
    assert busy["gflops"] == pytest.approx(2 * 114.6) and busy["all_cores_gflops"] == pytest.approx(110.4)
    assert "another process held a core" in busy["source"]
