"""mlc-lab replay FILE --trace TRACE [--json]: apply a schedule trace to a program, safely."""

from __future__ import annotations

import argparse
import json
import sys

from mlc_lab._cli.common import open_session


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("replay", help="apply a trace (TVM's text or JSON) to a program; the trace is never executed")
    p.add_argument("file", help="the program (.py with TVMScript)")
    p.add_argument("--trace", required=True, help="a trace file: TVM's printed trace or its JSON")
    p.add_argument("--func", help="the PrimFunc to schedule")
    p.add_argument("--json", action="store_true", help="print script, trace, trace_json and loop_tree as JSON")
    return p


def run(args: argparse.Namespace) -> int:

    session = open_session(args.file, args.func, args.trace)
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
