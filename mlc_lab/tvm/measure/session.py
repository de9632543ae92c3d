"""One session of a measuring machine's RPC server, run in a sandbox of its own.

    python -m mlc_lab.core.worker_main --child rpc_session --fd 5 --facts JSON      (`main`)

The server (`mlc_lab.core.server_sandbox`) accepts a client's connection, checks its key as TVM's
server does, and starts this program in a fresh sandbox with the connection as fd 5; it then serves
TVM's RPC session on that socket, as TVM's own server does in its forked child (`tvm.rpc.server`):
uploads land in a folder of the sandbox's private ``/tmp``, libraries load from there, functions run
there. The process holds TVM's runtime library alone, loaded without TVM's Python package (`load_runtime`:
the package's import would double a session's start), and, where the machine has a GPU, TVM's CUDA
runtime (`cuda_sidecar`).

Before anything is uploaded, a client may ask ``mlc_lab.session.confinement`` what confines the
session: the server's `--facts` (its limits, the mode) and what the process sees itself (its uid,
its network interfaces, its PID). `mlc_lab.tvm.measure.pool` asks it before it sends a hand-in's
kernel, and refuses a server that cannot answer (TVM's own server runs kernels as its own user).

A session that crashes, exceeds a limit or never ends is stopped by the sandbox; the server then tells
the client one sentence through TVM's own channel for it (``rpc.ReturnException``), marked with
`ENDED` (and, for a time limit, with TVM's ``RPCSessionTimeoutError``), and `session_verdict` reads
it back on the client's side.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import json
import logging
import os
import socket
import tempfile
from typing import Any

log = logging.getLogger("mlc_lab.session")

CONFINEMENT = "mlc_lab.session.confinement"  # the global function a client asks
ENDED = "mlc_lab: the session ended"  # marks the server's sentence about a session it stopped
TIMEOUT_MARK = "RPCSessionTimeoutError"  # TVM's own mark of a session that ran out of time
KDL_CUDA = 2  # DLPack's device type of CUDA

CUDART_GLOBS = (
    "{home}/targets/x86_64-linux/lib/libcudart.so.*",
    "{home}/lib64/libcudart.so.*",
    "{home}/lib/libcudart.so.*",
)


def load_runtime() -> str:
    """Load TVM's runtime library into this process as ``import tvm`` does under ``TVM_USE_RUNTIME_LIB=1``
    (``RTLD_GLOBAL``), without TVM's Python package: its import is most of a session's start, and a
    session needs only the runtime's own functions and the three below. TVM's package folder."""
    import tvm_ffi  # noqa: F401  (first: it loads libtvm_ffi.so, which the runtime library links to)

    spec = importlib.util.find_spec("tvm")  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("TVM is not installed in this Python")
    folder = list(spec.submodule_search_locations)[0]
    ctypes.CDLL(os.path.join(folder, "lib", "libtvm_runtime.so"), ctypes.RTLD_GLOBAL)
    return folder


def cuda_sidecar(folder: str) -> str:
    """Load TVM's CUDA runtime (from TVM's package `folder`) into this process, after the toolkit's
    ``libcudart`` (runtime-only mode leaves it out); one line saying whether CUDA is on, and why not."""
    import tvm_ffi

    enabled = tvm_ffi.get_global_func("runtime.RuntimeEnabled")
    if enabled("cuda"):
        return "CUDA: on"
    lib = os.path.join(folder, "lib", "libtvm_runtime_cuda.so")
    if not os.path.exists(lib):
        return "CUDA: off (this TVM has no libtvm_runtime_cuda.so)"
    for cudart in cudart_candidates():
        try:
            ctypes.CDLL(cudart, ctypes.RTLD_GLOBAL)
            break
        except OSError:
            continue
    try:
        ctypes.CDLL(lib, ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return f"CUDA: off ({exc})"
    if not enabled("cuda"):
        return "CUDA: off (its runtime loaded, but TVM does not see it)"
    exists = tvm_ffi.get_global_func("runtime.GetDeviceAttr")(KDL_CUDA, 0, 0)  # attribute 0: the device exists
    return "CUDA: on" if exists else "CUDA: on, but no GPU is visible"


def cuda_homes() -> list[str]:
    """Where a CUDA toolkit's runtime may be: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*."""
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), *sorted(glob.glob("/usr/local/cuda*"))]
    return [h for h in homes if h]


def cudart_candidates() -> list[str]:
    return [
        c for home in cuda_homes() for pattern in CUDART_GLOBS for c in sorted(glob.glob(pattern.format(home=home)))
    ]


def seen_from_inside() -> dict:
    """What confines this process, as it sees it: its user, its PID, its network interfaces."""
    try:
        lines = open("/proc/net/dev").read().splitlines()[2:]
        interfaces = sorted(line.split(":", 1)[0].strip() for line in lines)
    except OSError:
        interfaces = []
    return {"uid": os.getuid(), "pid": os.getpid(), "interfaces": interfaces, "hostname": os.uname().nodename}


def serve(fd: int, facts: dict) -> None:
    """Serve TVM's RPC session on the connected socket `fd` until the client closes it: the functions
    TVM's own session registers in Python (``tvm.rpc.server._server_env``: where uploads go, how a
    library loads), and `CONFINEMENT`; the rest is the runtime's."""
    import tvm_ffi

    confinement = json.dumps({**facts, "inside": seen_from_inside()})
    work = tempfile.mkdtemp(prefix="session_")  # in the sandbox's private /tmp

    def workpath(name: str) -> str:
        return os.path.join(work, name)

    def load_module(name: str) -> Any:
        log.info("load_module %s", workpath(name))
        return tvm_ffi.load_module(os.path.realpath(workpath(name)))

    tvm_ffi.register_global_func("tvm.rpc.server.workpath", workpath, override=True)
    tvm_ffi.register_global_func("tvm.rpc.server.load_module", load_module, override=True)
    tvm_ffi.register_global_func(CONFINEMENT, lambda: confinement, override=True)
    os.chdir(work)
    tvm_ffi.get_global_func("rpc.ServerLoop")(fd)


def session_verdict(text: str) -> tuple[str, str] | None:
    """The kind (``timeout`` or ``crash``) and the sentence of a session the server stopped, read
    from the error a client's call raised; None when the error is not the server's word on it."""
    if ENDED not in text:
        return None
    sentence = text[text.index(ENDED) + len(ENDED) :].lstrip(": ").splitlines()[0].strip()
    kind = "timeout" if TIMEOUT_MARK in text else "crash"
    return kind, f"the session that ran the program {sentence}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m mlc_lab.core.worker_main --child rpc_session", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--fd", type=int, help="the connected socket, handed on by the server")
    p.add_argument("--facts", default="{}", help="what the server says confines the session (JSON)")
    p.add_argument("--check", action="store_true", help="load TVM's runtime (and CUDA's), say what is seen, end")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")  # before anything loads TVM (the server sets it too)
    cuda = cuda_sidecar(load_runtime())
    if args.check:
        print(f"a session process sees {json.dumps(seen_from_inside())}; {cuda}")
        return 0
    log.info("%s", cuda)
    if args.fd is None:
        p.error("--fd is needed (or --check)")
    facts = json.loads(args.facts)
    if not isinstance(facts, dict):
        p.error("--facts must be a JSON object")
    sock = socket.socket(fileno=args.fd)  # fails here, not in TVM, when fd is not a socket
    serve(sock.detach(), facts)
    return 0
