"""Which machine to compile for: the native CPU, CUDA (this GPU's architecture when there is one).

Its own module (not part of `build`) because `machine` needs the native target while `build`
imports `timing`, which runs the machine's speed probe: one-way imports, no circle.
"""

from __future__ import annotations

from typing import Any

from mlc_lab._threads import ensure_tvm_threads

ensure_tvm_threads()

import tvm  # noqa: E402

DEFAULT_CUDA_ARCH = "sm_90"


def cpu_target() -> Any:
    """The native CPU target (`mcpu` of this machine); plain "llvm" is generic x86-64 and much slower."""
    return tvm.target.Target.from_device(tvm.cpu())


def gpu_present() -> bool:
    try:
        return bool(tvm.cuda(0).exist)
    except Exception:  # noqa: BLE001 - a runtime without CUDA support at all
        return False


def resolve_target(spec: Any) -> Any:
    """ "cpu"/"llvm" -> native CPU; "cuda"/"gpu" -> CUDA (this GPU's arch if present); a dict or a
    TVM target string/tag otherwise. CUDA targets get the native CPU as host."""
    if isinstance(spec, tvm.target.Target):
        target = spec
    elif spec is None or spec in ("cpu", "llvm", "native"):
        return cpu_target()
    elif spec in ("cuda", "gpu"):
        if gpu_present():
            target = tvm.target.Target.from_device(tvm.cuda(0))
        else:
            target = tvm.target.Target({"kind": "cuda", "arch": DEFAULT_CUDA_ARCH})
    elif isinstance(spec, dict):
        spec = dict(spec)
        if spec.get("kind") == "llvm" and "mcpu" not in spec and "mtriple" not in spec:
            native = dict(cpu_target().attrs)
            for key in ("mtriple", "mcpu"):
                if key in native:
                    spec[key] = str(native[key])
        target = tvm.target.Target(spec)
    else:
        target = tvm.target.Target(spec)
    if target.kind.name == "cuda" and target.host is None:
        target = tvm.target.Target(target, host=cpu_target())
    return target


def target_to_json(target: Any) -> dict:
    """A JSON-safe dict of a target (host included), as meta_schedule accepts."""
    target = resolve_target(target)
    out = _plain(dict(target.export()))
    return out


def _plain(obj: Any) -> Any:
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, tvm.tirx.IntImm):
        return int(obj.value)
    if isinstance(obj, tvm.tirx.FloatImm):
        return float(obj.value)
    if hasattr(obj, "items"):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__iter__"):
        return [_plain(v) for v in obj]
    return str(obj)
