"""The helper processes of `mlc_lab.core.sandbox`, run by path as ``python -I -S _sandbox_init.py`` (its config on stdin, marshalled).

Standard library only (it runs before, and outside, anything the sandbox lets in). Three roles:

- **setup** (the process `sandbox.run_sandboxed` starts, in the host's namespaces): asks for
  SIGKILL when the grader dies, joins the sandbox's cgroups, unshares the user (when not root),
  mount, PID, network, IPC, UTS and cgroup namespaces, forks the init and waits for it.
- **init** (PID 1 of the new PID namespace): builds the new root (read-only binds of what Python
  needs, /input read-only, a private /tmp, a minimal /dev, a fresh /proc), pivots into it, forks the
  program and reaps until the program ends; then it reports the program's status on fd 4 and exits,
  and the kernel kills every process left in the namespace.
- **program**: drops to an unprivileged identity (uid 65534 as root; as a normal user, uid 65534 of
  a nested user namespace), no capabilities, no_new_privs, rlimits, cwd /tmp, then execs argv.

fd 3 is the program's result channel; fd 4 carries one dict per line (a Python literal) to the grader (the init's
pid, the program's status, or a setup error) and is closed in the program by its exec. fd 5, when the caller
hands one on (a measuring server's connection to its client: `sandbox.run_sandboxed`'s ``pass_fd``), is the
program's alone: the setup and the init close their copies. A socket keeps the network namespace it was made
in: the program talks to its client through it, and to nothing else (its own namespace has no interface up).
"""

from __future__ import annotations

import ctypes
import fcntl
import marshal
import os
import resource

import _signal as signal  # type: ignore[import-not-found]  # the C module: `signal` adds enum, 10-30 ms of every start

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
# statvfs flag -> mount flag, for the flags a bind inherits and (in a user namespace) must keep
ST_TO_MS = {1: MS_RDONLY, 2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME, 2048: MS_NODIRATIME}
ST_RELATIME = 4096
STATUS_FD, RESULT_FD, PASSED_FD = 4, 3, 5
NOBODY = 65534
DEVICES = ("null", "zero", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    """A step of the setup failed; its text says which, and the OS's reason."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} ({_errno_name(err)})")


def _errno_name(err: int) -> str:
    import errno

    return errno.errorcode.get(err, str(err))


def _b(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_b(src), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def _prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def report(obj: dict) -> None:
    """One line to the grader on fd 4, a Python literal (`repr`; `json` would cost every start
    20 ms of imports); a write below PIPE_BUF is atomic."""
    try:
        os.write(STATUS_FD, (repr(obj) + "\n").encode())
    except OSError:
        pass


# ----------------------------------------------------------------------------------------- the new root


def _mirror(root: str, path: str) -> str:
    """Recreate under `root` every symlink met on the way to `path`; the real path it leads to."""
    parts = [p for p in path.split("/") if p]
    cur, i, hops = "/", 0, 0
    while i < len(parts):
        nxt = os.path.join(cur, parts[i])
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise SetupError(f"too many symlinks on the way to {path}")
            link = os.readlink(nxt)
            inside = root + nxt
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            if not os.path.lexists(inside):
                os.symlink(link, inside)
            target = link if link.startswith("/") else os.path.join(cur, link)
            parts = [p for p in os.path.normpath(target).split("/") if p] + parts[i + 1 :]
            cur, i = "/", 0
            continue
        cur, i = nxt, i + 1
    return cur


def _kept_flags(src: str) -> int:
    """The mount flags of `src`'s mount that a read-only remount of its bind must repeat."""
    flags = os.statvfs(src).f_flag
    out = sum(ms for st, ms in ST_TO_MS.items() if flags & st)
    return out | (MS_RELATIME if flags & ST_RELATIME else 0)


def _bind(src: str, target: str, extra: int = 0) -> None:
    """Bind `src` at `target` read-only, nosuid, nodev (and `extra`)."""
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "wb").close()
    try:
        _mount(src, target, None, MS_BIND)
    except SetupError:  # a tree with locked mounts below it must be bound whole
        _mount(src, target, None, MS_BIND | MS_REC)
    flags = _kept_flags(src) | MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | extra
    _mount(None, target, None, flags)


def _bind_tree(root: str, paths: list[str]) -> None:
    """Bind each host path (file or folder) read-only at the same path under `root`."""
    reals = []
    for path in paths:
        if os.path.lexists(path):
            real = _mirror(root, path)
            if os.path.exists(real):
                reals.append(real)
    done: list[str] = []
    for real in sorted(set(reals), key=lambda p: (p.count("/"), p)):
        if any(real == d or real.startswith(d.rstrip("/") + "/") for d in done):
            continue
        _bind(real, root + real)
        done.append(real)


def _make_dev(root: str, devices: dict[str, str]) -> None:
    """A minimal /dev: the four harmless nodes, the links a program expects, and `devices` (a name
    under /dev -> the host's node or folder of nodes: a GPU's), bound read-write, never executable."""
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=755")
    for name, src in [*((n, f"/dev/{n}") for n in DEVICES), *sorted(devices.items())]:
        target = f"{dev}/{name}"
        if os.path.isdir(src):
            os.makedirs(target, exist_ok=True)
            _mount(src, target, None, MS_BIND | MS_REC)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "wb").close()
            _mount(src, target, None, MS_BIND)
        _mount(None, target, None, _kept_flags(src) | MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(link, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")
    os.symlink("/tmp", f"{dev}/shm")
    _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=755")


def build_root(cfg: dict) -> None:
    """Build the new root in cfg["work"]/root and pivot into it (the init does this)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = os.path.join(cfg["work"], "root")
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    # The private /tmp first: a checkout or a venv that lives under the host's /tmp (a CI clone) is
    # then bound read-only inside it, at its own path, instead of colliding with it.
    os.makedirs(root + "/tmp")
    size = f"size={cfg['file_mb']}m,nr_inodes=65536,mode=1777"
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, size)
    _bind_tree(root, cfg["ro"])
    _make_dev(root, cfg["devices"])
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in ("/proc/sys", "/proc/sysrq-trigger"):  # the kernel's knobs: read-only, whoever it runs as
        if not os.path.exists(root + path):
            continue
        _mount(root + path, root + path, None, MS_BIND | MS_REC)
        _mount(None, root + path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _bind(os.path.join(cfg["work"], "input"), root + "/input", MS_NOEXEC)
    os.makedirs(root + "/.old")
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], _b(root), _b(root + "/.old")), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _check(_libc.sethostname(b"sandbox", 7), "sethostname")


# ----------------------------------------------------------------------------------------- seccomp

# x86_64 system calls a hand-in never needs and a kernel exploit often does: namespaces and mounts
# (it could build a view of its own), tracing, keyrings, BPF, userfaultfd, io_uring, perf, modules.
DENIED_X86_64 = {
    "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
}  # fmt: skip
SYS_CLONE, SYS_CLONE3 = 56, 435
AUDIT_ARCH_X86_64, X32_SYSCALL_BIT = 0xC000003E, 0x40000000
NAMESPACE_FLAGS = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
NAMESPACE_FLAGS |= CLONE_NEWNET | 0x80  # and CLONE_NEWTIME
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO, RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program() -> list[tuple[int, int, int, int]]:
    """The BPF filter: EPERM for the denied calls and for clone() with a namespace flag, ENOSYS for
    clone3() (its flags cannot be read; glibc then falls back to clone()), the rest allowed."""
    body: list = [(LD_ABS, 0, 0, 0)]  # the system call's number
    body.append((JGE, "deny", 0, X32_SYSCALL_BIT))
    body += [(JEQ, "deny", 0, nr) for nr in sorted(DENIED_X86_64.values())]
    body.append((JEQ, "enosys", 0, SYS_CLONE3))
    body.append((JEQ, 0, "allow", SYS_CLONE))
    body.append((LD_ABS, 0, 0, 16))  # clone's flags (the low half of its first argument)
    body.append((JSET, "deny", "allow", NAMESPACE_FLAGS))
    prog: list = [(LD_ABS, 0, 0, 4), (JEQ, 1, 0, AUDIT_ARCH_X86_64), (RET, 0, 0, RET_KILL), *body]
    labels = {"allow": len(prog), "deny": len(prog) + 1, "enosys": len(prog) + 2}
    prog += [(RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | 1), (RET, 0, 0, RET_ERRNO | 38)]
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out.append((code, jt, jf, k))
    return out


def install_seccomp() -> bool:
    """Install the filter (x86_64 only: the numbers are that architecture's); whether it was."""
    if os.uname().machine != "x86_64":
        return False
    prog = seccomp_program()
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    prctl = _libc["prctl"]  # a fresh function object: this call passes a pointer
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    _check(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")
    return True


# ----------------------------------------------------------------------------------------- identity


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _map_self(inside: int, outside: int) -> None:
    """Map this user namespace's `inside` uid and gid to the parent namespace's `outside` ones."""
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{inside} {outside} 1\n")
    _write("/proc/self/gid_map", f"{inside} {outside} 1\n")


def drop_identity(cfg: dict) -> None:
    """Become the unprivileged sandbox user: no groups, no capabilities, no new privileges."""
    if cfg["userns"]:
        # root of the outer user namespace until now: a nested one where we are uid 65534
        _check(_libc.unshare(CLONE_NEWUSER), "unshare a nested user namespace")
        _map_self(NOBODY, 0)
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):  # the bounding set, so that no exec can get one back
        _prctl(PR_CAPBSET_DROP, cap)
    if not cfg["userns"]:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)  # from root: clears every capability
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_limits(cfg: dict) -> None:
    cpu = max(1, int(cfg["cpu_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    size = cfg["file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    if cfg["nproc"]:
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"], cfg["nproc"]))


def exec_program(cfg: dict, cwd: str) -> None:
    """In the program's process: limits, identity, cwd, exec; on failure, say why on fd 4."""
    try:
        os.set_inheritable(RESULT_FD, True)
        if cfg["pass_fd"]:
            os.set_inheritable(PASSED_FD, True)
        os.closerange(PASSED_FD + 1 if cfg["pass_fd"] else STATUS_FD + 1, 1 << 16)
        _write("/proc/self/oom_score_adj", "1000")  # when memory runs out, hand-ins go first
        if cfg["namespaces"]:
            drop_identity(cfg)
        else:
            _prctl(PR_SET_NO_NEW_PRIVS, 1)
        set_limits(cfg)
        os.chdir(cwd)
        install_seccomp()  # last: the calls above (unshare, mount) are among those it denies
        os.set_inheritable(STATUS_FD, False)
        argv, env = cfg["argv"], cfg["env"]
        os.execvpe(argv[0], argv, env)
    except Exception as exc:  # noqa: BLE001 - told to the grader, whatever it was
        what = f"cannot run {cfg['argv'][0]}: " if isinstance(exc, OSError) else ""
        report({"exec_error": what + str(exc)})
    os._exit(127)


# ----------------------------------------------------------------------------------------- the roles


def _status(wait: int) -> dict:
    if os.WIFSIGNALED(wait):
        return {"signal": os.WTERMSIG(wait)}
    return {"exit": os.WEXITSTATUS(wait)}


def init_main(cfg: dict) -> None:
    """PID 1 of the sandbox: build the root, start the program, reap until it ends."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if cfg["setup_gone"]():
            os._exit(1)
        build_root(cfg)
    except Exception as exc:  # noqa: BLE001
        report({"error": f"the sandbox could not be set up: {exc}"})
        os._exit(1)
    pid = os.fork()
    if pid == 0:
        exec_program(cfg, "/tmp")
    _prctl(PR_SET_DUMPABLE, 0)  # the program may not ptrace its init
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
    _close_program_fds(cfg)
    while True:
        done, wait = os.waitpid(-1, 0)
        if done == pid:
            break
    st = os.statvfs("/tmp")
    report({**_status(wait), "tmp_full": st.f_bavail == 0 or st.f_favail == 0})
    os._exit(0)


def _move_fds(fds: list[int]) -> None:
    """Put the result channel at fd 3, the status channel at fd 4 and the passed fd (if any) at fd 5."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]
    for fd in fds:
        os.close(fd)
    for fd, target in zip(high, (RESULT_FD, STATUS_FD, PASSED_FD)):
        os.dup2(fd, target)
        os.close(fd)


def _close_program_fds(cfg: dict) -> None:
    """The setup's and the init's copies of what only the program uses: when the program ends, its
    result channel and its connection close with it."""
    os.close(RESULT_FD)
    if cfg["pass_fd"]:
        os.close(PASSED_FD)


def setup_main(cfg: dict) -> None:
    """The process the grader started: limits of the tree, namespaces, then the init; wait for it."""
    _move_fds(cfg["fds"])
    os.umask(0o022)  # the new root's folders must be open to the sandbox's user, whatever the grader's umask
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != cfg["parent"]:
            os._exit(1)  # the grader died before we could ask to die with it
        for procs in cfg["cgroups"]:
            _write(procs, str(os.getpid()))
        if not cfg["namespaces"]:
            exec_program(cfg, cfg["cwd"])
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
        try:
            _check(_libc.unshare(flags | (CLONE_NEWUSER if cfg["userns"] else 0)), "unshare")
        except SetupError as exc:
            raise SetupError(_which_namespace(cfg["userns"]) or str(exc)) from None
        if cfg["userns"]:
            _map_self(0, cfg["uid"])
    except Exception as exc:  # noqa: BLE001
        report({"error": str(exc)})
        os._exit(1)
    parent = os.getpid()
    cfg["setup_gone"] = lambda: not os.path.exists(f"/proc/{parent}")
    pid = os.fork()
    if pid == 0:
        init_main(cfg)
    report({"init": pid})
    for fd in (0, 1, 2):
        os.close(fd)
    _close_program_fds(cfg)
    _, wait = os.waitpid(pid, 0)
    if wait != 0:
        report({"init_ended": _status(wait)})  # killed (by the grader, or the machine's OOM killer)
    os._exit(0)


def _which_namespace(userns: bool) -> str | None:
    """The first namespace this machine refuses, named (a forked probe per kind)."""
    kinds = [("user", CLONE_NEWUSER)] if userns else []
    kinds += [("mount", CLONE_NEWNS), ("PID", CLONE_NEWPID), ("network", CLONE_NEWNET)]
    kinds += [("IPC", CLONE_NEWIPC), ("UTS", CLONE_NEWUTS), ("cgroup", CLONE_NEWCGROUP)]
    for name, flag in kinds:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if _libc.unshare(flag | (CLONE_NEWUSER if userns else 0)) == 0 else ctypes.get_errno())
        err = os.WEXITSTATUS(os.waitpid(pid, 0)[1])
        if err:
            return f"unshare: the machine refuses a new {name} namespace: {os.strerror(err)} ({_errno_name(err)})"
    return None


def _read_config() -> dict:
    """The config from stdin (a pipe the grader closes), then stdin is /dev/null."""
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return marshal.loads(b"".join(chunks))


if __name__ == "__main__":
    setup_main(_read_config())
