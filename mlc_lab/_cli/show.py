"""mlc-lab show FILE [--func NAME]: print a program as modern TVMScript."""

from __future__ import annotations

import argparse
import sys

from mlc_lab._cli.common import open_session


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("show", help="print a TensorIR program (legacy spelling too) as modern TVMScript")
    p.add_argument("file", help="a .py file holding an @I.ir_module class or a @T.prim_func")
    p.add_argument("--func", help="the PrimFunc to show (default: all of them)")
    return p


def run(args: argparse.Namespace) -> int:
    session = open_session(args.file, args.func)
    sys.stdout.write(session.script_of_function(args.func) if args.func else session.script)
    sys.stdout.write("\n")
    return 0
