"""A tuning job's live log: one JSON line per phase and per measured candidate, read by the page
while the job runs."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from mlc_lab.model.tuning import LIVE_FILE


class LiveLog:
    """Appends to WORK_DIR/mlc_lab_live.jsonl: {"phase", "n", "t"} when a phase starts,
    {"trial": k, "latency_s", "error", "t"} for each candidate as it is measured (k counts the
    candidates measured by this run; the committed records come with the batch), and
    {"event", ...} for what happened to the machines that measure elsewhere."""

    def __init__(self, work_dir: str, t0: float) -> None:
        self.path = os.path.join(work_dir, LIVE_FILE)
        self.t0 = t0
        self.count = 0
        self._lock = threading.Lock()

    def _write(self, obj: dict) -> None:
        obj["t"] = round(time.time() - self.t0, 3)
        with self._lock, open(self.path, "a") as fh:
            fh.write(json.dumps(obj) + "\n")

    def phase(self, name: str, n: int = 0) -> None:
        self._write({"phase": name, "n": n})

    def trial(
        self,
        latency: float | None,
        error: Any,
        others_cores: float | None = None,
        where: str | None = None,
        waited_s: float | None = None,
    ) -> None:
        line = {
            "trial": self.count,
            "latency_s": latency,
            "error": str(error)[:300] if error else None,
            "others_cores": others_cores,
        }
        if where is not None:  # measured elsewhere: where, and how long it waited for the machine
            line.update(where=where, waited_s=waited_s)
        self._write(line)
        self.count += 1

    def event(self, kind: str, **facts: Any) -> None:
        """What happened to a measuring machine or a round: {"event": kind, ...} (a server lost or
        left out, a candidate measured again elsewhere, a batch round sent, waiting, done)."""
        self._write({"event": kind, **facts})
