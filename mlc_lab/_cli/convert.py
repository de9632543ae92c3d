"""mlc-lab convert FILE [-o OUT]: the course's legacy TVM code rewritten for the pinned TVM.

A .py file is printed converted; a notebook (.ipynb) is converted cell by cell and printed as a
notebook. Code that already runs on TVM 0.27 comes back unchanged, and stderr says so.
"""

from __future__ import annotations

import argparse
import sys

from mlc_lab._cli.common import read_text
from mlc_lab.errors import ConvertError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("convert", help="rewrite legacy MLC-course TVM code (.py or .ipynb) for today's TVM")
    p.add_argument("file", help="a .py file, a Jupyter notebook (.ipynb), or - for Python on standard input")
    p.add_argument("-o", "--output", help="write the result to this file instead of standard output")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.text.compat import MARKER, convert
    from mlc_lab.text.compat_notebook import convert_notebook

    text = read_text(args.file)
    try:
        if args.file.endswith(".ipynb"):
            out, report = convert_notebook(text)
            note = report.summary(args.file)
        else:
            out = convert(text)
            note = f"{args.file}: nothing to convert: it is valid TVM 0.27 code" if out == text else None
            if MARKER in out and MARKER not in text:
                note = f"{args.file}: converted; some lines need a fix by hand (see {MARKER.strip()})"
    except ConvertError as exc:
        raise ConvertError(f"{args.file}: {exc}") from None
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(out)
    else:
        sys.stdout.write(out)
    if note:
        print(f"mlc-lab: {note}", file=sys.stderr)
    return 0
