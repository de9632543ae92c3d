"""Where the checks and a corpus label disagree, ask the CUDA toolchain: build each disputed item with
TVM for CUDA (sm_80), count its kernels, and run nvcc/ptxas on the source (a kernel over the 48 KB of
static shared memory does not build). Prints JSON, one row per item.

    PYTHONPATH=. .venv/bin/python benchmarks/verdicts.py --no-conformance > /tmp/v.json
    PYTHONPATH=. .venv/bin/python benchmarks/verdict_disputes.py /tmp/v.json [--corpus tests/verdicts/corpus.json.gz]

Needs nvcc on PATH (no GPU): without it, the kernel count and TVM's shared allocations are printed alone.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def cuda_facts(program: str, trace: str, func: str | None) -> dict:
    import tvm

    from mlc_lab.core.session import Session

    s = Session.from_trace(program, trace, func)
    ex = tvm.compile(s.module_at(s.current.id), target=tvm.target.Target({"kind": "cuda", "arch": "sm_80"}))
    src = ex.mod.imports[0].inspect_source()
    out: dict = {
        "kernels": len(set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src))),
        "shared_floats": [int(n) for n in re.findall(r"__shared__ alignas\(\d+\) float \w+\[(\d+)\]", src)],
    }
    if shutil.which("nvcc"):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "k.cu").write_text(src)
            r = subprocess.run(
                ["nvcc", "-arch=sm_80", "-cubin", "-o", f"{tmp}/k.cubin", f"{tmp}/k.cu"], capture_output=True, text=True
            )
            errors = [line.strip() for line in r.stderr.splitlines() if "error" in line]
            out["ptxas"] = errors[0] if errors else "builds"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", type=Path, help="the JSON benchmarks/verdicts.py printed")
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "verdicts" / "corpus.json.gz")
    args = ap.parse_args(argv)
    from benchmarks.verdicts import load

    data, bench = load(args.corpus), json.loads(args.bench.read_text())
    items = {it["id"]: it for it in data["items"]}
    rows = []
    for name, wrong in bench.get("cuda", {}).get("wrong", {}).items():
        for w in wrong:
            it = items[w["id"]]
            facts = cuda_facts(data["programs"][it["program"]], it["trace"], it["func"])
            rows.append({"id": w["id"], "check": name, "label": w["label"], "got": w["got"], **facts})
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
