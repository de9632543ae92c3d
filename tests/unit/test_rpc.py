"""Tuning through TVM's RPC tracker, as docs/measuring.md sets up a class: a tracker and two
servers on 127.0.0.1, each server pinned to its own core with one TVM thread, each process in its
own process group (killed at teardown), and a short tuning job measuring through both at once."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

import mlc_lab
from mlc_lab.core.tuning import tune
from tests.fixtures.programs import matmul
from tests.unit.processes import free_port, group_gone

KEY = "mlc-lab-test"


def start(args: list[str], log_path: str, core: int | None = None) -> subprocess.Popen:
    log = open(log_path, "wb")
    prefix: list[str] = []
    env = dict(os.environ)
    if core is not None:  # the class setup: one server per core, one thread each
        cores = sorted(os.sched_getaffinity(0))
        if shutil.which("taskset"):
            prefix = ["taskset", "-c", str(cores[core % len(cores)])]
        env["TVM_NUM_THREADS"] = "1"
    try:
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    finally:
        log.close()


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def free_servers(host: str, port: int) -> int:
    from tvm import rpc

    try:
        summary = rpc.connect_tracker(host, port).summary()
    except Exception:  # noqa: BLE001 - not up yet
        return 0
    return int(summary.get("queue_info", {}).get(KEY, {}).get("free", 0))


@pytest.fixture
def tracker(tmp_path):
    port = free_port()
    procs = [
        start(
            ["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)],
            str(tmp_path / "tracker.log"),
        )
    ]
    try:
        deadline = time.monotonic() + 30
        while True:  # servers that find no tracker retry only every 5 s: start them after it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert procs[0].poll() is None and time.monotonic() < deadline, "the tracker did not start"
                time.sleep(0.2)
        for n in range(2):
            sport = free_port()
            procs.append(
                start(
                    [
                        "tvm.exec.rpc_server",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(sport),
                        "--port-end",
                        str(sport + 1),
                        "--tracker",
                        f"127.0.0.1:{port}",
                        "--key",
                        KEY,
                    ],
                    str(tmp_path / f"server{n}.log"),
                    core=n,
                )
            )
        deadline = time.monotonic() + 60
        while free_servers("127.0.0.1", port) < 2:
            assert all(p.poll() is None for p in procs), "the tracker or a server exited"
            assert time.monotonic() < deadline, "the RPC servers did not register with the tracker"
            time.sleep(0.5)
        yield port
    finally:
        for p in procs:
            stop(p)
        for p in procs:
            assert group_gone(p.pid), "a tracker/server process outlived the test"


@pytest.mark.slow
def test_tune_through_an_rpc_tracker(tracker, tmp_path):
    job = tune(
        mlc_lab.load(matmul(64)),
        trials=4,
        work_dir=str(tmp_path / "wd"),
        runner=f"rpc://127.0.0.1:{tracker}/{KEY}",
        num_trials_per_iter=4,
        strategy="replay-trace",
        cost_model="random",
        servers=2,
    )
    assert job.spec["runner"] == f"rpc://127.0.0.1:{tracker}/{KEY}" and job.spec["servers"] == 2
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert len(recs) == 4
    assert all(r.ok and r.latency_s > 0 for r in recs), [r.error for r in recs]
    assert "RPCRunner" in job.log_tail(200_000) or "rpc" in job.log_tail(200_000).lower()
