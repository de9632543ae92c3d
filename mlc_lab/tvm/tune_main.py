"""Entry of the tuning subprocess: ``python -m mlc_lab.tvm.tune_main WORK_DIR``.

Started by `mlc_lab.core.tune.tune` in its own process group (so a cancel kills the runner's
workers too); everything it needs is in WORK_DIR/mlc_lab_job.json.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mlc_lab.tvm.tune_main WORK_DIR", file=sys.stderr)
        return 2
    from mlc_lab.tvm.tuning import run_job

    return run_job(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
