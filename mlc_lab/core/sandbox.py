"""Run one command in a sandbox and say what happened, as plain data: the worker's sandboxed mode.

`run_sandboxed(argv, inputs=..., limits=...)` runs `argv` as an unprivileged user (uid 65534; as a
normal user, in a user namespace), in its own mount namespace whose root holds only what Python
needs (read-only), the `inputs` at ``/input/NAME`` (read-only copies) and a private ``/tmp`` (its
cwd), in its own PID, network, IPC and UTS namespaces. The tree's memory, processes, CPU time, wall
time, output and file size are limited; it returns an `Outcome` only after every process of the tree
is gone. The child writes its result to fd 3. See docs/sandbox.md for the guarantees and what a
machine must allow for them. The helper processes live in ``_sandbox_init.py`` (standard library only).
"""

from __future__ import annotations

import ast
import functools
import marshal
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import psutil

from mlc_lab.core.processes import kill_now, kill_tree
from mlc_lab.errors import MlcLabError

INIT = str(Path(__file__).with_name("_sandbox_init.py"))
PACKAGE = Path(__file__).resolve().parents[1]  # mlc_lab's folder: bound read-only, on PYTHONPATH
POLL_S = 0.05
PREFIX = "mlc_lab_sandbox_"  # + the grader's pid: its folder in the temporary folder, and its cgroups
CGROUP_ROOT = "/sys/fs/cgroup"
ETC: tuple[str, ...] = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
)
ETC += ("/etc/OpenCL",)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

Status = Literal["ok", "exit", "signal", "timeout", "cpu", "memory", "processes", "output"]


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0  # wall clock for the whole tree
    cpu_s: float = 60.0  # CPU seconds (per process via RLIMIT_CPU, and for the tree where the machine allows)
    memory_mb: int = 4096  # for the whole tree, not per process
    processes: int = 64  # tasks (processes and threads) in the tree
    output_bytes: int = 1 << 20  # stdout+stderr kept, and the result channel; more is cut and said so
    file_mb: int = 64  # largest file, and the private /tmp's size

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "processes", "output_bytes", "file_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"the sandbox limit {name} must be a positive number, not {value!r}")


@dataclass(frozen=True)
class Outcome:
    status: Status
    returncode: int | None  # the exit status, or -N for signal N; None when the program never ran
    stdout: bytes
    stderr: bytes  # stdout and stderr together are capped at limits.output_bytes
    result: bytes  # what the child wrote to its result channel (fd 3), capped
    seconds: float
    message: str  # one plain sentence when status != "ok"


class SandboxUnavailable(MlcLabError):
    """This machine refuses something the sandbox needs; the message says what and how to allow it."""

    kind = "error"


ADVICE = (
    "allow it (as root: `sysctl -w kernel.unprivileged_userns_clone=1` and `user.max_user_namespaces=10000`; "
    "on Ubuntu 24.04 also `kernel.apparmor_restrict_unprivileged_userns=0`; in Docker, run the container "
    "with `--security-opt seccomp=unconfined --cap-add SYS_ADMIN`), or grade with --unsafe-same-user, "
    "which runs hand-ins as you with only the limits"
)


# ----------------------------------------------------------------------------------------- limits of the tree


@dataclass
class _Cgroups:
    """The sandbox's own cgroups (v2, else v1 memory + pids + cpuacct), each below the one this
    process is in; none where the machine does not let us write them (then a watchdog counts)."""

    dirs: dict[str, str] = field(default_factory=dict)  # "memory" | "pids" | "cpu" -> folder
    v2: bool = False

    @classmethod
    def create(cls, limits: Limits, name: str) -> _Cgroups:
        made = cls()
        try:
            if os.path.exists(f"{CGROUP_ROOT}/cgroup.controllers"):
                made._create_v2(limits, name)
            else:
                made._create_v1(limits, name)
        except OSError:
            made.remove()
            made = cls()
        return made

    def _create_v1(self, limits: Limits, name: str) -> None:
        for ctl, key in (("memory", "memory"), ("pids", "pids"), ("cpuacct", "cpu")):
            here = _own_cgroup(ctl)
            if here is None or not os.access(f"{CGROUP_ROOT}/{ctl}{here}", os.W_OK):
                continue
            folder = f"{CGROUP_ROOT}/{ctl}{here.rstrip('/')}/{name}"
            os.mkdir(folder)
            self.dirs[key] = folder
        if "memory" in self.dirs:
            mem = self.dirs["memory"]
            _put(f"{mem}/memory.limit_in_bytes", limits.memory_mb << 20)
            if os.path.exists(f"{mem}/memory.memsw.limit_in_bytes"):
                _put(f"{mem}/memory.memsw.limit_in_bytes", limits.memory_mb << 20)
        if "pids" in self.dirs:
            _put(f"{self.dirs['pids']}/pids.max", limits.processes + 2)  # + the setup and the init

    def _create_v2(self, limits: Limits, name: str) -> None:
        parent = _v2_parent()
        if parent is None:
            return
        folder = f"{parent}/{name}"
        os.mkdir(folder)
        self.v2 = True
        self.dirs = {"memory": folder, "pids": folder, "cpu": folder}
        _put(f"{folder}/memory.max", limits.memory_mb << 20)
        if os.path.exists(f"{folder}/memory.swap.max"):
            _put(f"{folder}/memory.swap.max", 0)
        _put(f"{folder}/pids.max", limits.processes + 2)

    def procs_files(self) -> list[str]:
        return sorted({f"{d}/cgroup.procs" for d in self.dirs.values()})

    def oom_kills(self) -> int:
        if "memory" not in self.dirs:
            return 0
        name = "memory.events" if self.v2 else "memory.oom_control"
        return _field(f"{self.dirs['memory']}/{name}", "oom_kill")

    def pids_refused(self) -> int:
        if "pids" not in self.dirs:
            return 0
        return _field(f"{self.dirs['pids']}/pids.events", "max")

    def cpu_s(self) -> float | None:
        if "cpu" not in self.dirs:
            return None
        if self.v2:
            return _field(f"{self.dirs['cpu']}/cpu.stat", "usage_usec") / 1e6
        return int(Path(f"{self.dirs['cpu']}/cpuacct.usage").read_text()) / 1e9

    def empty(self) -> bool:
        return all(not Path(f).read_text().strip() for f in self.procs_files() if os.path.exists(f))

    def remove(self) -> None:
        for folder in set(self.dirs.values()):
            for _ in range(100):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


GRADER_LEAF = "mlc_lab_grader"


def _v2_parent() -> str | None:
    """The cgroup v2 folder to make sandboxes in, with memory and pids on for its children; None
    where there is none. cgroup v2 lets a cgroup have processes or controlled children, not both:
    so the first time, every process of our own cgroup moves to a leaf `mlc_lab_grader` in it, and
    our cgroup turns memory and pids on for its children (where we may write it: root, or a
    delegated cgroup)."""
    here = _own_cgroup("")
    if here is None:
        return None
    mine = f"{CGROUP_ROOT}{here}".rstrip("/")
    if os.path.basename(mine) == GRADER_LEAF:  # moved there before
        mine = os.path.dirname(mine)
    wanted = {"memory", "pids"}
    if not wanted <= set(Path(f"{mine}/cgroup.controllers").read_text().split()):
        return None
    if not wanted <= set(Path(f"{mine}/cgroup.subtree_control").read_text().split()):
        if not os.access(f"{mine}/cgroup.subtree_control", os.W_OK):
            return None
        leaf = f"{mine}/{GRADER_LEAF}"
        os.makedirs(leaf, exist_ok=True)
        for pid in Path(f"{mine}/cgroup.procs").read_text().split():
            try:
                Path(f"{leaf}/cgroup.procs").write_text(pid)
            except OSError:
                continue  # it ended meanwhile (or cannot move: then turning controllers on fails below)
        Path(f"{mine}/cgroup.subtree_control").write_text("+memory +pids")
    return mine


def _cgroup_parents() -> list[str]:
    """The folders this process makes its sandboxes' cgroups in (v1: one per controller)."""
    out = []
    for ctl in ("memory", "pids", "cpuacct", ""):
        here = _own_cgroup(ctl)
        if here is not None:
            folder = f"{CGROUP_ROOT}/{ctl}{here}".replace("//", "/").rstrip("/")
            out.append(os.path.dirname(folder) if folder.endswith("/" + GRADER_LEAF) else folder)
    return out


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of `controller` ("" for cgroup v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctls, path = line.split(":", 2)
        if (controller == "" and ctls == "") or controller in ctls.split(","):
            return path
    return None


def _put(path: str, value: int) -> None:
    Path(path).write_text(str(value))


def _field(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


# ----------------------------------------------------------------------------------------- staging


def _stage(work: str, inputs: dict[str, bytes | Path]) -> None:
    """Copy the inputs into work/input (read-only). A symlink is copied as a symlink (inside the
    sandbox it leads only to what the sandbox holds), never followed on the host."""
    folder = os.path.join(work, "input")
    os.mkdir(folder)
    for name, value in inputs.items():
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"the sandbox input name {name!r} is not a plain file name")
        target = os.path.join(folder, name)
        if isinstance(value, bytes | bytearray):
            Path(target).write_bytes(value)
        elif os.path.islink(value):
            os.symlink(os.readlink(value), target)
        elif os.path.isdir(value):
            shutil.copytree(value, target, symlinks=True, copy_function=_copy_file)
        else:
            _copy_file(value, target)
    for dirpath, dirnames, filenames in os.walk(folder):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755, follow_symlinks=False)
        for f in filenames:
            if not os.path.islink(os.path.join(dirpath, f)):
                os.chmod(os.path.join(dirpath, f), 0o444)
    os.chmod(folder, 0o755)


def _copy_file(src: str | Path, dst: str | Path) -> None:
    """Copy a regular file, never through a symlink (a swap after the check would be followed) and
    never from a FIFO or a device (a read could block or never end)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"the sandbox input {src} cannot be read: {exc.strerror}") from None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"the sandbox input {src} is not a regular file, a folder or a symlink")
        with open(dst, "wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)


def _read_only_paths() -> list[str]:
    """What Python and mlc_lab need, bound read-only at the same paths."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable]
    paths += [p for p in sys.path if p and "site-packages" in p]
    paths.append(str(PACKAGE))
    return paths + list(SYSTEM) + [p for p in ETC if os.path.lexists(p)]


def _base_env() -> dict[str, str]:
    return {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(PACKAGE.parent),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }


# ----------------------------------------------------------------------------------------- running


def probe() -> str | None:
    """None when this machine can sandbox; else the sentence saying what it refuses and how to
    allow it. Found by sandboxing ``true``: a success is remembered for the process, a refusal is
    looked for again at the next call (the machine may be set right while a class server runs)."""
    if _PROBED_OK:
        return None
    try:
        out = _run(["true"], {}, Limits(wall_s=30, cpu_s=10, memory_mb=256, processes=8), None, True)
    except SandboxUnavailable as exc:
        return str(exc)
    if out.status != "ok":
        return f"this machine cannot sandbox a hand-in: a sandboxed `true` {out.message}; {ADVICE}"
    _PROBED_OK.append(True)
    return None


_PROBED_OK: list[bool] = []


@dataclass(frozen=True)
class Extras:
    """What a run may be given beyond its inputs (a measuring server's session, `core.server_sandbox`):
    `pass_fd`, a descriptor of the caller's that the program gets as fd 5 (its connection to its client:
    a socket keeps the network it was made in, so the program reaches its client and nothing else);
    `devices`, nodes of the host bound read-write at ``/dev/NAME`` (a GPU's: name -> host path); and
    `read_only`, more host paths bound read-only at their own paths (a CUDA toolkit's libraries)."""

    pass_fd: int | None = None
    devices: dict[str, str] = field(default_factory=dict)
    read_only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, path in self.devices.items():
            parts = name.split("/")
            if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] in DEVICES:
                raise ValueError(f"the sandbox device name {name!r} is not a plain name under /dev")
            if not os.path.isabs(path):
                raise ValueError(f"the sandbox device {name!r} must be given as an absolute host path, not {path!r}")
        if any(not os.path.isabs(p) for p in self.read_only):
            raise ValueError(f"the sandbox's read-only paths must be absolute: {list(self.read_only)}")


DEVICES = ("null", "zero", "random", "urandom", "fd", "stdin", "stdout", "stderr", "shm")  # /dev's own


def run_sandboxed(
    argv: list[str],
    *,
    inputs: dict[str, bytes | Path] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, never changed
    env: dict[str, str] | None = None,
    unsafe_same_user: bool = False,
    extras: Extras = Extras(),  # noqa: B008 - frozen
) -> Outcome:
    """Run `argv` in the sandbox (see the module's text) and return its `Outcome` once every
    process of its tree is gone. `inputs` are copied read-only to ``/input/NAME``; `env` is added to
    a small clean environment (never the grader's own); `extras` hands on a descriptor, devices and
    more read-only paths (`Extras`). `unsafe_same_user` runs it as this user, with the host's files,
    keeping only the limits, the kill of the whole tree, fd 3 and the passed fd (an ``/input/NAME``
    argument then names the staged copy). Raises `SandboxUnavailable` when the machine refuses a
    namespace and `unsafe_same_user` is False."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("run_sandboxed needs a non-empty list of strings as argv")
    if not unsafe_same_user:
        reason = probe()
        if reason is not None:
            raise SandboxUnavailable(reason)
    return _run(list(argv), dict(inputs or {}), limits, env, not unsafe_same_user, extras)


def _run(
    argv: list[str],
    inputs: dict,
    limits: Limits,
    env: dict | None,
    namespaces: bool,
    extras: Extras = Extras(),  # noqa: B008
) -> Outcome:
    _sweep()
    work = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}_")
    cgroups = _Cgroups()
    run = None
    try:
        _stage(work, inputs)
        os.mkdir(os.path.join(work, "root"))
        os.mkdir(os.path.join(work, "tmp"))
        cgroups = _Cgroups.create(limits, os.path.basename(work))
        full_env = {**_base_env(), **(env or {})}
        if not namespaces:
            argv = [_unsafe_path(a, work) for a in argv]
            full_env.update(HOME=f"{work}/tmp", TMPDIR=f"{work}/tmp", MLC_LAB_INPUT_DIR=f"{work}/input")
        else:
            full_env["MLC_LAB_INPUT_DIR"] = "/input"
        cfg = {
            "work": work,
            "cwd": f"{work}/tmp",
            "namespaces": namespaces,
            "userns": os.geteuid() != 0,
            "uid": os.geteuid(),
            "parent": os.getpid(),
            "cgroups": cgroups.procs_files(),
            "ro": _read_only_paths() + list(extras.read_only),
            "devices": dict(extras.devices),
            "pass_fd": extras.pass_fd is not None,
            "cpu_s": limits.cpu_s,
            "file_mb": limits.file_mb,
            # RLIMIT_NPROC counts every process of the user: only the sandbox's own user may get it
            "nproc": None if "pids" in cgroups.dirs or not namespaces else limits.processes,
            "argv": argv,
            "env": full_env,
        }
        run = _Run(cfg, limits, cgroups, extras.pass_fd)
        return run.wait()
    finally:
        if run is not None:
            run.end()
        cgroups.remove()
        shutil.rmtree(work, ignore_errors=True)


@functools.cache
def _sweep() -> None:
    """Once per process: remove the folders and cgroups that sandboxes of a grader that was killed
    (SIGKILL: its sandboxes died with it, by PR_SET_PDEATHSIG) left behind; each name holds the
    pid of the grader that made it."""
    for parent in [tempfile.gettempdir(), *_cgroup_parents()]:
        for left in Path(parent).glob(f"{PREFIX}*_*"):
            pid = left.name[len(PREFIX) :].split("_")[0]
            if not pid.isdigit() or psutil.pid_exists(int(pid)):
                continue
            if parent == tempfile.gettempdir():
                shutil.rmtree(left, ignore_errors=True)
            else:
                try:
                    os.rmdir(left)  # an empty cgroup; one still in use stays
                except OSError:
                    pass


def _unsafe_path(arg: str, work: str) -> str:
    return f"{work}/input/{arg[len('/input/') :]}" if arg.startswith("/input/") else arg


class _Run:
    """One sandboxed process tree, watched: its pipes read with caps, its limits checked every 50 ms."""

    def __init__(self, cfg: dict, limits: Limits, cgroups: _Cgroups, pass_fd: int | None = None) -> None:
        self.limits, self.cgroups = limits, cgroups
        self.namespaces = cfg["namespaces"]
        self.start = time.monotonic()
        pipes = [os.pipe() for _ in range(4)]  # stdout, stderr, result, status
        (out_r, out_w), (err_r, err_w), (res_r, res_w), (st_r, st_w) = pipes
        cfg["fds"] = [res_w, st_w] + ([] if pass_fd is None else [pass_fd])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", INIT],  # the config on stdin: /proc/1/cmdline is public
                stdin=subprocess.PIPE,
                stdout=out_w,
                stderr=err_w,
                pass_fds=tuple(cfg["fds"]),
                start_new_session=True,
                env={"LANG": "C.UTF-8"},
            )
        except BaseException:
            for fd in (out_r, err_r, res_r, st_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, res_w, st_w):
                os.close(fd)
        assert self.proc.stdin is not None
        with self.proc.stdin as config:
            try:
                config.write(marshal.dumps(cfg))
            except BrokenPipeError:
                pass  # it died at once; its status pipe says why
        self.bufs = {out_r: bytearray(), err_r: bytearray(), res_r: bytearray(), st_r: bytearray()}
        self.out_r, self.err_r, self.res_r, self.st_r = out_r, err_r, res_r, st_r
        self.reason: str | None = None
        self.killed_at: float | None = None
        self.init: psutil.Process | None = None
        self.ended = False
        self.all_gone = False  # known: every process of the tree is gone

    def wait(self) -> Outcome:
        sel = selectors.DefaultSelector()
        for fd in self.bufs:
            sel.register(fd, selectors.EVENT_READ)
        try:
            watched = 0.0
            while sel.get_map():
                for key, _ in sel.select(POLL_S):
                    self._read(sel, key.fd)
                if time.monotonic() - watched >= POLL_S or self.proc.poll() is not None:
                    watched = time.monotonic()
                    self._watch()
                if self.killed_at is not None and time.monotonic() - self.killed_at > 10:
                    break  # everything is dead; a pipe still open is not worth waiting for
        finally:
            sel.close()
        self.end()
        return self._outcome()

    def _read(self, sel: selectors.BaseSelector, fd: int) -> None:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            sel.unregister(fd)
            return
        buf = self.bufs[fd]
        cap = self.limits.output_bytes
        if fd == self.st_r:
            cap = 1 << 16
        elif fd != self.res_r:  # stdout and stderr share the cap
            cap -= len(self.bufs[self.out_r]) + len(self.bufs[self.err_r]) - len(buf)
        room = max(0, cap - len(buf))
        buf += chunk[:room]
        if len(chunk) > room and fd != self.st_r and self.reason is None:
            self.reason = "result" if fd == self.res_r else "output"

    def _watch(self) -> None:
        """Check the limits; stop the tree when one is passed or when the setup process ended."""
        if self.reason is None:
            self.reason = self._passed()
        if self.killed_at is None and (self.reason is not None or self.proc.poll() is not None):
            self.killed_at = time.monotonic()
            self._kill()

    def _passed(self) -> str | None:
        lim, cg = self.limits, self.cgroups
        if time.monotonic() - self.start > lim.wall_s:
            return "timeout"
        if cg.oom_kills():
            return "memory"
        if cg.pids_refused():
            return "processes"
        cpu = cg.cpu_s()
        if cpu is not None and cpu > lim.cpu_s:
            return "cpu"
        if "memory" in cg.dirs and "pids" in cg.dirs and cpu is not None:
            return None
        return self._watchdog()

    def _watchdog(self) -> str | None:
        """Where a cgroup is missing: sum the tree's memory and CPU, count its processes."""
        try:
            setup = psutil.Process(self.proc.pid)
            tree = setup.children(recursive=True)  # with namespaces: the init and the program's tree
        except psutil.Error:
            return None
        if not self.namespaces:
            tree.append(setup)  # it became the program
        rss, cpu, count = 0, 0.0, 0
        for p in tree:
            try:
                rss += p.memory_info().rss
                t = p.cpu_times()
                cpu += t.user + t.system + t.children_user + t.children_system
                count += p.num_threads()  # tasks, as the pids cgroup and RLIMIT_NPROC count them
            except psutil.Error:
                continue
        lim = self.limits
        if "memory" not in self.cgroups.dirs and rss > lim.memory_mb << 20:
            return "memory"
        helpers = 1 if self.namespaces else 0  # the init
        if "pids" not in self.cgroups.dirs and count - helpers >= lim.processes:
            return "processes"
        if self.cgroups.cpu_s() is None and cpu > lim.cpu_s:
            return "cpu"
        return None

    def _kill(self) -> None:
        if self.all_gone:
            return
        self._status()  # learn the init's pid
        if self.init is not None:
            kill_now([self.init])  # SIGKILL the PID namespace's init: every process in it dies with it
        gone = kill_tree(self.proc, wait_s=10.0)
        self.all_gone = self._kill_cgroups() and gone and (self.init is None or _wait_gone(self.init, 10.0))

    def _kill_cgroups(self) -> bool:
        deadline = time.monotonic() + 10
        if self.cgroups.v2 and os.path.exists(f"{self.cgroups.dirs['pids']}/cgroup.kill"):
            _put(f"{self.cgroups.dirs['pids']}/cgroup.kill", 1)  # the kernel kills all, forks in flight too
        while self.cgroups.dirs and not self.cgroups.empty() and time.monotonic() < deadline:
            for procs in self.cgroups.procs_files():
                kill_now(int(pid) for pid in Path(procs).read_text().split())
            time.sleep(0.02)
        return not self.cgroups.dirs or self.cgroups.empty()

    def end(self) -> None:
        """Return only when every process of the tree is gone; close the pipes."""
        if self.ended:
            return
        self.ended = True
        self._kill()
        for fd in self.bufs:
            try:
                os.close(fd)
            except OSError:
                pass

    def _status(self) -> dict:
        merged: dict = {}
        for line in bytes(self.bufs.get(self.st_r, b"")).splitlines():
            try:
                obj = ast.literal_eval(line.decode())
            except (ValueError, SyntaxError, UnicodeDecodeError):
                continue
            if "error" in merged:  # the first error is the cause; the setup's "init ended" follows it
                obj.pop("error", None)
            merged.update(obj)
        if "init" in merged and self.init is None:
            try:
                self.init = psutil.Process(int(merged["init"]))
            except psutil.Error:
                pass
        return merged

    def _outcome(self) -> Outcome:
        st = self._status()
        if "error" in st and "exit" not in st and "signal" not in st and self.reason is None:
            raise SandboxUnavailable(f"this machine cannot sandbox a hand-in: {st['error']}; {ADVICE}")
        if self.namespaces:
            code = -int(st["signal"]) if "signal" in st else st.get("exit")
        else:  # the setup process became the program
            code = self.proc.returncode
        status, message = self._verdict(st, code)
        return Outcome(
            status=status,
            returncode=code,
            stdout=bytes(self._buf(self.out_r)),
            stderr=bytes(self._buf(self.err_r)),
            result=bytes(self._buf(self.res_r)),
            seconds=time.monotonic() - self.start,
            message=message,
        )

    def _buf(self, fd: int) -> bytearray:
        return self.bufs.get(fd, bytearray())

    def _verdict(self, st: dict, code: int | None) -> tuple[Status, str]:
        lim = self.limits
        reason = self.reason
        if reason is None and code is not None and code < 0:
            if self.cgroups.oom_kills():
                reason = "memory"
            elif -code == signal.SIGXCPU:
                reason = "cpu"
        if reason == "result":
            return (
                "output",
                f"wrote more than the limit of {lim.output_bytes} bytes to its result channel; the rest was cut",
            )
        if reason is not None:
            return reason, _LIMIT_SENTENCE[reason].format(lim=lim)  # type: ignore[return-value]
        if "exec_error" in st:
            return "exit", f"could not start: {st['exec_error']}"
        full = f" after filling its /tmp (the file size limit is {lim.file_mb} MB)" if st.get("tmp_full") else ""
        if code is None:
            return "signal", f"ended without a status: its sandbox's init was stopped ({st.get('init_ended')})"
        if code < 0:
            name = _signal_name(-code)
            if -code == signal.SIGXFSZ:
                return "signal", f"was killed by {name} for writing a file larger than the limit of {lim.file_mb} MB"
            return "signal", f"was killed by {name}{full}"
        if code:
            return "exit", f"exited with status {code}{full}"
        return "ok", ""


_LIMIT_SENTENCE = {
    "timeout": "ran for more than the wall-clock limit of {lim.wall_s:g} s and was stopped",
    "cpu": "used more than the CPU time limit of {lim.cpu_s:g} s and was stopped",
    "memory": "used more than the memory limit of {lim.memory_mb} MB for all its processes and was stopped",
    "processes": "started more than the limit of {lim.processes} processes and was stopped",
    "output": "printed more than the output limit of {lim.output_bytes} bytes (stdout and stderr together), "
    "so the rest was cut and it was stopped",
}


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _wait_gone(proc: psutil.Process, wait_s: float) -> bool:
    """Wait until `proc` has exited (a zombie counts: a PID namespace's init is a zombie only once
    every process of its namespace is gone); whether it did within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            return True
        time.sleep(0.01)
    return False
