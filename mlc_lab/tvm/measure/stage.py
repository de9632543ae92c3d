"""Build here, run there: the trusted side's half of a run by the measuring side (`runside`).

`stage_kernel` builds a scheduled program with TVM's compiler in this process, exports it as a
library, draws the seeded random inputs and runs the *original* program (the assignment's, never a
hand-in's) on them for the expected outputs; it writes the library and the inputs into a folder and
returns the candidate that names them. `stage_speed_probe` adds the parallel-speed probe's library,
`write_manifest` the manifest. Nothing compiled from a hand-in runs here: the measuring side runs it
(in the sandbox, or on another machine), and the caller compares what it sends back with the
expected outputs (`errors`), never trusting the far side's own verdict.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from mlc_lab.model.measure import RUN_FORMAT, RunArg, RunCandidate, RunManifest, RunMethod, SpeedProbe
from mlc_lab.tvm.measure import build
from mlc_lab.tvm.measure.runside import MANIFEST


def stage_kernel(
    module_text: str,
    reference_text: str | None,
    func_name: str | None,
    target: Any,
    folder: str,
    *,
    seed: int = 0,
    cid: str = "kernel",
) -> dict:
    """Build `module_text` for `target`, export it to ``FOLDER/CID.so`` and its inputs to
    ``FOLDER/CID.npz``. Returns ``{"candidate": RunCandidate (outputs sent back), "device": "cpu" |
    "cuda", "func_name", "target", "flops", "build_s", "export_s", "names", "inputs", "expected"}``:
    ``expected`` is every argument after the reference's call (None without a reference), in call
    order. A program that cannot be built or run there raises `build.MeasureFailure`."""
    func_name, one = build.single_function_module(build.module_from_text(module_text), func_name)
    tgt = build.resolve_target(target)
    build.check_runnable(one, func_name, tgt)
    try:
        flops = build.estimate_flops(build.module_from_text(reference_text) if reference_text else one, func_name)
    except Exception:  # noqa: BLE001 - the estimate is a nicety
        flops = 0.0
    ex, build_s = build.timed_build(one, tgt)
    inputs, expected = build.inputs_and_expected(one, func_name, reference_text, seed)
    t0 = time.perf_counter()
    library = f"{cid}.so"
    export_library(ex, os.path.join(folder, library), tgt)
    names = unique_names([name for name, _, _ in build.param_specs(one, func_name)])
    arrays = f"{cid}.npz"
    np.savez(os.path.join(folder, arrays), **dict(zip(names, inputs)))
    candidate = RunCandidate(
        id=cid,
        artifact=library,
        function=func_name,
        args=[RunArg(name, arrays) for name in names],
        outputs=list(names),
        send_outputs=True,
    )
    return {
        "candidate": candidate,
        "device": "cuda" if tgt.kind.name == "cuda" else "cpu",
        "func_name": func_name,
        "target": str(tgt),
        "flops": flops,
        "build_s": build_s,
        "export_s": time.perf_counter() - t0,
        "names": names,
        "inputs": inputs,
        "expected": expected,
    }


def export_library(ex: Any, path: str, target: Any) -> None:
    """Export a built program for the measuring side. A CUDA program's kernels are compiled here into
    a binary (`artifact.export_artifact`: the far side then needs TVM's runtime and the driver only)
    when the CUDA toolkit is here; without nvcc they stay source, which the far side compiles with
    NVRTC as it loads them (the full TVM's callback and ``cuda-bindings`` there)."""
    import shutil

    from mlc_lab.tvm.measure import artifact

    try:
        if target.kind.name == "cuda" and shutil.which("nvcc") is not None:
            artifact.export_artifact(ex, path, target)
        else:
            ex.export_library(path)
    except Exception as exc:  # noqa: BLE001 - the linker's (or nvcc's) refusal is the build's
        message = "the program was built but could not be exported as a library"
        raise build.MeasureFailure("build", message, str(exc)) from None


def device_of(module_text: str, func_name: str | None, target: Any) -> str:
    """``"cpu"`` or ``"cuda"``: where `target` runs the program, once `build.check_runnable` has found
    nothing that stops it there (its `MeasureFailure` otherwise); nothing is built."""
    func_name, one = build.single_function_module(build.module_from_text(module_text), func_name)
    tgt = build.resolve_target(target)
    build.check_runnable(one, func_name, tgt)
    return "cuda" if tgt.kind.name == "cuda" else "cpu"


def unique_names(names: list[str]) -> list[str]:
    """The parameters' names, made distinct (a second ``A`` becomes ``A_1``): the keys of one ``.npz``."""
    out: list[str] = []
    for name in names:
        new, k = name or "arg", 1
        while new in out:
            new, k = f"{name}_{k}", k + 1
        out.append(new)
    return out


def stage_speed_probe(folder: str, threads: int, name: str = "speed_probe.so") -> SpeedProbe:
    """The parallel-speed probe for this CPU, exported into the folder (built once per process)."""
    from mlc_lab.tvm.measure.probe import speed_probe_library

    facts = speed_probe_library(threads, os.path.join(folder, name))
    return SpeedProbe(artifact=name, threads=facts["threads"], width=facts["width"])


def write_manifest(folder: str, device: str, method: RunMethod, candidates: list[RunCandidate]) -> RunManifest:
    """Write ``FOLDER/manifest.json``; the manifest, as the measuring side will read it back."""
    manifest = RunManifest(version=RUN_FORMAT, device=device, method=method, candidates=candidates)
    text = json.dumps(manifest.to_json())
    RunManifest.from_json(json.loads(text))  # what this side writes, the other side reads
    with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as fh:
        fh.write(text)
    return manifest


def errors(got: list[np.ndarray], expected: list[np.ndarray]) -> tuple[float, float, bool]:
    """(max absolute error, relative to the largest expected value, correct): `build`'s one rule."""
    return build.output_errors(got, expected)
