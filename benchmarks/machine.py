"""The machine's roofline, printed as one JSON object: peak fp32 GFLOP/s (a TVM-generated FMA kernel
on all cores, and on one core) and memory bandwidth (a TVM-generated STREAM triad), re-measured now
(`mlc_lab.machine(refresh=True)`), and numpy's matmul as a fraction of that peak, numpy timed by
`mlc_lab.time_callable` (measure()'s method) in a clean subprocess. Every figure states the cores
other processes used while it was taken (`others_cores`); a numpy figure above the peak would
raise the peak (`machine.observed`), so a fraction above 1 cannot be printed.

Usage: python benchmarks/machine.py
The load average is included: on a shared machine every figure here is a lower bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mlc_lab  # noqa: E402
from mlc_lab._threads import cpu_name  # noqa: E402
from mlc_lab.core.worker import shutdown_worker  # noqa: E402

NUMPY_SNIPPET = """
import json, sys
sys.path.insert(0, {root!r})
import numpy as np
from mlc_lab.core.measure import time_callable   # measure()'s method, for a Python callable
n = {n}
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
r = time_callable(lambda: a @ b, warmup=3)
r.pop("results_s")
print(json.dumps(r))
"""


def numpy_matmul(n: int) -> dict:
    """numpy's `a @ b` (OpenBLAS, its own threads) timed by measure()'s method in a clean process,
    with the cores other processes used meanwhile (`others_cores`)."""
    out = subprocess.run(
        [sys.executable, "-c", NUMPY_SNIPPET.format(n=n, root=ROOT)], capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["median_s"] = r["latency_s"]
    r["gflops"] = 2 * n**3 / r["median_s"] / 1e9
    r["gflops_at_min"] = 2 * n**3 / r["min_s"] / 1e9
    return r


def main() -> int:
    out: dict = {
        "cpu": cpu_name(),
        "cores": len(os.sched_getaffinity(0)),
        "tvm_num_threads": os.environ.get("TVM_NUM_THREADS"),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    m = mlc_lab.machine(refresh=True)
    numpy = {n: numpy_matmul(n) for n in (512, 1024)}
    fastest = max(r["gflops_at_min"] for r in numpy.values())
    if fastest > m.peak_gflops:  # a real kernel beat the peak: the peak is wrong (machine.observed)
        from mlc_lab.core.machine import observed

        m = observed(fastest, "numpy's matmul")
    out["machine"] = m.to_json()
    out["measured"] = m.when()
    out["peak_gflops"] = round(m.peak_gflops, 1)
    out["bandwidth_gbs"] = round(m.bandwidth_gbs, 2)
    out["peak_one_core_gflops"] = round(m.peak_one_core_gflops or 0, 1)
    out["ridge_flops_per_byte"] = round(m.ridge_intensity, 2)
    for n, r in numpy.items():
        r["fraction_of_peak"] = round(r["gflops"] / m.peak_gflops, 3)
        r["fraction_of_peak_at_min"] = round(r["gflops_at_min"] / m.peak_gflops, 3)
        out[f"numpy_matmul_{n}"] = r
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    shutdown_worker()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
