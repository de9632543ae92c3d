"""The TVM side of the exercise graders (``mlc_lab.exercises``).

Two jobs: run one function of a student's module on given numpy inputs, and test two functions for
TVM's structural equality. Running generated code happens in the worker process
(request "run_function", sent by ``mlc_lab.exercises.run_function``) so that an out-of-bounds store in a student's
program costs the worker, never the Jupyter kernel.
"""

from __future__ import annotations

from typing import Any


from mlc_lab._threads import ensure_tvm_threads
from mlc_lab.model.grading import RunResult

ensure_tvm_threads()

import tvm  # noqa: E402
import tvm.s_tir  # noqa: E402,F401  (registers s_tir node types)


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
    from mlc_lab.tvm.measure.build import param_specs

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


def module_json(module: Any) -> str:
    """``tvm.ir.save_json`` of the IRModule behind ``module`` (a Schedule, a PrimFunc or an IRModule):
    how a program travels to the worker."""
    return tvm.ir.save_json(_module_of(module))


def run_function_request(req: dict) -> RunResult:
    """Worker side of `run_function`: build, call once, answer every argument after the call."""
    from mlc_lab.model.wire import RequestFailure

    func_name = req["func_name"]
    mod = tvm.ir.load_json(req["module"])
    try:
        ex = tvm.compile(tvm.IRModule({func_name: mod[func_name]}), target=tvm.target.Target.from_device(tvm.cpu()))
    except Exception as exc:  # noqa: BLE001 - reported to the student
        text = str(exc).strip()
        raise RequestFailure("build", "the program does not build: " + _first(text), text[-3000:]) from None
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a, dev) for a in req["inputs"]]
    try:
        ex.mod.get_function(func_name)(*tensors)
    except Exception as exc:  # noqa: BLE001
        text = str(exc).strip()
        raise RequestFailure("run", "the program failed while running: " + _first(text), text[-3000:]) from None
    return RunResult(ok=True, outputs=[t.numpy() for t in tensors])


def _first(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "unknown error"
