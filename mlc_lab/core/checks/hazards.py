"""Hazards of a GPU schedule, found exactly from the schedule (no run): races, out-of-bounds accesses,
stages bound to one thread axis with different extents, local arrays that spill, launch limits.

Each hazard names the block and loop it is about and says what goes wrong when the kernel runs.
See ``mlc_lab.core.checks.facts`` for the model of TVM's code generation this follows.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from mlc_lab.core.checks.facts import BLOCK_TAGS, THREAD_TAGS, Kernel, Site, StepFacts, free_vars, linear_shape
from mlc_lab.core.access.expr import evaluate
from mlc_lab.core.checks.base import Hazard

log = logging.getLogger(__name__)

_AXIS = {
    "threadIdx.x": 1024,
    "threadIdx.y": 1024,
    "threadIdx.z": 64,
    "blockIdx.x": 2**31 - 1,
    "blockIdx.y": 65535,
    "blockIdx.z": 65535,
}


def find(sf: StepFacts) -> list:
    out: list[Hazard] = []
    if not sf.target.gpu:
        return out
    try:
        out += aliasing(sf)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError):
        log.debug("mlc_lab: aliasing skipped a buffer", exc_info=True)
    for k in sf.kernels():
        for family in (thread_extents, limits, spills, global_in_kernel, out_of_bounds, races):
            try:
                out += family(sf, k)
            except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError):
                # a construct the model does not read (symbolic extents, ...): no claim either way
                log.debug("mlc_lab: %s skipped a kernel", family.__name__, exc_info=True)
    return out


# --- a layout that maps two elements to one ---------------------------------------------------------


def aliasing(sf: StepFacts) -> list:
    """A buffer in global memory whose layout the schedule changed (``transform_layout``) so that two of
    its elements share one place: fewer places than elements, or a write of one block that lands twice
    on one place. Each element of a global buffer lives for the whole program (every thread block sees
    it), so one overwrites the other, at every size where the map folds: a map like ``(i % 128, j)``
    is the identity at 128 and folds rows together at 2048."""
    out = []
    before = sf.original.program.buffers
    for name, info in sf.prog.buffers.items():
        old = before.get(name)
        if old is None or sf.scope(name) != "global" or tuple(old.shape) == tuple(info.shape):
            continue
        if not all(isinstance(x, int) for x in (*old.shape, *info.shape)):
            continue
        places, elements = math.prod(info.shape), math.prod(old.shape)
        shapes = f"the {'x'.join(map(str, old.shape))} elements of {name} onto {'x'.join(map(str, info.shape))} places"
        twice = _written_twice(sf, name)
        if places >= elements and twice is None:
            continue
        block, element = twice if twice is not None else (None, None)
        where = f": block {block} writes {element} twice" if element else ""
        out.append(
            Hazard(
                "aliasing",
                f"the schedule's layout of {name} maps {shapes}{where}; two elements share one place in memory, so one "
                f"overwrites the other (a map such as (i % 128, j) is the identity while the buffer is small "
                f"and folds rows together at the program's size): give transform_layout a map that keeps "
                f"every element of {name} apart",
                block,
            )
        )
    return out


def _written_twice(sf: StepFacts, buf: str) -> tuple | None:
    """(block, element) where one write of ``buf`` by a block with no reduction lands twice on one element,
    over every iteration of its loops (thread and block loops included); None when none is found or the
    enumeration would be too large."""
    for s in sf.sites():
        b = sf.facts.blocks.get(s.access.block)
        if s.access.kind != "write" or s.access.buffer != buf or b is None or b.loops_of("R"):
            continue
        got = sf.enumerate(s, None)
        if got is None:
            continue
        idx, active, _env, _axes = got
        lin = _linear(sf, buf, idx, active.shape)[active]
        s_lin = np.sort(lin, kind="stable")
        dup = np.flatnonzero(s_lin[1:] == s_lin[:-1])
        if dup.size:
            return s.access.block, _element(sf, buf, int(s_lin[dup[0]]))
    return None


# --- thread axes with different extents --------------------------------------------------------------


def thread_extents(sf: StepFacts, k: Kernel) -> list:
    out = []
    for tag in THREAD_TAGS + BLOCK_TAGS:
        bound = [lp for lp in k.loops if lp.tag == tag]
        if len({int(lp.extent) for lp in bound if isinstance(lp.extent, int)}) <= 1:
            continue
        launched = k.launch[tag]
        short = [lp for lp in bound if lp.extent != launched]
        parts = ", ".join(f"{sf.loop_name(lp.id)} ({lp.extent})" for lp in bound)
        first = short[0]
        out.append(
            Hazard(
                "thread_extent",
                f"{tag} is bound to loops with different extents ({parts}); the kernel launches {launched} "
                f"and loop {sf.loop_name(first.id)} then runs {launched} iterations instead of {first.extent}: "
                f"bind every stage to the same number of threads on {tag}",
                sf.loop_name(first.id),
            )
        )
    return out


# --- launch limits ---------------------------------------------------------------------------------


def limits(sf: StepFacts, k: Kernel) -> list:
    out = []
    tgt = sf.target
    where = sf.loop_name(k.root.id)
    if k.threads > tgt.max_threads_per_block:
        dims = " x ".join(str(k.launch[t]) for t in THREAD_TAGS if t in k.launch)
        out.append(
            Hazard(
                "limit",
                f"the kernel under {where} uses {k.threads} threads per block ({dims}), "
                f"more than the {tgt.max_threads_per_block} a block may have: it will not launch",
                where,
            )
        )
    for tag, n in k.launch.items():
        if n > _AXIS.get(tag, n):
            out.append(Hazard("limit", f"{tag} is launched with {n}, more than its limit of {_AXIS[tag]}", where))
    shared = {b: _bytes(sf, b) for b in _buffers_in(k) if sf.scope(b).startswith("shared") and b not in sf.unplaced()}
    total = sum(shared.values())
    if total > tgt.max_shared_memory_per_block:
        parts = ", ".join(f"{b} {n // 1024} KB" if n >= 1024 else f"{b} {n} B" for b, n in shared.items())
        out.append(
            Hazard(
                "limit",
                f"the kernel under {where} allocates {total // 1024} KB of shared memory per "
                f"block ({parts}), more than the {tgt.max_shared_memory_per_block // 1024} KB "
                f"a block may have: make the shared tiles smaller",
                where,
            )
        )
    return out


def _buffers_in(k: Kernel) -> list:
    return list(dict.fromkeys(s.access.buffer for s in k.sites))


def _bytes(sf: StepFacts, buffer: str) -> int:
    info = sf.prog.buffers[buffer]
    shape = sf.facts.allocated.get(buffer, info.shape)
    if not all(isinstance(x, int) for x in shape):
        return 0
    return math.prod(shape) * info.itemsize


# --- local arrays that spill ---------------------------------------------------------------------------


def spills(sf: StepFacts, k: Kernel) -> list:
    """A thread's local arrays too large for its registers: TVM's compacted size, times every virtual
    thread (vthread) around the uses, which TVM gives a copy of its own."""
    out = []
    # Half the register file: the kernel's addresses and loaded operands need the rest. Over the conformance
    # corpus' CUDA schedules, ptxas gives a stack frame to every one above it (224 words, 3 of 3) and to
    # none below (64 words at most, 0 of 37, and the lab's 64-word tiles).
    limit = sf.target.registers_per_thread * 4 // 2
    for b in _buffers_in(k):
        if not sf.scope(b).startswith("local") or b not in sf.facts.allocated or b in sf.unplaced():
            continue
        sites = [s for s in k.sites if s.access.buffer == b]
        vthreads = {
            lp.id: int(lp.extent)
            for s in sites
            for lp in s.chain
            if lp.tag and lp.tag.startswith("vthread") and isinstance(lp.extent, int)
        }
        copies = math.prod(vthreads.values())
        n = _bytes(sf, b) * copies
        if n > limit:
            shape = "x".join(str(x) for x in sf.facts.allocated[b])
            per = f" for each of {copies} virtual threads" if copies > 1 else ""
            block = next((s.access.block for s in sites if s.access.kind == "write"), "")
            out.append(
                Hazard(
                    "spill",
                    f"each thread keeps a {shape} local array {b}{per} ({n // 1024 if n >= 1024 else n} "
                    f"{'KB' if n >= 1024 else 'B'}), more than half of the {sf.target.registers_per_thread} registers it "
                    f"has: it goes to the stack in local memory; {_smaller(sf, b, block)}",
                    block or None,
                )
            )
    return out


def _smaller(sf: StepFacts, buf: str, writer: str) -> str:
    """How to make a spilling local array smaller: a register-level copy of a tile is moved down to the
    loop where its consumer uses it; an accumulator gets a smaller tile."""
    src, via = sf.copy_source(buf)
    if via and via[0].name == writer:
        users = [b.name for b in sf.consumers(buf) if b.name != writer]
        red: set = next(
            (b.loops_of("R") for b in sf.facts.blocks.values() if b.name in users and b.loops_of("R")), set()
        )
        place = [lid for lid in next((b.loops for b in sf.facts.blocks.values() if b.name in users), ()) if lid in red]
        at = f" under {sf.loop_name(place[-1])}" if place else " under the innermost loop that uses it"
        return f"compute_at {writer}{at} so each thread copies only the values of {src} it uses there"
    return "give each thread a smaller tile (the accumulator under the thread loops, fewer or smaller register tiles)"


# --- a global intermediate inside a kernel ------------------------------------------------------------


def global_in_kernel(sf: StepFacts, k: Kernel) -> list:
    """A global buffer the function allocates whose every access is inside one kernel: TVM allocates it
    there, and a kernel cannot allocate global memory (the CUDA build fails)."""
    out = []
    params = set(sf.facts.params)
    inside = {s.access.buffer for s in k.sites}
    for buf in sorted(inside):
        if buf in params or sf.scope(buf) != "global" or not sf.facts.params:
            continue
        if any(s.access.buffer == buf and s not in k.sites for s in sf.sites()):
            continue
        writer = next((s.access.block for s in k.sites if s.access.buffer == buf and s.access.kind == "write"), None)
        out.append(
            Hazard(
                "allocation",
                f"the intermediate {buf} is used only inside the kernel under {sf.loop_name(k.root.id)}, so TVM "
                f"allocates it there, and a kernel cannot allocate global memory (the CUDA build fails): keep the "
                f"accumulator in a 'local' buffer (cache_write) or compute {buf} in a kernel of its own",
                writer,
            )
        )
    return out


# --- out-of-bounds accesses ----------------------------------------------------------------------------


def out_of_bounds(sf: StepFacts, k: Kernel) -> list:
    """Accesses past the end of a buffer: a global buffer's shape, or for shared and local buffers the
    region TVM allocates (what the loops' own extents reach; a thread axis launched wider runs past it)."""
    out, seen = [], set()
    declared: dict = {}  # buffer -> per dim [lo, hi] the loops' own extents reach
    launched: dict = {}  # buffer -> list of (site, dim, lo, hi) under the launch
    held = _held_loops(sf, k)
    for s in k.sites:
        acc = s.access
        info = sf.prog.buffers.get(acc.buffer)
        if info is None or not acc.indices or acc.buffer in sf.unplaced():
            continue
        scope = info.scope
        fixed = {lid: sf.loop(lid).min for lid in held.get(acc.buffer, ())} if scope != "global" else {}
        got = _ranges(sf, s, k, fixed)
        if got is None:
            continue
        launched.setdefault(acc.buffer, []).append((s, got))
        if scope != "global":
            own = _ranges(sf, s, None, fixed)
            if own is not None:
                box = declared.setdefault(acc.buffer, [list(r) for r in own])
                for d, (lo, hi) in enumerate(own):
                    box[d][0], box[d][1] = min(box[d][0], lo), max(box[d][1], hi)
    for buf, items in launched.items():
        info = sf.prog.buffers[buf]
        if info.scope == "global":
            allowed = [(0, int(n) - 1) if isinstance(n, int) else (-math.inf, math.inf) for n in info.shape]
        elif buf in declared:
            allowed = [tuple(r) for r in declared[buf]]
        else:
            continue
        for s, ranges in items:
            for d, (lo, hi) in enumerate(ranges):
                if lo >= allowed[d][0] and hi <= allowed[d][1]:
                    continue
                key = (s.access.block, buf)
                if key in seen:
                    break
                seen.add(key)
                verb = "writes" if s.access.kind == "write" else "reads"
                bad = hi if hi > allowed[d][1] else lo
                what = (
                    f"past the end of {buf} ({int(allowed[d][1]) + 1} in dimension {d})"
                    if info.scope == "global"
                    else f"outside the {_shape_text(allowed)} tile of {buf} that TVM allocates "
                    f"(dimension {d}: {int(allowed[d][0])}..{int(allowed[d][1])})"
                )
                cause = _wide_thread_cause(sf, s, k)
                out.append(
                    Hazard(
                        "out_of_bounds",
                        f"block {s.access.block} {verb} {buf} at index {bad} {what}{cause}",
                        s.access.block,
                    )
                )
                break
    return out + _past_logical_end(sf, k, seen)


def _past_logical_end(sf: StepFacts, k: Kernel, seen: set) -> list:
    """A shared or local buffer keeps the logical shape of what it copies: an index past it (the last
    tile of a split that does not divide its loop, its guard disabled) reads elements no copy wrote,
    even where it stays inside the tile TVM allocates."""
    out = []
    for s in k.sites:
        buf = s.access.buffer
        info = sf.prog.buffers.get(buf)
        if info is None or info.scope == "global" or buf in sf.unplaced() or (s.access.block, buf) in seen:
            continue
        if s.access.guards:  # a guarded access is kept inside by its guard (a wrong guard: out_of_bounds)
            continue
        wide = _wide_thread_cause(sf, s, k)
        if wide and not info.scope.startswith("shared"):  # reported through the global buffers it feeds
            continue
        ranges = _ranges(sf, s, k, {})
        if ranges is None:
            continue
        for d, ((lo, hi), n) in enumerate(zip(ranges, info.shape)):
            if not isinstance(n, int) or (lo >= 0 and hi < n):
                continue
            seen.add((s.access.block, buf))
            verb = "writes" if s.access.kind == "write" else "reads"
            cause = wide or (
                ": the last tile of a split that does not divide its loop runs unguarded; keep the split's "
                "guard or split by a factor that divides the loop"
            )
            out.append(
                Hazard(
                    "out_of_bounds",
                    f"block {s.access.block} {verb} {buf} at index {hi if hi >= n else lo} past the end of the "
                    f"{n} elements it holds in dimension {d}{cause}",
                    s.access.block,
                )
            )
            break
    return out


def _held_loops(sf: StepFacts, k: Kernel) -> dict:
    """Per shared or local buffer, the loops TVM holds fixed when it sizes the buffer: those above the
    place it allocates the buffer (the innermost loop enclosing every access), and for a local buffer
    the thread loops too (each thread has its own)."""
    chains: dict = {}
    for s in k.sites:
        if sf.scope(s.access.buffer) != "global":
            chains.setdefault(s.access.buffer, []).append(s.chain)
    out = {}
    for buf, cs in chains.items():
        common = []
        for level in zip(*cs):
            if all(lp.id == level[0].id for lp in level):
                common.append(level[0])
            else:
                break
        local = sf.scope(buf).startswith("local")
        held = {lp.id for lp in common if lp.tag not in THREAD_TAGS or local}
        if local:
            held |= {lp.id for c in cs for lp in c if lp.tag in THREAD_TAGS or lp.tag in BLOCK_TAGS}
        out[buf] = held
    return out


def _shape_text(allowed: list) -> str:
    return "x".join(str(int(hi - lo + 1)) for lo, hi in allowed)


def _wide_thread_cause(sf: StepFacts, s: Site, k: Kernel) -> str:
    for lp in s.chain:
        if lp.tag and lp.tag in k.launch and isinstance(lp.extent, int) and lp.extent < k.launch[lp.tag]:
            return (
                f": its loop {sf.loop_name(lp.id)} is bound to {lp.tag} with extent {lp.extent}, but the kernel "
                f"launches {k.launch[lp.tag]} threads on {lp.tag}, so threads {lp.extent}..{k.launch[lp.tag] - 1} "
                f"run it too"
            )
    return ""


_ENUMERATE_BELOW = 1 << 15  # more points than this: an exact affine bound first, when there is one


def _ranges(sf: StepFacts, s: Site, k: Kernel | None, fixed: dict) -> list | None:
    """Per dimension (min, max) of the site's index over the points where it runs. ``k`` None: every
    loop over its own extent (TVM's view when it sizes a buffer), else thread loops over the launch."""
    out = []
    for d, e in enumerate(s.access.indices):
        sub = Site(_OneIndex(s.access, d), s.chain, s.leaf, s.index)
        if sf.points(sub, k, fixed) > _ENUMERATE_BELOW:
            quick = sf.affine_range(sub, k, fixed, e)
            if quick is not None:
                out.append(quick)
                continue
        got = sf.enumerate(sub, k, fixed=fixed)
        if got is None:
            return None
        idx, active, _env, _axes = got
        vals = idx[0][active]
        if vals.size == 0:
            return None
        out.append((int(vals.min()), int(vals.max())))
    return out


class _OneIndex:
    """An access seen through one of its dimensions (what ``enumerate`` needs of it)."""

    def __init__(self, acc, d: int):
        self.indices = (acc.indices[d],)
        self.guards = acc.guards
        self.inner = acc.inner
        self.block = acc.block
        self.buffer = acc.buffer
        self.kind = acc.kind


# --- races ---------------------------------------------------------------------------------------------


def races(sf: StepFacts, k: Kernel) -> list:
    """Two threads of a block writing one element of a global or shared buffer (a statement every thread
    runs identically, copying the same values, is redundant work, and a reduction over threads with its
    init TVM's cross-thread reduction: neither is a race); a thread reading an
    element of a global buffer that another thread writes in the same kernel (nothing orders them);
    a thread reading an element of a local buffer that it never wrote (each thread has its own)."""
    out = []
    thread_ids = {lp.id for lp in k.loops if lp.tag in THREAD_TAGS}
    nthreads = max(1, k.threads)
    for buf, sites in _race_sites(sf, k, thread_ids).items():
        scope = sf.scope(buf)
        fixed = _race_fixed(sf, k, sites, scope)
        wpairs = _write_pairs(sf, k, sites, fixed, scope, thread_ids)
        if not wpairs:
            continue
        # every write as one key: element * nthreads + thread
        wkeys = _uniq(np.concatenate([p[0] * nthreads + p[1] for _, p in wpairs]))
        if scope == "local":
            found = _unwritten_local_read(sf, k, buf, sites, fixed, wkeys, nthreads)
        else:
            found = _write_clash(sf, buf, wpairs)
            if found is None and scope == "global":
                found = _foreign_global_read(sf, k, buf, sites, fixed, wkeys, nthreads)
        if found is not None:
            out.append(found)
    return out


_RACE_POINTS = 1 << 18


def foreign_local_read(sf: StepFacts, k: Kernel, buf: str) -> tuple | None:
    """(thread, element, who computes it) where a thread reads an element of the local buffer ``buf`` that
    it never wrote (each thread has its own), or None: what a write-back bound to other threads than its
    compute's does."""
    thread_ids = {lp.id for lp in k.loops if lp.tag in THREAD_TAGS}
    sites = _race_sites(sf, k, thread_ids).get(buf)
    if not sites or sf.scope(buf) != "local":
        return None
    fixed = _race_fixed(sf, k, sites, "local")
    wpairs = _write_pairs(sf, k, sites, fixed, "local", thread_ids)
    if not wpairs:
        return None
    nthreads = max(1, k.threads)
    wkeys = _uniq(np.concatenate([p[0] * nthreads + p[1] for _, p in wpairs]))
    found = _first_read(sf, k, sites, fixed, nthreads, lambda _elements, keys: ~_isin(keys, wkeys))
    if found is None:
        return None
    _s, elem, thread = found
    others = wkeys[wkeys // nthreads == elem] % nthreads
    who = f"thread {int(others[0])} computes it" if others.size else "no thread writes it"
    return thread, _element(sf, buf, elem), who


def _race_sites(sf: StepFacts, k: Kernel, thread_ids: set) -> dict:
    """Buffer -> the kernel's sites of it where threads may race: global, shared and local buffers
    that the kernel writes, less what TVM or an intrinsic orders itself."""
    # A reduction whose reduction loop is bound to threads, its init still inside it: TVM lowers it to
    # a cross-thread reduction (an all-reduce, one thread writes the result), not to racing updates.
    # Decomposed (no init), the updates of the threads do race.
    allreduce = {b.name: set(b.writes) for b in sf.facts.blocks.values() if b.has_init and b.loops_of("R") & thread_ids}
    # a tensorized block is one warp-wide instruction, and fragments (wmma.*) belong to a warp:
    # which thread holds which element is the intrinsic's business
    tensorized = {b.name for b in sf.facts.blocks.values() if b.tensorized}
    by_buffer: dict = {}
    for s in k.sites:
        if s.access.buffer in allreduce.get(s.access.block, ()):
            continue
        if s.access.buffer in sf.unplaced():  # a stage not placed yet: TVM keeps it in global memory
            continue
        if s.access.block in tensorized or not _per_thread_or_shared(sf.scope(s.access.buffer)):
            continue
        by_buffer.setdefault(s.access.buffer, []).append(s)
    return {b: sites for b, sites in by_buffer.items() if any(s.access.kind == "write" for s in sites)}


def _race_fixed(sf: StepFacts, k: Kernel, sites: list, scope: str) -> dict:
    """The loops held at one value while the threads are compared: the thread blocks (what one does,
    every one does). A shared or local buffer lives for one iteration of the loops around all its uses
    (TVM allocates it there): those loops are held at their first value. A global buffer's only when
    the enumeration would be too large (then two threads meeting across those loops go unseen)."""
    fixed: dict = {tag: 0 for tag in BLOCK_TAGS}
    if scope != "global" or any(sf.points(s, k, fixed) > _RACE_POINTS for s in sites):
        fixed.update({lid: int(sf.loop(lid).min) for lid in _common_serial(sites)})
    return fixed


def _write_pairs(sf: StepFacts, k: Kernel, sites: list, fixed: dict, scope: str, thread_ids: set) -> list:
    """(site, ``_pairs`` of it) for each write that can race (with the values' keys but in local memory); a
    write of a shared or global buffer that every thread does identically is redundant work, left out."""
    out = []
    for s in sites:
        if s.access.kind != "write" or (scope != "local" and _thread_invariant(sf, s, thread_ids)):
            continue
        got = _pairs(sf, s, k, fixed, values=scope != "local")
        if got is not None:
            out.append((s, got))
    return out


def _first_read(sf: StepFacts, k: Kernel, sites: list, fixed: dict, nthreads: int, bad) -> tuple | None:
    """(site, element, thread) of the first point of a read among ``sites`` that ``bad(elements, keys)``
    marks (keys: element * nthreads + thread, as the writes' keys), or None."""
    for s in sites:
        if s.access.kind != "read":
            continue
        got = _pairs(sf, s, k, fixed)
        if got is None:
            continue
        marked = bad(got[0], got[0] * nthreads + got[1])
        if marked.any():
            i = int(np.flatnonzero(marked)[0])
            return s, int(got[0][i]), int(got[1][i])
    return None


def _unwritten_local_read(sf: StepFacts, k: Kernel, buf: str, sites: list, fixed: dict, wkeys, nthreads: int):
    """A thread reading an element of the local buffer ``buf`` that it never wrote, or None."""
    found = _first_read(sf, k, sites, fixed, nthreads, lambda _elements, keys: ~_isin(keys, wkeys))
    if found is None:
        return None
    s, elem, thread = found
    others = wkeys[wkeys // nthreads == elem] % nthreads
    who = f"thread {int(others[0])} computes it" if others.size else "no thread writes it"
    return Hazard(
        "race",
        f"block {s.access.block} in thread {thread} reads element {_element(sf, buf, elem)} of the local buffer "
        f"{buf}, which that thread never wrote ({who}; local memory is private to each thread): bind the loops "
        f"of {s.access.block} to the threads that computed those elements",
        s.access.block,
    )


def _write_clash(sf: StepFacts, buf: str, wpairs: list):
    """Two threads writing one element of ``buf`` with different values, or None."""
    clash = _clash(wpairs)
    if clash is None:
        return None
    elem, t1, t2 = clash
    block = next(s.access.block for s, p in wpairs if np.any((p[0] == elem) & (p[1] == t1)))
    return Hazard(
        "race",
        f"threads {t1} and {t2} of a thread block both write element {_element(sf, buf, elem)} of {buf} "
        f"(block {block}), with different values: the result depends on which runs last; each element must "
        f"be written by one thread",
        block,
    )


def _foreign_global_read(sf: StepFacts, k: Kernel, buf: str, sites: list, fixed: dict, wkeys, nthreads: int):
    """A thread reading an element of the global buffer ``buf`` that another thread writes in the kernel."""
    addr = wkeys // nthreads
    found = _first_read(
        sf, k, sites, fixed, nthreads, lambda elements, keys: _isin(elements, addr) & ~_isin(keys, wkeys)
    )
    if found is None:
        return None
    s, elem, thread = found
    writer = int(wkeys[np.searchsorted(addr, elem)] % nthreads)
    return Hazard(
        "race",
        f"block {s.access.block} in thread {thread} reads element {_element(sf, buf, elem)} of {buf}, which "
        f"thread {writer} writes in the same kernel with no barrier between (global memory): compute it in "
        f"the thread that reads it",
        s.access.block,
    )


def _per_thread_or_shared(scope: str) -> bool:
    return scope in ("global", "local") or scope.startswith("shared")


def _common_serial(sites: list) -> list:
    """Ids of the loops, bound to no thread or block, that enclose every one of ``sites``."""
    out = []
    for level in zip(*[s.chain for s in sites]):
        if not all(lp.id == level[0].id for lp in level):
            break
        if level[0].tag is None and isinstance(level[0].min, int):
            out.append(level[0].id)
    return out


def _uniq(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sorting: numpy's hash-based unique is slower on these arrays)."""
    s = np.sort(a, kind="stable")
    if s.size == 0:
        return s
    keep = np.ones(s.size, dtype=bool)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def _isin(values, sorted_set: np.ndarray) -> np.ndarray:
    """``values`` in the sorted array ``sorted_set``."""
    values = np.asarray(values)
    if sorted_set.size == 0:
        return np.zeros(values.shape, dtype=bool)
    pos = np.clip(np.searchsorted(sorted_set, values), 0, sorted_set.size - 1)
    return sorted_set[pos] == values


def _thread_invariant(sf: StepFacts, s: Site, thread_ids: set) -> bool:
    for acc in s.leaf.accesses:
        if acc.block != s.access.block:
            continue
        if acc.kind == "read" and sf.scope(acc.buffer).startswith("local"):
            return False
        used = set()
        for e in acc.indices + tuple(acc.guards):
            used |= free_vars(e)
        if used & thread_ids:
            return False
    return True


def _pairs(sf: StepFacts, s: Site, k: Kernel, fixed: dict, values: bool = False):
    """(linear element, linear thread) of every point where the site runs, thread axes included; with
    ``values``, a third array: a key of the value written (the block and the elements its statement
    reads), equal where two points write the same value."""
    reads = [a for a in s.leaf.accesses if a.block == s.access.block and a.kind == "read"] if values else []
    extra: tuple = ()
    if reads:
        used = set().union(*(free_vars(e) for a in reads for e in a.indices))
        extra = tuple(lp for lp in list(s.chain) + list(s.access.inner) if lp.id in used)
    got = sf.enumerate(s, k, fixed=fixed, all_threads=True, extra_loops=extra)
    if got is None:
        return None
    idx, active, env, axes = got
    # a point past the end of the buffer is the out-of-bounds hazard's, not a write that meets another
    for i, n in zip(idx, linear_shape(sf.prog.buffers[s.access.buffer].shape)):
        active = active & (i >= 0) & (i < n)
    lin = _linear(sf, s.access.buffer, idx, active.shape)
    tid = np.broadcast_to(sf.thread_ids(k, axes), active.shape)
    if not values:
        return lin[active], tid[active]
    key = np.full(active.shape, sum(map(ord, s.access.block)) * 1_000_003, dtype=np.int64)
    for n, a in enumerate(reads):
        if sf.scope(a.buffer).startswith("local"):  # a thread's own value: never the same as another's
            key = key + tid * 7919 + 1
            continue
        try:
            ix = [np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), active.shape) for e in a.indices]
        except Exception:  # noqa: BLE001 - a read the analysis cannot evaluate: assume values differ
            key = key + tid * 7919 + 1
            continue
        key = key * 1_000_000_007 + _linear(sf, a.buffer, ix, active.shape) * (2 * n + 3)
    return lin[active], tid[active], key[active]


def _linear(sf: StepFacts, buf: str, idx: list, shape: tuple) -> np.ndarray:
    lin = np.zeros(shape, dtype=np.int64)
    for i, n in zip(idx, linear_shape(sf.prog.buffers[buf].shape)):
        lin = lin * n + np.clip(i, 0, max(n - 1, 0))
    return lin


def _clash(wpairs: list) -> tuple | None:
    """(element, thread, other thread) where two threads write one element with different values
    (by the value keys of ``_pairs``), or None: threads that write the same value to an element are
    redundant work, not a race."""
    elem = np.concatenate([p[0] for _, p in wpairs])
    tid = np.concatenate([p[1] for _, p in wpairs])
    val = np.concatenate([p[2] for _, p in wpairs])
    order = np.lexsort((val, tid, elem))
    elem, tid, val = elem[order], tid[order], val[order]
    start = np.r_[True, elem[1:] != elem[:-1]]
    group = np.cumsum(start) - 1
    first_val = val[start][group]
    first_tid = tid[start][group]
    bad = np.flatnonzero((val != first_val) & (tid != first_tid))
    if not bad.size:
        return None
    i = int(bad[0])
    return int(elem[i]), int(first_tid[i]), int(tid[i])


def _element(sf: StepFacts, buf: str, lin: int) -> str:
    shape = linear_shape(sf.prog.buffers[buf].shape)
    idx = np.unravel_index(lin, shape) if shape else ()
    return f"{buf}[{', '.join(str(int(i)) for i in idx)}]"
