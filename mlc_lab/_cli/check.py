"""mlc-lab check PROGRAM [--trace T] [--target cpu|cuda|ARCH] [--json] [--numeric]: which optimisations a
schedule applies (the named checks), its hazards, and (--numeric) whether its GPU kernel computes the
right numbers, run on the CPU (a trace file's kernel in the sandbox: `--unsafe-same-user` where the
machine cannot sandbox). Exit 0 when everything holds, 1 when something fails, 2 on bad input."""

from __future__ import annotations

import argparse
import json
import sys

from mlc_lab._cli.bench import add_unsafe_same_user, refuse_unless_sandboxed
from mlc_lab._cli.common import open_session
from mlc_lab.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "check",
        help="judge a schedule: named optimisations, hazards (races, out-of-bounds, "
        "spills, limits) and optionally its numbers",
    )
    p.add_argument("file", help="the program (.py with TVMScript)")
    p.add_argument("--trace", help="a schedule trace to apply first (TVM's printed trace or its JSON; never executed)")
    p.add_argument("--func", help="the PrimFunc to check")
    p.add_argument(
        "--target",
        help="cpu, cuda, or a CUDA arch such as sm_80 (default: cuda when the program binds threads, else cpu)",
    )
    p.add_argument("--only", metavar="NAMES", help="comma-separated check names (default: every check that applies)")
    p.add_argument(
        "--numeric",
        action="store_true",
        help="also run the GPU kernel on the CPU (OpenCL) at a small size and compare with the program",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"checks": [...], "hazards": [...], "numeric": {...} or null} as JSON',
    )
    add_unsafe_same_user(p)
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.core.checks import CheckReport, Target
    from mlc_lab.errors import MlcLabError

    session = open_session(args.file, args.func, args.trace)
    target = args.target
    if target is not None:
        try:
            Target.of(target)
        except MlcLabError as exc:
            raise UsageError(f"--target: {exc}") from None
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    report = session.check(names, target=target)
    if args.numeric:
        kind = Target.of(target).kind if target is not None else ("cuda" if _binds(session) else "cpu")
        if kind != "cuda":
            raise UsageError("--numeric runs a GPU schedule on the CPU; this program is checked for a CPU target")
        report = CheckReport(report.checks, report.hazards, _numeric(session, args).to_check())
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_text(report))
    warning = _unjudged_warning(report)
    if warning:
        sys.stderr.write(warning)
    return 0 if report.ok else 1


def _numeric(session, args: argparse.Namespace):
    """The numeric check: of the caller's own program in the worker; of a trace file (a hand-in) in
    the sandbox, where nothing runs unless the machine can sandbox (or --unsafe-same-user)."""
    return _numeric_of_trace(session, args) if args.trace else _numeric_own(session)


def _numeric_own(session):
    from mlc_lab.core.checks.numeric_gpu import numeric_check

    return numeric_check(session)


def _numeric_of_trace(session, args: argparse.Namespace):
    from mlc_lab.core.checks.numeric_gpu import numeric_check_sandboxed
    from mlc_lab.core.kernel_sandbox import KernelSandbox

    refuse_unless_sandboxed(args)
    return numeric_check_sandboxed(session, sandbox=KernelSandbox(unsafe_same_user=args.unsafe_same_user))


def _unjudged_warning(report) -> str:
    """For a teacher checking a reference: the checks that could not judge it (a task on one of them
    can never pass)."""
    missing = report.unjudged()
    if not missing:
        return ""
    lines = [
        f"warning: {len(missing)} check{'s' if len(missing) != 1 else ''} could not judge this program; "
        f"a task on {'them' if len(missing) != 1 else 'it'} can never pass for it:"
    ]
    lines += [f"  {c.name}: {c.message}" for c in missing]
    return "\n".join(lines) + "\n"


def _binds(session) -> bool:
    from mlc_lab.core.checks.facts import binds_threads

    return binds_threads(session)


def _numeric_summary(numeric) -> str:
    """What the summary line says of the numbers: only a mismatch is "wrong numbers"."""
    if numeric is None or numeric["ok"]:
        return ""
    return {
        "mismatch": ", wrong numbers",
        "could_not_run": ", numbers not checked (the numeric check could not run)",
        "does_not_build": ", the kernel does not build",
    }.get(numeric.get("verdict", "mismatch"), f", the kernel failed ({numeric['verdict']})")


def _text(report) -> str:
    from mlc_lab.model.checks import numeric_line

    lines = []
    mark = {"pass": "ok  ", "fail": "FAIL", "unjudged": "--  "}
    for c in report.checks:
        lines.append(f"{mark[c.verdict]}  {c.name:<22} {c.message}")
    for h in report.hazards:
        lines.append(f"HAZARD {h.kind:<19} {h.message}")
    if report.numeric is not None:
        lines.append(numeric_line(report.numeric, 22))
    if not lines:
        lines.append("no check applies to this program")
    failed = len(report.failed())
    lines.append("")
    lines.append(
        "all checks hold"
        if report.ok
        else f"{failed} check{'s' if failed != 1 else ''} failed, {len(report.hazards)} "
        f"hazard{'s' if len(report.hazards) != 1 else ''}" + _numeric_summary(report.numeric)
    )
    if report.ok and report.numeric is not None and not report.numeric_judged:
        lines[-1] += "; the numbers were not checked (the numeric check could not run)"
    return "\n".join(lines) + "\n"
