"""Run the GPU lab's kernels (built by prepare.py) on a real GPU and hold them to the verdicts here.

On the device machine, from the repo root, the prepared folder carried::

    bash .work/gpu_check/run_on_gpu.sh [--only NAME ...] [--timeout S] [--budget S]

For each kernel that built: a process of its own (an illegal address poisons the CUDA context) loads
TVM's runtime alone (``TVM_USE_RUNTIME_LIB=1``, ``libcudart.so.13`` then ``libtvm_runtime_cuda.so``),
loads the kernel (NVRTC compiles its CUDA source for the device's own arch), runs it twice on
standard normal inputs (a fixed seed) with the output filled with NaN, counts the elements not
within rtol 1e-3 / atol 1e-2 of a float64 reference, and, when none is wrong, times it
(``time_evaluator``, median of 5). Writes ``$OUT/gpu_results.json`` and ``$OUT/gpu_table.txt``, and
prints the table. Exit status: 0 when every verdict here agrees with the GPU, 1 when one does not,
2 when it cannot run (no GPU, no OUT, a bad argument, a missing file, the runtime cannot load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261127
RTOL, ATOL = 1e-3, 1e-2
SETUP_FAILED = 3  # a kernel's process exits so when the machine cannot run any kernel
CUDART_CANDIDATES = (
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13",
    "/usr/local/cuda/lib64/libcudart.so.13",
)
RESULT_TAG = "GPU_CHECK_RESULT "


class Refusal(Exception):
    """The run cannot go on: one sentence, and the script exits 2."""


# --- one kernel, in its own process ---------------------------------------------------------------
def load_cuda_runtime(site: Path | None):
    """Import TVM's runtime (from ``site``, the unpacked runtime.tar.xz, first) with CUDA enabled; its
    ``tvm`` module."""
    import ctypes

    if site is not None:
        sys.path.insert(0, str(site))
    os.environ["TVM_USE_RUNTIME_LIB"] = "1"
    import tvm  # noqa: PLC0415 - imported only here, after the environment is set

    cudart = os.environ.get("GPU_CHECK_CUDART") or next((p for p in CUDART_CANDIDATES if Path(p).exists()), None)
    if cudart is None:
        raise Refusal(f"libcudart.so.13 is in none of {', '.join(CUDART_CANDIDATES)} (set GPU_CHECK_CUDART)")
    lib = Path(tvm.__file__).parent / "lib" / "libtvm_runtime_cuda.so"
    for path in (cudart, lib):
        try:
            ctypes.CDLL(str(path), ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise Refusal(f"cannot load {path}: {exc}") from None
    use_cuda_headers_of(cudart)
    if not tvm.runtime.enabled("cuda") or not tvm.cuda(0).exist:
        raise Refusal("TVM's CUDA runtime loaded, but it sees no CUDA device 0")
    # Runtime-only TVM has no Target.current (its FFI function lives in the compiler library); NVRTC's
    # callback asks for it when the kernel loads. None: compile for the device's own arch.
    tvm.target.Target.current = staticmethod(lambda allow_none=True: None)
    return tvm


def has_cuda_headers(root: Path) -> bool:
    return any((root / d / "cuda_runtime.h").is_file() for d in ("include", "targets/x86_64-linux/include"))


def use_cuda_headers_of(cudart: str) -> None:
    """NVRTC needs CUDA's headers: TVM looks under ``CUDA_PATH``, else two folders above ``nvcc``. Where
    neither holds them, point ``CUDA_PATH`` at the CUDA that ``cudart`` comes from."""
    import shutil

    if "CUDA_PATH" in os.environ:
        return
    nvcc = shutil.which("nvcc")
    if nvcc and has_cuda_headers(Path(os.path.realpath(os.path.join(nvcc, "../..")))):
        return
    # <root>/targets/x86_64-linux/lib/libcudart.so.13, or <root>/lib64/libcudart.so.13
    roots = (Path(cudart).parents[3], Path(os.path.realpath(cudart)).parents[1])
    root = next((r for r in roots if has_cuda_headers(r)), None)
    if root is not None:
        os.environ["CUDA_PATH"] = str(root)


def inputs_and_reference(program: dict):
    """The kernel's arguments (the output filled with NaN) and its float64 reference."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    shapes = program["shapes"]
    args = [rng.standard_normal(tuple(s), dtype=np.float32) for s in shapes[:-1]]
    a, b = (x.astype(np.float64) for x in args[:2])
    if program["name"] == "matmul":
        ref = a @ b
    elif program["name"] == "gemm_relu_add":
        ref = np.maximum(a @ b, 0.0) + args[2].astype(np.float64)
    else:
        raise Refusal(f"verdicts.json names a program {program['name']!r} this script cannot compute")
    return args + [np.full(tuple(shapes[-1]), np.nan, dtype=np.float32)], ref


def wrong_elements(out, ref) -> int:
    import numpy as np

    return int(np.count_nonzero(~np.isclose(out, ref, rtol=RTOL, atol=ATOL)))


def run_kernel(tvm, dev, so: Path, program: dict, timing: bool) -> dict:
    """Load, run twice on ``dev``, count wrong elements, time: the result of one kernel (an ``error``
    if it failed)."""
    result: dict = {"wrong": None, "ms": None, "tflops": None, "load_s": None, "error": None}
    t0 = time.perf_counter()
    try:
        mod = tvm.runtime.load_module(str(so))
        func = mod["main"]
    except Exception as exc:  # noqa: BLE001 - NVRTC's and the loader's errors come in many kinds
        result["error"] = f"load: {first_line(exc)}"
        return result
    result["load_s"] = round(time.perf_counter() - t0, 3)
    host, ref = inputs_and_reference(program)
    wrong = []
    try:
        for _ in range(2):  # a race may differ from run to run
            args = [tvm.runtime.tensor(x, dev) for x in host]
            func(*args)
            dev.sync()
            wrong.append(wrong_elements(args[-1].numpy(), ref))
    except Exception as exc:  # noqa: BLE001 - a launch error or an illegal address
        result["error"] = f"run: {first_line(exc)}"
        result["wrong"] = wrong or None
        return result
    result["wrong"] = wrong
    if timing and not any(wrong):
        try:
            evaluator = mod.time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=20)
            median_s = float(evaluator(*args).median)
        except Exception as exc:  # noqa: BLE001 - the numbers were judged: a timing failure is only noted
            result["timing_error"] = first_line(exc)
            return result
        result["ms"] = round(median_s * 1e3, 4)
        result["tflops"] = round(program["flops"] / median_s / 1e12, 3)
    return result


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # TVM's errors end with the one line that says what went wrong, after its traceback
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:400]


def kernel_main(args: argparse.Namespace) -> int:
    """The child: one kernel; prints its result as one tagged JSON line."""
    meta = read_verdicts(args.dir)
    entry = meta["submissions"][args.kernel]
    try:
        tvm = load_cuda_runtime(args.site)
    except Refusal as exc:
        print(f"run_on_gpu: {exc}", file=sys.stderr)
        return SETUP_FAILED
    result = run_kernel(tvm, tvm.cuda(0), args.dir / entry["so"], entry["program"], timing=not args.no_timing)
    result["device"] = tvm.cuda(0).device_name
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# --- the driver -----------------------------------------------------------------------------------
def read_verdicts(folder: Path) -> dict:
    path = folder / "verdicts.json"
    if not path.is_file():
        raise Refusal(f"{path} does not exist: run scripts/gpu_check/prepare.py first and carry its folder")
    try:
        meta = json.loads(path.read_text())
    except ValueError as exc:
        raise Refusal(f"{path} is not JSON ({exc})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("submissions"), dict):
        raise Refusal(f"{path} has no 'submissions' object: it was not written by prepare.py")
    return meta


def gpu_present() -> str:
    """The GPUs ``nvidia-smi -L`` lists, or a Refusal saying there is none."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise Refusal("no NVIDIA GPU here: nvidia-smi is not on the PATH") from None
    except subprocess.TimeoutExpired:
        raise Refusal("no usable NVIDIA GPU here: nvidia-smi -L did not answer in 60 s") from None
    if listed.returncode != 0 or "GPU 0" not in listed.stdout:
        said = (listed.stderr or listed.stdout).strip().splitlines()
        raise Refusal(f"no NVIDIA GPU here: nvidia-smi -L lists none ({said[-1] if said else 'no output'})")
    return listed.stdout.strip()


def unpack_runtime(folder: Path, into: Path) -> Path:
    archive = folder / "runtime.tar.xz"
    if not archive.is_file():
        raise Refusal(f"{archive} does not exist: prepare.py writes it")
    try:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(into, filter="data")  # Python 3.11.4 and later
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise Refusal(f"{archive} does not unpack ({exc})") from None
    site = into / "site"
    if not (site / "tvm" / "lib" / "libtvm_runtime_cuda.so").is_file():
        raise Refusal(f"{archive} holds no site/tvm/lib/libtvm_runtime_cuda.so: it is not TVM's runtime")
    return site


def run_child(args: argparse.Namespace, name: str, site: Path) -> dict:
    """One kernel in a process of its own: its result, or what went wrong with the process."""
    cmd = [args.python, str(Path(__file__).resolve()), "--kernel", name, "--dir", str(args.dir), "--site", str(site)]
    cmd += ["--no-timing"] if args.no_timing else []
    env = dict(os.environ, TVM_USE_RUNTIME_LIB="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"its process did not end in {args.timeout:g} s (killed)"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:400]
    if proc.returncode == SETUP_FAILED:
        raise Refusal(tail.removeprefix("run_on_gpu: "))
    return {"error": f"its process exited {proc.returncode}: {tail}"}


def agreement(entry: dict, result: dict) -> bool | None:
    """Whether the verdict here (a correctness hazard, or none) agrees with what the GPU did: a kernel
    with a correctness hazard fails to build, fails to run or computes wrong numbers, and one without
    builds, runs and computes right ones. None when the GPU did not judge it (not run)."""
    if entry["built"] and result.get("not_run"):
        return None
    wrong_on_gpu = not entry["built"] or bool(result.get("error")) or any(result.get("wrong") or [])
    return wrong_on_gpu == entry["predicts_wrong"]


def cell_wrong(entry: dict, result: dict) -> str:
    if not entry["built"]:
        return "does not build"
    if result.get("not_run"):
        return "not run"
    wrong = result.get("wrong")
    counts = "/".join(f"{w:,}" for w in wrong) if wrong else ""
    if result.get("error"):
        return f"{counts} then error" if counts else "error"
    n = 1
    for d in entry["program"]["shapes"][-1]:
        n *= d
    return f"{counts} of {n:,}"


def table(meta: dict, results: dict) -> str:
    """Submission, the verdicts here, wrong elements on the GPU (two runs), ms, TFLOP/s, agreement."""
    head = ("submission", "hazards here", "checks failed here", "wrong on the GPU", "ms", "TFLOP/s", "agrees")
    rows = []
    for name, entry in meta["submissions"].items():
        r = results.get(name, {})
        agree = agreement(entry, r)
        rows.append(
            (
                name,
                ",".join(entry["hazard_kinds"]) or "none",
                ",".join(entry["failed_checks"]) or "none",
                cell_wrong(entry, r),
                "-" if r.get("ms") is None else f"{r['ms']:.4f}",
                "-" if r.get("tflops") is None else f"{r['tflops']:.1f}",
                "-" if agree is None else ("yes" if agree else "NO"),
            )
        )
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    errors = [f"{n}: {r['error']}" for n, r in results.items() if r.get("error")]
    errors += [f"{n}: timing: {r['timing_error']}" for n, r in results.items() if r.get("timing_error")]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"


def run_all(args: argparse.Namespace, meta: dict, site: Path) -> dict:
    """Each built kernel of the chosen submissions in its own process, within the time budget."""
    results: dict = {}
    started = time.monotonic()
    for name, entry in meta["submissions"].items():
        if not entry["built"]:
            continue
        if time.monotonic() - started > args.budget:
            results[name] = {"not_run": f"the time budget of {args.budget:g} s was spent"}
            continue
        t0 = time.monotonic()
        results[name] = run_child(args, name, site)
        results[name]["wall_s"] = round(time.monotonic() - t0, 2)
        r = results[name]
        print(f"  {name}: wrong={r.get('wrong')} ms={r.get('ms')} {r.get('error') or ''} ({r['wall_s']} s)", flush=True)
    return results


def device_facts() -> dict:
    q = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    try:
        said = subprocess.run(q, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    return {"nvidia_smi": said, "python": sys.version.split()[0]}


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run_on_gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, default=HERE, help="the folder prepare.py filled (default: this script's)")
    p.add_argument("--out", type=Path, default=None, help="where the results go (default: $OUT)")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="one submission (repeatable)")
    p.add_argument("--timeout", type=positive, default=60.0, help="seconds one kernel's process may take")
    p.add_argument("--budget", type=positive, default=170.0, help="seconds after which no kernel is started")
    p.add_argument("--python", default=sys.executable, help="the Python that runs each kernel")
    p.add_argument("--no-timing", action="store_true", help="count wrong elements only")
    p.add_argument("--kernel", help=argparse.SUPPRESS)  # the child: run this one kernel
    p.add_argument("--site", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.kernel is None:
        out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
        if out is None:
            p.error("no output folder: set OUT (the device tool does) or pass --out")
        args.out = out
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.kernel is not None:
            return kernel_main(args)
        return drive(args)
    except Refusal as exc:
        print(f"run_on_gpu: {exc}", file=sys.stderr)
        return 2


def drive(args: argparse.Namespace) -> int:
    meta = read_verdicts(args.dir)
    unknown = [n for n in args.only if n not in meta["submissions"]]
    if unknown:
        raise Refusal(f"--only {unknown[0]!r} is not a submission in {args.dir / 'verdicts.json'}")
    if args.only:
        meta["submissions"] = {n: e for n, e in meta["submissions"].items() if n in args.only}
    missing = [e["so"] for e in meta["submissions"].values() if e["built"] and not (args.dir / e["so"]).is_file()]
    if missing:
        raise Refusal(f"{args.dir / missing[0]} does not exist: prepare.py builds it")
    args.out.mkdir(parents=True, exist_ok=True)
    print(gpu_present(), flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpu_check_rt_") as tmp:
        site = unpack_runtime(args.dir, Path(tmp))
        results = run_all(args, meta, site)
    agree = {n: agreement(e, results.get(n, {})) for n, e in meta["submissions"].items()}
    summary = {
        "judged": sum(a is not None for a in agree.values()),
        "agree": sum(a is True for a in agree.values()),
        "disagree": sorted(n for n, a in agree.items() if a is False),
        "wall_s": round(time.monotonic() - started, 1),
    }
    report = {"device": device_facts(), "commit": meta.get("commit"), "seed": SEED, "rtol": RTOL, "atol": ATOL}
    report.update(
        summary=summary, submissions={n: {**e, "gpu": results.get(n)} for n, e in meta["submissions"].items()}
    )
    (args.out / "gpu_results.json").write_text(json.dumps(report, indent=1) + "\n")
    text = table(meta, results)
    text += f"\n{summary['agree']} of {summary['judged']} verdicts agree with the GPU"
    text += f" (not: {', '.join(summary['disagree'])})" if summary["disagree"] else ""
    text += f"; {summary['wall_s']} s\n"
    (args.out / "gpu_table.txt").write_text(text)
    print(text, end="")
    return 1 if summary["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
