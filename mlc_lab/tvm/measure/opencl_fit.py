"""Fitting a GPU kernel's CPU run into a memory and time budget: what it needs, and how it runs to fit.

A GPU kernel run on the CPU costs memory that the GPU never spends. pocl runs a thread block in one of
its threads, whose stack holds the private arrays of all the block's threads (256 threads of 64 KB
each need 16 MB: past an 8 MB stack, pocl dies). Oclgrind simulates each thread block with its own
interpreter state (hundreds of MB for 256 threads of an unrolled tile) and, left to itself, runs one
block per CPU at once: a correct kernel with a large register tile took 6 GB on a 16-core machine.

So a run has a `Budget` (the memory this process may use, the seconds it may take) and fits it:

- pocl where its stack holds a block's private arrays (`pocl_problem`), else Oclgrind;
- on Oclgrind, each launch in chunks of thread blocks (`Chunks`): the first chunk is one block, whose
  peak memory and time are measured; the next chunks hold as many blocks as the memory left allows (a
  block's state is freed when its chunk ends), and a run whose time left cannot hold the rest stops
  at once, saying how long it would take;
- what cannot fit says so in one sentence ("needs about 900 MB ..., the budget leaves 310 MB"), as an
  `OpenCLProgramError` whose verdict is ``could_not_run``: the numbers are not judged, and nothing
  counts it against the schedule. A smaller size is the caller's choice (``numeric_sizes``).

Chunks launch fewer thread blocks than the grid with the same code: each kernel gets three arguments
more, the first block's index, which its ``get_group_id`` adds (TVM's kernels read their block with
``get_group_id``). This module imports no TVM and no pyopencl (the run passes its objects in).
"""

from __future__ import annotations

import math
import os
import re
import resource
import threading
import time
from dataclasses import dataclass
from typing import Any

_MB = 1 << 20
_TYPE_BYTES = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "half": 2, "int": 4, "uint": 4, "float": 4}
_TYPE_BYTES |= {"long": 8, "ulong": 8, "double": 8, "bool": 1}
# a private array at the top of a kernel, as TVM's OpenCL code declares it: ``float C_local_ptr[64];``
_PRIVATE = re.compile(r"^\s+(?!__local\b)([a-z]+?)(\d*)\s+(\w+)\[(\d+)\];", re.M)
_KERNEL = re.compile(r"__kernel\s+void\s+(\w+)\s*\(")
_STACK_SPARE = 1 * _MB  # what a pocl thread's stack needs besides the block's private arrays
SAFETY = 0.8  # of the memory left, what the chunks may plan to use


class BudgetError(Exception):
    """The run cannot fit its budget: ``str`` is the sentence (the verdict is could_not_run);
    ``memory`` when it is the memory (Oclgrind without its race detection needs about half)."""

    def __init__(self, message: str, memory: bool = False) -> None:
        super().__init__(message)
        self.memory = memory


OVER = "mlc_lab: past the memory budget: "  # what a run stopped by its watcher writes to stderr first


def _say_and_end(sentence: str) -> None:
    """The default of `ON_OVER`: the sentence on stderr after `OVER` (the sandbox hands stderr back), then
    the end of this process: a kernel cannot be interrupted, and it would grow past the budget."""
    os.write(2, (OVER + sentence + "\n").encode("utf-8", "replace"))
    os._exit(3)


# Called with the sentence when this process passes its memory budget while a kernel runs, to say so
# and end at once; ``opencl_run``'s child writes it as its result instead.
ON_OVER: Any = _say_and_end


@dataclass(frozen=True)
class Budget:
    """What one run may use: ``memory_mb`` for this whole process (None: no limit), ``seconds`` of
    wall time (None: no limit), ``blocks``: thread blocks at once on Oclgrind (None: as memory allows)."""

    memory_mb: float | None = None
    seconds: float | None = None
    blocks: int | None = None

    @classmethod
    def of(cls, prog: dict) -> Budget:
        raw = prog.get("budget") or {}
        return cls(raw.get("memory_mb"), raw.get("seconds"), raw.get("blocks"))


def allowance(total_mb: float, tree: int, alone: tuple[int, ...] = ()) -> float:
    """Of ``total_mb`` for the process ``tree`` with every descendant and the processes ``alone``, what
    is left now for one more process (at least 64 MB: a run that cannot fit says so itself)."""
    import psutil

    held = 0
    try:
        root = psutil.Process(tree)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        procs = []
    for pid in alone:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    for p in {p.pid: p for p in procs}.values():
        try:
            held += p.memory_info().rss
        except psutil.Error:
            continue
    return max(64.0, total_mb - held / _MB - 16)  # 16 MB spare: the watcher reads every 5 ms


def private_bytes(source: str) -> dict[str, int]:
    """Kernel name -> the bytes of private arrays each of its threads declares."""
    out: dict[str, int] = {}
    starts = [(m.start(), m.group(1)) for m in _KERNEL.finditer(source)]
    for n, (at, name) in enumerate(starts):
        body = source[at : starts[n + 1][0] if n + 1 < len(starts) else len(source)]
        total = 0
        for m in _PRIVATE.finditer(body):
            base, lanes, count = m.group(1), m.group(2), int(m.group(4))
            total += _TYPE_BYTES.get(base, 4) * (int(lanes) if lanes else 1) * count
        out[name] = max(out.get(name, 0), total)
    return out


def pocl_stack_bytes() -> int:
    """The stack of a pocl thread: the default of a new thread, the process's soft stack limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
    return 8 * _MB if soft in (resource.RLIM_INFINITY, -1) or soft <= 0 else int(soft)


def pocl_problem(prog: dict) -> str | None:
    """Why pocl cannot run ``prog`` (a block's private arrays exceed its thread's stack), or None."""
    private = private_bytes(prog["source"])
    stack = pocl_stack_bytes()
    for launch in prog["launches"]:
        threads = math.prod(launch["block"])
        need = private.get(launch["kernel"], 0) * threads
        if need + _STACK_SPARE > stack:
            per = private.get(launch["kernel"], 0)
            return (
                f"the {threads} threads of a block of kernel {launch['kernel']} hold {_size(need)} of private "
                f"arrays ({_size(per)} each), more than the {_size(stack)} stack of a pocl thread"
            )
    return None


def chunkable(source: str) -> str:
    """The source with each kernel taking the index of its first block (three ints, last), which its
    ``get_group_id`` and ``get_global_id`` add: the same kernel can run a part of its grid."""

    def params(m: re.Match) -> str:
        return f"{m.group(1)}{m.group(2)}, int mlc_g0, int mlc_g1, int mlc_g2)"

    source = re.sub(r"(__kernel\s+void\s+\w+\s*\()([^)]*)\)", params, source)
    source = re.sub(r"get_group_id\((\d)\)", r"(get_group_id(\1) + mlc_g\1)", source)
    return re.sub(r"get_global_id\((\d)\)", r"(get_global_id(\1) + mlc_g\1 * get_local_size(\1))", source)


def rss_bytes() -> int:
    """This process's resident memory now."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Peak(threading.Thread):
    """The peak resident memory of this process while a chunk runs, read every 5 ms; past ``limit``
    bytes, `ON_OVER` is told (``what`` says what was running)."""

    def __init__(self, limit: float | None = None, what: str = "") -> None:
        super().__init__(daemon=True)
        self.peak = rss_bytes()
        self.done = threading.Event()
        self.limit, self.what = limit, what

    def run(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, rss_bytes())
            if self.limit is not None and self.peak > self.limit and ON_OVER is not None:
                ON_OVER(f"{self.what} needs more than the {_size(self.limit)} the budget leaves")
                return

    def stop(self) -> int:
        self.done.set()
        self.join()
        return max(self.peak, rss_bytes())


def watch(budget: Budget, what: str) -> _Peak | None:
    """A watcher of this process's memory for a whole run (compiling the kernel included), telling
    `ON_OVER` when it passes the budget; None without a budget."""
    if budget.memory_mb is None:
        return None
    peak = _Peak(budget.memory_mb * _MB, what)
    peak.start()
    return peak


class Chunks:
    """Launches in chunks of thread blocks within a `Budget` (Oclgrind): the first chunk of each kernel
    is one block, measured; the rest as many blocks at once as the memory left allows."""

    def __init__(self, budget: Budget, engine: str, cpus: int) -> None:
        self.budget, self.engine, self.cpus = budget, engine, max(1, cpus)
        self.started = time.monotonic()
        self.per_block: dict[str, tuple[int, float]] = {}  # kernel -> (peak bytes, seconds) of one block
        self.at_once = 0  # the most blocks a chunk held

    def launch(self, call: Any, finish: Any, launch: dict) -> None:
        """Run one launch: ``call(grid, offset)`` enqueues the kernel on a part of its grid, ``finish()``
        waits for it."""
        grid = [int(g) for g in launch["grid"]] + [1] * (3 - len(launch["grid"]))
        total = math.prod(grid)
        done = 0
        per = None
        limit = self.budget.memory_mb * _MB if self.budget.memory_mb is not None else None
        threads = math.prod(launch["block"])
        for sub, offset in _parts(grid, 1):  # the first block, measured
            before = rss_bytes()
            peak = _Peak(limit, f"running one block of {threads} threads of kernel {launch['kernel']} on {self.engine}")
            peak.start()
            t0 = time.monotonic()
            call(sub, offset)
            finish()
            seconds = time.monotonic() - t0
            grown = max(peak.stop() - before, _MB)
            per = (grown, seconds)
            self.per_block.setdefault(launch["kernel"], per)
            done = 1
            break
        assert per is not None
        size = self._blocks_at_once(launch, per, total - done)
        self.at_once = max(self.at_once, size)
        for sub, offset in _parts(grid, size, skip=done):
            watch = _Peak(limit, f"running {size} blocks of kernel {launch['kernel']} at once on {self.engine}")
            watch.start()
            call(sub, offset)
            finish()
            watch.stop()

    def _blocks_at_once(self, launch: dict, per: tuple[int, float], left_blocks: int) -> int:
        grown, seconds = per
        threads = math.prod(launch["block"])
        now = rss_bytes()
        size = max(1, left_blocks)
        if self.budget.memory_mb is not None:
            allowed = self.budget.memory_mb * _MB
            if now + grown > allowed:  # one block does not fit beside what the process holds
                raise BudgetError(
                    f"running kernel {launch['kernel']} on {self.engine} needs about {_size(now + grown)} "
                    f"({_size(grown)} for one block of {threads} threads), and the budget leaves {_size(allowed)}",
                    memory=True,
                )
            size = max(1, min(size, int((allowed - now) * SAFETY // grown)))
        if self.budget.blocks is not None:
            size = max(1, min(size, int(self.budget.blocks)))
        if self.budget.seconds is not None and left_blocks:
            at_once = min(size, self.cpus)
            expected = seconds * left_blocks / at_once
            left = self.budget.seconds - (time.monotonic() - self.started)
            if expected > left:
                raise BudgetError(
                    f"running kernel {launch['kernel']} on {self.engine} would take about {expected:.0f} s more "
                    f"({seconds:.2f} s for one block of {threads} threads, {left_blocks} blocks left, "
                    f"{at_once} at once), and the budget leaves {max(0.0, left):.0f} s"
                )
        return size


def _parts(grid: list[int], size: int, skip: int = 0):
    """(sub-grid, offset) covering ``grid`` in order, each of at most ``size`` blocks (a run of one row,
    or whole rows), after the first ``skip`` blocks (which are the first row's first ones)."""
    gx, gy, gz = grid
    for z in range(gz):
        y = 0
        while y < gy:
            x = skip if (z == 0 and y == 0) else 0
            if size >= gx and x == 0:  # whole rows at once
                rows = min(gy - y, size // gx)
                yield [gx, rows, 1], [0, y, z]
                y += rows
                continue
            while x < gx:
                n = min(size, gx - x)
                yield [n, 1, 1], [x, y, z]
                x += n
            y += 1


def _size(n: float) -> str:
    return f"{n / _MB:.0f} MB" if n >= _MB else f"{n / 1024:.0f} KB"
