"""What starting a sandbox costs; prints JSON.

    .venv/bin/python benchmarks/sandbox_start.py [--repeat 10]

The median (and min, max) wall time in seconds of `--repeat` runs of ``python -c pass`` and of
``python -c "import tvm"``, each three ways: a plain child (``subprocess.run``, no limits), the
sandbox (`run_sandboxed`: namespaces, new root, cgroups, uid 65534) and ``--unsafe-same-user``
(limits only). The sandbox's own cost is its line less the plain one. Also the machine's load
average (these are taken on a shared machine), and which limits the machine gave (cgroups or the
watchdog).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlc_lab.core import sandbox  # noqa: E402
from mlc_lab.core.sandbox import Limits, run_sandboxed  # noqa: E402

PROGRAMS = {"pass": "pass", "import tvm": "import tvm"}


def _plain(code: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, stdout=subprocess.DEVNULL)


def _sandboxed(code: str, unsafe: bool) -> None:
    out = run_sandboxed([sys.executable, "-c", code], limits=Limits(wall_s=120), unsafe_same_user=unsafe)
    if out.status != "ok":
        raise SystemExit(f"{code!r} failed in the sandbox: {out.message}\n{out.stderr.decode()[-2000:]}")


def _times(fn, repeat: int) -> dict:
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return {
        "median_s": round(statistics.median(seconds), 4),
        "min_s": round(min(seconds), 4),
        "max_s": round(max(seconds), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    if sandbox.probe() is not None:
        raise SystemExit(sandbox.probe())
    cg = sandbox._Cgroups.create(Limits(), f"mlc_lab_bench_{os.getpid()}")  # noqa: SLF001
    limits_by = sorted(cg.dirs) or ["watchdog"]
    cg.remove()
    report: dict = {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "cgroups": limits_by, "runs": args.repeat}
    for name, code in PROGRAMS.items():
        report[name] = {
            "plain": _times(lambda c=code: _plain(c), args.repeat),
            "sandbox": _times(lambda c=code: _sandboxed(c, False), args.repeat),
            "unsafe_same_user": _times(lambda c=code: _sandboxed(c, True), args.repeat),
        }
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
