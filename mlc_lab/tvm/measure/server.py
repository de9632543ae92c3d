"""A measuring machine's RPC server: TVM's own listener (`tvm.rpc.server`), each session run by the caller's
runner instead of TVM's forked child.

TVM's server accepts a connection, checks the client's key, registers with the tracker, and then (TVM
0.27's ``_serving``) forks a child of the listening process that serves the session with the server's
user, files and network. Here `serve` keeps TVM's listener and hands each accepted connection to
`run_session(sock, opts)`: `mlc_lab.core.server_sandbox` runs the session (`mlc_lab.tvm.measure.session`)
in the sandbox. The runner returns None when the session ended as sessions do (the client closed it),
or ``(kind, sentence)`` when it was stopped (``timeout``: a time limit; ``crash``: a signal, a memory or
process limit, an exit); the client then gets the sentence through TVM's channel for a session's error
(`tell_client`), the listener logs it and serves the next connection.

The command a lab admin runs is ``python -m mlc_lab.core.server_sandbox`` (docs/measuring.md): this
module is the part of it that imports TVM, and `add_arguments` its flags that are TVM's server's.
"""

from __future__ import annotations

import argparse
import logging
import socket
from typing import Callable

from mlc_lab.tvm.measure.session import ENDED, TIMEOUT_MARK

log = logging.getLogger("mlc_lab.server")

Verdict = tuple[str, str]  # ("timeout" | "crash", the sentence)
RunSession = Callable[[socket.socket, dict], "Verdict | None"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of TVM's server (``tvm.exec.rpc_server``) that a measuring machine uses."""
    p.add_argument("--tracker", required=True, help="the RPC tracker, HOST:PORT")
    p.add_argument("--key", required=True, help="the key the tracker hands this machine out under")
    p.add_argument("--host", default="0.0.0.0", help="the address to listen on (default: 0.0.0.0)")
    p.add_argument("--port", type=int, default=9090, help="the first port to try (default: 9090)")
    p.add_argument("--port-end", type=int, default=9199, help="the last port to try, exclusive (default: 9199)")
    p.add_argument("--custom-addr", help="the address to give the tracker (behind NAT)")


def tracker_address(p: argparse.ArgumentParser, spec: str) -> tuple[str, int]:
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--tracker must be HOST:PORT, not {spec!r}")
    return host, int(port)


def tell_client(sock: socket.socket, verdict: Verdict) -> None:
    """The session's end in one sentence, as the error of the call the client is waiting on (the way
    TVM's own server says a session timed out)."""
    from tvm.rpc import _ffi_api

    kind, sentence = verdict
    mark = f"{TIMEOUT_MARK}: " if kind == "timeout" else ""
    try:
        _ffi_api.ReturnException(sock.fileno(), f"{mark}{ENDED}: {sentence}")
    except Exception as exc:  # noqa: BLE001 - the client may be gone already
        log.info("the client could not be told (%s)", str(exc).strip().splitlines()[-1:])


def serve(args: argparse.Namespace, run_session: RunSession) -> int:
    """Listen as TVM's server does (registered with ``args.tracker`` under ``args.key``) and run every
    session with `run_session`; returns when the listener stops (it does not, unless TVM's listening
    loop fails)."""
    from tvm.rpc import server as tvm_server

    def serving(sock, addr, opts, load_library):  # noqa: ANN001,ANN202,ARG001 - TVM's signature
        log.info("connected from %s", addr)
        try:
            verdict = run_session(sock, dict(opts))
        except Exception as exc:  # noqa: BLE001 - a session that cannot start is that session's end
            verdict = ("crash", f"could not be started on the server ({exc})")
        if verdict is not None:
            log.warning("a session from %s was stopped: %s; serving on", addr, verdict[1])
            tell_client(sock, verdict)
        try:
            sock.close()
        except OSError:
            pass
        log.info("finished serving %s", addr)

    tvm_server._serving = serving  # noqa: SLF001  (TVM's own session handler, in the listening loop)
    tracker = tracker_address(argparse.ArgumentParser(), args.tracker)
    port = tvm_server._popen_start_rpc_server(  # noqa: SLF001 - TVM's server, in this process
        args.host, args.port, args.port_end, tracker_addr=tracker, key=args.key, custom_addr=args.custom_addr
    )
    log.info("listening on %s:%s, registered with the tracker %s:%s as %r", args.host, port, *tracker, args.key)
    tvm_server.PopenRPCServerState.current.thread.join()
    return 1


if __name__ == "__main__":
    raise SystemExit(
        "the measuring server is `python -m mlc_lab.core.server_sandbox` (each session in the sandbox): "
        "see docs/measuring.md"
    )
