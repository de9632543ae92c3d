"""The numeric GPU check at more than one size: right at every size, not only at the one it ran.

A schedule can be right at the numeric check's small size and wrong at the program's: a layout
``(i % 128, j)`` is the identity at 128 and folds rows together at 2048. So the check runs at a plan
of sizes, in order, each compared with the unscheduled program at that size:

- the small size (the largest dimension becomes 128, or larger while the trace's tiles do not divide);
- the program's shape class: twice that, still a power-of-two fraction of the program (so still a
  multiple of every tile), and past the first 128 rows of every buffer;
- a size that is not a multiple of the tiles (196 for 128): the loops get TVM's bounds checks, as a
  program of another size would (left out for a trace whose splits turn bounds checks off).

``sizes = [128, 196, 256]`` names the plan instead: each the largest dimension, the others scaled with
it (a power-of-two fraction of the program keeps the tiles whole; any other size runs with bounds
checks). The first verdict that is not a match decides (a build TVM refuses at a later size only
says so); sizes the time left cannot hold are not run, and said so.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from mlc_lab.core.checks.numeric_gpu import (
    DEFAULT_TIMEOUT_S,
    NumericResult,
    resolve_inputs,
    sizes_text,
)

FAILING = ("mismatch", "crash", "timeout", "does_not_build")
WORK_POWER = 3  # the work of a run grows as its size to this power (a matmul's three loops)


def numeric_check_sizes(
    session: Any,
    sizes: list | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    check: Any,
    **kw: Any,
) -> NumericResult:
    """``check`` (`numeric_check` for a student's own schedule, or a hand-in's `numeric_check_sandboxed`,
    named by the caller: a hand-in's kernel never runs outside the sandbox) at each size of the plan
    (``sizes``: the largest dimension at each run; None: the default plan), within ``timeout_s`` for all
    of them; one verdict, the first that is not a match."""
    from mlc_lab.tvm.checks import opencl

    started = time.monotonic()
    original, trace, func_name = resolve_inputs(session, None, None)
    dims = opencl.buffer_dims(original, func_name)
    plan: list = list(sizes) if sizes else ["default"]
    runs: list[NumericResult] = []
    notes: list[str] = []
    for size in plan:  # the default plan grows after its first run
        left = timeout_s - (time.monotonic() - started)
        mapping, guards = _mapping(size, dims)
        if isinstance(guards, str):
            notes.append(f"not run at {size}: {guards}")
            continue
        if runs and not _fits(runs, mapping, dims, left):
            notes.append(
                f"not run at {sizes_text(mapping)}: the time left of the check's {timeout_s:g} s cannot hold it"
            )
            continue
        r = check(session, sizes=mapping, timeout_s=max(1.0, left), rtol=rtol, atol=atol, guards=guards, **kw)
        if not runs and _over_budget(r):  # the first size does not fit: a smaller one may
            r = _smaller(session, r, timeout_s - (time.monotonic() - started), check=check, rtol=rtol, atol=atol, **kw)
        if runs and r.verdict == "does_not_build":  # at the program's size it builds: not the student's
            notes.append(f"not judged at {sizes_text(r.sizes) or 'its own size'}: {r.message}")
            continue
        runs.append(r)
        if r.verdict in FAILING:
            break
        if size == "default" and r.verdict == "match":
            plan += _default_rest(r, dims, str(trace))
    return _combined(runs, notes)


def _over_budget(r: NumericResult) -> bool:
    return r.verdict == "could_not_run" and "the budget leaves" in r.message


def _smaller(session: Any, r: NumericResult, left: float, check: Any, **kw: Any) -> NumericResult:
    """Half the size ``r`` ran at, while the tiles still divide it and it stays over its budget: the
    first run that fits, or ``r`` with what was tried."""
    from mlc_lab.core.checks.numeric_gpu import NumericCheckError

    tried = r
    while _over_budget(tried) and tried.sizes and all(isinstance(v, int) and v % 2 == 0 for v in tried.sizes.values()):
        half = {d: v // 2 for d, v in tried.sizes.items()}
        started = time.monotonic()
        try:
            tried = check(session, sizes=half, timeout_s=max(1.0, left), **kw)
        except NumericCheckError:  # the tiles do not divide it
            break
        left -= time.monotonic() - started
    if tried is r or _over_budget(tried):
        return r
    return replace(
        tried,
        message=f"{tried.message} (smaller than planned: {r.message.removeprefix('the numbers were not checked: ')})",
    )


def _mapping(size: Any, dims: list[int]) -> tuple[Any, Any]:
    """(the ``sizes`` to give `numeric_check`, whether it runs with bounds checks), or (None, why not).
    ``size``: "default" (the small size, chosen to fit the tiles), the largest dimension (an int), or a
    dimension map (a dict; ``"guards"`` in it: a size the tiles do not divide)."""
    if size == "default":
        return None, False
    if isinstance(size, dict):
        return {k: v for k, v in size.items() if k != "guards"}, bool(size.get("guards"))
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return None, f"a size is a positive number, not {size!r}"
    if not dims or size >= dims[0]:
        return None, f"the program's largest dimension is {dims[0] if dims else 'not a number'}"
    factor = dims[0] // size
    whole = dims[0] % size == 0 and factor & (factor - 1) == 0 and all(d % factor == 0 for d in dims)
    mapping = {d: d // factor if whole else max(1, round(d * size / dims[0])) for d in dims}
    return {d: v for d, v in mapping.items() if d != v}, not whole


def _default_rest(first: NumericResult, dims: list[int], trace: str) -> list:
    """After the small size: the program's shape class (twice it, while smaller than the program) and a
    size no tile divides (half as much again, plus 4), unless the trace turns bounds checks off."""
    used = first.sizes
    if not used or not dims or dims[0] not in used:
        return []
    small = int(used[dims[0]])
    out: list = []
    if 2 * small < dims[0]:
        out.append({d: 2 * v for d, v in used.items() if isinstance(d, int)})
    odd = small + small // 2 + 4
    if "disable_predication=True" not in trace and odd < dims[0]:
        out.append({**{d: max(1, round(d * odd / dims[0])) for d in dims}, "guards": True})
    return out


def _fits(runs: list, mapping: dict | None, dims: list[int], left: float) -> bool:
    """Whether a run at ``mapping`` should finish in ``left`` seconds, from the last run's time."""
    last = runs[-1]
    big = next((v for d, v in (mapping or {}).items() if isinstance(d, int) and d == dims[0]), None)
    was = next((v for d, v in last.sizes.items() if isinstance(d, int) and d == dims[0]), None)
    if not big or not was:
        return True
    return last.seconds * (big / was) ** WORK_POWER < left


def _combined(runs: list, notes: list[str]) -> NumericResult:
    """One verdict from the runs: the first that is not a match, else a match that names every size."""
    if not runs:
        why = "; ".join(notes) or "no size could run"
        return NumericResult(False, None, {}, 0, 0, f"the numbers were not checked: {why}", "could_not_run")
    deciding = next((r for r in runs if r.verdict in FAILING), None)
    if deciding is None:
        matched = [r for r in runs if r.verdict == "match"]
        deciding = matched[0] if matched else runs[0]
        also = [f"{sizes_text(r.sizes)} ({r.total} elements)" for r in matched[1:]]
        message = deciding.message + (f"; the same at {' and at '.join(also)}" if also else "")
    else:
        message = deciding.message
        earlier = [r for r in runs[: runs.index(deciding)] if r.verdict == "match"]
        if earlier:
            message += f" (it matched at {', '.join(sizes_text(r.sizes) or 'its own size' for r in earlier)})"
    if notes:
        message += "; " + "; ".join(notes)
    return replace(deciding, message=message, seconds=sum(r.seconds for r in runs))
