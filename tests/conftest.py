"""The whole suite runs on the strict wire: every reply, error kind and synced trait a widget sends, and
every answer of a worker or grading child, is checked against mlc_lab.model (mlc_lab.model.conform.STRICT_WIRE),
and a test after which anything departed fails, naming where."""

from __future__ import annotations

import os
import sys

import pytest

os.environ["MLC_LAB_STRICT_WIRE"] = "1"  # before mlc_lab.model is imported (and for kernels started here)

# TVMScript's decorators (T.prim_func, I.ir_module) call inspect.stack(), whose getmodule scans all of
# sys.modules for every frame: in this process (thousands of modules, pytest's deep stack) that was
# most of the time of the tests that load programs. This process takes mlc_lab's own stand-in, the
# one its tuning jobs and lowering worker install (the same frames, lines read lazily); the kernels,
# CLIs, workers and grading children the tests start keep TVM's own. test_tuning_build holds that the
# two parse every fixture program alike.
from mlc_lab.tvm.tuning.build import install_fast_stack  # noqa: E402

install_fast_stack()


@pytest.fixture(autouse=True)
def _strict_wire():
    base = sys.modules.get("mlc_lab.model.conform")
    if base is not None:
        base.wire_violations.clear()
    yield
    base = sys.modules.get("mlc_lab.model.conform")
    if base is not None and base.wire_violations:
        found, base.wire_violations[:] = list(base.wire_violations), []
        pytest.fail("the wire departs from mlc_lab.model:\n  " + "\n  ".join(found[:20]), pytrace=False)


@pytest.fixture
def kernels_only_in_the_sandbox(monkeypatch):
    """Fail the test if this process asks the persistent worker to run a kernel, or times one itself:
    for the tests of paths that run a hand-in's kernel, which must run it in the sandbox only (the
    code's paths are read by tests/unit/test_kernel_paths.py)."""
    import tvm.runtime.module

    from mlc_lab.core.worker import Worker
    from tests.unit.kernel_paths import WORKER_RUNS

    request = Worker.request

    def guarded(self, op, payload, timeout=None):
        assert op not in WORKER_RUNS, f"a hand-in's kernel was sent to the persistent worker ({op!r})"
        return request(self, op, payload, timeout)

    def timing_here(*_args, **_kwargs):
        raise AssertionError("a kernel was timed in the grader's own process")

    monkeypatch.setattr(Worker, "request", guarded)
    monkeypatch.setattr(tvm.runtime.module.Module, "time_evaluator", timing_here)
