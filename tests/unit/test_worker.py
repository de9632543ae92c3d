"""The one worker mechanism: request table, arrays on the wire, failures as MeasureError, and the
psutil-based control of detached jobs."""

from __future__ import annotations

import importlib
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
