"""The one worker mechanism: request table, arrays on the wire, failures as MeasureError, and the
psutil-based control of detached jobs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from mlc_lab.core.worker import ENTRY, job_running, stop_group, worker
from mlc_lab.errors import MeasureError
from mlc_lab.model.wire import decode, encode
from mlc_lab.core.worker_main import REQUESTS


def test_every_request_type_names_a_function():
    for op, where in REQUESTS.items():
        module, _, name = where.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), op


def test_arrays_cross_the_wire_unchanged():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.array([1, -2], dtype=np.int64)
    back = decode(encode({"x": [a, {"y": b}], "n": np.int32(3)}))
    assert back["n"] == 3
    np.testing.assert_array_equal(back["x"][0], a)
    assert back["x"][0].dtype == np.float32 and back["x"][0].shape == (3, 4)
    np.testing.assert_array_equal(back["x"][1]["y"], b)


def test_an_unknown_request_is_a_plain_error_and_the_worker_lives_on():
    with pytest.raises(MeasureError) as info:
        worker().call("no_such_request")
    assert info.value.kind == "protocol" and "no_such_request" in str(info.value)
    pid = worker().pid
    assert worker().call("env").threads and worker().pid == pid


def test_a_detached_job_is_recognised_and_stopped_with_its_group():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", ENTRY, "tune"], start_new_session=True
    )
    threading.Thread(target=proc.wait, daemon=True).start()
    assert job_running(proc.pid, "tune")
    assert not job_running(proc.pid, "other")
    stop_group(proc.pid, grace_s=2.0, popen=proc)
    assert proc.poll() is not None and not job_running(proc.pid, "tune")


def test_an_idle_worker_stops_spinning_right_after_a_measurement():
    # TVM's pool threads yield-spin after every parallel kernel (300,000 times by default: up to a
    # second of a core when another process wants it, e.g. numpy timed right after a measure).
    # The worker's environment bounds that spin; its CPU time while idle must stay near zero.
    import time

    import psutil

    import mlc_lab
    from mlc_lab.core.measure import measure
    from tests.fixtures.programs import matmul

    s = mlc_lab.Session(matmul(128))
    s.apply("parallel", "C/i")
    w = worker()
    assert w.call("env").threads is not None
    measure(s.module, s.original, s.func_name, repeats=3)
    proc = psutil.Process(w.pid)
    assert proc.environ()["TVM_THREAD_POOL_SPIN_COUNT"] == "10000"
    before = sum(proc.cpu_times()[:2])
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1: pass"])
    time.sleep(1.0)  # a competitor for the cores, as numpy's threads would be
    busy.wait()
    idle_cpu = sum(proc.cpu_times()[:2]) - before
    assert idle_cpu < 0.1, idle_cpu


# A request that keeps the worker busy for a minute: an unscheduled 512^3 matmul timed 200 times
# (0.3 s a run here). The tests below stop it after a second or two.
_LONG_MEASURE = (
    "import mlc_lab\n"
    "from mlc_lab.core.measure import _module_text\n"
    "from tests.fixtures.programs import matmul\n"
    "LONG = dict(module=_module_text(mlc_lab.Session(matmul(512)).module), reference=None, func_name=None,\n"
    "            target='cpu', repeats=200, cache='warm', min_repeat_ms=20.0, seed=0)\n"
)


@pytest.fixture(scope="module")
def long_request() -> dict:
    """The long request's parameters (made once: the module's text needs TVM)."""
    namespace: dict = {}
    exec(_LONG_MEASURE, namespace)  # noqa: S102 - the constant above, a test's own code
    return namespace["LONG"]


def _gone(pid: int, within_s: float) -> bool:
    import time

    import psutil

    from mlc_lab.core.processes import alive

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if not alive(psutil.Process(pid)):
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_worker_dies_with_the_kernel_that_started_it_even_mid_measurement(long_request, tmp_path):
    # Before: the worker noticed its kernel was gone only when it next read stdin, so a kernel
    # restarted during a long measurement left it running (53% CPU, still going minutes later).
    import os
    import signal
    import time
    from pathlib import Path

    request = tmp_path / "request.json"
    request.write_text(json.dumps(long_request))
    kernel_code = (  # a kernel as far as the worker can tell: it imports no TVM itself
        "import json, sys\n"
        "from mlc_lab.core.worker import worker\n"
        "w = worker(); w.start(); print(w.pid, flush=True)\n"
        "w.call('measure', timeout=300, **json.loads(open(sys.argv[1]).read()))\n"
    )
    repo = str(Path(__file__).resolve().parents[2])
    kernel = subprocess.Popen(
        [sys.executable, "-c", kernel_code, str(request)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": repo},
        start_new_session=True,
    )
    try:
        worker_pid = int(kernel.stdout.readline())
        time.sleep(1.5)  # the request is in flight: the worker builds and runs the matmul
        import psutil

        assert psutil.Process(worker_pid).status() != psutil.STATUS_ZOMBIE
        os.kill(kernel.pid, signal.SIGKILL)  # what a kernel restart does to a busy kernel
        kernel.wait(10)
        assert _gone(worker_pid, within_s=3.0), "the worker outlived its kernel"
    finally:
        if kernel.poll() is None:
            os.killpg(kernel.pid, signal.SIGKILL)


def test_cancel_stops_the_request_in_flight_and_the_next_call_starts_a_fresh_worker(long_request):
    import time

    w = worker()
    w.start()
    first = w.pid
    outcome: dict = {}

    def run() -> None:
        try:
            w.call("measure", timeout=300, **long_request)
        except MeasureError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    while w._owner is None:  # noqa: SLF001 - until the request is in flight
        time.sleep(0.01)
    owner = w._owner  # noqa: SLF001
    assert not w.cancel(owner=owner + 1)  # another thread's cancel leaves it alone
    time.sleep(0.5)
    t0 = time.monotonic()
    assert w.cancel(owner=owner)
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - t0 < 6
    assert outcome["error"].kind == "cancelled" and "cancelled" in str(outcome["error"])
    assert _gone(first, within_s=2.0)
    assert not w.cancel()  # nothing in flight now
    assert w.call("env").threads and w.pid != first
