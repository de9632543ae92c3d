"""mlc-lab replay FILE --trace TRACE [--json]: apply a schedule trace to a program, safely."""

from __future__ import annotations

import argparse
import json
import sys

from mlc_lab._cli.common import read_text


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("replay", help="apply a trace (TVM's text or JSON) to a program; the trace is never executed")
    p.add_argument("file", help="the program (.py with TVMScript)")
    p.add_argument("--trace", required=True, help="a trace file: TVM's printed trace or its JSON")
    p.add_argument("--func", help="the PrimFunc to schedule")
    p.add_argument("--json", action="store_true", help="print script, trace, trace_json and loop_tree as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.core.session import Session
    from mlc_lab.errors import LoadError, TraceParseError

    program = read_text(args.file)
    trace = read_text(args.trace)
    try:
        session = Session(program, func=args.func)
    except LoadError as exc:
        raise LoadError(f"{args.file}: {exc}", line=exc.line) from None
    try:
        session.replay(trace)
    except TraceParseError as exc:
        where = f"{args.trace}, line {exc.line}" if exc.line else args.trace
        message = str(exc).split(": ", 1)[1] if exc.line else str(exc)
        raise TraceParseError(f"{where}: {message}") from None
    if args.json:
        out = {
            "script": session.script,
            "trace": session.trace,
            "trace_json": session.trace_json,
            "loop_tree": session.loop_tree(),
        }
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(session.script + "\n")
    return 0
