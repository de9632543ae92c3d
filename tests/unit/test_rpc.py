"""Measuring through TVM's RPC tracker, as docs/measuring.md sets up a class: a tracker and three servers
on 127.0.0.1 that run TVM's runtime alone (no compiler on their PATH), each its own process and group.
The inputs are made and the outputs checked here; servers that die (``kill -9``) or hang (SIGSTOP)
mid-measurement are worked around and said; a tracker that is down is one sentence; two timings never
run at once on one machine. The 64-trial runs are ``-m full`` (and ``benchmarks/remote.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
import time

import numpy as np
import pytest

import mlc_lab
from mlc_lab.core.tuning import tune
from mlc_lab.errors import TuneError
from mlc_lab.tvm.measure import build, pool
from tests.fixtures.programs import matmul
from tests.unit.processes import free_port
from tests.unit.rpc_cluster import KEY, SANDBOXED, Cluster  # noqa: F401  (KEY: test_classroom times on these servers)


@pytest.fixture
def tracker(tmp_path):
    """A tracker and two runtime-only servers under KEY, mlc_lab's (each session in the sandbox: the class
    server times hand-ins only there): its port (the class server's tests time there)."""
    c = Cluster(tmp_path / "cluster", servers=2, ours=(KEY,))
    try:
        yield c.port
    finally:
        c.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One tracker: three servers under the test key for the tests that harm none, two under "hang" for
    the test that stops one, three under "tune" for the tune that loses two, two of mlc_lab's own
    servers under "ours" (`mlc_lab.core.server_sandbox`: each session in the sandbox, 256 MB for its
    tree), with a stand-in CUDA driver when this machine can make one (test_artifact's: every driver
    call answers "no device"), and one of them under "unsafe" (--unsafe-same-user). One start for all."""
    from tests.unit.test_artifact import CUDART_DIRS, STUB_DRIVER

    folder = tmp_path_factory.mktemp("cluster")
    env: dict[str, str] = {}
    cudart = next((d for d in CUDART_DIRS if os.path.exists(os.path.join(d, "libcudart.so.13"))), None)
    if cudart and shutil.which("gcc"):
        (folder / "stub.c").write_text(STUB_DRIVER)
        folder.chmod(0o755)  # bound read-only into the sessions' sandboxes, where uid 65534 must enter it
        lib = folder / "libcuda.so.1"
        cmd = ["gcc", "-shared", "-fPIC", "-o", str(lib), "-Wl,-soname,libcuda.so.1", str(folder / "stub.c")]
        subprocess.run(cmd, check=True)
        env = {"LD_LIBRARY_PATH": f"{folder}:{cudart}", "CUDA_HOME": str(Path(cudart).parent)}
    tune = [
        "tests.unit.dying_server",
        "tvm.exec.rpc_server",
        "tvm.exec.rpc_server",
    ]  # one dies as its 2nd session begins
    ours = [(SANDBOXED, "--memory-mb", "256")] * 2
    more = {"hang": 2, "tune": tune, "ours": ours, "unsafe": [(SANDBOXED, "--unsafe-same-user")]}
    c = Cluster(folder / "cluster", servers=3, more=more, ours=("ours",), env=env)
    c.stub_driver = bool(env)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def matmul_lib(tmp_path_factory):
    """A 128^3 matmul built here for this CPU, its seeded inputs and the reference's outputs."""
    import tvm

    mod = mlc_lab.load(matmul(128))
    name, one = build.single_function_module(mod, None)
    path = str(tmp_path_factory.mktemp("lib") / "mm.so")
    tvm.compile(one, target=build.cpu_target()).export_library(path)
    inputs, expected = build.reference_outputs(build.module_to_text(mod), name, 0)
    return path, name, inputs, expected


def _when(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_runtime_only_servers_measure_check_and_never_time_two_at_once_on_one_host(shared, matmul_lib, monkeypatch):
    path, name, inputs, expected = matmul_lib
    spans: list[tuple[float, float]] = []
    real = pool.measure.time_function

    def watched(*args, **kwargs):
        t0 = time.monotonic()
        try:
            return real(*args, **kwargs)
        finally:
            spans.append((t0, time.monotonic()))

    monkeypatch.setattr(pool.measure, "time_function", watched)
    p = pool.TrackerPool("127.0.0.1", shared.port, shared.key, servers=3, session_timeout_s=20)
    try:
        wrong = [a.copy() for a in expected]
        wrong[-1][3, 4] += 1.0
        cands = [pool.Candidate(f"c{i}", path, name, "cpu", inputs, expected) for i in range(6)]
        outs = p.measure([*cands, pool.Candidate("wrong", path, name, "cpu", inputs, wrong)])
    finally:
        p.close()
    good, bad = outs[:-1], outs[-1]
    assert all(o.ok and o.correct and len(o.results_s) == 3 and o.results_s[0] > 0 for o in good), outs
    assert len({o.where for o in good}) >= 2 and {o.where for o in good} <= set(shared.addrs)
    assert not bad.ok and bad.error_kind == "check" and "wrong result: max abs error 1" in bad.error
    spans.sort()
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), "two timings overlapped on 127.0.0.1"


def test_a_tracker_that_is_down_is_one_sentence():
    port = free_port()
    with pytest.raises(TuneError) as err:
        tune(mlc_lab.load(matmul(64)), trials=4, runner=f"rpc://127.0.0.1:{port}/class-cpu")
    assert str(err.value) == (
        f"the RPC tracker at 127.0.0.1:{port} does not answer (connection refused): "
        f"is `python -m tvm.exec.rpc_tracker --port {port}` running there?"
    )


def test_a_key_no_server_has_is_one_sentence(shared):
    with pytest.raises(
        TuneError, match=r"no server under the key 'gpu' \(it lists 'hang', 'mlc-lab-test', 'ours', 'tune', 'unsafe'\)"
    ):
        tune(mlc_lab.load(matmul(64)), trials=4, runner=f"rpc://127.0.0.1:{shared.port}/gpu")


@pytest.mark.full  # 10 s; the tune below has a server hang too (at its connection)
def test_a_server_that_hangs_mid_measurement_is_left_out_and_its_candidate_measured_elsewhere(shared, tmp_path):
    """A 512^3 matmul (untuned, generic x86-64: 0.1-0.3 s a call): the server timing it is stopped
    (SIGSTOP) mid-session."""
    import tvm

    mod = mlc_lab.load(matmul(512))
    name, one = build.single_function_module(mod, None)
    path = str(tmp_path / "slow.so")
    tvm.compile(one, target="llvm").export_library(path)  # generic x86-64, one thread: slow on purpose
    inputs = build.random_inputs(build.param_specs(one, name))
    events: list[tuple] = []
    p = pool.TrackerPool(
        "127.0.0.1",
        shared.port,
        "hang",
        servers=1,
        session_timeout_s=1,
        on_event=lambda kind, **facts: events.append((kind, facts)),
    )
    try:
        fut = p.submit(pool.Candidate("slow", path, name, "cpu", inputs, method=pool.measure.TimingMethod(repeats=1)))
        _when(lambda: shared.in_session("hang"), 60)
        stopped = shared.in_session("hang")[0]
        shared.stop(stopped)
        out = fut.result(timeout=120)
    finally:
        p.close()
    assert events[0] == ("hung", {"server": shared.addrs[stopped], "reason": "it did not answer for 7 s"}), events
    assert out.where != shared.addrs[stopped] and out.attempts == 2, out
    assert out.ok or out.error_kind == "timeout", out  # measured elsewhere (a 512^3 call may pass 2 x 1 s there)


@pytest.mark.slow
def test_a_tune_goes_on_when_one_server_dies_and_another_hangs(shared, tmp_path):
    """16 trials through three runtime-only servers: one is stopped (SIGSTOP) before the run, so the
    tracker hands it out and it never answers; another kills its own group (as kill -9 would) as its
    second session begins, mid-measurement (tests/unit/dying_server.py). Every trial is measured, the
    lost candidate again elsewhere, the hung server left out, and both said. (The 64-trial run, -m full,
    kills a server from outside with kill -9.)"""
    servers = [n for n, k in enumerate(shared.keys) if k == "tune"]  # the dying one first
    shared.stop(servers[1])
    job = tune(
        mlc_lab.load(matmul(128)),
        trials=16,
        work_dir=str(tmp_path / "wd"),
        runner=f"rpc://127.0.0.1:{shared.port}/tune",
        num_trials_per_iter=8,
        strategy="replay-trace",
        cost_model="random",
        servers=3,
        timeout_s=2,  # a server that does not answer a connection in 5 s is hung
    )
    shared.killed.add(shared.servers[servers[0]].pid)  # it dies on purpose
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert len(recs) == 16 and all(r.ok for r in recs), [r.error for r in recs if not r.ok]
    killed, stopped = shared.addrs[servers[0]], shared.addrs[servers[1]]
    assert shared.servers[servers[0]].poll() is not None  # it went away
    events = job.events()
    assert any(e["event"] == "lost" and e["server"] == killed for e in events), events
    assert any(e["event"] == "retry" for e in events), events
    hung = [e for e in events if e["event"] == "hung"]
    assert [(e["server"], e["reason"]) for e in hung] == [(stopped, "it did not answer a connection in 5 s")]
    tune_addrs = {shared.addrs[n] for n in servers}
    assert all(r.where in tune_addrs and r.waited_s is not None for r in recs)
    assert stopped not in {r.where for r in recs}  # it never answered: nothing was measured there
    assert sum(r.where == killed for r in recs) == 1  # its first session; the second one's candidate went elsewhere


def test_measure_and_bench_time_a_program_on_a_runtime_only_server(shared, tmp_path, capsys):
    from mlc_lab.cli import main as cli_main
    from mlc_lab.core.session import Session

    s = Session(mlc_lab.load(matmul(128)))
    j0, j1 = s.apply("split", "C/j", factors=[None, 16])
    s.apply("reorder", "C/i", j0, "k", j1)
    m = s.measure(runner=shared.runner, repeats=3)
    assert m.ok and m.correct and m.latency_s > 0 and m.repeats == 3, m.error
    assert m.where in shared.addrs and f"a server of 'mlc-lab-test' ({m.where})" in m.method
    assert m.gflops > 0 and m.threads is None  # the server's threads are its own
    prog = tmp_path / "mm.py"
    prog.write_text(matmul(64))
    assert cli_main(["bench", str(prog), "--repeats", "2", "--runner", shared.runner]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["correct"] is True and out["where"] in shared.addrs and out["repeats"] == 2


def test_bench_times_a_trace_files_kernel_only_on_sandboxed_sessions(shared, tmp_path, capsys):
    """A trace file is a hand-in's: `bench --trace --runner` leaves out TVM's own servers in one sentence
    and times it on mlc_lab's sandboxed sessions; --unsafe-same-user (the teacher's choice) allows both."""
    from mlc_lab.cli import main as cli_main

    prog, trace = tmp_path / "mm.py", tmp_path / "t.py"
    prog.write_text(matmul(64))
    trace.write_text(
        'b0 = sch.get_sblock(name="C", func_name="main")\nl1, l2, l3 = sch.get_loops(block=b0)\n'
        "l4, l5 = sch.split(loop=l2, factors=[None, 8])\n"
    )
    ours = f"rpc://127.0.0.1:{shared.port}/ours"
    for runner, extra in ((shared.runner, []), (ours, []), (shared.runner, ["--unsafe-same-user"])):
        code = cli_main(["bench", str(prog), "--trace", str(trace), "--repeats", "2", "--runner", runner, *extra])
        captured = capsys.readouterr()
        if runner == shared.runner and not extra:
            assert code != 0 and "it does not run its sessions in mlc_lab's sandbox (TVM's own server?)" in captured.err
            continue
        assert code == 0, captured.err
        out = json.loads(captured.out.strip().splitlines()[-1])
        assert out["correct"] is True and out["repeats"] == 2
        where = {a for a, k in zip(shared.addrs, shared.keys) if k == ("ours" if runner == ours else KEY)}
        assert out["where"] in where, out


KERNELS = {
    "crash": """
@T.prim_func(s_tir=True)
def crash(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("A"):
            vi = T.axis.spatial(4, i)
            T.evaluate(T.call_extern("int32", "abort"))
""",
    "endless": """
@T.prim_func(s_tir=True)
def endless(A: T.Buffer((4,), "float32")):
    for i, j, k in T.grid(1 << 30, 1 << 30, 1 << 30):
        with T.sblock("A"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            A[0] = A[0] * T.float32(1.0000001) + T.float32(1.0)
""",
    "hog": """
@T.prim_func(s_tir=True)
def hog(A: T.Buffer((4,), "float32")):
    B = T.alloc_buffer((1 << 28,), "float32")  # 1 GB, every page written, then read
    for i in range(1 << 28):
        with T.sblock("B"):
            vi = T.axis.spatial(1 << 28, i)
            B[vi] = T.float32(1.0)
    for i in range(1 << 28):
        with T.sblock("A"):
            vi = T.axis.reduce(1 << 28, i)
            with T.init():
                A[0] = T.float32(0)
            A[0] = A[0] + B[vi]
""",
}


@pytest.fixture(scope="module")
def bad_kernels(tmp_path_factory) -> dict[str, str]:
    """Libraries of kernels that abort, never end, and write 1 GB: name -> path."""
    import tvm

    folder = tmp_path_factory.mktemp("bad")
    out = {}
    for name, text in KERNELS.items():
        out[name] = str(folder / f"{name}.so")
        mod = mlc_lab.load("from tvm.script import tirx as T\n" + text)
        tvm.compile(mod, target="llvm").export_library(out[name])
    return out


def _ours(shared, cands, session_timeout_s=10.0, **kw):
    p = pool.TrackerPool("127.0.0.1", shared.port, "ours", servers=2, session_timeout_s=session_timeout_s, **kw)
    try:
        return p.measure(cands)
    finally:
        p.close()


def _bad(path: str, name: str) -> pool.Candidate:
    return pool.Candidate(
        name, path, "main", "cpu", [np.zeros(4, "float32")], method=pool.measure.TimingMethod(repeats=1)
    )


def test_a_sandboxed_session_that_crashes_ends_its_measurement_in_one_sentence(shared, bad_kernels, matmul_lib):
    """A kernel that calls abort(): the session's sandbox ends with it, the client hears why at once
    (no second server is tried: the server said what happened), and both servers serve on."""
    (out,) = _ours(shared, [_bad(bad_kernels["crash"], "crash")])
    assert (out.error_kind, out.error, out.attempts) == (
        "crash",
        "the session that ran the program was killed by SIGABRT",
        1,
    ), out
    _both_serve_on(shared, matmul_lib)
    assert "was stopped: was killed by SIGABRT; serving on" in shared.logs()


def test_a_session_past_its_memory_or_time_is_stopped_and_said_so(shared, bad_kernels, matmul_lib):
    """1 GB written by a session whose server allows 256 MB; a kernel that never ends, in a session the
    client asked to last 2 x 2 s. Each is stopped with its whole tree and its client told why."""
    started = time.monotonic()
    hog, endless = _ours(
        shared, [_bad(bad_kernels["hog"], "hog"), _bad(bad_kernels["endless"], "endless")], session_timeout_s=2
    )
    assert (hog.error_kind, hog.error) == (
        "crash",
        "the session that ran the program used more than the memory limit of 256 MB for all its processes and "
        "was stopped",
    ), hog
    assert (endless.error_kind, endless.error) == (
        "timeout",
        "the session that ran the program ran for more than the wall-clock limit of 4 s and was stopped",
    ), endless
    assert hog.attempts == endless.attempts == 1 and time.monotonic() - started < 60
    _both_serve_on(shared, matmul_lib)


def _both_serve_on(shared, matmul_lib) -> None:
    """Both of mlc_lab's servers are registered again and measure the next sessions normally."""
    shared.wait_free(2, timeout=30, key="ours")
    path, name, inputs, expected = matmul_lib
    outs = _ours(shared, [pool.Candidate(f"next{i}", path, name, "cpu", inputs, expected) for i in range(4)])
    assert all(o.ok and o.correct for o in outs), outs
    ours = {a for a, k in zip(shared.addrs, shared.keys) if k == "ours"}
    assert {o.where for o in outs} == ours, outs


def test_a_sandboxed_session_says_what_confines_it_and_a_pool_for_hand_ins_leaves_out_the_rest(shared, matmul_lib):
    """The session's own answer (asked before anything is uploaded): uid 65534, the loopback alone (down),
    the server's limits. A pool that must send hand-ins' kernels only to sandboxed sessions leaves out
    TVM's own servers and mlc_lab's with --unsafe-same-user, and says so in one sentence."""
    from tvm import rpc

    host, port = "127.0.0.1", shared.port
    tracker = rpc.connect_tracker(host, port)
    session = tracker.request("ours", session_timeout=30)
    facts = pool.require_sandbox(session)
    assert facts["sandboxed"] is True and facts["inside"]["uid"] == 65534, facts
    assert facts["inside"]["interfaces"] == ["lo"] and facts["inside"]["hostname"] == "sandbox"
    assert facts["limits"]["memory_mb"] == 256 and facts["limits"]["wall_s"] == 30
    del session
    plain = tracker.request(KEY, session_timeout=30)  # TVM's own server
    with pytest.raises(pool._Unconfined, match=r"it does not run its sessions in mlc_lab's sandbox \(TVM's own"):
        pool.require_sandbox(plain)
    del plain
    path, name, inputs, expected = matmul_lib
    p = pool.TrackerPool(host, port, "unsafe", servers=1, session_timeout_s=10, wait_s=60, sandboxed_only=True)
    try:
        (out,) = p.measure([pool.Candidate("handin", path, name, "cpu", inputs, expected)])
    finally:
        p.close()
    (unsafe,) = [a for a, k in zip(shared.addrs, shared.keys) if k == "unsafe"]
    assert (out.error_kind, out.error) == (
        "no_server",
        f"every server of the key 'unsafe' at the tracker 127.0.0.1:{port} is left out ({unsafe}: its sessions "
        "run as its own user (mlc_lab's server with --unsafe-same-user))",
    ), out
    # the same unsafe server measures a program that is not a hand-in's
    p = pool.TrackerPool(host, port, "unsafe", servers=1, session_timeout_s=10)
    try:
        (out,) = p.measure([pool.Candidate("own", path, name, "cpu", inputs, expected)])
    finally:
        p.close()
    assert out.ok and out.correct, out


@pytest.mark.full  # 11-21 s on the shared VM: CI's default run has no room; every other test here uses such sessions
def test_a_16_trial_tune_through_sandboxed_servers_measures_every_candidate(shared, tmp_path):
    job = tune(
        mlc_lab.load(matmul(128)),
        trials=16,
        work_dir=str(tmp_path / "wd"),
        runner=f"rpc://127.0.0.1:{shared.port}/ours",
        num_trials_per_iter=8,
        strategy="replay-trace",
        cost_model="random",
        servers=2,
        timeout_s=10,
    )
    assert job.wait(timeout=300) == "done", job.error
    recs = job.records()
    assert len(recs) == 16 and all(r.ok for r in recs), [r.error for r in recs if not r.ok]
    assert {r.where for r in recs} <= {a for a, k in zip(shared.addrs, shared.keys) if k == "ours"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the CUDA toolkit (nvcc) is not installed")
def test_a_cuda_kernel_built_here_loads_on_a_runtime_only_server(shared, tmp_path):
    """As far as a machine without a GPU goes: each session, in its sandbox, loads TVM's CUDA runtime (the
    sidecar: the toolkit's and LD_LIBRARY_PATH's folders bound read-only) and the library with its fat
    binary; allocating on the GPU is where a driver without a device says no. (No CUDA kernel was run
    inside a sandbox here: this machine has no GPU.)"""
    if not shared.stub_driver:
        pytest.skip("no stand-in CUDA driver could be made (gcc or libcudart.so.13 missing)")
    import tvm

    from mlc_lab.tvm.measure import artifact
    from tests.unit.test_artifact import SM_90, add_one

    path = str(tmp_path / "add.so")
    artifact.export_artifact(tvm.compile(tvm.IRModule({"main": add_one}), target=SM_90), path, SM_90)
    p = pool.TrackerPool("127.0.0.1", shared.port, "ours", servers=1, session_timeout_s=10)
    try:
        (out,) = p.measure([pool.Candidate("add", path, "main", "cuda", [np.zeros(1024, "float32")] * 2)])
    finally:
        p.close()
    ours = [n for n, k in enumerate(shared.keys) if k == "ours"]
    for n in ours:  # seen from inside a session's sandbox, as each server starts
        assert "CUDA: on, but no GPU is visible" in (shared.folder / f"server{n}.log").read_text()
    assert out.error_kind == "run" and "the arguments do not fit" in out.error, out  # loaded; no device memory
    assert "does not load" not in out.error


def _within_noise(retimed: dict, a: str, b: str) -> bool:
    """Two bests agree when their ratio is within the wider of their own re-timings' spreads (this VM
    moves a kernel's figure by tens of percent within seconds: docs/measuring.md)."""
    ratio = retimed[b]["median_s"] / retimed[a]["median_s"]
    noise = max(retimed[a]["self_spread"], retimed[b]["self_spread"], 0.10)
    return 1 / (1 + noise) <= ratio <= 1 + noise


@pytest.mark.full
def test_a_64_trial_tune_reaches_its_trials_through_a_tracker_that_loses_a_server(tmp_path):
    from benchmarks.remote import tracker_figures

    figs = tracker_figures(mlc_lab.load(matmul(128)), 64, tmp_path, rounds=5)
    calm, hit = figs["undisturbed"], figs["killed"]
    assert calm["trials"] == hit["trials"] == 64 and calm["failed"] == hit["failed"] == 0, figs
    assert hit["killed"] and any(e["event"] == "lost" and e["server"] == hit["killed"]["server"] for e in hit["events"])
    assert _within_noise(figs["retimed_here"], "undisturbed", "killed"), figs["retimed_here"]
