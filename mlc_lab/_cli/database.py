"""`mlc-lab database serve DIR [--port 9190] [--tracker HOST:PORT --key KEY]`: a class's tuning database.

Serves a meta_schedule database folder over TVM RPC; students tune with
``mlc_lab.tune(..., database="rpc://TEACHER:9190")`` (or ``rpc://TRACKER:9190/KEY`` through the class's
tracker). Runs until interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "database",
        help="serve a class's shared tuning database over TVM RPC",
        description="Serve the meta_schedule database in DIR (created when missing) so that every student's "
        "tune(..., database='rpc://HOST:PORT') starts from the class's records and adds its own.",
    )
    p.add_argument("action", choices=["serve"], help="serve: run the database server until interrupted")
    p.add_argument("dir", help="the database folder (database_workload.json, database_tuning_record.json)")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    p.add_argument("--port", type=int, default=9190, help="port to listen on (default: 9190)")
    p.add_argument("--tracker", help="HOST:PORT of the class's RPC tracker, to register the server there")
    p.add_argument("--key", default=None, help="the key to register under (default: mlc-lab-database)")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.errors import UsageError
    from mlc_lab.tvm.tuning import shared_db

    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir} is a file; the database is a folder")
    if args.key and not args.tracker:
        raise UsageError("--key names the server at a tracker; use it with --tracker HOST:PORT")
    if args.tracker and ":" not in args.tracker:
        raise UsageError(f"--tracker must be HOST:PORT, not {args.tracker!r}")
    server = shared_db.serve(
        args.dir, host=args.host, port=args.port, tracker=args.tracker, key=args.key or shared_db.DEFAULT_KEY
    )
    host = args.host if args.host not in ("", "0.0.0.0") else socket.gethostname()
    where = (
        f"rpc://{args.tracker}/{args.key or shared_db.DEFAULT_KEY}" if args.tracker else f"rpc://{host}:{server.port}"
    )
    print(f"mlc-lab: serving the tuning database in {os.path.abspath(args.dir)} at {where}", file=sys.stderr)
    print(f"mlc-lab: students tune with database={where!r}", file=sys.stderr)
    sys.stderr.flush()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.terminate()
    return 0
