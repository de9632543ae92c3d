"""A measuring machine's RPC server: TVM's own (``tvm.exec.rpc_server``), with TVM's runtime alone, CUDA
on when the machine has it, and a server that outlives a kernel that crashes.

    python -m mlc_lab.tvm.measure.server --tracker HOST:9190 --key class-gpu [--port 9090] [--host 0.0.0.0]

- **Runtime alone**: ``TVM_USE_RUNTIME_LIB=1`` is set before TVM loads (what a lab admin installs: the
  ``apache-tvm`` wheel, or its ``tvm`` package without ``lib/libtvm_compiler.so``, and ``apache-tvm-ffi``).
- **The CUDA sidecar**: TVM's runtime-only mode does not load ``tvm/lib/libtvm_runtime_cuda.so``; the
  server loads it (after ``libcudart.so.13``, found under ``$CUDA_HOME`` or /usr/local/cuda*) in the
  process that serves, so every session has ``remote.cuda(0)`` and loads the CUDA modules mlc_lab sends
  (compiled where they were built: `mlc_lab.tvm.measure.artifact`). A machine without it serves the CPU.
- **A crashing kernel**: TVM 0.27's server runs each session in a forked child and stops listening when
  that child exits badly (a kernel that segfaults or aborts); this one says so in its log and goes on
  serving, so one candidate costs a session, not the machine.

The same flags as ``tvm.exec.rpc_server``'s main ones. Nothing here imports the compiler.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import logging
import os
import sys

os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")  # before anything loads TVM

log = logging.getLogger("mlc_lab.server")

CUDART_GLOBS = (
    "{home}/targets/x86_64-linux/lib/libcudart.so.*",
    "{home}/lib64/libcudart.so.*",
    "{home}/lib/libcudart.so.*",
)


def cuda_sidecar() -> str:
    """Load TVM's CUDA runtime into this process (runtime-only mode leaves it out); one line saying
    whether CUDA is on, and why not."""
    import tvm

    if tvm.runtime.enabled("cuda"):
        return "CUDA: on"
    lib = os.path.join(os.path.dirname(tvm.__file__), "lib", "libtvm_runtime_cuda.so")
    if not os.path.exists(lib):
        return "CUDA: off (this TVM has no libtvm_runtime_cuda.so)"
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), *sorted(glob.glob("/usr/local/cuda*"))]
    for home in [h for h in homes if h]:
        for pattern in CUDART_GLOBS:
            for cudart in sorted(glob.glob(pattern.format(home=home))):
                try:
                    ctypes.CDLL(cudart, ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    continue
    try:
        ctypes.CDLL(lib, ctypes.RTLD_GLOBAL)
    except OSError as exc:
        return f"CUDA: off ({exc})"
    if not tvm.runtime.enabled("cuda"):
        return "CUDA: off (its runtime loaded, but TVM does not see it)"
    return "CUDA: on" if tvm.cuda(0).exist else "CUDA: on, but no GPU is visible"


def serve_on() -> None:
    """Runs in the process that listens (TVM's server starts one): the CUDA sidecar, and sessions that
    end badly no longer stop the listening."""
    from tvm.rpc import server as tvm_server

    logging.basicConfig(level=logging.INFO)
    log.info("%s", cuda_sidecar())
    original = tvm_server._serving  # noqa: SLF001  (TVM's own session handler)

    def serving(sock, addr, opts, load_library):  # noqa: ANN001,ANN202 - TVM's signature
        cwd = os.getcwd()
        try:
            original(sock, addr, opts, load_library)
        except RuntimeError as exc:  # the session's child exited badly: its kernel crashed
            log.warning("a session from %s ended badly (%s); serving on", addr, exc)
            os.chdir(cwd)
            try:
                sock.close()
            except OSError:
                pass

    tvm_server._serving = serving  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mlc_lab.tvm.measure.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--tracker", required=True, help="the RPC tracker, HOST:PORT")
    p.add_argument("--key", required=True, help="the key the tracker hands this machine out under")
    p.add_argument("--host", default="0.0.0.0", help="the address to listen on (default: 0.0.0.0)")
    p.add_argument("--port", type=int, default=9090, help="the first port to try (default: 9090)")
    p.add_argument("--port-end", type=int, default=9199, help="the last port to try, exclusive (default: 9199)")
    p.add_argument("--custom-addr", help="the address to give the tracker (behind NAT)")
    args = p.parse_args(argv)
    host, _, port = args.tracker.rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--tracker must be HOST:PORT, not {args.tracker!r}")
    from tvm import rpc

    logging.basicConfig(level=logging.INFO)
    server = rpc.Server(
        args.host,
        args.port,
        args.port_end,
        key=args.key,
        tracker_addr=(host, int(port)),
        custom_addr=args.custom_addr,
        server_init_callback=serve_on,
    )
    server.proc.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
