"""A machine that goes away mid-measurement, on cue: TVM's own RPC server (TVM's runtime alone) that sends
its whole process group SIGKILL, as ``kill -9`` of the machine's server would, in its Nth session
(``$DIE_AT_SESSION``, default 2: it measures one candidate first), as the client asks it to load the
library it has just sent: always mid-measurement.

    python -m tests.unit.dying_server --tracker HOST:PORT --key KEY [--host H] [--port P] [--port-end E]
"""

from __future__ import annotations

import os
import signal
import sys

os.environ.setdefault("TVM_USE_RUNTIME_LIB", "1")


def arm() -> None:
    """In TVM's listening process: count the sessions; in the Nth, die as the client asks to load the
    library it sent (it is then surely mid-measurement)."""
    import tvm_ffi
    from tvm.rpc import server as tvm_server

    serving_before, env_before = tvm_server._serving, tvm_server._server_env  # noqa: SLF001
    seen = [0]

    def serving(sock, addr, opts, load_library):  # noqa: ANN001,ANN202 - TVM's signature
        seen[0] += 1  # the session's forked process inherits the count
        serving_before(sock, addr, opts, load_library)

    def server_env(load_library, work_path=None):  # noqa: ANN001,ANN202 - TVM's signature
        temp = env_before(load_library, work_path)
        load = tvm_ffi.get_global_func("tvm.rpc.server.load_module")

        def load_or_die(file_name):  # noqa: ANN001,ANN202
            if seen[0] >= int(os.environ.get("DIE_AT_SESSION", "2")):
                os.killpg(os.getpgrp(), signal.SIGKILL)
            return load(file_name)

        tvm_ffi.register_global_func("tvm.rpc.server.load_module", load_or_die, override=True)
        return temp

    tvm_server._serving, tvm_server._server_env = serving, server_env  # noqa: SLF001


def main(argv: list[str]) -> int:
    import argparse

    from tvm import rpc

    p = argparse.ArgumentParser()
    p.add_argument("--tracker", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9090)
    p.add_argument("--port-end", type=int, default=9199)
    args = p.parse_args(argv)
    host, _, port = args.tracker.rpartition(":")
    server = rpc.Server(
        args.host, args.port, args.port_end, key=args.key, tracker_addr=(host, int(port)), server_init_callback=arm
    )
    server.proc.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
