"""Helpers shared by the subcommands."""

from __future__ import annotations

import sys
from pathlib import Path

from mlc_lab.errors import UsageError


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not a file")
    try:
        return p.read_text()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file") from None
