"""`mlc-lab class serve ASSIGNMENT --dir DIR (--roster R | --jupyterhub | --open) [--host H] [--port P]
[--tracker HOST:PORT/KEY] [--tuning-db-port P]`: the class server (and, with --tuning-db-port, the
class's tuning database); `mlc-lab class tokens --dir DIR [--roster R] [--reissue ID...]`: the
students' tokens, as a CSV for the teacher; `mlc-lab submit SERVER [--token T] (TRACE_FILE |
--program P --trace T) [--task T]`: hand in.

The server stores submissions in DIR/class.sqlite (a restart loses nothing), grades each with the
autograder in a child process, times it (on the class's measurement machines through TVM's RPC
tracker with --tracker, else on this machine) and serves the leaderboard and the teacher's summary.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "class",
        help="run a class server: submissions, autograding, leaderboard, teacher's view",
        description="Serve a class over one assignment: students submit traces (the explorer's "
        "Submit button, `mlc-lab submit`, Session.submit); each is graded by the autograder and "
        "timed; students see the leaderboard, the teacher a summary (with the printed token).",
    )
    p.add_argument(
        "action",
        choices=["serve", "tokens"],
        help="serve: run the class server until interrupted; tokens: issue the students' tokens (a CSV)",
    )
    p.add_argument("assignment", nargs="?", help="the assignment's TOML file (mlc-lab grade's format); for serve")
    p.add_argument("--dir", required=True, help="the class's folder: class.sqlite holds every submission")
    p.add_argument(
        "--roster",
        help="the class's students: a CSV (student_id,name[,pseudonym]) or a TOML file's [roster] table; "
        "kept in DIR, so a restart needs it only when it changed (a pseudonym given is one the teacher approved)",
    )
    p.add_argument(
        "--jupyterhub",
        action="store_true",
        help="run as a JupyterHub service: a student is the Hub user whose token the request carries "
        "(checked with $JUPYTERHUB_API_URL); Hub admins are teachers",
    )
    p.add_argument(
        "--open",
        action="store_true",
        help="a demo without identities: anyone hands in under any name (every answer says so)",
    )
    p.add_argument("--per-hour", type=int, default=30, help="hand-ins per student per hour (default 30)")
    p.add_argument(
        "--reissue",
        nargs="+",
        metavar="ID",
        help="with tokens: new tokens for these students (a lost token stops working)",
    )
    p.add_argument("--out", help="with tokens: the CSV to write (default DIR/tokens-DATE.csv)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for students on other machines or "
        "other JupyterHub containers)",
    )
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    p.add_argument(
        "--tracker",
        help="HOST:PORT/KEY of the class's TVM RPC tracker: time submissions on the "
        "measurement machines registered under KEY (default: time them on this machine)",
    )
    p.add_argument("--new-token", action="store_true", help="replace the teacher's token kept in DIR")
    p.add_argument(
        "--unsafe-same-user",
        action="store_true",
        help="serve even where this machine cannot sandbox: the kernels compiled from submissions then run "
        "as you and see your files and the network (only the limits stay); only for code you trust",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="submissions graded at once (default: one per core); timings on this machine take turns, "
        "and close results are timed again, interleaved, when the server is idle",
    )
    p.add_argument(
        "--tuning-db-port",
        type=int,
        metavar="PORT",
        help="also serve the class's shared tuning database (DIR/tuning_db, as `mlc-lab database serve`) "
        "on PORT, registered with --tracker's tracker when given",
    )

    s = sub.add_parser(
        "submit",
        help="hand in a trace to a class server",
        description="Submit a trace under a pseudonym and print the verdict and the rank.",
    )
    s.add_argument("server", help="the class server, http://HOST:PORT")
    s.add_argument(
        "trace_file",
        nargs="?",
        help="the trace: an apply_trace(sch) .py file, TVM's JSON trace, or printed trace statements",
    )
    s.add_argument("--token", help="your class token (default $MLC_LAB_CLASS_TOKEN)")
    s.add_argument("--name", help="your pseudonym, on a demo (--open) server only")
    s.add_argument(
        "--client-id",
        help="the id of this hand-in: the one a failed submit printed, to learn whether it was stored",
    )
    s.add_argument("--program", help="with --trace: the program the trace schedules (re-read as a submission)")
    s.add_argument("--trace", dest="trace_opt", help="with --program: the trace (a file or text)")
    s.add_argument("--task", help="the task this submission is for (default: all of them)")
    s.add_argument("--json", action="store_true", help="print the verdict as JSON")
    s.set_defaults(run=run_submit, take_extra=_take_trace_file)
    return p


def run(args: argparse.Namespace) -> int:
    import os

    from mlc_lab.classroom.roster import RosterError, load_roster
    from mlc_lab.errors import UsageError

    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir} is a file; the class's folder must be a folder")
    try:
        roster = load_roster(args.roster) if args.roster else None
    except RosterError as exc:
        raise UsageError(str(exc)) from None
    if args.action == "tokens":
        return run_tokens(args, roster)
    return run_serve(args, roster)


def run_serve(args: argparse.Namespace, roster: list | None) -> int:
    from mlc_lab.classroom.server import serve_forever

    mode = _identity_mode(args, roster)
    runner = _runner(args)
    server = _class_server(args, roster, mode, runner)
    _print_banner(args, server, mode, runner)
    database = _serve_tuning_db(args, server, runner)
    if server.token:
        print(f"mlc-lab: teacher's token: {server.token}", file=sys.stderr)
        print(
            "mlc-lab: (only its hash is kept: note it; --new-token makes a new one and retires this one)",
            file=sys.stderr,
        )
        print(f"mlc-lab: teacher: mlc_lab.class_dashboard({server.url!r}, {server.token!r})", file=sys.stderr)
    else:
        print(
            "mlc-lab: teacher's token: the one printed when it was made (only its hash is kept; "
            "--new-token makes a new one)",
            file=sys.stderr,
        )
        print(f"mlc-lab: teacher: mlc_lab.class_dashboard({server.url!r}, TOKEN)", file=sys.stderr)
    _log_to_stderr()
    sys.stderr.flush()
    try:
        serve_forever(server)
    finally:
        if database is not None:
            database.terminate()
    return 0


def _log_to_stderr() -> None:
    """The server's log (a client gone before its answer, a grader restarted) on stderr, a line each."""
    import logging

    logger = logging.getLogger("mlc_lab.classroom")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def _identity_mode(args: argparse.Namespace, roster: list | None) -> str:
    """How the server knows its students (--open, --jupyterhub, else the roster), once the options agree."""
    from mlc_lab.errors import UsageError

    if not args.assignment:
        raise UsageError("mlc-lab class serve needs the assignment's TOML file")
    if args.open and (roster is not None or args.jupyterhub):
        raise UsageError("--open is a server without identities: not with --roster or --jupyterhub")
    return "open" if args.open else "jupyterhub" if args.jupyterhub else "roster"


def _runner(args: argparse.Namespace) -> str | None:
    """``rpc://HOST:PORT/KEY`` from --tracker (the measurement machines), or None: this machine times."""
    from mlc_lab.errors import UsageError

    runner = None
    if args.tracker:
        t = args.tracker[len("rpc://") :] if args.tracker.startswith("rpc://") else args.tracker
        where, _, key = t.partition("/")
        if ":" not in where or not key:
            raise UsageError(
                f"--tracker must be HOST:PORT/KEY (the tracker and the measurement servers' key), not {args.tracker!r}"
            )
        runner = f"rpc://{t}"
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    return runner


def _class_server(args: argparse.Namespace, roster: list | None, mode: str, runner: str | None):
    """The class server, listening (not serving yet); why it cannot start as a usage error."""
    from mlc_lab.classroom.reaper import FolderInUse
    from mlc_lab.classroom.server import ClassServer, ServerSetupError
    from mlc_lab.errors import UsageError
    from mlc_lab.core.sandbox import probe

    refused = None if args.unsafe_same_user else probe()
    if refused:  # every submission's kernel runs in the sandbox: none would be timed
        raise UsageError(f"{refused}; the class server was not started (--unsafe-same-user serves without the sandbox)")

    try:
        return ClassServer(
            args.assignment,
            args.dir,
            host=args.host,
            port=args.port,
            runner=runner,
            new_token=args.new_token,
            workers=args.workers,
            mode=mode,
            roster=roster,
            per_hour=args.per_hour,
            unsafe_same_user=args.unsafe_same_user,
        )
    except (ServerSetupError, FolderInUse) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})") from None


def _print_banner(args: argparse.Namespace, server, mode: str, runner: str | None) -> None:
    """Where the server is, what it holds, who its students are, and what they call to reach it."""
    counts = server.store.counts()
    print(f"mlc-lab: class server for {server.assignment.title!r} at {server.url}", file=sys.stderr)
    print(
        f"mlc-lab: submissions in {server.store.path} ({counts['submissions']} so far, "
        f"{counts['queued']} waiting to be graded)",
        file=sys.stderr,
    )
    print(
        f"mlc-lab: {server.workers} grader{'s' if server.workers > 1 else ''}; "
        f"timing on {runner or 'this machine, one timing at a time'}",
        file=sys.stderr,
    )
    if mode == "open":
        print("mlc-lab: DEMO MODE (--open): anyone hands in under any name; every answer says so", file=sys.stderr)
    elif mode == "jupyterhub":
        print(f"mlc-lab: students are JupyterHub's users ({server.identities.hub_api})", file=sys.stderr)
    if server.issued:
        where = _write_tokens(args.dir, server.issued, None)
        print(f"mlc-lab: {len(server.issued)} students' tokens in {where}: hand each out", file=sys.stderr)
    print(
        f"mlc-lab: students: explore(program, classroom={server.url!r}"
        + (")" if mode != "roster" else ", class_token=T)")
        + f", mlc_lab.leaderboard({server.url!r}{', T' if mode == 'roster' else ''})",
        file=sys.stderr,
    )


def _serve_tuning_db(args: argparse.Namespace, server, runner: str | None):
    """With --tuning-db-port: the class's tuning database served (registered with the tracker of
    --tracker when given) and its address printed; else None. The server is stopped if it cannot be."""
    import os

    from mlc_lab.errors import UsageError

    if not args.tuning_db_port:
        return None
    from mlc_lab.tvm.tuning import shared_db

    tracker = runner[len("rpc://") :].split("/", 1)[0] if runner else None
    try:
        database = shared_db.serve(
            os.path.join(args.dir, "tuning_db"), host=args.host, port=args.tuning_db_port, tracker=tracker
        )
    except Exception as exc:  # noqa: BLE001  (TVM says "address in use" in its own words)
        server.stop()
        raise UsageError(
            f"cannot serve the tuning database on port {args.tuning_db_port}: {str(exc).splitlines()[0]}"
        ) from None
    where = (
        f"rpc://{tracker}/{shared_db.DEFAULT_KEY}"
        if tracker
        else f"rpc://{server.url.split('//', 1)[1].rsplit(':', 1)[0]}:{database.port}"
    )
    print(f"mlc-lab: the class's tuning database: students tune with database={where!r}", file=sys.stderr)
    return database


def run_tokens(args: argparse.Namespace, roster: list | None) -> int:
    import os

    from mlc_lab.classroom.store import Store
    from mlc_lab.errors import UsageError

    if args.out and os.path.exists(args.out):
        raise UsageError(f"{args.out} exists; the tokens are written to a new file only")
    store = Store(args.dir, [])
    try:
        if roster is not None:
            store.sync_roster(roster)
        if not store.has_roster():
            raise UsageError(f"{args.dir} has no roster yet: give --roster roster.csv")
        try:
            issued = store.issue_tokens(args.reissue)
        except KeyError as exc:
            raise UsageError(f"{exc.args[0]!r} is not a student on the roster") from None
    finally:
        store.close()
    if not issued:
        print("mlc-lab: every student has a token already (--reissue ID replaces a lost one)", file=sys.stderr)
        return 0
    where = _write_tokens(args.dir, issued, args.out)
    print(f"mlc-lab: {len(issued)} tokens in {where} (only their hashes are kept: hand this file out, then delete it)")
    return 0


def _write_tokens(folder: str, issued: list[tuple[str, str, str]], out: str | None) -> str:
    """A CSV ``student_id,name,token``, readable by its owner only; never over an existing file."""
    import csv
    import os
    import time

    from mlc_lab.errors import UsageError

    path = out or os.path.join(folder, time.strftime("tokens-%Y%m%d-%H%M%S.csv"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UsageError(f"{path} exists; the tokens are written to a new file only") from None
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "name", "token"])
        w.writerows(issued)
    return path


def _take_trace_file(args: argparse.Namespace, extra: list[str]) -> bool:
    """`mlc-lab submit SERVER --name N TRACE_FILE`: the file given after the options."""
    if args.trace_file is None and len(extra) == 1 and not extra[0].startswith("-"):
        args.trace_file = extra[0]
        return True
    return False


def run_submit(args: argparse.Namespace) -> int:
    import json
    import os

    from mlc_lab.classroom.client import submit, verdict_text
    from mlc_lab.errors import UsageError

    if args.program or args.trace_opt:
        if not (args.program and args.trace_opt) or args.trace_file:
            raise UsageError("give a TRACE_FILE, or --program P and --trace T (not both)")
        from mlc_lab.core.session import Session
        from mlc_lab.tvm.program import load

        trace = Session.from_trace(load(args.program), args.trace_opt).submission()
        file = os.path.basename(args.trace_opt) if os.path.isfile(args.trace_opt) else None
    elif args.trace_file:
        try:
            with open(args.trace_file, encoding="utf-8") as fh:
                trace = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{args.trace_file}: cannot be read as text ({exc})") from None
        file = os.path.basename(args.trace_file)
    else:
        raise UsageError("give a TRACE_FILE, or --program P and --trace T")

    def retrying(text: str) -> None:
        print(f"mlc-lab: {text}", file=sys.stderr, flush=True)

    v = submit(
        args.server,
        trace,
        args.task,
        token=args.token,
        name=args.name,
        client_id=args.client_id,
        file=file,
        on_retry=retrying,
    )
    if args.json:
        json.dump(v, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(verdict_text(v))
        for t in v.get("tasks") or []:
            print(f"  {'PASS' if t['passed'] else 'FAIL'} {t['name']}: {t['title']}")
            if not t["passed"] and not v.get("error"):
                for m in t.get("messages") or []:
                    print(f"       {m}")
    return 0 if v.get("status") == "graded" and not v.get("error") else 1
