"""The machine's roofline, printed as one JSON object: peak fp32 GFLOP/s (a TVM-generated FMA kernel
on all cores) and memory bandwidth (a TVM-generated STREAM triad), re-measured now
(`mlc_lab.machine(refresh=True)`), and numpy's matmul as a fraction of that peak, numpy measured in
a clean subprocess (TVM's thread pool would slow it) with the same median-of-repeats method.

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
from mlc_lab.core.worker import shutdown_worker  # noqa: E402

NUMPY_SNIPPET = """
import json, time, numpy as np
n = {n}
rng = np.random.default_rng(0)
a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
for _ in range(3): a @ b                       # warm-up
t = time.perf_counter(); a @ b; one = time.perf_counter() - t
number = max(1, int(0.02 / one))               # repeats of at least 20 ms, as measure() does
times = []
for _ in range(10):
    t = time.perf_counter()
    for _ in range(number): a @ b
    times.append((time.perf_counter() - t) / number)
times.sort()
print(json.dumps({{"median_s": times[len(times) // 2], "min_s": times[0], "repeats": 10, "number": number}}))
"""


def numpy_matmul(n: int) -> dict:
    out = subprocess.run([sys.executable, "-c", NUMPY_SNIPPET.format(n=n)], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    r["gflops"] = 2 * n**3 / r["median_s"] / 1e9
    r["gflops_at_min"] = 2 * n**3 / r["min_s"] / 1e9
    return r


def cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.lower().startswith("model name"))
    except (OSError, StopIteration):
        return ""


def main() -> int:
    out: dict = {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                 "tvm_num_threads": os.environ.get("TVM_NUM_THREADS"),
                 "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    m = mlc_lab.machine(refresh=True)
    out["machine"] = m.to_json()
    out["peak_gflops"] = round(m.peak_gflops, 1)
    out["bandwidth_gbs"] = round(m.bandwidth_gbs, 2)
    out["ridge_flops_per_byte"] = round(m.ridge_intensity, 2)
    for n in (512, 1024):
        r = numpy_matmul(n)
        r["fraction_of_peak"] = round(r["gflops"] / m.peak_gflops, 3)
        r["fraction_of_peak_at_min"] = round(r["gflops_at_min"] / m.peak_gflops, 3)
        out[f"numpy_matmul_{n}"] = r
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    shutdown_worker()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
