"""`mlc-lab bench FILE [--trace T] [--target cpu|cuda]`: build, check and time one program; print JSON.

Without a trace the program is the caller's own and runs in the persistent worker. A trace file is
a hand-in (a teacher benching a student's schedule): its kernel is built here and runs only in the
sandbox (`mlc_lab.core.kernel_sandbox`); where the machine cannot sandbox nothing runs, unless
``--unsafe-same-user`` (which keeps the limits). With ``--runner`` (rpc://..., batch:...) the kernel is
built here and runs on the measuring machines the runner names, never here; a trace file's, through a
tracker, only on servers whose sessions run in the sandbox (`mlc_lab.core.server_sandbox`)."""

from __future__ import annotations

import argparse
import json
import os


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "bench",
        help="build, verify and time a program (optionally after a schedule trace)",
        description="Build FILE's program (after TRACE, if given), check it against the original "
        "program on random inputs and time it. Prints one JSON object.",
    )
    p.add_argument("file", help="a .py file or TVMScript text file holding the program")
    p.add_argument("--trace", help="a schedule trace (a file, or the text itself) to apply first")
    p.add_argument("--target", default="cpu", help="cpu (native, all cores) or cuda (default: cpu)")
    p.add_argument("--func", help="the function to use when the module has several")
    p.add_argument("--repeats", type=int, default=10, help="timed repeats; the median is reported (default: 10)")
    p.add_argument(
        "--cache",
        choices=("warm", "cold"),
        default="warm",
        help="warm: inputs stay cached between calls (default); cold: flushed before every call",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds before a hanging program is stopped (default: 30; 600 elsewhere)",
    )
    p.add_argument(
        "--runner",
        default="local",
        metavar="SPEC",
        help="where to time it: local (default), rpc://HOST:PORT/KEY (a TVM RPC tracker's server), "
        "batch:slurm[:PARTITION] or batch:COMMAND (run as COMMAND FOLDER); built here either way",
    )
    add_unsafe_same_user(p)
    return p


def add_unsafe_same_user(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unsafe-same-user",
        action="store_true",
        help="with --trace, where this machine cannot sandbox: run the trace's kernel as you, with your files "
        "and the network (only the limits stay); only for code you trust",
    )


def refuse_unless_sandboxed(args: argparse.Namespace) -> None:
    """Stop before anything runs when a trace's kernel would have to run outside the sandbox."""
    from mlc_lab.core.sandbox import probe
    from mlc_lab.errors import MlcLabError

    refused = None if args.unsafe_same_user else probe()
    if refused:
        raise MlcLabError(
            f"{refused}; nothing was run: the kernel of a trace file runs only in the sandbox "
            "(--unsafe-same-user runs it without)"
        )


def read_text_arg(value: str) -> str:
    """A command-line argument that is either a path to a file or the text itself."""
    if "\n" not in value and os.path.isfile(value):
        with open(value) as fh:
            return fh.read()
    return value


def load_session(path: str, func: str | None, trace: str | None):
    from mlc_lab.errors import UsageError
    from mlc_lab.core.session import Session

    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    session = Session(path, func)
    if trace:
        session.replay(read_text_arg(trace))
    return session


def run(args: argparse.Namespace) -> int:
    from mlc_lab.errors import UsageError

    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.target not in ("cpu", "cuda", "llvm", "gpu"):
        raise UsageError(f"--target must be cpu or cuda, not {args.target!r}")
    session = load_session(args.file, args.func, args.trace)
    if args.runner not in ("", "local"):  # built here, run on the measuring machines: nothing runs here
        m = _measure_own(session, args, runner=args.runner)
    else:
        m = _measure_trace(session, args) if args.trace else _measure_own(session, args)
    # the same figures as every other measurement (mlc_lab.tvm.measure), in Measurement's one encoding
    out = {
        **{k: v for k, v in m.to_json().items() if k not in ("results_s", "error", "error_kind")},
        "func": session.func_name,
        "target": m.target,
        "latency_s": m.latency_s,
        "std_s": m.std_s,
        "min_s": m.min_s,
        "max_s": m.max_s,
        "repeats": m.repeats,
        "flops": m.flops,
        "gflops": m.gflops,
        "max_abs_error": m.max_abs_error,
        "correct": m.correct,
        "build_s": m.build_s,
    }
    print(json.dumps(out))
    return 0


def _measure_own(session, args: argparse.Namespace, runner: str = "local"):
    """The caller's own program (no trace file), timed in the persistent worker; or, with a runner,
    any program built in the worker and timed on the machines the runner names (`measure`): a trace
    file's only on servers whose sessions run in the sandbox, unless --unsafe-same-user."""
    from mlc_lab.core.measure import measure

    return measure(
        session.module,
        session.original,
        session.func_name,
        args.target,
        args.repeats,
        timeout=args.timeout,
        cache=args.cache,
        runner=runner,
        sandboxed_only=bool(args.trace) and not args.unsafe_same_user,
    )


def _measure_trace(session, args: argparse.Namespace):
    """The trace's kernel, timed in the sandbox (`--timeout` its wall time)."""
    from mlc_lab.core import kernel_sandbox

    refuse_unless_sandboxed(args)
    box = kernel_sandbox.KernelSandbox(wall_s=args.timeout, unsafe_same_user=args.unsafe_same_user)
    m = kernel_sandbox.measure(
        session.module,
        session.original,
        session.func_name,
        args.target,
        args.repeats,
        sandbox=box,
        cache=args.cache,
        roofline=True,
    )
    if m.error:
        from mlc_lab.errors import MeasureError

        raise MeasureError(m.error.splitlines()[0], kind=m.error_kind or "internal")
    return m
