"""A measuring machine's RPC server whose every session runs in the sandbox: the command a lab admin runs.

    python -m mlc_lab.core.server_sandbox --tracker HOST:9190 --key class-gpu [--memory-mb 4096] [--time-s 600]

TVM's listener (`mlc_lab.tvm.measure.server`) accepts each connection and checks its key; the session
then runs in a fresh sandbox (`mlc_lab.core.sandbox`, the ``rpc_session`` row of `WORKER_OPS`) instead of
a fork of the server: as an unprivileged user (uid 65534; in a user namespace when the server is not
root), in a read-only root that holds only what Python and TVM's runtime need, a private ``/tmp`` where
the uploaded libraries land, its own PID, IPC, UTS and network namespaces (the connection, made in the
host's, keeps working: it is the one way out), no core dumps, seccomp, no_new_privs, and limits on the
whole tree: memory, processes, CPU time, and the wall time of the session (the client's own time-out,
at most ``--time-s``). Where the machine has NVIDIA's device nodes they are bound into the sandbox's
``/dev`` (`gpu_devices`), with the CUDA toolkit's folders read-only, so CUDA works inside.

A session that crashes, exceeds a limit or never ends is stopped with its whole tree; its client hears
why in one sentence, the server logs it and serves the next connection. ``--unsafe-same-user`` runs
each session as the server's own user with the host's files (only the limits kept), for a machine
that refuses namespaces: the admin's explicit choice, never a fallback.

Why here: the listener imports TVM (only ``mlc_lab.tvm`` may) and the sandbox is core's (``mlc_lab.tvm``
may not import core); core imports the one and hands the other a runner.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import socket
import sys
from dataclasses import dataclass, field

from mlc_lab.core.sandbox import Extras, Outcome, SandboxUnavailable, probe
from mlc_lab.model.worker_ops import WORKER_OPS

OP = "rpc_session"
LIMITS: dict = dict(WORKER_OPS[OP].limits or {})
# NVIDIA's device nodes (a GPU, its control and unified-memory devices, MIG's capabilities)
GPU_NODES = ("nvidia[0-9]*", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")

log = logging.getLogger("mlc_lab.server")


def gpu_devices(dev: str = "/dev") -> dict[str, str]:
    """NVIDIA's device nodes under `dev`, by name (what a session's sandbox binds at ``/dev/NAME``)."""
    found: dict[str, str] = {}
    for pattern in GPU_NODES:
        for path in sorted(glob.glob(os.path.join(dev, pattern))):
            found[os.path.basename(path)] = path
    return found


def cuda_paths() -> tuple[dict[str, str], tuple[str, ...]]:
    """The CUDA toolkit's environment a session inherits (``CUDA_HOME``, ``CUDA_PATH``, the absolute
    folders of ``LD_LIBRARY_PATH``) and the folders it names, bound read-only into the sandbox."""
    env: dict[str, str] = {}
    folders: list[str] = []
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(name, "")
        if os.path.isabs(value) and os.path.isdir(value):
            env[name] = value
            folders.append(value)
    libs = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isabs(p) and os.path.isdir(p)]
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs)
        folders += libs
    folders += [h for h in sorted(glob.glob("/usr/local/cuda*")) if os.path.isdir(h)]
    return env, tuple(dict.fromkeys(folders))


@dataclass(frozen=True)
class SessionSandbox:
    """How a measuring server confines each session: the most wall time one may take (the client's own
    time-out when shorter), the memory of its whole tree, its /tmp, TVM's threads in it, the GPU's
    device nodes bound in, and ``unsafe_same_user`` (the server's user and files, only the limits)."""

    max_s: float = float(LIMITS["wall_s"])
    memory_mb: int = int(LIMITS["memory_mb"])
    tmp_mb: int = int(LIMITS["file_mb"])
    threads: int = 1
    devices: dict[str, str] = field(default_factory=dict)
    unsafe_same_user: bool = False

    def wall_s(self, opts: dict) -> float:
        asked = opts.get("timeout")
        return min(self.max_s, float(asked)) if asked else self.max_s

    def facts(self, wall_s: float) -> dict:
        """What the session says confines it, when its client asks (`mlc_lab.tvm.measure.session`)."""
        return {
            "sandboxed": not self.unsafe_same_user,
            "limits": {"wall_s": wall_s, "memory_mb": self.memory_mb, "tmp_mb": self.tmp_mb, "threads": self.threads},
            "devices": sorted(self.devices),
        }

    def run(self, sock: socket.socket, opts: dict) -> tuple[str, str] | None:
        """One session on the accepted connection `sock`, in its sandbox; None when it ended as sessions
        do, else ``(kind, sentence)`` (`mlc_lab.tvm.measure.server`'s runner)."""
        wall = self.wall_s(opts)
        out = self.start(["--fd", "5", "--facts", json.dumps(self.facts(wall))], wall, sock.fileno())
        return verdict(out)

    def start(self, args: list[str], wall_s: float, fd: int | None = None) -> Outcome:
        from mlc_lab.core.kernel_sandbox import run_env
        from mlc_lab.core.worker import child_argv, sandboxed

        cuda_env, cuda_folders = cuda_paths()
        return sandboxed(
            OP,
            child_argv(OP, *args),
            inputs={},
            env={**run_env(self.threads), **cuda_env},
            unsafe_same_user=self.unsafe_same_user,
            extras=Extras(pass_fd=fd, devices=dict(self.devices), read_only=cuda_folders),
            wall_s=wall_s,
            cpu_s=wall_s * (self.threads + 1),  # every thread of the tree counts
            memory_mb=self.memory_mb,
            processes=int(LIMITS["processes"]) + 2 * self.threads,
            file_mb=self.tmp_mb,
        )


def verdict(out: Outcome) -> tuple[str, str] | None:
    """None for a session that ended as sessions do; else its kind and sentence (``timeout`` for a
    time limit, ``crash`` for the rest)."""
    if out.status == "ok":
        return None
    return ("timeout" if out.status in ("timeout", "cpu") else "crash"), out.message


def check(box: SessionSandbox) -> str:
    """Start the session program once in its sandbox (it loads TVM's runtime and, where there is one,
    the GPU's, then ends); one line for the log. `SandboxUnavailable` when it cannot run there."""
    if not box.unsafe_same_user:
        reason = probe()
        if reason is not None:
            raise SandboxUnavailable(reason)
    out = box.start(["--check"], 120.0)
    if out.status != "ok":
        tail = out.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise SandboxUnavailable(f"a session cannot run in the sandbox here: it {out.message}: {' | '.join(tail)}")
    return out.stdout.decode("utf-8", "replace").strip()


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")  # the listener needs TVM's runtime alone, as its sessions
    from mlc_lab._threads import tvm_thread_env
    from mlc_lab.tvm.measure import server

    p = argparse.ArgumentParser(prog="python -m mlc_lab.core.server_sandbox", description=__doc__.split("\n\n")[0])
    server.add_arguments(p)
    p.add_argument("--memory-mb", type=int, default=LIMITS["memory_mb"], help="memory of one session's whole tree")
    p.add_argument("--time-s", type=float, default=LIMITS["wall_s"], help="the most wall time a session may take")
    p.add_argument("--tmp-mb", type=int, default=LIMITS["file_mb"], help="a session's private /tmp (its uploads)")
    p.add_argument(
        "--unsafe-same-user",
        action="store_true",
        help="run sessions as this user with this machine's files (only the limits kept): for a machine that "
        "refuses namespaces; a student's kernel then runs as you",
    )
    args = p.parse_args(argv)
    server.tracker_address(p, args.tracker)
    for name in ("memory_mb", "time_s", "tmp_mb"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be a positive number")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    box = SessionSandbox(
        max_s=args.time_s,
        memory_mb=args.memory_mb,
        tmp_mb=args.tmp_mb,
        threads=int(tvm_thread_env()["TVM_NUM_THREADS"]),
        devices=gpu_devices(),
        unsafe_same_user=args.unsafe_same_user,
    )
    try:
        line = check(box)
    except SandboxUnavailable as exc:
        print(f"mlc_lab server: {exc}", file=sys.stderr)
        return 2
    mode = "as this user (--unsafe-same-user)" if box.unsafe_same_user else "each in the sandbox"
    log.info("sessions run %s: %s; %s", mode, json.dumps(box.facts(box.max_s)), line)
    return server.serve(args, box.run)


if __name__ == "__main__":
    sys.exit(main())
