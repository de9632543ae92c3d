"""The tuning job's measuring process, started before the job itself imports TVM.

meta_schedule's LocalRunner times candidates in a process of its own (TVM's `popen_worker`),
which imports TVM when it starts: about 2 CPU-seconds, as long as the job's own import. Started by
the runner, it began only once the job had imported TVM (one core idle meanwhile) and then took a
core from the first batch's builds. `prestart` starts that same process first thing in the job's
process, so that both imports run side by side; `adopting` hands it to the LocalRunner's pool,
which would otherwise start its own. Nothing here imports TVM at module level.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from mlc_lab import timeline
from mlc_lab.model.tuning import BEST_FILE, CONTENTION_FILE, JOB_FILE

_prestarted: tuple[Any, Any, Any] | None = None  # (Popen, reader, writer), until a pool adopts it


def runner_env(work_dir: str) -> dict[str, str]:
    """What the measuring process reads from its environment (`mlc_lab.tvm.measure.run_evaluator`)."""
    return {
        "MLC_LAB_BEST_FILE": os.path.join(work_dir, BEST_FILE),
        "MLC_LAB_CONTENTION_FILE": os.path.join(work_dir, CONTENTION_FILE),
    }


def prestart(work_dir: str) -> bool:
    """Start the measuring process for the job in `work_dir` if it measures locally (an RPC job
    measures elsewhere). It waits for its first task; if no runner adopts it, it exits with the
    job (its pipe closes). Returns whether one was started."""
    global _prestarted
    if _prestarted is not None or sys.platform == "win32":
        return False
    try:
        with open(os.path.join(work_dir, JOB_FILE)) as fh:
            job = json.load(fh)
    except (OSError, ValueError):
        return False
    if job.get("runner", "local") not in (None, "", "local"):
        return False
    os.environ.update(runner_env(os.path.abspath(work_dir)))  # inherited by the process
    # the same command, pipes and streams as TVM's PopenWorker._start (LocalRunner: stderr silenced)
    main_read, worker_write = os.pipe()
    worker_read, main_write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tvm.exec.popen_worker", str(worker_read), str(worker_write)],
        pass_fds=(worker_read, worker_write),
        stderr=subprocess.DEVNULL,
    )
    os.close(worker_read)
    os.close(worker_write)
    _prestarted = (proc, os.fdopen(main_read, "rb"), os.fdopen(main_write, "wb"))
    timeline.event("runner_prestarted")
    return True


@contextmanager
def adopting() -> Iterator[None]:
    """While a LocalRunner is made inside this block, the first worker its pool starts is the
    pre-started process (when there is one, still alive)."""
    from tvm.support import popen_pool

    base = popen_pool.PopenWorker

    class AdoptingWorker(base):  # type: ignore[misc, valid-type]
        def _start(self) -> None:
            global _prestarted
            if self._proc is None and _prestarted is not None:
                proc, reader, writer = _prestarted
                _prestarted = None
                if proc.poll() is None:
                    self._proc, self._reader, self._writer = proc, reader, writer
                    return
                reader.close()
                writer.close()
            super()._start()

    popen_pool.PopenWorker = AdoptingWorker
    try:
        yield
    finally:
        popen_pool.PopenWorker = base
