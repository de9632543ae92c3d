"""TVM sizes its worker pool once, when the runtime starts: set the thread count before that.

TVM's pool threads also *spin* after every parallel kernel before they sleep: 300,000
`sched_yield` calls by default, which is 0.1 s on an idle core and a second or more when another
process wants that core. The idle measuring worker then competes with whatever runs next: measured
here, 0.38-0.55 CPU-seconds burnt by an idle worker while another process ran right after a
`measure`. `SPIN_COUNT` yields (~1-10 ms) keep the threads awake between the back-to-back calls
of one timing, and let them sleep right after (0.00-0.01 CPU-seconds then).
"""

from __future__ import annotations

import os
import platform


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (what `platform` says where there is none): the one
    reader, for the machine figures (`mlc_lab.tvm.machine`), their cache key and the benchmarks."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


SPIN_COUNT = 10000


def tvm_thread_env() -> dict[str, str]:
    """The variables TVM's thread pool reads when it starts (a value already set wins)."""
    return {
        # TVM picks one worker per *physical* core, which is 1 on a 2-vCPU VM: `parallel` then does nothing.
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS") or str(usable_cores()),
        "TVM_THREAD_POOL_SPIN_COUNT": os.environ.get("TVM_THREAD_POOL_SPIN_COUNT") or str(SPIN_COUNT),
    }


def ensure_tvm_threads() -> None:
    os.environ.update(tvm_thread_env())
