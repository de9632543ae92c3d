"""mlc-lab path PROGRAM TARGET [--trace FROM] [--func NAME] [--as apply_trace|json]: the way to a target.

The schedule that turns PROGRAM (after the trace FROM, when given) into TARGET (a program file with
the scheduled TVMScript, or a trace of PROGRAM), found with TVM as the oracle and printed only when
TVM's structural equality confirms it. Exit status: 0 reached, 1 not reached (the why on standard
error), 2 bad input (the file and line). This interface is kept for tools outside the project.
"""

from __future__ import annotations

import argparse
import json
import sys

from mlc_lab._cli.common import open_session, read_text

FORMS = ("apply_trace", "json")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "path",
        help="the schedule that turns a program into a target program (the trace of a scheduled program)",
        description="Find the schedule primitives that turn PROGRAM into TARGET, read off the target with TVM "
        "as the oracle and confirmed by TVM's structural equality. Prints the whole schedule as "
        "`def apply_trace(sch)` (--as apply_trace, the default) or "
        '{"reached", "steps", "trace", "why", "seconds"} (--as json). Exit 0 when reached, 1 when not (why on '
        "standard error), 2 on bad input.",
    )
    p.add_argument("program", help="the program (.py with TVMScript; module constants are read, not run)")
    p.add_argument("target", help="the target: a .py with the scheduled TVMScript, or a trace of PROGRAM")
    p.add_argument("--trace", dest="start", metavar="FROM", help="start from PROGRAM with this trace replayed")
    p.add_argument("--func", help="the PrimFunc to schedule when the module has several")
    p.add_argument("--as", dest="form", choices=FORMS, default="apply_trace", help="what to print")
    return p


def run(args: argparse.Namespace) -> int:
    session = open_session(args.program, args.func, args.start)
    answer = session.path_to(_target(args.target))
    if args.form == "json":
        json.dump(answer.cli_json(), sys.stdout)
        sys.stdout.write("\n")
    elif answer.trace:
        sys.stdout.write(answer.trace)
    if not answer.reached:
        print(f"mlc-lab path: {answer.why}", file=sys.stderr)
        return 1
    return 0


def _target(path: str) -> str:
    """The target as text, with its file named in any error it causes."""
    from mlc_lab.errors import LoadError, TraceParseError
    from mlc_lab.tvm.program import looks_like_program

    text = read_text(path)
    if looks_like_program(text):
        try:
            from mlc_lab.tvm.program import parse_text

            parse_text(text, filename=path)  # a parse error names the file and line here
        except LoadError as exc:
            raise LoadError(str(exc), line=exc.line) from None
        return text
    from mlc_lab.tvm import trace_io

    try:
        trace_io.parse_trace_text(text) if not trace_io.looks_like_json(text) else json.loads(text)
    except (TraceParseError, ValueError) as exc:
        import re

        line = getattr(exc, "line", None)
        where = f"{path}, line {line}" if line else path
        said = re.sub(r"^line \d+: ", "", str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise TraceParseError(f"{where}: the target is neither a program (TVMScript) nor a trace: {said}") from None
    return text
