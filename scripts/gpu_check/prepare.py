"""Prepare one device call that re-checks the GPU lab on a real GPU (see run_on_gpu.py).

Run here, on a machine without a GPU, from the repo root::

    PYTHONPATH=$PWD .venv/bin/python scripts/gpu_check/prepare.py [--out .work/gpu_check]

It writes into the folder (which git must ignore, and the device call carries):

- ``verdicts.json``: for each submission of ``tests/labs/gpu_matmul.py``, the verdicts of
  ``Session.check(target="cuda")`` here (failed checks, hazards), whether its kernel built, and what
  the device script needs to make its inputs and float64 reference (the program, its shapes);
- ``kernels/<name>.so``: each kernel that builds, ``tvm.compile(mod, target=sm_90)`` then
  ``export_library`` (CUDA source inside: the GPU machine compiles it with NVRTC when it loads it);
- ``runtime.tar.xz``: TVM's runtime alone (the installed ``tvm`` package without
  ``libtvm_compiler.so``) and ``apache-tvm-ffi`` for the device's Python (3.12);
- ``run_on_gpu.sh`` and ``run_on_gpu.py``: what the device call runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SM_90 = {"kind": "cuda", "arch": "sm_90"}
DEVICE_PYTHON = "3.12"  # the device machine's python3
LIMIT_BYTES = 60 * 2**20  # the folder travels with the working tree (64 MiB a call in all)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def program_of(program_text: str) -> dict:
    """The program a submission schedules, as the device script needs it to make inputs and the
    float64 reference: its name, its buffers' shapes (the output last) and its FLOP count."""
    from tests.labs import gpu_matmul as lab

    if program_text is lab.GEMM_RELU_ADD:
        n = 2048
        return {"name": "gemm_relu_add", "n": n, "shapes": [[n, n]] * 4, "flops": 2 * n**3}
    if program_text is lab.MATMUL_1024:
        n = 1024
        return {"name": "matmul", "n": n, "shapes": [[n, n]] * 3, "flops": 2 * n**3}
    raise ValueError("a submission of tests/labs/gpu_matmul.py schedules a program this script does not know")


def verdicts_of(report) -> dict:
    """The verdicts of one ``CheckReport`` as plain data."""
    from mlc_lab.model.checks import HAZARD_CLASS

    hazards = [{"kind": h.kind, "where": h.where, "message": h.message} for h in report.hazards]
    return {
        "failed_checks": sorted(c.name for c in report.failed()),
        "unjudged_checks": sorted(c.name for c in report.unjudged()),
        "hazards": hazards,
        "hazard_kinds": sorted({h["kind"] for h in hazards}),
        # a correctness hazard says: the kernel computes wrong numbers, or cannot build or launch
        "predicts_wrong": any(HAZARD_CLASS.get(h["kind"], "correctness") == "correctness" for h in hazards),
    }


def build(module, path: Path) -> str | None:
    """Compile ``module`` for sm_90 and export it to ``path``; the first line of the error if it fails."""
    import tvm

    try:
        tvm.compile(module, target=SM_90).export_library(str(path))
    except Exception as exc:  # noqa: BLE001 - TVM raises many kinds; the message is what we record
        path.unlink(missing_ok=True)
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:500]
    return None


def prepare_submission(name: str, kernels: Path) -> dict:
    """Check one submission of the lab here and build its kernel; its entry in verdicts.json."""
    from tests.labs import gpu_matmul as lab

    program_text, steps = lab.SUBMISSIONS[name]
    session = lab.session_of(name)
    entry = {"program": program_of(program_text), "steps": len(steps)}
    entry.update(verdicts_of(session.check(target="cuda")))
    fails, kinds = lab.EXPECTED[name]
    entry["as_expected_here"] = set(entry["failed_checks"]) == fails and set(entry["hazard_kinds"]) == kinds
    so = kernels / f"{name}.so"
    error = build(session.module, so)
    entry.update(built=error is None, build_error=error, so=f"kernels/{so.name}" if error is None else None)
    return entry


def tvm_paths() -> tuple[Path, Path, str]:
    """The installed ``tvm`` and ``tvm_ffi`` packages and tvm_ffi's version."""
    from importlib import metadata

    import tvm
    import tvm_ffi

    return Path(tvm.__file__).parent, Path(tvm_ffi.__file__).parent, metadata.version("apache-tvm-ffi")


def download_ffi_wheel(version: str, into: Path) -> Path:
    """``apache-tvm-ffi==version`` for the device's Python, from PyPI through pip."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet"]
    cmd += ["--python-version", DEVICE_PYTHON, "--implementation", "cp", "-d", str(into)]
    cmd += [arg for p in PLATFORMS for arg in ("--platform", p)] + [f"apache-tvm-ffi=={version}"]
    subprocess.run(cmd, check=True)
    wheels = sorted(into.glob("apache_tvm_ffi-*.whl"))
    if not wheels:
        raise SystemExit(f"prepare: pip downloaded no apache-tvm-ffi {version} wheel into {into}")
    return wheels[0]


def pack_runtime(dest: Path, ffi_wheel: Path | None) -> dict:
    """Write ``dest`` (tar.xz): ``site/tvm`` without the compiler library, and ``site/`` the ffi wheel."""
    tvm_dir, _ffi_dir, ffi_version = tvm_paths()
    tag = "cp" + DEVICE_PYTHON.replace(".", "")
    with tempfile.TemporaryDirectory(prefix="gpu_check_rt_") as tmp:
        site = Path(tmp) / "site"
        shutil.copytree(
            tvm_dir, site / "tvm", ignore=shutil.ignore_patterns("__pycache__", "libtvm_compiler.so", "*.pyc")
        )
        wheel = ffi_wheel or download_ffi_wheel(ffi_version, Path(tmp) / "wheels")
        if f"-{tag}-" not in wheel.name:
            raise SystemExit(f"prepare: {wheel.name} is not built for Python {DEVICE_PYTHON} ({tag})")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
        with tarfile.open(dest, "w:xz") as tar:
            tar.add(site, arcname="site")
    return {"tvm_ffi_wheel": wheel.name, "python": DEVICE_PYTHON}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from tests.labs import gpu_matmul as lab

    p = argparse.ArgumentParser(prog="prepare.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / ".work" / "gpu_check", help="the folder to fill")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="one submission (repeatable)")
    p.add_argument("--ffi-wheel", type=Path, help="apache-tvm-ffi's cp312 wheel (default: pip downloads it)")
    p.add_argument("--skip-runtime", action="store_true", help="keep runtime.tar.xz as it is, if prepare.py wrote it")
    args = p.parse_args(argv)
    unknown = [n for n in args.only if n not in lab.SUBMISSIONS]
    if unknown:
        p.error(f"--only {unknown[0]!r} is not a submission of tests/labs/gpu_matmul.py")
    if args.ffi_wheel is not None and not args.ffi_wheel.is_file():
        p.error(f"--ffi-wheel {args.ffi_wheel} is not a file")
    return args


def main(argv: list[str] | None = None) -> int:
    from tests.labs import gpu_matmul as lab

    args = parse_args(argv)
    out: Path = args.out
    kernels = out / "kernels"
    kernels.mkdir(parents=True, exist_ok=True)
    names = args.only or sorted(lab.SUBMISSIONS)
    entries = {}
    for name in names:
        t0 = time.perf_counter()
        entries[name] = prepare_submission(name, kernels)
        e = entries[name]
        print(
            f"{name:32s} built={e['built']!s:5s} hazards={','.join(e['hazard_kinds']) or '-':28s} "
            f"failed={','.join(e['failed_checks']) or '-'}  ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    runtime, runtime_json = out / "runtime.tar.xz", out / "runtime.json"
    if args.skip_runtime and runtime.exists() and runtime_json.exists():
        runtime_info = json.loads(runtime_json.read_text())
    else:
        runtime_info = pack_runtime(runtime, args.ffi_wheel)
        runtime_json.write_text(json.dumps(runtime_info) + "\n")
    for script in ("run_on_gpu.sh", "run_on_gpu.py"):
        shutil.copy2(HERE / script, out / script)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    meta = {"commit": commit.strip(), "target": SM_90, "runtime": runtime_info, "submissions": entries}
    (out / "verdicts.json").write_text(json.dumps(meta, indent=1) + "\n")
    size = folder_bytes(out)
    print(
        f"{out}: {size / 2**20:.1f} MiB ({len(entries)} submissions, {sum(e['built'] for e in entries.values())} built)"
    )
    if size > LIMIT_BYTES:
        print(f"prepare: {out} is {size / 2**20:.1f} MiB, over the {LIMIT_BYTES / 2**20:.0f} MiB one call carries")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
