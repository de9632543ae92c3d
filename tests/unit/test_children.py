"""Every child process of mlc_lab starts through one launcher (`mlc_lab.core.worker`), and every worker
operation is declared once (`mlc_lab.model.worker_ops.WORKER_OPS`) and answered once (`worker_main.REQUESTS`)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import json
import subprocess
import sys
import time
import typing
from pathlib import Path

import psutil
import pytest

from mlc_lab.core import sandbox
from mlc_lab.core.worker import child_env, decode_result, failure, launch, sandboxed, stop
from mlc_lab.core.worker_main import CHILDREN, REQUESTS
from mlc_lab.model.conform import problems
from mlc_lab.model.worker_ops import WORKER, WORKER_OPS

PACKAGE = Path(__file__).resolve().parents[2] / "mlc_lab"

# Who may start a process, and why.
POPEN_ALLOWED = {
    "core/worker.py": "the launcher",
    "core/sandbox.py": "starts the sandbox's init with the pipes and fds it hands on (the sandboxed mode)",
    # TVM's PopenWorker protocol, reproduced so that meta_schedule's pool adopts the process; it runs in
    # the tuning job, under mlc_lab.tvm, which may not import core; the job's kill_tree stops it with the job
    "tvm/tuning/runner_process.py": "TVM's own runner process, started early for meta_schedule to adopt",
    # a batch round's transport (`COMMAND FOLDER`), run by the tuning job or the worker in a session of its
    # own so that its whole tree stops at the round's time limit; the job's kill_tree stops it with the job
    "tvm/measure/batch.py": "the batch runner's command, which measures a round of candidates elsewhere",
}
RUN_ALLOWED = {
    # a one-shot tool or a crash-prone engine run from inside the worker (in its process group, so that
    # the worker's time-out and kill_tree stop it too); mlc_lab.tvm may not import core's launcher
    "tvm/measure/opencl_run.py": "the OpenCL engine, started by the worker so that its crash is a verdict",
    "tvm/lowering.py": "ptxas, for register and spill counts",
    "tvm/tuning/build.py": "ld, linking a candidate faster than TVM's own link",
    "tvm/measure/batch.py": "Slurm's sbatch, scontrol and scancel: a round's job submitted, followed, cancelled",
}
FORK_ALLOWED = {"core/_sandbox_init.py": "the sandbox's init, inside its namespaces"}


def _calls(tree: ast.AST, module: str, names: set[str]) -> list[int]:
    """Lines calling ``module.X`` for X in `names`, or X imported bare from `module`."""
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == module
        for alias in node.names
        if alias.name in names
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr in names
                and isinstance(f.value, ast.Name)
                and f.value.id == module
            ):
                lines.append(node.lineno)
            elif isinstance(f, ast.Name) and f.id in bare:
                lines.append(node.lineno)
    return lines


# Operations whose child is not worker_main, and why.
OWN_ENTRIES = {
    # run by a batch round's command on a node that may hold TVM's runtime alone (model/measure.py's contract)
    "mlc_lab.tvm.measure.runside": "the measuring side's program, a command of its own on another machine",
}
# Other modules run by path (``python -m``), and why: none is the child of a grading operation.
MAIN_ALLOWED = {
    "mlc_lab.cli": "the command line, mlc-lab",
    "mlc_lab.core.model_ts": "a build tool: writes js/lib/model.ts",
    "mlc_lab.core.server_sandbox": "the measuring server a lab admin runs",
    "mlc_lab.tvm.measure.server": "says that the server is core.server_sandbox, and runs nothing",
    "mlc_lab.core._sandbox_init": "the sandbox's init, run by its path inside the namespaces before any import",
    "mlc_lab.tvm.measure.opencl_run": "the OpenCL engine, run by the worker (mlc_lab.tvm may not import core)",
}
# Who may send a signal to a process, and why: every stop goes through mlc_lab.core.processes (kill_tree).
KILL_ALLOWED = {
    "core/processes.py": "kill_tree and kill_now: the one way to stop a child",
    # mlc_lab.tvm may not import core; the round's command runs in a session of its own, its group killed
    "tvm/measure/batch.py": "a batch round's command stopped with its group at the round's time limit",
    "_cli/classroom.py": "TVM's RPC server stopped by TVM's own Server.terminate",
    "_cli/database.py": "TVM's RPC server stopped by TVM's own Server.terminate",
}
SIGNALLING = {"kill", "killpg", "pthread_kill", "raise_signal"}  # os.X / signal.X, or imported bare
SIGNAL_METHODS = {"kill", "terminate", "send_signal"}  # psutil.Process's and Popen's: x.kill()


def _kills(tree: ast.AST) -> list[int]:
    """Lines sending a signal: ``os.kill``/``os.killpg``/``signal.pthread_kill`` (or imported bare), and
    ``x.kill()``, ``x.terminate()``, ``x.send_signal(...)`` on any object (a psutil process, a Popen)."""
    nodes = list(ast.walk(tree))
    bare = {
        alias.asname or alias.name
        for node in nodes
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "signal")
        for alias in node.names
        if alias.name in SIGNALLING
    }
    lines = set()
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in bare:
            lines.add(node.lineno)
        elif isinstance(f, ast.Attribute):
            module = f.value.id if isinstance(f.value, ast.Name) and f.value.id in ("os", "signal") else None
            if (module and f.attr in SIGNALLING) or (not module and f.attr in SIGNAL_METHODS):
                lines.add(node.lineno)
    return sorted(lines)


def _stray_kills(sources: dict[str, ast.AST]) -> dict[str, list[int]]:
    return {rel: lines for rel, lines in _all_kills(sources).items() if rel not in KILL_ALLOWED}


def _all_kills(sources: dict[str, ast.AST]) -> dict[str, list[int]]:
    return {rel: lines for rel, tree in sources.items() if (lines := _kills(tree))}


@functools.cache
def _sources() -> dict[str, ast.AST]:
    return {str(p.relative_to(PACKAGE)): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize(
    ("module", "names", "allowed"),
    [
        ("subprocess", {"Popen"}, POPEN_ALLOWED),
        ("subprocess", {"run", "call", "check_call", "check_output", "getoutput"}, RUN_ALLOWED),
        ("os", {"fork", "forkpty", "spawnv", "spawnl", "posix_spawn", "system", "popen"}, FORK_ALLOWED),
        ("multiprocessing", {"Process", "Pool", "get_context"}, {}),
    ],
)
def test_only_the_launcher_starts_children(module, names, allowed):
    found = {rel: lines for rel, tree in _sources().items() if (lines := _calls(tree, module, names))}
    stray = {rel: lines for rel, lines in found.items() if rel not in allowed}
    assert not stray, f"start children through mlc_lab.core.worker.launch, not here: {stray}"
    assert set(found) == set(allowed), (
        f"allowed but no longer starting a child (drop them): {set(allowed) - set(found)}"
    )


def test_only_kill_tree_stops_children():
    found = _all_kills(_sources())
    stray = {rel: lines for rel, lines in found.items() if rel not in KILL_ALLOWED}
    assert not stray, f"stop children through mlc_lab.core.processes.kill_tree, not here: {stray}"
    still = set(found)
    assert set(KILL_ALLOWED) <= still, (
        f"allowed but no longer sending a signal (drop them): {set(KILL_ALLOWED) - still}"
    )


PLANTED_KILLS = {
    "os.kill(pid, signal.SIGKILL)": True,
    "os.killpg(pgid, 9)": True,
    "from os import killpg as k\nk(pgid, 9)": True,
    "psutil.Process(pid).kill()": True,
    "proc.terminate()": True,
    "p.send_signal(signal.SIGTERM)": True,
    "signal.pthread_kill(t, signal.SIGUSR1)": True,
    "signal.signal(signal.SIGTERM, handler)": False,  # a handler, not a signal sent
    "os.getpgid(pid); proc.wait(); kill_tree(proc)": False,
}


@pytest.mark.parametrize(("code", "kills"), PLANTED_KILLS.items())
def test_a_planted_kill_outside_processes_fails_the_check(code, kills):
    planted = {  # the check as it runs on the package, here on the planted file and the one place that may
        "core/processes.py": _sources()["core/processes.py"],
        "classroom/planted.py": ast.parse("import os, signal, psutil\n" + code),
    }
    assert ("classroom/planted.py" in _stray_kills(planted)) == kills
    assert "core/processes.py" not in _stray_kills(planted)  # the one place may


def test_every_worker_operation_has_a_handler_and_back():
    served = {op for op, spec in WORKER_OPS.items() if spec.entry == WORKER}
    assert served == set(REQUESTS) | set(CHILDREN)
    assert not set(REQUESTS) & set(CHILDREN), "an operation is a request to the worker or a child, not both"
    for where in CHILDREN.values():  # each child's function is there
        module, _, name = where.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), where


@pytest.mark.parametrize("op", sorted(WORKER_OPS))
def test_every_child_runs_the_one_entry(op):
    """No module but worker_main is a child's entry (no ``__main__`` block of its own), save those whose
    program must run where mlc_lab's core may not (the measuring side's: a batch node, an RPC session)."""
    assert WORKER_OPS[op].entry in (WORKER, *OWN_ENTRIES), f"{op}: its child should be worker_main --child {op}"


def test_the_entry_says_plainly_which_child_it_does_not_know(capsys):
    from mlc_lab.core.worker_main import main

    assert main(["--child", "grade_everything"]) == 2
    assert "no operation 'grade_everything' has a child (known: grade_batch, grade_class" in capsys.readouterr().err
    assert main(["--child", "grade_batch", "stray"]) == 2  # the judge's own check, before it reads stdin
    assert "the judging child takes no arguments" in capsys.readouterr().err


def test_only_the_entries_have_a_main_block():
    mains = {
        rel
        for rel, tree in _sources().items()
        for node in getattr(tree, "body", [])
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)
    }
    entries = {WORKER, *OWN_ENTRIES, *MAIN_ALLOWED}
    assert {rel[:-3].replace("/", ".") for rel in mains} <= {e.removeprefix("mlc_lab.") for e in entries}, mains


@pytest.mark.parametrize("op", sorted(WORKER_OPS))
def test_each_operation_is_complete(op):
    spec = WORKER_OPS[op]
    assert typing.is_typeddict(spec.params)
    assert spec.timeout_s >= 0
    assert importlib.util.find_spec(spec.entry) is not None, f"{op}: no module {spec.entry}"
    if spec.mode == "sandboxed":
        assert spec.limits is not None and sandbox.Limits(**spec.limits)  # the same fields, each valid
    else:
        assert spec.limits is None


def test_sandboxed_refuses_an_operation_without_limits():
    with pytest.raises(ValueError, match="does not run sandboxed"):
        sandboxed("measure", [sys.executable, "-c", "pass"], inputs={}, env={}, unsafe_same_user=True)


def test_sandboxed_runs_under_the_tables_limits_changed_by_the_caller():
    out = sandboxed(
        "handin",
        [sys.executable, "-c", "while True: pass"],
        inputs={},
        env={},
        unsafe_same_user=True,
        wall_s=1.0,
        cpu_s=1.0,
    )
    assert out.status in ("timeout", "cpu")
    assert out.seconds < 30


def test_stop_kills_the_whole_tree_and_closes_the_pipes():
    grandchild = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
    )
    proc = launch([sys.executable, "-c", grandchild + " print('up', flush=True); time.sleep(600)"], "persistent")
    assert proc.stdout.readline().strip() == b"up"
    tree = [proc.pid, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))]
    assert len(tree) == 2
    stop(proc, wait_s=10)
    assert proc.returncode is not None and proc.stdin.closed and proc.stdout.closed
    time.sleep(0.1)
    for pid in tree:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_detached_child_has_its_own_session_and_the_env_mark(tmp_path):
    log = tmp_path / "log"
    code = "import os, sys; print(os.getsid(0) == os.getpid(), os.environ['MARK_X'], file=sys.stderr)"
    with open(log, "wb") as fh:
        proc = launch(
            [sys.executable, "-c", code], "detached", stdout=fh, stderr=subprocess.STDOUT, env={"MARK_X": "7"}
        )
    assert proc.wait(timeout=60) == 0
    assert log.read_text().split() == ["True", "7"]
    assert proc.stdin is None


def test_child_env_puts_this_package_first():
    assert child_env()["PYTHONPATH"].split(":")[0] == str(PACKAGE.parent)


def test_a_failure_crosses_as_error_info_and_back():
    from mlc_lab.core.worker_main import _failure
    from mlc_lab.errors import MeasureError, NoGPUError
    from mlc_lab.model.conform import problems
    from mlc_lab.model.errors import ErrorInfo
    from mlc_lab.model.wire import RequestFailure

    for exc, kind in (
        (RequestFailure("no_gpu", "no CUDA GPU here", "nvidia-smi: none"), "no_gpu"),
        (KeyError("x"), "internal"),
    ):
        info = _failure(7, exc)["error"]
        assert problems(info, ErrorInfo) == []
        err = failure(info, "cuda")
        assert err.kind == kind and str(err).startswith(info["summary"][:10])
        assert isinstance(err, NoGPUError) == (kind == "no_gpu")
    assert failure({"summary": "bad", "type": "build", "detail": "d"}, "measure").detail == "d"
    junk = failure("not an ErrorInfo", "measure")
    assert isinstance(junk, MeasureError) and junk.kind == "protocol"


def test_results_are_decoded_once_into_the_tables_type(monkeypatch):
    from mlc_lab.errors import MeasureError
    from mlc_lab.model import conform
    from mlc_lab.model.measure import Measurement

    m = Measurement(target="llvm", latency_s=0.5, func_name="main")
    assert decode_result("measure", m.to_json()) == m
    found: list[str] = []
    monkeypatch.setattr(conform, "wire_violations", found)
    # a key the type does not declare departs from the wire (Measurement's reading drops it)
    assert decode_result("measure", {**m.to_json(), "number": 3}) == m
    assert found == ["measure result.number: Measurement declares no key 'number'"]
    found.clear()
    # an answer that is not of its type: a protocol error, and on the strict wire a violation too
    with pytest.raises(MeasureError) as info:
        decode_result("env", {"tvm": "0.27", "threads": None, "cpu_target": "llvm", "gpu": "no", "nvcc": None})
    assert info.value.kind == "protocol" and "env result.gpu: 'no' is not a boolean" in str(info.value)
    assert found and all(text.startswith("env result.gpu") for text in found)


# One answer per operation whose result is not raw data, as its handler writes it (its type's to_json).
def _answers() -> dict:
    from mlc_lab.model.grading import GradeResult, HandinResult, NumericComparison, RunResult, TaskResult
    from mlc_lab.model.lowering import CudaBuild, LowerResult, PassStep
    from mlc_lab.model.machine import Machine
    from mlc_lab.model.measure import CandidateResult, Measurement, RunResults

    here = Machine("Test CPU", 2, 2, "avx2", 8, 100.0, 10.0)
    return {
        "env": {"tvm": "0.27.0", "threads": "2", "cpu_target": "llvm -mcpu=znver4", "gpu": False, "nvcc": None},
        "measure": Measurement(target="llvm", latency_s=0.5, func_name="main").to_json(),
        "measure_elsewhere": Measurement(target="llvm", latency_s=0.5, where="10.0.0.7:9090").to_json(),
        "machine": here.to_json(),
        "cuda": CudaBuild("", "", [], problems=["the loop i is not bound"]).to_json(),
        "lower": LowerResult("llvm", "cpu", "main", [PassStep(0, "tirx.BindTarget", "bind", "changed")]).to_json(),
        "run_function": RunResult(ok=True, outputs=[]).to_json(),
        "run_opencl": RunResult(ok=True, engine="pocl", diagnostics=["a race on C"]).to_json(),
        "numeric_gpu": NumericComparison(
            wrong=1,
            total=16,
            max_error=2.0,
            worst={"buffer": "C", "index": [0, 1], "got": 3.0, "expected": 1.0},
            outputs=["C"],
            shape={"A": [4, 4], "C": [4, 4]},
            guard_writes={},
            engine="pocl",
            diagnostics=[],
            nan_read=False,
            launches=[{"kernel": "main_kernel", "grid": [1, 1, 1], "block": [4, 4, 1]}],
            out_of_bounds=[],
            seconds={"build": 0.1, "total": 0.3},
        ).to_json(),
        "handin": HandinResult(error="raised", line=3, message="schedule() raised KeyError: 'k'").to_json(),
        "grade_batch": GradeResult(
            "alice/lab.py", "trace", [TaskResult("tiling", "Tile the loops", 2.0, 2.0, True, ["ok"], "1.1")]
        ).to_json(),
        "grade_class": [
            {
                **GradeResult("s1.py", "trace", [TaskResult("tiling", "Tile the loops", 2.0, 2.0, True)]).to_json(),
                "latency_ms": 0.8,
                "correct": True,
                "timing": {"where": "the class server (in its sandbox)", "method": "median of 10", "quiet": True},
            },
            {"error": "the grader failed", "status": "grader error", "error_info": {"summary": "the grader failed"}},
            {
                "timings": [
                    {
                        "latency_ms": 0.7,
                        "timing": {"spread_ms": 0.01, "load": 0.2, "quiet": True, "retimed": {"rounds": 3}},
                    },
                    {"error": "it could not be timed again"},
                ]
            },
        ],
        "tune": 0,
        "rpc_session": None,  # it serves its client over the socket it is handed, and answers no caller
        "run_kernel": RunResults(1, "cpu", "m", [CandidateResult("k", True)]).to_json(),
    }


ANSWERS = _answers()


@pytest.mark.parametrize("op", sorted(WORKER_OPS))
def test_every_operation_names_its_result_type_and_decodes_what_its_handler_writes(op):
    declared = WORKER_OPS[op].result
    assert declared not in (dict, list, typing.Any), f"{op}: its result is untyped data, not a type of mlc_lab.model"
    for member in typing.get_args(declared) or (declared,):  # one type, or the answers of a child's jobs
        assert member in (int, None) or member.__module__.startswith("mlc_lab.model."), (
            f"{op}: {member} is no model type"
        )
    assert op in ANSWERS, f"{op}: give an answer as its handler writes it"
    for raw in ANSWERS[op] if isinstance(ANSWERS[op], list) else [ANSWERS[op]]:
        assert problems(raw, declared, f"{op} result") == []
        decoded = decode_result(op, raw)
        if dataclasses.is_dataclass(declared):
            assert isinstance(decoded, declared)
            assert decode_result(op, json.loads(json.dumps(decoded.to_json()))) == decoded  # its encoding reads back
        else:
            assert decoded == raw


def _handlers_answers(tmp_path) -> dict:
    """What the cheap handlers write, called here as the worker calls them (``_plain`` of their result)."""
    import numpy as np

    import mlc_lab
    from mlc_lab.core.worker_main import _plain, handler
    from mlc_lab.tvm import exercises as tvm_exercises
    from mlc_lab.tvm.measure.build import module_to_text
    from tests.fixtures.programs import GPU_TWO_BLOCKS, MM_RELU

    gpu = module_to_text(mlc_lab.load(GPU_TWO_BLOCKS))
    add = mlc_lab.load(
        "from tvm.script import tirx as T\n"
        "@T.prim_func(s_tir=True)\n"
        "def main(A: T.Buffer((4,), 'float32'), B: T.Buffer((4,), 'float32')):\n"
        "    for i in range(4):\n"
        "        with T.sblock('B'):\n"
        "            vi = T.axis.spatial(4, i)\n"
        "            B[vi] = A[vi] + T.float32(1)\n"
    )
    requests = {
        "env": {},
        "cuda": {"module": gpu, "func_name": None, "ptx": False},
        "lower": {"script": mlc_lab.Session(MM_RELU).script, "func_name": None, "target": "cpu", "ptx": False},
        "run_function": {
            "module": tvm_exercises.module_json(add),
            "func_name": "main",
            "inputs": [np.arange(4, dtype="float32"), np.zeros(4, "float32")],
        },
    }
    out = {op: _plain(handler(op)(req)) for op, req in requests.items()}
    # the sandboxed hand-in child, run here on a file that defines no scheduling function
    from mlc_lab.tvm import grading as tvm_grading

    handin, result = tmp_path / "handin.py", tmp_path / "result.json"
    handin.write_text("x = 1\n")
    assert tvm_grading.handin_child([str(tmp_path / "program.py"), str(handin), str(result)]) == 0
    out["handin"] = json.loads(result.read_text())
    return out


def test_the_handlers_write_their_tables_type(tmp_path):
    answers = _handlers_answers(tmp_path)
    for op, raw in answers.items():
        assert problems(raw, WORKER_OPS[op].result, f"{op} result") == [], op
        decoded = decode_result(op, raw)
        assert isinstance(decoded, WORKER_OPS[op].result), op
    assert answers["env"]["tvm"] and answers["cuda"]["source"].count("__global__") == 2
    assert answers["lower"]["ok"] and answers["lower"]["passes"] and answers["lower"]["asm"]
    assert list(answers["run_function"]["outputs"][1]) == [1.0, 2.0, 3.0, 4.0]
    assert answers["handin"]["error"] == "no_function"


def test_the_class_servers_child_still_dies_with_the_server_and_carries_its_mark():
    tree = _sources()["classroom/graders.py"]  # the class server's grading children start there, only there
    starting = [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for node in ast.walk(fn)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "launch"
    ]
    assert len(starting) == 1
    (call,) = [n for n in ast.walk(starting[0]) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "launch"]
    kw = {k.arg: ast.unparse(k.value) for k in call.keywords}
    assert kw["preexec_fn"] == "reaper.die_with(os.getpid())"
    assert "reaper.MARK" in ast.unparse(starting[0]) and kw["env"] == "env"
    assert not any(
        isinstance(n, ast.Call) and getattr(n.func, "id", "") == "launch"
        for n in ast.walk(_sources()["classroom/server.py"])
    )


@pytest.mark.parametrize(
    ("module", "function", "param", "op"),
    [
        ("mlc_lab.core.lowering", "lower", "timeout", "lower"),
        ("mlc_lab.core.machine", "machine", "timeout", "machine"),
        ("mlc_lab.core.measure", "measure", "timeout", "measure"),
        ("mlc_lab.core.measure", "cuda_source", "timeout", "cuda"),
        ("mlc_lab.core.checks.numeric_gpu", "numeric_check", "timeout_s", "numeric_gpu"),
        ("mlc_lab.core.checks.numeric_gpu", "run_gpu_function", "timeout_s", "run_opencl"),
        ("mlc_lab.exercises", "run_function", "timeout", "run_function"),
    ],
)
def test_callers_wait_as_long_as_the_table_says(module, function, param, op):
    import importlib
    import inspect

    default = inspect.signature(getattr(importlib.import_module(module), function)).parameters[param].default
    assert default == WORKER_OPS[op].timeout_s
