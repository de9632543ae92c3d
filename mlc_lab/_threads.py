"""TVM sizes its worker pool once, when the runtime starts: set the thread count before that."""

from __future__ import annotations

import os


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def ensure_tvm_threads() -> None:
    # TVM picks one worker per *physical* core, which is 1 on a 2-vCPU VM: `parallel` then does nothing.
    os.environ.setdefault("TVM_NUM_THREADS", str(usable_cores()))
