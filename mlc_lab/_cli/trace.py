"""mlc-lab trace PROGRAM [--trace T] [--as apply_trace|text|json]: a schedule in the form to hand in.

The trace (a file: TVM's printed trace, a pasted ``apply_trace`` function, its JSON or a tuning
record) is parsed and replayed on PROGRAM, never executed; what is printed replays unchanged on
TVM's own ``tvm.s_tir.Schedule(prim_func)``.
"""

from __future__ import annotations

import argparse
import json
import sys

from mlc_lab._cli.common import open_session

FORMS = ("apply_trace", "text", "json")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "trace",
        help="print a program's schedule as the apply_trace function courses ask for (or TVM's text or JSON)",
        description="Replay TRACE (never executed) on PROGRAM and print the schedule: --as apply_trace (default) "
        "gives `def apply_trace(sch: s_tir.Schedule) -> None:` with its import, ready to hand in; --as text "
        "gives TVM's printed trace; --as json its JSON. Without --trace: the program unscheduled.",
    )
    p.add_argument("program", help="the program (.py with TVMScript; module constants are read, not run)")
    p.add_argument("--trace", help="a trace file: printed trace, apply_trace function, JSON or a tuning record")
    p.add_argument("--func", help="the PrimFunc to schedule when the module has several")
    p.add_argument("--as", dest="form", choices=FORMS, default="apply_trace", help="the form to print")
    return p


def run(args: argparse.Namespace) -> int:
    session = open_session(args.program, args.func, args.trace)
    if args.form == "apply_trace":
        sys.stdout.write(session.submission())
    elif args.form == "text":
        sys.stdout.write(session.trace + "\n")
    else:
        json.dump(session.trace_json, sys.stdout)
        sys.stdout.write("\n")
    return 0
