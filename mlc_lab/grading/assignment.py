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

[[tasks]]
name = "thread_blocks"
title = "Tile the output over thread blocks"
checks = ["thread_block_tiling"]
points = 5
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from mlc_lab.errors import MlcLabError


class AssignmentError(MlcLabError):
    """The assignment file is not one we can grade with (says which key and why)."""


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    checks: tuple[str, ...]
    points: float


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
    extra: dict = field(default_factory=dict)

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
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks) or not checks:
            raise AssignmentError(f"{at} ({name}): 'checks' must be a non-empty list of check names")
        for c in checks:
            if c not in CHECKS:
                raise AssignmentError(f"{at} ({name}): there is no check named {c!r}; the checks are "
                                      f"{', '.join(sorted(CHECKS))}")
            if CHECKS[c].target != kind:
                raise AssignmentError(f"{at} ({name}): {c} is a check for {CHECKS[c].target} targets, "
                                      f"and the assignment's target is {target}")
        points = raw.get("points", 1)
        if not isinstance(points, (int, float)) or points < 0:
            raise AssignmentError(f"{at} ({name}): 'points' must be a number >= 0")
        tasks.append(Task(name, str(raw.get("title", name)), tuple(checks), float(points)))
    limits = data.get("limits", {})
    return Assignment(
        title=str(data.get("title", path.stem)), path=path, program=program_path,
        func=data.get("func"), target=target, tasks=tuple(tasks),
        hazards_fail=bool(data.get("hazards_fail", True)),
        time_s=float(limits.get("time_s", 60)), memory_mb=int(limits.get("memory_mb", 4096)),
    )


def _get(table: dict, key: str, kind: type, where: str):
    if key not in table:
        raise AssignmentError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise AssignmentError(f"{where}: {key!r} must be a {kind.__name__}")
    return value
