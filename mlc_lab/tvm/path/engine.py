"""Finding the way from a schedule to a target program, with TVM as the oracle.

``find(make, func, target)``: ``make()`` gives a fresh schedule of the start (the original program
with the start's trace replayed); the target is a PrimFunc. The way is read off the target
(``blocks``: which block is which, where each sits; ``tiling``: each block's loops), applied on a
fresh schedule one step at a time, and claimed only when TVM's ``structural_equal`` says the result
is the target. Where the target leaves a real choice (which block owns a nest), the choices are
tried cheapest first, a few at most.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import tvm_ffi

from mlc_lab.tvm.path import copyat, dtypes, gemm, hidden, inplace, late, loose, merge, partition, rare, tensorcore
from mlc_lab.tvm.path.blocks import correspond, placements
from mlc_lab.tvm.path.explain import difference
from mlc_lab.tvm.path.ir import read
from mlc_lab.tvm.path.plan import Run
from mlc_lab.tvm.path.work import Op, Refused, Unreachable, Work


@dataclass
class Found:
    """What the engine found: ``status`` is "reached", "names" (equal up to block names) or
    "unreached"; ``ops`` the way (applied after the start), ``sch`` the schedule at its end."""

    status: str
    ops: list[Op] = field(default_factory=list)
    sch: Any = None
    why: str = ""
    kind: str = ""  # unreached: "computes" | "no_primitive" | "stage" | "unread" | "here" | "partial"
    tried: int = 0
    seconds: float = 0.0


def same_function(a: Any, b: Any) -> bool:
    """TVM's structural equality of two PrimFuncs whatever their names (``global_symbol``)."""
    name = "f"
    return bool(tvm_ffi.structural_equal(a.with_attr("global_symbol", name), b.with_attr("global_symbol", name)))


def find(
    make: Callable[[], Any], func: str, target: Any, *, limit: int = 4, deadline_s: float = 20.0, normalize: bool = True
) -> Found:
    started = time.perf_counter()
    try:
        sch = make()
    except Exception as exc:  # noqa: BLE001  (TVM cannot replay this step's trace: a dynamic tile's sample)
        why = f"TVM cannot replay the schedule of this step by itself ({type(exc).__name__}): start from another"
        return Found("unreached", why=why, kind="partial", seconds=time.perf_counter() - started)
    if same_function(sch.mod[func], target):
        return Found("reached", [], sch, seconds=time.perf_counter() - started)
    tgt = read(target)
    unbound = loose.loose(tgt)
    if unbound:  # no way can be confirmed: TVM compares the stray variables by identity
        return Found("unreached", why=loose.sentence(unbound), kind="trace", seconds=time.perf_counter() - started)
    if tensorcore.is_tensorcore(tgt):  # a sketch of meta_schedule's tensor-core rule, read as such first
        at = tensorcore.find(make, func, target, tgt, deadline_s, same_function)
        if at is not None:
            return Found("reached", list(at.ops), at.sch, seconds=time.perf_counter() - started)
    at = tensorcore.blockize_once(make, func, target, tgt, same_function)
    if at is not None:
        return Found("reached", list(at.ops), at.sch, seconds=time.perf_counter() - started)
    if normalize and _to_prepare(read(sch.mod[func]), tgt):
        return _prepared(make, func, target, tgt, limit, deadline_s, started)
    start = read(sch.mod[func])
    for wanted, prelude in ((gemm.wanted, gemm.prelude), (gemm.outer_wanted, gemm.outer_prelude)):
        matmul = wanted(start, tgt) if normalize else None
        if matmul is not None:  # dlight's normal form of a matmul first (reindex, layouts, padding)
            got = _from(prelude(make, func, matmul, tgt), func, target, limit, deadline_s, started)
            if got.ops or got.status == "reached":
                return got  # else TVM or the target disagree with the prelude: the plain reading
    try:
        corr = correspond(read(sch.mod[func]), tgt)
        choices = placements(tgt, corr, limit)
    except Unreachable as exc:
        early = Found("unreached", why=exc.sentence, kind=exc.kind)
        return _or_normalized(early, make, func, target, limit, deadline_s, started, normalize)
    except Exception as exc:  # noqa: BLE001  (a construct the engine does not read: said, never raised)
        why = f"the path engine cannot read this target yet ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
        early = Found("unreached", why=why, kind="partial")
        return _or_normalized(early, make, func, target, limit, deadline_s, started, normalize)
    best: Found | None = None
    shortest: Found | None = None  # once reached, the other owners' ways are tried: the shortest is said
    tries = [(p, o) for p in choices for o in _OPTIONS]
    for n, (placement, options) in enumerate(tries):
        if n and time.perf_counter() - started > deadline_s:
            break
        if options and (shortest is not None or (best is not None and best.kind not in ("partial", "here"))):
            continue  # a variant only helps where the plain attempt got part of the way
        if options.get("consumers_first") and len(corr.inlined) < 2:
            continue  # one block inlined: no order to choose
        if options.get("fuse_late") and not late.hosts(tgt, placement):
            continue
        work = Work(make() if n else sch, func)
        got = _attempt(work, tgt, corr, placement, target, options)
        got.tried = n + 1
        if got.status == "reached":
            if shortest is None or len(got.ops) < len(shortest.ops):
                shortest = got
            continue
        if shortest is not None:
            continue
        if best is None or _better(got, best):
            best = got
        if got.kind in ("computes", "no_primitive", "stage", "unread"):
            break  # no other choice of the way changes what the target computes
    if shortest is not None:
        shortest.seconds = time.perf_counter() - started
        return shortest
    assert best is not None
    return _or_normalized(best, make, func, target, limit, deadline_s, started, normalize)


def _or_normalized(
    best: Found,
    make: Callable[[], Any],
    func: str,
    target: Any,
    limit: int,
    deadline_s: float,
    started: float,
    on: bool,
) -> Found:
    """``best``, or the way from the normal form of the start where that one reaches the target."""
    if on and best.status == "unreached" and time.perf_counter() - started < deadline_s:
        left = deadline_s - (time.perf_counter() - started)
        named = rare.find(make, func, target, same_function, left, _going_on(func, target, limit))
        if named is not None:
            return Found("reached", named[0], named[1], seconds=time.perf_counter() - started)
    if on and time.perf_counter() - started < deadline_s:
        again = _normalized(make, func, target, limit, deadline_s - (time.perf_counter() - started))
        if again is not None and again.status == "reached":
            best = again
    twins = loose.twins(read(target)) if best.status != "reached" and best.kind == "partial" else []
    if twins:  # what TVM refused there matters less than that no step could name the block
        best.why = loose.twins_sentence(twins)
    best.seconds = time.perf_counter() - started
    return best


def _going_on(func: str, target: Any, limit: int) -> Callable[[Callable[[], Any], float], Found]:
    """The engine from another start (one step ``rare`` read off the target), with no fallbacks."""

    def go(make: Callable[[], Any], seconds: float) -> Found:
        return find(make, func, target, limit=limit, deadline_s=seconds, normalize=False)

    return go


def _normalized(make: Callable[[], Any], func: str, target: Any, limit: int, deadline_s: float) -> Found | None:
    """The way from the start with each block's iterators in TVM's normal form first (what dlight's
    rules do before they tile: unit iterators dropped, ``transform_block_layout`` by TVM's own
    ``NormalizePrimFunc``), the engine going on from there. None when the form changes nothing."""
    probe = make()
    before = len(probe.trace.insts)  # a start in the middle of a schedule has its own steps: not the form's
    try:
        tvm_ffi.get_global_func("s_tir.schedule.NormalizePrimFunc")(probe)
    except Exception:  # noqa: BLE001  (TVM finds no normal form for this program)
        return None
    maps = []
    for inst in list(probe.trace.insts)[before:]:
        if inst.kind.name == "TransformBlockLayout":
            index_map = inst.attrs[0]
            same = len(index_map.initial_indices) == len(index_map.final_indices) and all(
                isinstance(f, type(v)) and f.same_as(v)
                for v, f in zip(index_map.initial_indices, index_map.final_indices)
            )
            if not same:
                maps.append((str(probe.get(inst.inputs[0]).name_hint), index_map))
    if not maps:
        return None

    def normal() -> Any:
        work = Work(make(), func)
        for name, index_map in maps:
            why = f"the target's block {name} iterates over its iterators in TVM's normal form (no unit iterators)"
            work.apply("transform_block_layout", why, block=work.block_rv(name), index_map=index_map)
        normal.ops = work.ops  # type: ignore[attr-defined]
        return work.sch

    normal.ops = []  # type: ignore[attr-defined]  # (the search may end before it makes the start)
    got = find(normal, func, target, limit=limit, deadline_s=deadline_s, normalize=False)
    got.ops = list(normal.ops) + got.ops  # type: ignore[attr-defined]
    return got


def _to_prepare(cur: Any, tgt: Any) -> bool:
    found = dtypes.retyped(cur, tgt) or _new_partitions(cur, tgt) or copyat.copies(cur, tgt)
    return bool(found or merge.merges(cur, tgt) or inplace.caches(cur, tgt))


def _new_partitions(cur: Any, tgt: Any) -> bool:
    return bool(partition.partitions(tgt)) and not partition.partitions(cur)


def _prepared(
    make: Callable[[], Any], func: str, target: Any, tgt: Any, limit: int, deadline_s: float, started: float
) -> Found:
    """The way from the start with the target's element types (``dtypes``), loop partitions
    (``partition``), copies at a loop (``copyat``), merged loops (``merge``) and in-place caches
    (``inplace``) made first."""

    def cut() -> Any:
        work = Work(make(), func)
        for buffer, dtype in dtypes.retyped(work.view, tgt):
            dtypes.apply(work, buffer, dtype)
        if _new_partitions(work.view, tgt):
            for common, extents in partition.partitions(tgt):
                partition.apply(work, common, extents)
        for at in copyat.copies(work.view, tgt):
            copyat.apply(work, at)
        for joined in merge.merges(work.view, tgt):
            merge.apply(work, joined)
        for cache in inplace.caches(work.view, tgt):
            inplace.apply(work, cache)
        cut.ops = work.ops  # type: ignore[attr-defined]
        return work.sch

    got = _from(cut, func, target, limit, deadline_s, started)
    made = hasattr(cut, "ops")  # the preparation applied (else TVM refused it: said as is)
    if made and got.status != "reached" and _new_partitions(read(make().mod[func]), tgt):
        last = _partitioned_last(make, func, target, tgt, limit, deadline_s - (time.perf_counter() - started))
        got = last if last is not None else got
        got.seconds = time.perf_counter() - started
    return got


def _from(cut: Callable[[], Any], func: str, target: Any, limit: int, deadline_s: float, started: float) -> Found:
    """The way from what ``cut()`` makes of the start (its ops on ``cut.ops``), the engine going on
    from there."""
    try:
        cut()
    except (Unreachable, Refused) as exc:
        why = exc.sentence if isinstance(exc, Unreachable) else f"TVM refused {exc.primitive}: {exc.message}"
        return Found("unreached", why=why, kind="partial", seconds=time.perf_counter() - started)
    left = max(deadline_s - (time.perf_counter() - started), 1.0)
    got = find(cut, func, target, limit=limit, deadline_s=left, normalize=False)
    got.ops = list(cut.ops) + got.ops  # type: ignore[attr-defined]
    got.seconds = time.perf_counter() - started
    return got


def _partitioned_last(
    make: Callable[[], Any], func: str, target: Any, tgt: Any, limit: int, deadline_s: float
) -> Found | None:
    """The way to the target as it was before its partition, then the partition (its pieces then
    share the loops tiled once: a split of a loop inside the partitioned one)."""
    if deadline_s < 0.5:
        return None
    start = make()
    try:
        before = partition.unpartitioned(start.mod[func], target, tgt)
    except Exception:  # noqa: BLE001  (a form of the target this reading does not rebuild)
        before = None
    if before is None:
        return None
    got = find(make, func, before, limit=limit, deadline_s=deadline_s, normalize=False)
    if got.status != "reached":
        return None
    work = Work(got.sch, func)
    try:
        for common, extents in partition.partitions(tgt):
            partition.apply(work, common, extents)
    except (Unreachable, Refused):
        return None
    if not same_function(work.mod[func], target):
        return None
    return Found("reached", got.ops + work.ops, work.sch)


# Variants of one attempt, tried in order when the plain one gets only part of the way: set_scope
# before the blocks move (a shared buffer's region then spans the threads bound above it); the
# serial loops blocks move into fused only after they do (``late``); blocks inlined consumers first
# (the order meta_schedule's auto-inline rule takes: a block's reads list so); reverse_compute_inline
# after the blocks sit in their loops (the predicate that trims a padded copy).
_OPTIONS: tuple[dict, ...] = (
    {},
    {"scope_first": True},
    {"fuse_late": True},
    {"consumers_first": True},
    {"inline_late": True},
)


def _attempt(work: Work, tgt: Any, corr: Any, placement: Any, target: Any, options: dict) -> Found:
    run = Run(work, tgt, corr, placement, options)
    try:
        run.go()
    except (Unreachable, Refused) as exc:
        kind = exc.kind if isinstance(exc, Unreachable) else "partial"
        why = exc.sentence if isinstance(exc, Unreachable) else f"TVM refused {exc.primitive}: {exc.message}"
        return Found("unreached", list(work.ops), work.sch, why=why, kind=kind)
    except Exception as exc:  # noqa: BLE001  (a construct the engine does not read: said, never raised)
        why = f"the path engine cannot read this target yet ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
        return Found("unreached", list(work.ops), work.sch, why=why, kind="partial")
    ours = work.mod[work.func]
    if not same_function(ours, target) and hidden.hide(work, tgt):  # accesses the target does not state
        ours = work.mod[work.func]
    if same_function(ours, target):
        return Found("reached", list(work.ops), work.sch)
    kind, why = difference(ours, target)
    if not why:
        kind, why = "partial", "the program differs from the target outside its blocks (its buffers or attributes)"
    return Found("unreached", list(work.ops), work.sch, why=why, kind=kind)


def _better(a: Found, b: Found) -> bool:
    rank = {"reached": 0, "names": 1, "unreached": 2}
    return (rank[a.status], -len(a.ops)) < (rank[b.status], -len(b.ops))
