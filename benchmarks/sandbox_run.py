"""What running a hand-in's kernel in the sandbox costs, against running the same kernel outside; prints JSON.

    .venv/bin/python benchmarks/sandbox_run.py [--pairs 5] [--kernels mm_relu_128,...] [--threads N]

Each kernel is built once here (`mlc_lab.tvm.measure.stage`: the same library, the same inputs), then
the measuring side (`python -m mlc_lab.tvm.measure.runside FOLDER --fd N`, TVM's runtime alone) runs
it `--pairs` times each way, interleaved (the order alternating from pair to pair): in a plain child
with the same environment, and in the sandbox (`mlc_lab.core.kernel_sandbox.run_folder`, as the
grader runs it). Both time it by the one method (10 repeats of at least 20 ms, the median, up to 3
rounds while not quiet, the parallel-speed probe on more than one thread). Per kernel: the median
latency each way, the ratio sandbox / plain per pair of the medians and of the fastest repeats
(median, min, max over the pairs; the fastest repeat is the figure other processes disturb least),
the wall time of a whole run
(start, imports, load, timing), and how busy the machine was (`others_cores`). Also the import of the
measuring side with TVM's runtime alone against the full TVM, and the load average before and after.

Kernels: the course's mm_relu at 128 as written (scalar), the same at 128 with the course's schedule
(rows in parallel, j split by 8 and vectorized), and at 1024 with that schedule.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlc_lab._threads import cpu_name, usable_cores  # noqa: E402
from mlc_lab.core import kernel_sandbox as ks  # noqa: E402
from mlc_lab.model.measure import RunMethod, RunResults, unpack_files  # noqa: E402

SCHEDULE = (
    'b0 = sch.get_sblock(name="Y", func_name="mm_relu")\n'
    "l1, l2, l3 = sch.get_loops(block=b0)\n"
    "l4, l5 = sch.split(loop=l2, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)\n"
    "sch.reorder(l1, l4, l3, l5)\n"
    "sch.parallel(loop=l1)\n"
    "sch.vectorize(loop=l5)\n"
)
KERNELS = {
    "mm_relu_128": (128, None),
    "mm_relu_128_vectorized": (128, SCHEDULE),
    "mm_relu_1024_vectorized": (1024, SCHEDULE),
}


def _stage(size: int, trace: str | None, folder: str, threads: int) -> dict:
    from mlc_lab.core.session import Session
    from mlc_lab.tvm.course_programs import MM_RELU
    from mlc_lab.tvm.measure import stage
    from mlc_lab.tvm.measure.build import module_to_text

    session = Session(MM_RELU.replace("128", str(size)))
    if trace:
        session.replay(trace)
    module, reference = module_to_text(session.module), module_to_text(session.original)
    staged = stage.stage_kernel(module, reference, session.func_name, "cpu", folder)
    probe = stage.stage_speed_probe(folder, threads) if threads > 1 else None
    stage.write_manifest(folder, "cpu", RunMethod(threads=threads, speed_probe=probe), [staged["candidate"]])
    return staged


def _plain(folder: str, threads: int) -> tuple[RunResults, float]:
    """The measuring side in a plain child, its answer on a descriptor (as in the sandbox)."""
    with tempfile.TemporaryFile() as stream:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "mlc_lab.tvm.measure.runside", folder + "/", "--fd", str(stream.fileno())],
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", **ks.run_env(threads)},
            pass_fds=(stream.fileno(),),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        stream.seek(0)
        files = unpack_files(stream.read())
    return RunResults.from_json(json.loads(files["results.json"])), wall


def _sandboxed(folder: str, threads: int, staged: dict) -> tuple[RunResults, float]:
    start = time.perf_counter()
    results, _files = ks.run_folder(folder, ks.KernelSandbox(wall_s=600), ks.bytes_back(staged["inputs"]), threads)
    return results, time.perf_counter() - start


def _one(results: RunResults, wall: float) -> dict:
    (c,) = results.candidates
    if not c.ok:
        raise SystemExit(f"the kernel failed: {c.error}")
    return {
        "latency_s": c.latency_s,
        "min_s": c.min_s,
        "iqr_s": c.iqr_s,
        "others_cores": c.others_cores,
        "parallel_speed": c.parallel_speed,
        "rounds": c.rounds,
        "wall_s": round(wall, 3),
    }


def _summary(runs: list[dict]) -> dict:
    med = lambda key: statistics.median(r[key] for r in runs if r[key] is not None)  # noqa: E731
    return {
        "latency_ms_median": round(med("latency_s") * 1e3, 4),
        "min_ms_median": round(med("min_s") * 1e3, 4),
        "wall_s_median": round(med("wall_s"), 3),
        "others_cores_median": round(med("others_cores"), 3),
        "rounds_median": med("rounds"),
    }


def _bench(name: str, pairs: int, threads: int) -> dict:
    size, trace = KERNELS[name]
    with tempfile.TemporaryDirectory(prefix="mlc_lab_bench_run_") as folder:
        staged = _stage(size, trace, folder, threads)
        plain, boxed = [], []
        for i in range(pairs):
            order = ("plain", "sandbox") if i % 2 == 0 else ("sandbox", "plain")
            for way in order:
                if way == "plain":
                    plain.append(_one(*_plain(folder, threads)))
                else:
                    boxed.append(_one(*_sandboxed(folder, threads, staged)))
    ratios = [b["latency_s"] / p["latency_s"] for p, b in zip(plain, boxed)]
    fastest = [b["min_s"] / p["min_s"] for p, b in zip(plain, boxed)]
    return {
        "plain": _summary(plain),
        "sandbox": _summary(boxed),
        "latency_ratio_sandbox_over_plain": {
            "median": round(statistics.median(ratios), 3),
            "min": round(min(ratios), 3),
            "max": round(max(ratios), 3),
        },
        "fastest_repeat_ratio_sandbox_over_plain": {
            "median": round(statistics.median(fastest), 3),
            "min": round(min(fastest), 3),
            "max": round(max(fastest), 3),
        },
        "wall_s_added_by_the_sandbox": round(_summary(boxed)["wall_s_median"] - _summary(plain)["wall_s_median"], 3),
        "pairs": [{"plain": p, "sandbox": b} for p, b in zip(plain, boxed)],
    }


def _imports(repeat: int = 5) -> dict:
    """Seconds to import the measuring side and TVM's runtime, alone and with the full TVM."""
    out = {}
    for label, runtime_only in (("runtime_only", "1"), ("full_tvm", "0")):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_USE_RUNTIME_LIB": runtime_only}
        seconds = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", "import mlc_lab.tvm.measure.runside, tvm.runtime"], env=env, check=True
            )
            seconds.append(time.perf_counter() - start)
        out[label] = {"median_s": round(statistics.median(seconds), 3), "min_s": round(min(seconds), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--threads", type=int, default=usable_cores(), help="TVM_NUM_THREADS of both runs")
    parser.add_argument("--skip-imports", action="store_true")
    args = parser.parse_args()
    threads = args.threads
    report: dict = {"cpu": cpu_name(), "cores": usable_cores(), "threads": threads, "load_average": os.getloadavg()}
    if not args.skip_imports:
        report["imports"] = _imports()
    for name in args.kernels.split(","):
        report[name] = _bench(name, args.pairs, threads)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
