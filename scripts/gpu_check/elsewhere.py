"""Measuring where the GPU is: the GPU lab's kernels and one tuning round of the course's matmul, built
here (their kernels compiled to a fat binary for sm_90), measured on a lent GPU by the batch runner's
measuring side (`mlc_lab.tvm.measure.runside`, TVM's runtime alone), and each latency printed beside
what ``measure`` and the tuner record of it. Three steps, one device call:

  here   PYTHONPATH=$PWD .venv/bin/python scripts/gpu_check/elsewhere.py prepare
         ``measure(..., target=sm_90, runner="batch:<stash>")`` for every submission of
         tests/labs/gpu_matmul.py and ``tune(matmul 1024, sm_90, 16 trials in one round,
         runner="batch:<stash>")``: the batch runner builds its folders as always, and the transport
         (``stash``) keeps them in .work/gpu_check/elsewhere/folders/ instead of running them (here
         there is no GPU: those measurements fail, "stashed"). The arrays are not kept (a 2048^2
         float32 argument is 16 MiB, and one device call carries 64): each folder gets a recipe
         (the seeded draws of ``measure``'s inputs, checked here to give the same bytes; the expected
         outputs computed there in float64 by numpy). Plus TVM's runtime for the device's Python.
  there  bash .work/gpu_check/elsewhere/measure_on_gpu.sh      (carry .work/gpu_check, timeout 600)
         Every folder is given its arrays back from its recipe and measured by the measuring side in a
         process of its own (``TVM_USE_RUNTIME_LIB=1``): the results, one JSON file, in $OUT.
  here   PYTHONPATH=$PWD .venv/bin/python scripts/gpu_check/elsewhere.py collect FILES_AT/elsewhere_results.json
         ``measure`` and the same tune again, with a transport (``replay``) that answers each folder
         with what the GPU said of the one built from the same bytes (matched by the libraries'
         SHA-256): what they record is printed beside the device's own figure and last round's
         H200 table (``time_evaluator`` of the NVRTC-built kernels, tests/fixtures/gpu_h200.json).

Nothing here needs a GPU but the middle step; ``prepare`` and ``collect`` need nvcc (the CUDA 13 toolkit).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the checkout: this script runs from scripts/gpu_check/ here and from .work/gpu_check/elsewhere/ there
REPO = next((p for p in HERE.parents if (p / "mlc_lab" / "__init__.py").is_file()), Path.cwd())
SM_90 = {"kind": "cuda", "arch": "sm_90"}
SEED = 0  # measure's and the tuner's draws (mlc_lab.tvm.measure.build.random_inputs)
RTOL, ATOL = 1e-3, 1e-2  # run_on_gpu.py's tolerance against the float64 reference
RECIPE = "recipe.json"
STASHED = 3  # the stash transport's exit status: kept for the GPU, not measured
TUNE_TRIALS = 16  # one round of the tuner


# --- the arrays: measure's seeded draws, and the programs' float64 references ---------------------------


def draws(arrays: list, seed: int):
    """``mlc_lab.tvm.measure.build.random_inputs``' draws, for float arrays (repeated here: the device
    has TVM's runtime alone; `stash` checks both give the same bytes)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _name, shape, dtype in arrays:
        if np.dtype(dtype).kind != "f":
            raise SystemExit(f"elsewhere: a {dtype} argument: only float arguments have a recipe")
        out.append(rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype))
    return out


def reference(program: str, args: list):
    """The program's output in float64 from its inputs (the arguments before the last)."""
    import numpy as np

    a, b = (x.astype(np.float64) for x in args[:2])
    if program == "matmul":
        return a @ b
    if program == "gemm_relu_add":
        return np.maximum(a @ b, 0.0) + args[2].astype(np.float64)
    raise SystemExit(f"elsewhere: no reference for the program {program!r}")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the stash transport (COMMAND FOLDER, here) ------------------------------------------------------


def stash(dest: Path, program: str, folder: Path) -> int:
    """Keep `folder` (a round the batch runner built) in `dest`, its arrays replaced by a recipe."""
    import numpy as np

    manifest = json.loads((folder / "manifest.json").read_text())
    cand0 = manifest["candidates"][0]
    names = [a["name"] for a in cand0["args"]]
    inputs_file = cand0["args"][0]["file"]
    with np.load(folder / inputs_file) as data:
        staged = [data[n] for n in names]
    arrays = [[n, list(a.shape), str(a.dtype)] for n, a in zip(names, staged)]
    if any(not np.array_equal(x, y) for x, y in zip(draws(arrays, SEED), staged)):
        print(f"elsewhere: {folder}'s arrays are not measure's seeded draws: no recipe can make them", file=sys.stderr)
        return 1
    output = names[-1]
    for cand in manifest["candidates"]:  # compared there with the float64 reference, nothing sent back
        cand.update(outputs=[output], expected="expected.npz", send_outputs=False)
        cand["rtol"], cand["atol"] = RTOL, max(float(cand.get("atol") or 0.0), ATOL)
    recipe = {"inputs": {"file": inputs_file, "seed": SEED, "arrays": arrays}, "program": program, "output": output}
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for p in folder.iterdir():
        if p.suffix == ".so":
            shutil.copyfile(p, dest / p.name)
    recipe["artifacts"] = {c["id"]: sha256(dest / c["artifact"]) for c in manifest["candidates"]}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    (dest / RECIPE).write_text(json.dumps(recipe))
    print(f"stashed for the GPU check in {dest} (not measured here: there is no GPU)", file=sys.stderr)
    return STASHED


# --- the replay transport (COMMAND FOLDER, here, after the device call) ---------------------------------


def replay(results_file: Path, key: str, folder: Path) -> int:
    """Answer `folder` with what the GPU said of the stashed folder `key`, candidate by candidate, matched
    by the SHA-256 of their libraries (the same build gives the same bytes)."""
    said = json.loads(results_file.read_text()).get(key)
    if not said or said.get("results") is None:
        print(f"elsewhere: the GPU's results have nothing for {key}: {said and said.get('error')}", file=sys.stderr)
        return 1
    manifest = json.loads((folder / "manifest.json").read_text())
    theirs = {said["artifacts"][c["id"]]: c for c in said["results"]["candidates"]}
    mine = []
    for cand in manifest["candidates"]:
        digest = sha256(folder / cand["artifact"])
        if digest not in theirs:
            print(
                f"elsewhere: {cand['id']} of {folder} is no library the GPU measured (another build)", file=sys.stderr
            )
            return 1
        mine.append({**theirs[digest], "id": cand["id"], "outputs": {}})
    (folder / "results.json").write_text(json.dumps({**said["results"], "candidates": mine}))
    return 0


# --- prepare (here) -------------------------------------------------------------------------------------


def transport(verb: str, *words: str) -> str:
    return "batch:" + " ".join([sys.executable, str(Path(__file__).resolve()), verb, *words])


def prepare(out: Path, only: list[str], with_round: bool, runtime: str) -> int:
    sys.path.insert(0, str(REPO))
    from mlc_lab.core.measure import measure
    from tests.labs import gpu_matmul as lab

    folders = out / "folders"
    shutil.rmtree(folders, ignore_errors=True)
    folders.mkdir(parents=True)
    meta: dict = {"kernels": {}, "round": None, "target": SM_90}
    names = only or sorted(lab.SUBMISSIONS)
    for name in names:
        program = "gemm_relu_add" if lab.SUBMISSIONS[name][0] is lab.GEMM_RELU_ADD else "matmul"
        s = lab.session_of(name)
        t0 = time.perf_counter()
        m = measure(
            s.module,
            None,
            s.func_name,
            SM_90,
            runner=transport("stash", str(folders / f"kernel-{name}"), program),
            raise_errors=False,
            timeout=600,
        )
        built = (folders / f"kernel-{name}" / RECIPE).exists()
        meta["kernels"][name] = {
            "program": program,
            "stashed": built,
            "here": m.error.splitlines()[0] if m.error else None,
        }
        print(
            f"{name:32s} {'stashed' if built else 'not built: ' + (m.error or '').splitlines()[0]}"
            f"  ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    if with_round:
        meta["round"] = tune_round(out, transport("stash", str(folders / "round-1"), "matmul"), "prepare")
        print(f"tuning round: {meta['round']['trials']} candidates stashed ({meta['round']['wall_s']} s)", flush=True)
    if runtime == "pack" or (runtime == "keep" and not (out / "runtime.tar.xz").exists()):
        sys.path.insert(0, str(HERE))
        from prepare import pack_runtime  # noqa: PLC0415 - the sibling script's packer

        meta["runtime"] = pack_runtime(out / "runtime.tar.xz", None)
    for script in ("elsewhere.py", "measure_on_gpu.sh", "run_on_gpu.py"):
        shutil.copy2(HERE / script, out / script)
    (out / "elsewhere.json").write_text(json.dumps(meta, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 2**20:.1f} MiB")
    return 0 if size < 60 * 2**20 else 1


def tune_round(out: Path, runner: str, label: str) -> dict:
    """One round of the course's matmul at 1024^3 for sm_90 through `runner`: 16 candidates, drawn by
    replay-trace with a fixed seed (the same candidates every time, whatever was measured)."""
    import mlc_lab
    from mlc_lab.core.tuning import tune
    from tests.labs import gpu_matmul as lab

    work = out / f"tune_{label}"
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    job = tune(
        mlc_lab.load(lab.MATMUL_1024),
        SM_90,
        trials=TUNE_TRIALS,
        work_dir=str(work),
        runner=runner,
        num_trials_per_iter=TUNE_TRIALS,
        strategy="replay-trace",
        cost_model="random",
        seed=SEED,
        timeout_s=60,
    )
    status = job.wait(timeout=1800)
    recs = job.records(with_traces=False)
    return {
        "status": status,
        "error": job.error,
        "trials": len(recs),
        "work_dir": str(work),
        "wall_s": round(time.perf_counter() - t0, 1),
        "records": [
            {"trial": r.trial, "latency_s": r.latency_s, "error": (r.error or "")[:300], "where": r.where} for r in recs
        ],
    }


# --- the device's step (there) ----------------------------------------------------------------------------


def rehydrate(folder: Path) -> None:
    """The folder's arrays again: the inputs from their seeded draws, the expected output from the
    float64 reference."""
    import numpy as np

    recipe = json.loads((folder / RECIPE).read_text())
    arrays = recipe["inputs"]["arrays"]
    args = draws(arrays, recipe["inputs"]["seed"])
    np.savez(folder / recipe["inputs"]["file"], **{n: a for (n, _, _), a in zip(arrays, args)})
    want = reference(recipe["program"], args).astype(arrays[-1][2])
    np.savez(folder / "expected.npz", **{recipe["output"]: want})


def device(folder_root: Path, out: Path, site: Path | None, timeout: float, budget: float) -> int:
    """Each stashed folder measured by the measuring side, in a process of its own; one JSON file."""
    results: dict = {}
    env = dict(os.environ, TVM_USE_RUNTIME_LIB="1", PYTHONUNBUFFERED="1")
    paths = [str(site)] if site else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(REPO), os.environ.get("PYTHONPATH", "")]).strip(os.pathsep)
    cudart = cudart_dir()
    if cudart:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (cudart, os.environ.get("LD_LIBRARY_PATH", "")) if x)
    started = time.monotonic()
    for folder in sorted(p for p in folder_root.iterdir() if (p / RECIPE).exists()):
        recipe = json.loads((folder / RECIPE).read_text())
        entry: dict = {"artifacts": recipe["artifacts"], "results": None, "error": None}
        if time.monotonic() - started > budget:
            entry["error"] = f"not run: the time budget of {budget:g} s was spent"
            results[folder.name] = entry
            continue
        t0 = time.monotonic()
        rehydrate(folder)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "mlc_lab.tvm.measure.runside", str(folder)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if (folder / "results.json").exists():
                entry["results"] = json.loads((folder / "results.json").read_text())
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:400]
                entry["error"] = f"the measuring side exited {proc.returncode}: {tail}"
        except subprocess.TimeoutExpired:
            entry["error"] = f"the measuring side did not end in {timeout:g} s (killed)"
        for p in folder.glob("*.np[yz]"):
            p.unlink()  # the arrays stay there
        entry["wall_s"] = round(time.monotonic() - t0, 2)
        results[folder.name] = entry
        print(f"  {folder.name}: {summary_line(entry)} ({entry['wall_s']} s)", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "elsewhere_results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(e["results"] is not None for e in results.values()) else 1


def cudart_dir() -> str | None:
    for d in (
        "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda-13.0/lib",
    ):
        if Path(d, "libcudart.so.13").exists():
            return d
    return None


def summary_line(entry: dict) -> str:
    res = entry.get("results")
    if not res:
        return entry.get("error") or "no results"
    parts = []
    for c in res["candidates"]:
        if c["ok"]:
            parts.append(f"{c['id']} {c['latency_s'] * 1e3:.4f} ms")
        else:
            parts.append(f"{c['id']} {c['error']['kind']}: {c['error']['message'][:80]}")
    return "; ".join(parts)


# --- collect (here) ------------------------------------------------------------------------------------


def collect(results_file: Path, out: Path) -> int:
    sys.path.insert(0, str(REPO))
    from mlc_lab.core.measure import measure
    from tests.labs import gpu_matmul as lab

    meta = json.loads((out / "elsewhere.json").read_text())
    said = json.loads(results_file.read_text())
    h200 = json.loads((REPO / "tests" / "fixtures" / "gpu_h200.json").read_text())["kernels"]
    rows = []
    for name, k in meta["kernels"].items():
        key = f"kernel-{name}"
        device_c = ((said.get(key) or {}).get("results") or {}).get("candidates") or [None]
        there = device_c[0]
        if not k["stashed"]:
            rows.append((name, "does not build", "-", "-", "-"))
            continue
        s = lab.session_of(name)
        m = measure(
            s.module,
            None,
            s.func_name,
            SM_90,
            runner=transport("replay", str(results_file), key),
            raise_errors=False,
            timeout=600,
        )
        ref = (h200.get(name) or {}).get("ms")
        rows.append(
            (
                name,
                cell(there),
                f"{m.latency_s * 1e3:.4f} (correct {m.correct})" if m.ok else f"{m.error_kind}: {last_clause(m.error)}",
                "-",
                f"{ref:.4f}" if isinstance(ref, (int, float)) else "-",
            )
        )
    if meta.get("round"):
        again = tune_round(out, transport("replay", str(results_file), "round-1"), "collect")
        device_round = {c["id"]: c for c in ((said.get("round-1") or {}).get("results") or {}).get("candidates", [])}
        for rec in again["records"]:
            there = device_round.get(f"c{rec['trial']}")
            tuner = f"{rec['latency_s'] * 1e3:.4f}" if rec["latency_s"] is not None else f"failed: {rec['error'][:60]}"
            rows.append((f"round-1 c{rec['trial']}", cell(there), "-", tuner, "-"))
    head = ("kernel", "GPU: measuring side (ms)", "measure() recorded (ms)", "tuner recorded (ms)", "H200 table (ms)")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    text = "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows])
    print(text)
    (out / "elsewhere_table.txt").write_text(text + "\n")
    return 0


def last_clause(text: str | None) -> str:
    """What an error sentence ends with ("...: this machine has no cuda device" -> the device part)."""
    return (text or "").splitlines()[0].rsplit(": ", 1)[-1][:60]


def cell(c: dict | None) -> str:
    if c is None:
        return "not measured"
    if not c["ok"]:
        return f"{c['error']['kind']}: {c['error']['message'][:50]}"
    return f"{c['latency_s'] * 1e3:.4f}" + ("" if c.get("correct") in (None, True) else " (WRONG)")


# --- the command line -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="elsewhere.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    pp = sub.add_parser("prepare", help="here: stash the kernels and a tuning round, pack TVM's runtime")
    pp.add_argument("--out", type=Path, default=REPO / ".work" / "gpu_check" / "elsewhere")
    pp.add_argument("--only", action="append", default=[], metavar="NAME")
    pp.add_argument("--no-round", action="store_true", help="no tuning round")
    pp.add_argument("--skip-runtime", action="store_true", help="keep runtime.tar.xz as it is, if there")
    pp.add_argument("--no-runtime", action="store_true", help=argparse.SUPPRESS)  # tests: the local TVM serves
    ps = sub.add_parser("stash", help=argparse.SUPPRESS)
    ps.add_argument("dest", type=Path)
    ps.add_argument("program")
    ps.add_argument("folder", type=Path)
    pr = sub.add_parser("replay", help=argparse.SUPPRESS)
    pr.add_argument("results", type=Path)
    pr.add_argument("key")
    pr.add_argument("folder", type=Path)
    pd = sub.add_parser("device", help="there: measure every stashed folder (TVM's runtime alone)")
    pd.add_argument("--dir", type=Path, default=HERE)
    pd.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    pd.add_argument("--site", type=Path, help="the unpacked runtime (default: this Python's TVM)")
    pd.add_argument("--timeout", type=float, default=180.0)
    pd.add_argument("--budget", type=float, default=420.0)
    pc = sub.add_parser("collect", help="here: measure and the tuner again, answered by the GPU's results")
    pc.add_argument("results", type=Path)
    pc.add_argument("--out", type=Path, default=REPO / ".work" / "gpu_check" / "elsewhere")
    args = p.parse_args(argv)
    if args.verb == "prepare":
        runtime = "none" if args.no_runtime else "keep" if args.skip_runtime else "pack"
        return prepare(args.out, args.only, not args.no_round, runtime)
    if args.verb == "stash":
        return stash(args.dest, args.program, args.folder)
    if args.verb == "replay":
        return replay(args.results, args.key, args.folder)
    if args.verb == "device":
        if args.out is None:
            p.error("no output folder: set OUT (the device tool does) or pass --out")
        return device(args.dir / "folders", args.out, args.site, args.timeout, args.budget)
    return collect(args.results, args.out)


if __name__ == "__main__":
    sys.exit(main())
