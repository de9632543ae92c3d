"""An assignment as data: a TOML file naming the program, the target, the limits and the tasks.

```toml
title = "GEMM + ReLU + add on the GPU"
program = "gemm_relu_add.py"        # relative to this file; module constants are read, not run
func = "main"                       # optional: the function to schedule
target = "cuda"                     # "cpu", "cuda", or a CUDA arch such as "sm_80"
hazards_fail = true                 # a race, an out-of-bounds access ... fails every task

[limits]                            # for schedule files and notebooks, run in a child process
time_s = 60
memory_mb = 4096

[numeric]                           # optional, GPU targets: run each schedule at a smaller size on
size = 128                          # the CPU (the largest dimension becomes 128) and compare results

[performance]                       # optional: time each submission (checked against the program)
measure = true                      # also without thresholds: a "Latency (ms)" leaderboard column
repeats = 5

[[tasks]]
name = "thread_blocks"
title = "Tile the output over thread blocks"
checks = ["thread_block_tiling"]
points = 5
max_latency_ms = 12.5               # optional performance threshold of this task
```
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from mlc_lab.errors import MlcLabError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib


class AssignmentError(MlcLabError):
    """The assignment file is not one we can grade with (says which key and why)."""


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    checks: tuple[str, ...]
    points: float
    max_latency_ms: float | None = None  # a performance threshold: the program, timed, must be this fast


@dataclass(frozen=True)
class Assignment:
    title: str
    path: Path
    program: Path
    func: str | None
    target: str
    tasks: tuple[Task, ...]
    hazards_fail: bool = True
    time_s: float = 60.0
    memory_mb: int = 4096
    measure: bool = False  # time every submission (for thresholds and the leaderboard)
    repeats: int = 5
    numeric: dict | None = None  # {"sizes": 128 or {2048: 128}, "rtol", "atol"}: run smaller, compare
    extra: dict = field(default_factory=dict)

    @property
    def timed(self) -> bool:
        return self.measure or any(t.max_latency_ms is not None for t in self.tasks)

    @property
    def max_score(self) -> float:
        return float(sum(t.points for t in self.tasks))


def load_assignment(path: str | Path) -> Assignment:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AssignmentError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise AssignmentError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    program = _get(data, "program", str, where)
    program_path = (path.parent / program).resolve()
    if not program_path.is_file():
        raise AssignmentError(f"{where}: program {program!r} is not a file next to the assignment")
    target = str(data.get("target", "cpu"))
    from mlc_lab.core.checks import CHECKS, Target

    try:
        kind = Target.of(target).kind
    except MlcLabError as exc:
        raise AssignmentError(f"{where}: {exc}") from None
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise AssignmentError(f"{where}: an assignment needs at least one [[tasks]] table")
    tasks = []
    for i, raw in enumerate(raw_tasks, 1):
        at = f"{where}: task {i}"
        name = _get(raw, "name", str, at)
        checks = raw.get("checks", [])
        latency = raw.get("max_latency_ms")
        if latency is not None and (not isinstance(latency, (int, float)) or latency <= 0):
            raise AssignmentError(f"{at} ({name}): 'max_latency_ms' must be a number > 0")
        if (
            not isinstance(checks, list)
            or not all(isinstance(c, str) for c in checks)
            or (not checks and latency is None)
        ):
            raise AssignmentError(
                f"{at} ({name}): 'checks' must be a non-empty list of check names (or the task sets max_latency_ms)"
            )
        for c in checks:
            if c not in CHECKS:
                raise AssignmentError(
                    f"{at} ({name}): there is no check named {c!r}; the checks are {', '.join(sorted(CHECKS))}"
                )
            if CHECKS[c].target != kind:
                raise AssignmentError(
                    f"{at} ({name}): {c} is a check for {CHECKS[c].target} targets, "
                    f"and the assignment's target is {target}"
                )
        points = raw.get("points", 1)
        if not isinstance(points, (int, float)) or points < 0:
            raise AssignmentError(f"{at} ({name}): 'points' must be a number >= 0")
        tasks.append(
            Task(
                name,
                str(raw.get("title", name)),
                tuple(checks),
                float(points),
                float(latency) if latency is not None else None,
            )
        )
    limits = data.get("limits", {})
    performance = data.get("performance", {})
    numeric = _numeric(data.get("numeric"), where, kind)
    return Assignment(
        title=str(data.get("title", path.stem)),
        path=path,
        program=program_path,
        func=data.get("func"),
        target=target,
        tasks=tuple(tasks),
        hazards_fail=bool(data.get("hazards_fail", True)),
        time_s=float(limits.get("time_s", 60)),
        memory_mb=int(limits.get("memory_mb", 4096)),
        measure=bool(performance.get("measure", False)),
        repeats=int(performance.get("repeats", 5)),
        numeric=numeric,
    )


def _numeric(table: object, where: str, kind: str) -> dict | None:
    """``[numeric]``: ``size = 128`` (the largest dimension becomes 128) or ``sizes = {"2048" = 128}``,
    with ``rtol``/``atol`` and ``timeout_s`` (the run on the CPU's OpenCL simulator takes seconds). The schedule runs at that size on the CPU and is compared with the program."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise AssignmentError(f"{where}: [numeric] must be a table")
    if kind != "cuda":
        raise AssignmentError(
            f"{where}: [numeric] runs GPU schedules on the CPU; for a cpu target use "
            "[performance], whose timing checks the result"
        )
    if "sizes" in table:
        raw = table["sizes"]
        if not isinstance(raw, dict) or not all(str(k).isdigit() and isinstance(v, int) for k, v in raw.items()):
            raise AssignmentError(f'{where}: [numeric] sizes must map dimensions to smaller ones, as {{"2048" = 128}}')
        sizes: object = {int(k): v for k, v in raw.items()}
    else:
        sizes = table.get("size", 128)
        if not isinstance(sizes, int) or sizes < 1:
            raise AssignmentError(f"{where}: [numeric] size must be a positive integer")
    return {
        "sizes": sizes,
        "rtol": float(table.get("rtol", 1e-3)),
        "atol": float(table.get("atol", 1e-3)),
        "timeout_s": float(table.get("timeout_s", 120)),
    }


def _get(table: dict, key: str, kind: type, where: str):
    if key not in table:
        raise AssignmentError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise AssignmentError(f"{where}: {key!r} must be a {kind.__name__}")
    return value
