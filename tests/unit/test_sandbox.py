"""mlc_lab.core.sandbox: the sandboxed mode of running a child (the attacks are in tests/exploits/),
and worker.kill_tree, the one way mlc_lab stops a child and everything it started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from mlc_lab.core import sandbox
from mlc_lab.core.sandbox import Limits, SandboxUnavailable, probe, run_sandboxed
from mlc_lab.core.worker import kill_tree
from mlc_lab.errors import MlcLabError

PY = sys.executable
ROOT = str(Path(__file__).resolve().parents[2])


def py(code: str, **kw):
    return run_sandboxed([PY, "-c", code], **kw)


def test_this_machine_can_sandbox():
    assert probe() is None


def test_ok_with_stdout_stderr_and_the_result_channel():
    out = py("import os, sys\nprint('out')\nprint('err', file=sys.stderr)\nos.write(3, b'{\"a\": 1}')")
    assert (out.status, out.returncode, out.message) == ("ok", 0, "")
    assert (out.stdout, out.stderr, out.result) == (b"out\n", b"err\n", b'{"a": 1}')
    assert 0 < out.seconds < 30


def test_identity_and_view():
    out = py(
        "import os\n"
        "caps = [l for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))]\n"
        "print(os.getuid(), os.getgid(), os.getgroups(), os.getcwd(), os.getpid())\n"
        "print(''.join(caps), end='')\n"
        "print(sorted(os.listdir('/dev')))\n"
        "print(sorted(os.listdir('/proc/self/fd')))\n"
        "print(open('/proc/self/oom_score_adj').read().strip())\n"
    )
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "65534 65534 [] /tmp 2", out  # PID 2: the sandbox's init is PID 1
    assert lines[1].split() == ["CapEff:", "0000000000000000"]
    assert lines[2].split() == ["CapBnd:", "0000000000000000"]
    assert lines[3].split() == ["NoNewPrivs:", "1"]
    assert lines[4] == str(sorted(["null", "zero", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm"]))
    assert lines[5] == "['0', '1', '2', '3', '4']"  # 4: the listing itself; no fd of the grader's
    assert lines[6] == "1000"  # the first the kernel kills when the machine runs out of memory


def test_inputs_are_read_only_copies(tmp_path):
    handin = tmp_path / "handin.py"
    handin.write_text("print('hi')\n")
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "x.txt").write_text("x")
    out = run_sandboxed(
        [PY, "/input/handin.py"],
        inputs={"handin.py": handin, "program.txt": b"prog", "data": folder},
    )
    assert out.status == "ok" and out.stdout == b"hi\n"
    listing = py(
        "import os\nfor d, _, fs in sorted(os.walk('/input')):\n"
        "    for f in sorted(fs):\n        p = os.path.join(d, f); print(p, oct(os.stat(p).st_mode & 0o777), open(p).read().strip())",
        inputs={"handin.py": handin, "program.txt": b"prog", "data": folder},
    )
    assert listing.stdout.decode().splitlines() == [
        "/input/handin.py 0o444 print('hi')",
        "/input/program.txt 0o444 prog",
        "/input/data/sub/x.txt 0o444 x",
    ]


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_input_names_must_be_plain(name):
    with pytest.raises(ValueError, match="not a plain file name"):
        py("pass", inputs={name: b"x"})


def test_the_environment_is_clean(monkeypatch):
    monkeypatch.setenv("MLC_LAB_TEST_SECRET", "hunter2")
    out = py("import os, json\nos.write(3, json.dumps(dict(os.environ)).encode())", env={"EXTRA": "1"})
    env = json.loads(out.result)
    assert "MLC_LAB_TEST_SECRET" not in env and env["EXTRA"] == "1"
    assert env["HOME"] == "/tmp" and env["MLC_LAB_INPUT_DIR"] == "/input"


def test_mlc_lab_imports_inside():
    out = py("import mlc_lab.model.checks, mlc_lab\nprint(mlc_lab.__file__)")
    assert out.status == "ok", out.stderr
    assert out.stdout.decode().strip() == str(sandbox.PACKAGE / "__init__.py")


def test_a_program_that_cannot_start():
    out = run_sandboxed(["/no/such/program"])
    assert out.status == "exit" and out.returncode == 127
    assert out.message.startswith("could not start: cannot run /no/such/program:")


def test_exit_status_and_signal():
    out = py("raise SystemExit(3)")
    assert (out.status, out.returncode, out.message) == ("exit", 3, "exited with status 3")
    out = py("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    assert (out.status, out.returncode, out.message) == ("signal", -11, "was killed by SIGSEGV")


def test_result_channel_is_capped():
    out = py("import os\nos.write(3, b'r' * 5000)\nimport time\ntime.sleep(30)", limits=Limits(output_bytes=1000))
    assert out.status == "output" and len(out.result) == 1000
    assert out.message == "wrote more than the limit of 1000 bytes to its result channel; the rest was cut"
    assert out.seconds < 10


def test_stdout_and_stderr_share_the_output_cap():
    out = py(
        "import sys\nprint('o' * 600)\nsys.stdout.flush()\nprint('e' * 600, file=sys.stderr)",
        limits=Limits(output_bytes=1000),
    )
    assert out.status == "output"
    assert len(out.stdout) + len(out.stderr) == 1000 and out.stdout.startswith(b"o" * 600)


def test_unavailable_machine_raises_unless_unsafe(monkeypatch):
    monkeypatch.setattr(sandbox, "probe", lambda: "this machine refuses a new user namespace; allow it")
    with pytest.raises(SandboxUnavailable, match="refuses a new user namespace") as caught:
        py("pass")
    assert isinstance(caught.value, MlcLabError)
    out = py("import os\nprint(os.getuid())", unsafe_same_user=True)
    assert out.status == "ok" and out.stdout == f"{os.getuid()}\n".encode()


def test_unsafe_same_user_keeps_the_limits_and_fd_3(tmp_path):
    handin = tmp_path / "h.py"
    handin.write_text("import os\nos.write(3, open(__file__, 'rb').read()[:6])\n")
    out = run_sandboxed([PY, "/input/h.py"], inputs={"h.py": handin}, unsafe_same_user=True)
    assert out.status == "ok" and out.result == b"import", out
    out = py("import time\ntime.sleep(60)", limits=Limits(wall_s=1), unsafe_same_user=True)
    assert out.status == "timeout" and out.seconds < 3
    out = py("x = b'x' * (1 << 30)", limits=Limits(memory_mb=256), unsafe_same_user=True)
    assert out.status == "memory" or b"MemoryError" in out.stderr, out


def test_unsafe_same_user_kills_a_setsid_daemon():
    marker = f"mlc-lab-unsafe-{os.getpid()}-{time.monotonic_ns()}"
    out = py(
        f"# {marker}\nimport os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n", unsafe_same_user=True
    )
    assert out.status == "ok"
    if not sandbox._Cgroups.create(Limits(), f"probe-{os.getpid()}").dirs:
        pytest.skip("without a cgroup a setsid daemon escapes --unsafe-same-user (docs/sandbox.md)")
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert not left


# ----------------------------------------------------------------------------------------- not as root


NON_ROOT = textwrap.dedent(
    """
    import json, os, sys
    from mlc_lab.core import sandbox
    from mlc_lab.core.sandbox import Limits, run_sandboxed
    if sys.argv[1] == "watchdog":  # as on a machine that gives a normal user no cgroup
        sandbox._Cgroups.create = classmethod(lambda cls, *a: cls())
    def run(code, **kw):
        out = run_sandboxed([sys.executable, "-c", code], **kw)
        return [out.status, out.message, out.stdout.decode()[-300:]]
    print(json.dumps({
        "teacher": os.geteuid(),
        "who": run("import os; print(os.getuid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])"),
        "shadow": run("open('/etc/shadow').read()"),
        "parent": run("import os; os.kill(os.getppid(), 9); print('alive')"),
        "bomb": run("import os\\nwhile True:\\n    try: os.fork()\\n    except OSError: pass", limits=Limits(processes=16)),
        "memory": run("x = []\\nfor _ in range(40): x.append(b'x' * (64 << 20))", limits=Limits(memory_mb=512)),
        "tmp": run("open('/tmp/f', 'wb').write(b'x' * (100 << 20))"),
        "sysctl": run("import os; print(os.access('/proc/sys/vm/overcommit_ratio', os.W_OK))"),
    }))
    """
)


@pytest.mark.parametrize("mode", ["cgroups", "watchdog"])
def test_as_a_normal_user_in_a_user_namespace(mode):
    """A non-root teacher (uid 1000 of a user namespace here) gets the same sandbox, from a user
    namespace of its own; where it has no cgroup, the watchdog limits memory and processes."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--user", "--map-user=1000", "true"]).returncode:
        pytest.skip("this machine cannot start a user namespace to play a normal user in")
    done = subprocess.run(
        [unshare, "--user", "--map-user=1000", "--map-group=1000", PY, "-c", NON_ROOT, mode],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    got = json.loads(done.stdout)
    assert got["teacher"] == 1000
    assert got["who"] == ["ok", "", "65534 0000000000000000\n"]
    assert got["shadow"][0] == "exit"
    assert got["parent"][0] == "ok" and got["parent"][2] == "alive\n"  # the init ignores it
    assert got["bomb"][:2] == ["processes", "started more than the limit of 16 processes and was stopped"]
    assert got["memory"][0] == "memory" and "512 MB for all its processes" in got["memory"][1]
    assert got["tmp"][1] == "exited with status 1 after filling its /tmp (the file size limit is 64 MB)"
    # here the user namespace of "uid 1000" belongs to root, so the program is uid 0 outside: /proc/sys
    # would be its to write, were it not read-only
    assert got["sysctl"][2] == "False\n"


def test_a_machine_that_refuses_user_namespaces_is_named(tmp_path):
    """A normal user on a machine whose user namespaces are used up (max_user_namespaces) is told
    which namespace is refused and how to allow it; --unsafe-same-user still runs."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--user", "--map-root-user", "true"]).returncode:
        pytest.skip("this machine cannot start a user namespace")
    script = (
        "import json, sys\n"
        "from mlc_lab.core.sandbox import probe, run_sandboxed, SandboxUnavailable\n"
        "try:\n    run_sandboxed(['true']); said = None\n"
        "except SandboxUnavailable as e:\n    said = str(e)\n"
        "out = run_sandboxed(['sh', '-c', 'echo unsafe'], unsafe_same_user=True)\n"
        "print(json.dumps([probe(), said, out.status, out.stdout.decode()]))\n"
    )
    (tmp_path / "teacher.py").write_text(script)
    inner = f"{unshare} --user --map-user=1000 --map-group=1000 {PY} {tmp_path / 'teacher.py'}"
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "sh", "-c", f"echo 1 > /proc/sys/user/max_user_namespaces && {inner}"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    probed, said, status, printed = json.loads(done.stdout)
    assert said == probed
    assert said.startswith("this machine cannot sandbox a hand-in: unshare: the machine refuses a new user namespace")
    assert "--unsafe-same-user" in said and "max_user_namespaces" in said
    assert (status, printed) == ("ok", "unsafe\n")


# ----------------------------------------------------------------------------------------- kill_tree


def test_kill_tree_stops_the_group_and_every_descendant():
    code = (
        "import os, time, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, time\\nos.setsid()\\ntime.sleep(60)'])\n"
        "if os.fork() == 0:\n    time.sleep(60)\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    family = psutil.Process(proc.pid).children(recursive=True)
    assert len(family) == 2
    start = time.monotonic()
    assert kill_tree(proc, wait_s=10)
    assert time.monotonic() - start < 5
    assert proc.returncode == -9
    assert not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    proc.stdout.close()


def test_kill_tree_gives_sigterm_first_when_asked():
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    assert kill_tree(proc, grace_s=5)
    assert proc.returncode == 7
    proc.stdout.close()


@pytest.mark.parametrize("own_session", [True, False])
def test_kill_tree_signals_before_it_looks_at_the_clock(monkeypatch, own_session):
    # one scan of the process table slower than the whole wait (a loaded machine, memory pressure):
    # the process is still signalled, whether or not it leads a process group of its own
    from mlc_lab.core import processes

    scan = psutil.process_iter

    def slow_scan(*args, **kwargs):
        time.sleep(0.3)
        return scan(*args, **kwargs)

    monkeypatch.setattr(processes.psutil, "process_iter", slow_scan)
    proc = subprocess.Popen(["sleep", "300"], start_new_session=own_session)
    try:
        start = time.monotonic()
        kill_tree(proc, wait_s=0.001)
        assert time.monotonic() - start < 2
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("field", ["wall_s", "cpu_s", "memory_mb", "processes", "output_bytes", "file_mb"])
def test_limits_must_be_positive(field):
    with pytest.raises(ValueError, match=f"the sandbox limit {field} must be a positive number, not 0"):
        Limits(**{field: 0})


def test_what_a_killed_grader_left_is_swept(tmp_path, monkeypatch):
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(tmp_path))
    left = tmp_path / f"{sandbox.PREFIX}{dead.pid}_abc"
    (left / "input").mkdir(parents=True)
    (left / "input" / "h.py").write_text("x")
    (left / "input" / "h.py").chmod(0o444)
    alive = tmp_path / f"{sandbox.PREFIX}{os.getpid()}_def"
    alive.mkdir()
    # a cgroup whose folder is gone already (its grader's TMPDIR was removed) is found too
    cgroups = tmp_path / "cgroup"
    (cgroups / f"{sandbox.PREFIX}{dead.pid}_ghi").mkdir(parents=True)
    (cgroups / f"{sandbox.PREFIX}{os.getpid()}_jkl").mkdir()
    real = sandbox._cgroup_parents
    monkeypatch.setattr(sandbox, "_cgroup_parents", lambda: [*real(), str(cgroups)])
    sandbox._sweep.cache_clear()
    assert py("pass").status == "ok"
    assert not left.exists() and alive.exists()
    assert [p.name for p in cgroups.iterdir()] == [f"{sandbox.PREFIX}{os.getpid()}_jkl"]


def test_a_strict_umask_of_the_grader_does_not_lock_the_sandbox_out(tmp_path):
    old = os.umask(0o077)
    try:
        out = run_sandboxed([PY, "/input/h.py"], inputs={"h.py": b"print('ran')\n"})
    finally:
        os.umask(old)
    assert out.status == "ok" and out.stdout == b"ran\n", out


def test_cgroup_v2_moves_the_grader_to_a_leaf_and_limits_the_sandbox(tmp_path, monkeypatch):
    """On cgroup v2 (not this machine's) the files written, on a copy of the tree in tmp_path: the
    grader's processes move to a leaf, its cgroup turns memory and pids on for its children, and
    the sandbox's cgroup gets memory.max (no swap) and pids.max."""
    mine = tmp_path / "user.slice" / "s.scope"
    mine.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (mine / "cgroup.controllers").write_text("cpu memory pids\n")
    (mine / "cgroup.subtree_control").write_text("\n")
    (mine / "cgroup.procs").write_text(f"{os.getpid()}\n")
    monkeypatch.setattr(sandbox, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(sandbox, "_own_cgroup", lambda ctl: "/user.slice/s.scope" if ctl == "" else None)
    made = sandbox._Cgroups.create(Limits(memory_mb=100, processes=5), "mlc_lab_sandbox_1_x")
    assert made.v2 and made.dirs["memory"] == str(mine / "mlc_lab_sandbox_1_x")
    assert (mine / "mlc_lab_grader" / "cgroup.procs").read_text() == str(os.getpid())
    assert (mine / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (mine / "mlc_lab_sandbox_1_x" / "memory.max").read_text() == str(100 << 20)
    assert (mine / "mlc_lab_sandbox_1_x" / "pids.max").read_text() == "7"
    assert made.procs_files() == [str(mine / "mlc_lab_sandbox_1_x" / "cgroup.procs")]
    # once moved, the next sandbox is made beside the leaf, not in it
    monkeypatch.setattr(sandbox, "_own_cgroup", lambda ctl: "/user.slice/s.scope/mlc_lab_grader" if ctl == "" else None)
    (mine / "cgroup.subtree_control").write_text("memory pids\n")
    assert sandbox._v2_parent() == str(mine)
    assert sandbox._cgroup_parents() == [str(mine)]


def test_cgroup_v2_without_the_controllers_leaves_it_to_the_watchdog(tmp_path, monkeypatch):
    mine = tmp_path / "s.scope"
    mine.mkdir()
    (tmp_path / "cgroup.controllers").write_text("cpu\n")
    (mine / "cgroup.controllers").write_text("cpu\n")
    monkeypatch.setattr(sandbox, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(sandbox, "_own_cgroup", lambda ctl: "/s.scope" if ctl == "" else None)
    made = sandbox._Cgroups.create(Limits(), "mlc_lab_sandbox_1_y")
    assert made.dirs == {} and not (mine / "mlc_lab_sandbox_1_y").exists()


def test_a_fifo_or_a_device_in_a_hand_in_folder_is_refused_not_read(tmp_path):
    folder = tmp_path / "handin"
    folder.mkdir()
    (folder / "ok.py").write_text("pass\n")
    os.mkfifo(folder / "pipe")
    start = time.monotonic()
    with pytest.raises(ValueError, match="pipe is not a regular file, a folder or a symlink"):
        py("pass", inputs={"handin": folder})
    with pytest.raises(ValueError, match="/dev/zero is not a regular file"):
        py("pass", inputs={"zero": Path("/dev/zero")})
    assert time.monotonic() - start < 5


def test_sandboxes_run_side_by_side_from_threads():
    from concurrent.futures import ThreadPoolExecutor

    code = "import os, sys, time\nos.write(3, sys.argv[1].encode())\nprint(sys.argv[1])\ntime.sleep(0.5)"
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda i: run_sandboxed([PY, "-c", code, str(i)]), range(6)))
    assert [(o.status, o.stdout, o.result) for o in outs] == [
        ("ok", f"{i}\n".encode(), str(i).encode()) for i in range(6)
    ]


@pytest.mark.parametrize("unsafe", [False, True])
def test_the_watchdog_counts_the_whole_tree(monkeypatch, unsafe):
    """Without cgroups, the program's own memory and tasks count, in both modes. (Tasks in the
    sandbox as root are also held by RLIMIT_NPROC of uid 65534, which every uid-65534 process of
    the machine shares: that case is tested as a normal user, whose count is its own.)"""
    monkeypatch.setattr(sandbox._Cgroups, "create", classmethod(lambda cls, *a: cls()))
    out = py(
        "x = b'x' * (400 << 20)\nimport time\ntime.sleep(30)", limits=Limits(memory_mb=300), unsafe_same_user=unsafe
    )
    assert out.status == "memory" and out.seconds < 20, out
    if not unsafe:
        return
    out = py(
        "import threading, time\nfor _ in range(12):\n    try:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "    except RuntimeError:\n        pass\n"  # RLIMIT_NPROC refused it; the count still reached the limit
        "time.sleep(30)",
        limits=Limits(processes=8),
        unsafe_same_user=unsafe,
    )
    assert out.status == "processes" and out.seconds < 20, out


def test_a_refusal_is_looked_for_again_a_success_is_kept(monkeypatch):
    monkeypatch.setattr(sandbox, "_PROBED_OK", [])
    real, calls = sandbox._run, []

    def refuse_once(*args):
        calls.append(args[0])
        if len(calls) == 1:
            raise SandboxUnavailable("this machine cannot sandbox a hand-in: not yet")
        return real(*args)

    monkeypatch.setattr(sandbox, "_run", refuse_once)
    assert probe() == "this machine cannot sandbox a hand-in: not yet"
    assert probe() is None and probe() is None
    assert calls == [["true"], ["true"]]


def test_an_init_killed_from_outside_is_an_outcome_not_an_unavailable_machine():
    """The machine's OOM killer (or a person) may kill the sandbox's init: the hand-in's outcome
    says so; the machine is not called unable to sandbox."""
    import threading

    def kill_the_init() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for setup in psutil.Process().children():
                if sandbox.INIT in " ".join(setup.cmdline()):
                    inits = setup.children()
                    if inits:
                        time.sleep(0.5)
                        inits[0].kill()
                        return
            time.sleep(0.05)

    assert probe() is None  # its own sandbox first: the killer must find the hand-in's
    killer = threading.Thread(target=kill_the_init)
    killer.start()
    out = py("import time\ntime.sleep(30)")
    killer.join()
    assert out.status == "signal" and out.returncode is None and out.seconds < 20, out
    assert out.message == "ended without a status: its sandbox's init was stopped ({'signal': 9})"


def test_the_grader_keeps_no_file_descriptor_or_child():
    """A batch runs thousands: each run gives back its pipes and reaps its helper."""
    assert probe() is None
    before = len(os.listdir("/proc/self/fd"))
    for code, limits in (("print(1)", Limits()), ("import time\ntime.sleep(9)", Limits(wall_s=0.5))):
        for _ in range(3):
            py(code, limits=limits)
    assert len(os.listdir("/proc/self/fd")) == before
    assert not [c for c in psutil.Process().children() if sandbox.INIT in " ".join(c.cmdline())]


# ----------------------------------------------------------------------------------------- extras: a measuring server's session


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_passed_socket_is_fd_5_and_closes_when_the_program_ends(unsafe):
    """A measuring server's session gets its client's connection as fd 5; neither the setup nor the
    init keeps a copy, so the client sees the connection close when the program's tree is gone."""
    import socket

    here, there = socket.socketpair()
    code = (
        "import os, socket\n"
        "s = socket.socket(fileno=5)\n"
        "s.sendall(str(os.getuid()).encode())\n"
        "print(sorted(os.listdir('/proc/self/fd')))\n"
    )
    try:
        out = py(code, extras=sandbox.Extras(pass_fd=there.fileno()), unsafe_same_user=unsafe)
        there.close()
        here.settimeout(10)
        assert out.status == "ok", out
        assert here.recv(100) == (str(os.getuid()) if unsafe else "65534").encode()
        assert here.recv(100) == b""  # closed: nobody else holds it
        assert out.stdout.decode().strip() == "['0', '1', '2', '3', '4', '5']"  # 4: the listing itself
    finally:
        here.close()


def test_devices_are_bound_read_write_at_their_names_and_nothing_else_is_added(tmp_path):
    """A GPU's nodes, as the measuring server binds them, on stand-ins: /dev/zero as nvidia0, /dev/null as
    nvidiactl, and a folder of nodes (MIG's nvidia-caps) whose entry is a plain file here."""
    caps = tmp_path / "nvidia-caps"
    caps.mkdir()
    (caps / "nvidia-cap1").write_text("cap")
    devices = {"nvidia0": "/dev/zero", "nvidiactl": "/dev/null", "nvidia-caps": str(caps)}
    code = (
        "import os\n"
        "print(sorted(os.listdir('/dev')))\n"
        "print(open('/dev/nvidia0', 'r+b').read(4), open('/dev/nvidiactl', 'wb').write(b'x'))\n"
        "print(os.listdir('/dev/nvidia-caps'), open('/dev/nvidia-caps/nvidia-cap1').read())\n"
        "try:\n    open('/dev/nvidia9', 'wb')\nexcept OSError as e:\n    print(e.strerror)\n"
    )
    out = py(code, extras=sandbox.Extras(devices=devices))
    assert out.status == "ok", out
    lines = out.stdout.decode().splitlines()
    assert lines[0] == str(sorted([*sandbox.DEVICES, *devices]))
    assert lines[1] == "b'\\x00\\x00\\x00\\x00' 1"
    assert lines[2] == "['nvidia-cap1'] cap"
    assert lines[3] == "Read-only file system"


@pytest.mark.parametrize(
    ("devices", "read_only", "message"),
    [
        ({"../etc": "/dev/null"}, (), "is not a plain name under /dev"),
        ({"null": "/dev/zero"}, (), "is not a plain name under /dev"),
        ({"nvidia0": "dev/nvidia0"}, (), "must be given as an absolute host path"),
        ({}, ("usr/lib",), "read-only paths must be absolute"),
    ],
)
def test_extras_are_checked(devices, read_only, message):
    with pytest.raises(ValueError, match=message):
        sandbox.Extras(devices=devices, read_only=read_only)
