"""The TVM side of the exercise graders (``mlc_lab.exercises``).

Two jobs: run one function of a student's module on given numpy inputs, and test two functions for
TVM's structural equality. Running generated code happens in a child process
(``python -m mlc_lab.tvm.exercises_tvm DIR``) so that an out-of-bounds store in a student's program
costs that child, never the Jupyter kernel. Files travel through DIR: ``module.json`` (tvm.ir.save_json),
``request.json`` and ``inputs.npz`` in; ``result.json`` and ``outputs.npz`` back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

from mlc_lab._threads import ensure_tvm_threads

ensure_tvm_threads()

import tvm  # noqa: E402
import tvm.s_tir  # noqa: E402,F401  (registers s_tir node types)

RUN_TIMEOUT_S = 60.0


def _module_of(obj: Any) -> Any:
    """An IRModule from a Schedule, a PrimFunc or an IRModule."""
    if isinstance(obj, tvm.IRModule):
        return obj
    if isinstance(obj, tvm.tirx.PrimFunc):
        return tvm.IRModule({"main": obj})
    mod = getattr(obj, "mod", None)  # an s_tir.Schedule
    if isinstance(mod, tvm.IRModule):
        return mod
    raise TypeError(f"not a TVM module: {type(obj).__name__}")


def is_tvm_object(obj: Any) -> bool:
    return isinstance(obj, (tvm.IRModule, tvm.tirx.PrimFunc)) or isinstance(getattr(obj, "mod", None), tvm.IRModule)


def to_module(obj: Any) -> Any:
    return _module_of(obj)


def prim_func_names(mod: Any) -> list[str]:
    return [gv.name_hint for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]


def signature(mod: Any, func_name: str) -> list[dict]:
    """[{name, shape, dtype}] of the buffer parameters of ``func_name``."""
    from mlc_lab.tvm.build import param_specs

    try:
        specs = param_specs(mod, func_name)
    except Exception:  # noqa: BLE001 - symbolic shapes: report the parameter count only
        return [{"name": p.name, "shape": None, "dtype": "?"} for p in mod[func_name].params]
    return [{"name": name, "shape": list(shape), "dtype": dtype} for name, shape, dtype in specs]


def functions_equal(a: Any, b: Any, func_a: str, func_b: str) -> bool:
    """TVM's structural equality of two PrimFuncs, function attributes aside (loop names never count)."""
    fa = _module_of(a)[func_a]
    fb = _module_of(b)[func_b]
    fa = fa.with_attr("global_symbol", "f").without_attr("tirx.noalias").without_attr("tir.noalias")
    fb = fb.with_attr("global_symbol", "f").without_attr("tirx.noalias").without_attr("tir.noalias")
    from mlc_lab.tvm.program import structural_equal

    return structural_equal(fa, fb)


def run_function(module: Any, func_name: str, inputs: list[np.ndarray], timeout: float = RUN_TIMEOUT_S) -> dict:
    """Build ``func_name`` for the native CPU and call it on ``inputs`` (one array per parameter), in a
    child process. Returns {"ok": True, "outputs": [arrays after the call]} or
    {"ok": False, "stage": "build"|"run"|"crash"|"timeout", "error": one line, "detail": text}."""
    mod = _module_of(module)
    with tempfile.TemporaryDirectory(prefix="mlc_lab_ex_") as tmp:
        with open(os.path.join(tmp, "module.json"), "w") as fh:
            fh.write(tvm.ir.save_json(mod))
        with open(os.path.join(tmp, "request.json"), "w") as fh:
            json.dump({"func_name": func_name, "n": len(inputs)}, fh)
        np.savez(os.path.join(tmp, "inputs.npz"), *[np.ascontiguousarray(a) for a in inputs])
        env = dict(os.environ)
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "mlc_lab.tvm.exercises_tvm", tmp],
                capture_output=True, text=True, timeout=timeout, env=env, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return {"ok": False, "stage": "timeout",
                    "error": f"the program ran for more than {timeout:g} s and was stopped (an endless loop?)", "detail": ""}
        result_path = os.path.join(tmp, "result.json")
        if not os.path.exists(result_path):
            sig = -proc.returncode if proc.returncode and proc.returncode < 0 else None
            what = f"signal {sig}" if sig else f"exit status {proc.returncode}"
            return {"ok": False, "stage": "crash",
                    "error": f"the program crashed while running ({what}); an index outside a buffer?",
                    "detail": proc.stderr[-2000:]}
        with open(result_path) as fh:
            result = json.load(fh)
        if result.get("ok"):
            with np.load(os.path.join(tmp, "outputs.npz")) as data:
                result["outputs"] = [data[f"arr_{i}"] for i in range(len(inputs))]
        return result


def _child(tmp: str) -> int:
    with open(os.path.join(tmp, "request.json")) as fh:
        req = json.load(fh)
    with open(os.path.join(tmp, "module.json")) as fh:
        mod = tvm.ir.load_json(fh.read())
    with np.load(os.path.join(tmp, "inputs.npz")) as data:
        arrays = [data[f"arr_{i}"] for i in range(int(req["n"]))]

    def answer(obj: dict) -> int:
        with open(os.path.join(tmp, "result.json"), "w") as fh:
            json.dump(obj, fh)
        return 0

    func_name = req["func_name"]
    try:
        ex = tvm.compile(tvm.IRModule({func_name: mod[func_name]}), target=tvm.target.Target.from_device(tvm.cpu()))
    except Exception as exc:  # noqa: BLE001 - reported to the student
        text = str(exc).strip()
        return answer({"ok": False, "stage": "build", "error": "the program does not build: " + _first(text),
                       "detail": text[-3000:]})
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a, dev) for a in arrays]
    try:
        ex.mod.get_function(func_name)(*tensors)
    except Exception as exc:  # noqa: BLE001
        text = str(exc).strip()
        return answer({"ok": False, "stage": "run", "error": "the program failed while running: " + _first(text),
                       "detail": text[-3000:]})
    np.savez(os.path.join(tmp, "outputs.npz"), *[t.numpy() for t in tensors])
    return answer({"ok": True})


def _first(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "unknown error"


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
