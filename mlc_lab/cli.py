"""The ``mlc-lab`` command. Each subcommand lives in ``mlc_lab/_cli/<name>.py`` with
``add_parser(subparsers)`` and ``run(args) -> int``; bad input exits 2 with a message, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = [
    "convert",
    "show",
    "replay",
    "trace",
    "path",
    "bench",
    "tune",
    "lower",
    "check",
    "export",
    "database",
    "grade",
    "classroom",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mlc-lab", description="Explore and tune TVM TensorIR schedules.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"mlc_lab._cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"mlc_lab._cli.{name}":
                raise
            continue
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from mlc_lab.errors import MlcLabError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse gives an optional positional its value only before the options (`submit URL --name N
    # FILE` leaves FILE over): a subcommand may take what is left (`take_extra(args, extra) -> bool`).
    if extra and not getattr(args, "take_extra", lambda _a, _e: False)(args, extra):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.run(args) or 0)
    except (MlcLabError, OSError) as exc:
        print(f"mlc-lab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
