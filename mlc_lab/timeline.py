"""Where a tuning job's time goes: an event log, written only when $MLC_LAB_TIMELINE names a file.

Each line is {"t": epoch seconds, "ev": name, "pid", "tid", ...}; a span writes "<name>" with
"end": false and then true. The job process (search, each build, cost model) and the runner's
process (each measurement) append to the same file; `benchmarks/tune_timeline.py` reads it
next to a sample of the processes' CPU time. When the variable is unset every call is a no-op
that costs one global lookup.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

ENV = "MLC_LAB_TIMELINE"
_PATH = os.environ.get(ENV) or None
_lock = threading.Lock()


def enabled() -> bool:
    return _PATH is not None


def event(ev: str, **fields: Any) -> None:
    if _PATH is None:
        return
    line = json.dumps({"t": time.time(), "ev": ev, "pid": os.getpid(), "tid": threading.get_ident() % 100000, **fields})
    with _lock, open(_PATH, "a") as fh:  # one short append: lines from two processes do not interleave
        fh.write(line + "\n")


@contextmanager
def span(ev: str, **fields: Any) -> Iterator[None]:
    if _PATH is None:
        yield
        return
    event(ev, end=False, **fields)
    try:
        yield
    finally:
        event(ev, end=True, **fields)
