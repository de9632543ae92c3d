"""mlc-lab convert FILE: print the course's legacy TVM code rewritten for the pinned TVM."""

from __future__ import annotations

import argparse
import sys

from mlc_lab._cli.common import read_text
from mlc_lab.errors import ConvertError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("convert", help="rewrite legacy MLC-course TVM code for today's TVM")
    p.add_argument("file", help="a .py file (or - for standard input)")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.tvm.compat import convert

    text = read_text(args.file)
    try:
        out = convert(text)
    except ConvertError as exc:
        raise ConvertError(f"{args.file}: {exc}") from None
    sys.stdout.write(out)
    return 0
