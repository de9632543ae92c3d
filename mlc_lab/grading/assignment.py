"""An assignment as data: a TOML file naming the program, the target, the limits, the hand-in and the tasks.

```toml
title = "GEMM + ReLU + add on the GPU"
program = "gemm_relu_add.py"        # relative to this file; read by the grader, never run
func = "main"                       # optional: the function to schedule
reference = "gemm_tiled.py"         # optional: the lab's own solution (any hand-in form; --check-ref);
                                    # a scheduled program or a trace is also the explorer's way's target
target = "cuda"                     # "cpu", "cuda", or a CUDA arch such as "sm_80"
hazards_fail = ["correctness"]      # the default. true: the same; false: none; or a list of hazard
                                    # classes ("correctness", "performance") and kinds ("race", "spill")
visibility = "visible"              # Gradescope: "visible", "hidden", "after_due_date", "after_published"
output_format = "text"              # Gradescope's outputs: "text" (as written) or "md" (Markdown)

[hand_in]                           # optional: the file a student hands in and the function it defines
file = "lab3.py"                    # (the batch finds it in a student's folder)
function = "manual_schedule"        # default: schedule(sch), manual_schedule() or apply_trace(sch)

[limits]                            # for schedule files and notebooks, run in the sandbox
time_s = 60                         # CPU seconds (the wall clock allows twice that and half a minute)
memory_mb = 4096
grader_memory_mb = 2048             # the grader's own processes for one hand-in, all together
grader_time_s = 300                 # their CPU seconds (default: time_s + the numeric timeout + 180)

[numeric]                           # optional, GPU targets: run each schedule at smaller sizes on the
sizes = [128, 256, 196]             # CPU and compare results (default: 128, the program's shape class
                                    # and a size no tile divides; size = 128: that one only)
memory_mb = 768                     # the grader's memory while it runs (default: Gradescope's 768 MB)
timeout_s = 120                     # and its time, for all its sizes

[performance]                       # optional: time each submission (checked against the program)
measure = true                      # also without thresholds: a "Latency (ms)" leaderboard column
repeats = 5

[[tasks]]
name = "thread_blocks"
title = "Tile the output over thread blocks"
checks = ["thread_block_tiling"]
points = 5
max_latency_ms = 12.5               # optional performance threshold of this task
visibility = "after_due_date"       # optional: this task's Gradescope visibility
read_copies = true                  # optional, with register_tiling: the lab asks for register-level
                                    # copies of the shared tiles (cache_read into 'local' under k_1)
write_back = "block"                # optional, with write_cache: where the lab writes the accumulator
                                    # back: "thread" (under the innermost thread loop) or "block" (under
                                    # the thread-block loop, its loops bound to the threads)
```

``reference = "reference.py"`` (next to the TOML file, any hand-in form) names the lab's own solution:
``mlc-lab grade lab.toml --check-ref`` grades it and refuses the assignment unless it earns full marks.

An assignment of several parts, each with its own hand-in file and tasks, writes ``[[parts]]``
instead of ``[[tasks]]`` (a part has ``name``, ``title``, ``[parts.hand_in]`` and ``[[parts.tasks]]``)::

    [[parts]]
    name = "tiling"
    hand_in = { file = "part1.py" }
    [[parts.tasks]]
    name = "thread_blocks"
    checks = ["thread_block_tiling"]

A key the grader does not know (``hazard_fail``) is refused with the keys it knows, anywhere.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from mlc_lab.errors import MlcLabError
from mlc_lab.model.checks import HAZARD_CLASS

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
GRADESCOPE_MB = 768  # the memory of Gradescope's autograder container: the numeric check's default budget
HAZARD_CLASSES = ("correctness", "performance")

_KEYS = {
    "": {"title", "program", "func", "target", "hazards_fail", "visibility", "hand_in", "limits", "numeric"}
    | {"performance", "tasks", "parts", "output_format", "reference"},
    "hand_in": {"file", "function"},
    "limits": {"time_s", "memory_mb", "grader_memory_mb", "grader_time_s"},
    "numeric": {"size", "sizes", "rtol", "atol", "timeout_s", "memory_mb"},
    "performance": {"measure", "repeats"},
    "tasks": {"name", "title", "checks", "points", "max_latency_ms", "visibility", "read_copies", "write_back"},
    "parts": {"name", "title", "hand_in", "tasks"},
}


class AssignmentError(MlcLabError):
    """The assignment file is not one we can grade with (says which key and why)."""


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    checks: tuple[str, ...]
    points: float
    max_latency_ms: float | None = None  # a performance threshold: the program, timed, must be this fast
    visibility: str = "visible"
    number: str = ""  # "1.2": part 1, task 2 (Gradescope's test number)
    part: str = ""
    read_copies: bool = False  # the lab asks for register-level copies of the shared tiles
    write_back: str | None = None  # where the lab writes the accumulator back: "thread" or "block"


@dataclass(frozen=True)
class HandIn:
    file: str | None = None  # the hand-in's file name; None: any file
    function: str | None = None  # the scheduling function's name; None: the usual ones


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    hand_in: HandIn
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Assignment:
    title: str
    path: Path
    program: Path
    func: str | None
    target: str
    parts: tuple[Part, ...]
    hazards_fail: frozenset = frozenset({"correctness"})  # hazard classes and kinds that fail a task
    visibility: str = "visible"
    time_s: float = 60.0
    memory_mb: int = 4096
    grader_memory_mb: int = 2048  # the judging child's whole tree (replay, checks, numeric check, sandbox)
    grader_time_s: float | None = None  # its CPU seconds per hand-in; None: time_s + numeric timeout + 180
    measure: bool = False  # time every submission (for thresholds and the leaderboard)
    repeats: int = 5
    numeric: dict | None = None  # {"sizes": 128 or {2048: 128}, "rtol", "atol"}: run smaller, compare
    output_format: str = "text"  # Gradescope's outputs: "text" or "md"
    reference: Path | None = None  # the lab's own solution (a hand-in), graded by --check-ref; the way's target
    extra: dict = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(t for p in self.parts for t in p.tasks)

    @property
    def timed(self) -> bool:
        return self.measure or any(t.max_latency_ms is not None for t in self.tasks)

    @property
    def max_score(self) -> float:
        return float(sum(t.points for t in self.tasks))

    def part_for(self, file_name: str) -> Part | None:
        """The part whose hand-in is ``file_name``; the only part when there is one; else None."""
        for part in self.parts:
            if part.hand_in.file == file_name:
                return part
        return self.parts[0] if len(self.parts) == 1 else None

    def fails_on(self, hazard) -> bool:
        """Whether ``hazard`` (a ``Hazard``) fails this assignment's tasks: its kind or class is named."""
        return hazard.kind in self.hazards_fail or hazard.severity in self.hazards_fail


def load_assignment(path: str | Path) -> Assignment:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AssignmentError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise AssignmentError(f"{path}: not UTF-8 text at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise AssignmentError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    _known(data, "", where)
    program = _get(data, "program", str, where)
    program_path = (path.parent / program).resolve()
    if not program_path.is_file():
        raise AssignmentError(f"{where}: program {program!r} is not a file next to the assignment")
    target = str(data.get("target", "cpu"))
    from mlc_lab.core.checks import Target

    try:
        kind = Target.of(target).kind
    except MlcLabError as exc:
        raise AssignmentError(f"{where}: {exc}") from None
    visibility = _visibility(data.get("visibility", "visible"), where)
    limits = _table(data, "limits", where)
    performance = _table(data, "performance", where)
    return Assignment(
        title=str(data.get("title", path.stem)),
        path=path,
        program=program_path,
        func=data.get("func"),
        target=target,
        parts=_parts(data, where, kind, visibility),
        hazards_fail=_hazards_fail(data.get("hazards_fail", ["correctness"]), where),
        visibility=visibility,
        time_s=_positive(limits, "time_s", 60, where),
        memory_mb=int(_positive(limits, "memory_mb", 4096, where)),
        grader_memory_mb=int(_positive(limits, "grader_memory_mb", 2048, where)),
        grader_time_s=_positive(limits, "grader_time_s", None, where),
        measure=bool(performance.get("measure", False)),
        repeats=int(performance.get("repeats", 5)),
        numeric=_numeric(data.get("numeric"), where, kind),
        output_format=_output_format(data.get("output_format", "text"), where),
        reference=_reference(data.get("reference"), path, where),
    )


def _parts(data: dict, where: str, kind: str, visibility: str) -> tuple[Part, ...]:
    if "parts" in data and "tasks" in data:
        raise AssignmentError(f"{where}: an assignment has [[tasks]] or [[parts]] (each with its tasks), not both")
    if "tasks" in data:
        hand_in = _hand_in(data.get("hand_in", {}), where)
        return (Part("", str(data.get("title", "")), hand_in, _tasks(data["tasks"], where, kind, visibility, 1, "")),)
    raw_parts = data.get("parts")
    parts = []
    for i, at, raw, name in _named_tables(raw_parts, "parts", where, "[[tasks]] table (or [[parts]])"):
        hand_in = _hand_in(raw.get("hand_in", {}), at)
        if hand_in.file is None and len(raw_parts) > 1:
            raise AssignmentError(f"{at} ({name}): a part of several needs hand_in.file, the file it grades")
        parts.append(
            Part(name, str(raw.get("title", name)), hand_in, _tasks(raw.get("tasks"), at, kind, visibility, i, name))
        )
    files = [p.hand_in.file for p in parts]
    if len(set(files)) != len(files):
        raise AssignmentError(f"{where}: two parts hand in the same file; each part has its own hand_in.file")
    return tuple(parts)


def _tasks(raw_tasks: object, where: str, kind: str, visibility: str, number: int, part: str) -> tuple[Task, ...]:
    from mlc_lab.core.checks import CHECKS

    tasks = []
    for i, at, raw, name in _named_tables(raw_tasks, "tasks", where, "[[tasks]] table"):
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
                    f"{at} ({name}): {c} is a check for {CHECKS[c].target} targets, and the assignment's target is {kind}"
                )
        points = raw.get("points", 1)
        if not isinstance(points, (int, float)) or isinstance(points, bool) or points < 0:
            raise AssignmentError(f"{at} ({name}): 'points' must be a number >= 0")
        read_copies, write_back = _teachers_word(raw, checks, f"{at} ({name})")
        tasks.append(
            Task(
                name,
                str(raw.get("title", name)),
                tuple(checks),
                float(points),
                float(latency) if latency is not None else None,
                _visibility(raw.get("visibility", visibility), f"{at} ({name})"),
                f"{number}.{i}",
                part,
                read_copies,
                write_back,
            )
        )
    return tuple(tasks)


WRITE_BACKS = ("thread", "block")


def _teachers_word(raw: dict, checks: list, where: str) -> tuple[bool, str | None]:
    """What the lab's handout asks beyond the checks: register-level read copies (judged with
    register_tiling) and where the accumulator is written back (judged with write_cache)."""
    read_copies = raw.get("read_copies", False)
    if not isinstance(read_copies, bool):
        raise AssignmentError(f"{where}: read_copies is true or false")
    if read_copies and "register_tiling" not in checks:
        raise AssignmentError(f"{where}: read_copies is judged with register_tiling: add it to the task's checks")
    write_back = raw.get("write_back")
    if write_back is not None and write_back not in WRITE_BACKS:
        raise AssignmentError(
            f"{where}: write_back is 'thread' (under the innermost thread loop) or 'block' (under the "
            f"thread-block loop, its loops bound to the threads), not {write_back!r}"
        )
    if write_back is not None and "write_cache" not in checks:
        raise AssignmentError(f"{where}: write_back is judged with write_cache: add it to the task's checks")
    return read_copies, write_back


def _reference(value: object, path: Path, where: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise AssignmentError(f"{where}: reference is the lab's own solution, a file or folder next to the assignment")
    ref = (path.parent / value).resolve()
    if not ref.exists():
        raise AssignmentError(f"{where}: reference {value!r} is not next to the assignment")
    return ref


def _named_tables(raw: object, section: str, where: str, needed: str):
    """Each table of the list ``raw`` (the [[parts]] or [[tasks]]) as (its number, where it is, the table,
    its name), each checked for unknown keys and a name; an empty list or a non-table is an error."""
    if not isinstance(raw, list) or not raw:
        raise AssignmentError(f"{where}: an assignment needs at least one {needed}")
    noun = section.removesuffix("s")
    for i, table in enumerate(raw, 1):
        at = f"{where}: {noun} {i}"
        if not isinstance(table, dict):
            raise AssignmentError(f"{at}: a {noun} is a table")
        _known(table, section, at)
        yield i, at, table, _get(table, "name", str, at)


def _known(table: dict, section: str, where: str) -> None:
    known = _KEYS[section]
    unknown = sorted(set(table) - known)
    if unknown:
        scope = f"[{section}]" if section else "the assignment"
        raise AssignmentError(
            f"{where}: unknown key {unknown[0]!r} in {scope}; the keys it knows are {', '.join(sorted(known))}"
        )


def _table(data: dict, key: str, where: str) -> dict:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise AssignmentError(f"{where}: [{key}] must be a table")
    _known(table, key, where)
    return table


def _hand_in(table: object, where: str) -> HandIn:
    if not isinstance(table, dict):
        raise AssignmentError(f"{where}: hand_in must be a table (file = ..., function = ...)")
    _known(table, "hand_in", where)
    file, function = table.get("file"), table.get("function")
    if file is not None and (not isinstance(file, str) or not file or "/" in file or file in (".", "..")):
        raise AssignmentError(f"{where}: hand_in.file must be a plain file name, as 'lab3.py'")
    if function is not None and (not isinstance(function, str) or not function.isidentifier()):
        raise AssignmentError(f"{where}: hand_in.function must be a Python function name")
    return HandIn(file, function)


def _output_format(value: object, where: str) -> str:
    from mlc_lab.grading.report import OUTPUT_FORMATS

    if value not in OUTPUT_FORMATS:
        raise AssignmentError(f"{where}: output_format must be one of {', '.join(OUTPUT_FORMATS)}, not {value!r}")
    return str(value)


def _visibility(value: object, where: str) -> str:
    if value not in VISIBILITIES:
        raise AssignmentError(f"{where}: visibility must be one of {', '.join(VISIBILITIES)}, not {value!r}")
    return str(value)


def _hazards_fail(value: object, where: str) -> frozenset:
    """``true`` (correctness hazards fail tasks), ``false`` (none), or a list of classes and kinds."""
    if value is True:
        return frozenset({"correctness"})
    if value is False:
        return frozenset()
    known = set(HAZARD_CLASSES) | set(HAZARD_CLASS)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AssignmentError(f"{where}: hazards_fail is true, false or a list of hazard classes and kinds")
    for v in value:
        if v not in known:
            raise AssignmentError(
                f"{where}: hazards_fail names {v!r}, which is no hazard class or kind; they are {', '.join(sorted(known))}"
            )
    return frozenset(value)


def _numeric(table: object, where: str, kind: str) -> dict | None:
    """``[numeric]``: the sizes the schedule runs at on the CPU, each compared with the program: by default
    a plan of three (``mlc_lab.core.checks.numeric_sizes``), or ``sizes = [128, 196, 256]`` (the largest
    dimension at each run), ``size = 128`` (one run) or ``sizes = {"2048" = 128}`` (one run, a map of
    dimensions); with ``rtol``/``atol`` and ``timeout_s``, the time for all its runs."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise AssignmentError(f"{where}: [numeric] must be a table")
    _known(table, "numeric", where)
    if kind != "cuda":
        raise AssignmentError(
            f"{where}: [numeric] runs GPU schedules on the CPU; for a cpu target use "
            "[performance], whose timing checks the result"
        )
    if "sizes" in table and "size" in table:
        raise AssignmentError(f"{where}: [numeric] has size or sizes, not both")
    sizes: object = None  # the default plan: 128, the program's shape class, a size no tile divides
    if "sizes" in table:
        raw = table["sizes"]
        if isinstance(raw, list) and raw and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in raw):
            sizes = list(raw)
        elif isinstance(raw, dict) and raw and all(str(k).isdigit() and isinstance(v, int) for k, v in raw.items()):
            sizes = {int(k): v for k, v in raw.items()}
        else:
            raise AssignmentError(
                f"{where}: [numeric] sizes is a list of sizes to run at (the largest dimension at each run, "
                f'as [128, 196, 256]) or a map of dimensions to smaller ones, as {{"2048" = 128}}'
            )
    elif "size" in table:
        sizes = table["size"]
        if not isinstance(sizes, int) or isinstance(sizes, bool) or sizes < 1:
            raise AssignmentError(f"{where}: [numeric] size must be a positive integer")
    return {
        "sizes": sizes,
        "rtol": float(table.get("rtol", 1e-3)),
        "atol": float(table.get("atol", 1e-3)),
        "timeout_s": float(table.get("timeout_s", 120)),
        # the grader's processes while the check runs, all together: Gradescope's container by default
        "memory_mb": _positive(table, "memory_mb", GRADESCOPE_MB, where, "numeric"),
    }


def _positive(table: dict, key: str, default: float | None, where: str, section: str = "limits"):
    """``table[key]`` as a float > 0, or ``default`` when absent."""
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise AssignmentError(f"{where}: [{section}] {key} must be a number > 0, not {value!r}")
    return float(value)


def _get(table: dict, key: str, kind: type, where: str):
    if key not in table:
        raise AssignmentError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise AssignmentError(f"{where}: {key!r} must be a {kind.__name__}")
    return value
