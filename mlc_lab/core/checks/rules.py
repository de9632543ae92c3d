"""The named GPU checks, registered in ``CHECKS`` (the CPU ones in ``check_cpu``).

Each reads what the schedule does (blocks, scopes, bindings, placements and the exact accesses of
``mlc_lab.core.checks.facts``), never a reference's extents: any tile sizes and any loop order that
achieve the optimisation pass. An operand is looked through its register-level copies to the shared
stage they copy; a stage not placed in the compute's kernel yet is a failed (or a not-yet-judged)
step whose message names the next primitive, never a shared or local array of a kernel. A check
returns None when the program has nothing it applies to (``checks.check_session`` lists it all the
same, as not judged); the tile checks apply to reductions that reuse an input across outputs.
"""

from __future__ import annotations

import math

import numpy as np

from mlc_lab.core.checks.facts import BLOCK_TAGS, THREAD_TAGS, Kernel, Site, StepFacts, free_vars, linear_shape
from mlc_lab.core.checks.base import Check, CheckResult

CHECKS: dict[str, Check] = {}  # name -> Check, in the order a report lists them

# Why a check did not judge (``evidence["reason"]`` of a verdict with judged=False): the program has
# nothing it looks at; it is at a step before the one the check looks at; the check could not read it.
DOES_NOT_APPLY, NOT_YET, CANNOT_READ = "does not apply", "not judged yet", "could not judge"


def register(name: str, target: str, title: str):
    def deco(fn):
        CHECKS[name] = Check(name, target, title, fn)
        return fn

    return deco


_GOOD_EFFICIENCY = 0.75  # coalescing: bytes used / bytes of the 32-byte sectors moved, at least (the lab's
# coalesced copies use all of them; a warp that moves twice the sectors it needs fails)
_MAX_REQUESTS = 1 << 14  # a copy loop longer than this is not measured warp by warp (too slow to ask)
_BAD_WAYS = 2  # shared-memory bank conflicts: worse than 2-way fails


# --- shared helpers ---------------------------------------------------------------------------------


def main_of(sf: StepFacts):
    """The reduction block, its kernel and its sites (the update's accesses)."""
    r = sf.reduction_block()
    if r is None:
        return None, None, []
    return r, sf.kernel_of(r.name), sf.block_sites(r.name)


def _write_site(sites: list) -> Site:
    for s in sites:
        if s.access.kind == "write" and s.access.label == "":
            return s
    return next(s for s in sites if s.access.kind == "write")  # every block writes (a None was used unchecked)


def _box(idx: list, active: np.ndarray) -> list:
    """Extent of the touched box per dimension."""
    return [int(i[active].max() - i[active].min() + 1) if active.any() else 0 for i in idx]


def _tile_text(shape: list) -> str:
    return "x".join(str(n) for n in shape)


def reduction_loops(sf: StepFacts, r) -> list:
    red = r.loops_of("R")
    return [lid for lid in r.loops if lid in red]


def _fixed_blocks() -> dict:
    """The first thread block: what one block does is what every block does, shifted."""
    return {tag: 0 for tag in BLOCK_TAGS}


def _output_block(sf: StepFacts):
    """Without a reduction, the main computation is the last block that writes a function argument."""
    params = set(sf.facts.params)
    out = [b for b in sf.facts.blocks.values() if set(b.writes) & params and not b.tensorized]
    return out[-1] if out else None


def reuse_dims(sf: StepFacts) -> list:
    """The dimensions of the main block's output along which an operand is reused: some input it reads
    does not move when that dimension does (A[i, k] along j of C[i, j]). A matmul or a convolution has
    two or more; a row reduction (softmax's max) or a copy none: no tile of it shares inputs. Read from
    the original program, whose loops are the block's own axes."""

    def compute() -> list:
        orig = StepFacts(sf.original, sf.original, sf.target, 0)
        r = orig.reduction_block() or _output_block(orig)
        return _reuse(orig, r, orig.block_sites(r.name)) if r is not None else []

    return sf.memo("reuse", compute)


def _reuse(sf: StepFacts, r, sites: list) -> list:
    ws = _write_site(sites)
    if ws is None:
        return []
    own = set(r.writes)
    reads = [
        set().union(*(free_vars(e) for e in s.access.indices))
        for s in sites
        if s.access.kind == "read" and s.access.buffer not in own
    ]
    out = []
    shape = sf.prog.buffers[ws.access.buffer].shape
    for d, e in enumerate(ws.access.indices):
        loops = {lid for lid in free_vars(e) if not isinstance(sf.loop(lid).extent, int) or sf.loop(lid).extent > 1}
        if isinstance(shape[d], int) and shape[d] <= 1 or not loops:
            continue
        if any(not (loops & used) for used in reads):
            out.append(d)
    return out


def _gpu_preamble(name: str, sf: StepFacts, *, tiles: bool = True):
    """(main block, kernel, sites) or a failing CheckResult when the main block is not on the GPU; None
    when the check has nothing to judge. ``tiles``: the check is about tiles whose inputs are shared
    (a reduction that reuses an operand across its outputs), else any main block will do."""
    r, k, sites = main_of(sf)
    if r is None and not tiles:
        r = _output_block(sf)
        k, sites = (sf.kernel_of(r.name), sf.block_sites(r.name)) if r is not None else (None, [])
    if r is None:
        return None
    if tiles and not reuse_dims(sf):
        return None
    if k is None:
        why = (
            f"block {r.name} runs on the host: no loop above it is bound to blockIdx or threadIdx, "
            f"so nothing of it runs on the GPU"
        )
        if name == "thread_block_tiling":
            return CheckResult(name, False, why, r.name, {"bound": False})
        return _unjudged(name, f"{CHECKS[name].title} is not judged yet: {why}", r.name, {"bound": False})
    return r, k, sites


def gpu_check(name: str, title: str, tiles=True):
    """Register a CUDA check of the main block: ``fn(sf, r, k, sites)`` judges it once ``_gpu_preamble``
    found it in a kernel; else the preamble's answer (None, or not judged) is the check's. ``tiles``: as
    the preamble's, or a function of the step's facts that says it."""

    def deco(fn):
        def check(sf: StepFacts) -> CheckResult | None:
            got = _gpu_preamble(name, sf, tiles=tiles(sf) if callable(tiles) else tiles)
            return got if got is None or isinstance(got, CheckResult) else fn(sf, *got)

        check.__name__ = check.__qualname__ = fn.__name__
        register(name, "cuda", title)(check)
        return check

    return deco


def _reduces(sf: StepFacts) -> bool:
    """Whether the program has a reduction (then a check is about its tiles, else about any main block)."""
    return sf.reduction_block() is not None


# --- GPU --------------------------------------------------------------------------------------------


@gpu_check("thread_block_tiling", "thread-block tiling", tiles=False)
def thread_block_tiling(sf: StepFacts, r, k: Kernel, sites: list) -> CheckResult | None:
    name = "thread_block_tiling"
    ws = _write_site(sites)
    chain_tags = [lp.tag for lp in ws.chain if lp.tag]
    blocks = [lp for lp in ws.chain if lp.tag in BLOCK_TAGS]
    threads = [lp for lp in ws.chain if lp.tag in THREAD_TAGS]
    ev = {"blocks": k.blocks, "threads_per_block": k.threads, "launch": dict(k.launch), "bound": chain_tags}
    if not blocks or not threads:
        missing = "blockIdx" if not blocks else "threadIdx"
        return CheckResult(
            name,
            False,
            f"block {r.name} has no loop bound to {missing}: split its spatial loops "
            f"and bind the outer ones to blockIdx and the inner ones to threadIdx",
            r.name,
            ev,
        )
    out = sf.enumerate(ws, k, fixed=_fixed_blocks(), extra_loops=tuple(threads))
    if out is None:
        return CheckResult(
            name, False, f"the tile each thread block computes in {r.name} could not be worked out", r.name, ev
        )
    idx, active, _env, _axes = out
    box = _box(idx, active)
    shape = [int(n) for n in sf.prog.buffers[ws.access.buffer].shape]
    ev["block_tile"] = box
    where = sf.loop_name(blocks[0].id)
    # a 2-D tile where the original output reuses inputs along two dimensions or more (the layout of
    # the buffer written now may differ: a cache or a reindex stage adds or reorders dimensions)
    wide = [d for d, n in enumerate(box) if n > 1]
    need = min(2, len(reuse_dims(sf)))
    flat = [d for d, n in enumerate(box) if n <= 1 and shape[d] > 1] if len(wide) < need else []
    # One block is a tiling too when the output is one tile (a small problem); it is not when the
    # output is more than a whole block could hold (its most threads, half their registers each).
    outputs = math.prod(n for n in shape if n > 0)
    per_thread = outputs / max(1, k.threads)
    ev["outputs_per_thread"] = round(per_thread, 2)
    one_block = sf.target.max_threads_per_block * (sf.target.registers_per_thread // 2)
    if k.blocks <= 1 and outputs > one_block:
        return CheckResult(
            name,
            False,
            f"all of {r.name} runs in one thread block, whose {k.threads} threads compute "
            f"{per_thread:g} outputs each; bind the outer tile loops to blockIdx so that many blocks "
            f"share the work",
            where,
            ev,
        )
    if flat:
        return CheckResult(
            name,
            False,
            f"each thread block computes a {_tile_text(box)} strip of {sf.written_back(ws.access.buffer)}, one element "
            f"wide in dimension {flat[0]}: split that loop too so that a block computes a 2-D tile "
            f"whose inputs its threads share",
            where,
            ev,
        )
    return CheckResult(
        name,
        True,
        f"{r.name} is tiled over thread blocks: each of the {k.blocks} blocks computes a "
        f"{_tile_text(box)} tile of {sf.written_back(ws.access.buffer)} with {k.threads} threads",
        where,
        ev,
    )


def _operands(sf: StepFacts, r, sites: list) -> dict:
    """The buffers the reduction reads (not its own accumulator), each looked through its register-level
    copies: source buffer -> the local copies between it and the compute."""
    out: dict = {}
    for s in sites:
        if s.access.kind == "read" and s.access.buffer not in r.writes:
            src, via = sf.copy_source(s.access.buffer)
            out.setdefault(src, [b.name for b in via])
    return out


def _copied(p, b: str) -> str:
    """What a copy block ``p`` into ``b`` copies (the buffer it reads), for its sentences."""
    reads = [x for x in p.reads if x != b]
    return reads[0] if reads else b


def _dest(b, acc: str) -> str:
    """Where a write-back block ``b`` of the accumulator ``acc`` writes it."""
    writes = [x for x in b.writes if x != acc]
    return writes[0] if writes else acc


def _unjudged(name: str, why: str, where: str | None = None, ev: dict | None = None) -> CheckResult:
    """Not judged yet: the program is at a step before the one this check looks at (``why`` names it)."""
    return CheckResult(name, False, why, where, {**(ev or {}), "reason": NOT_YET}, judged=False)


@gpu_check("shared_memory_tiling", "shared-memory tiling")
def shared_memory_tiling(sf: StepFacts, r, k: Kernel, sites: list) -> CheckResult | None:
    name = "shared_memory_tiling"
    red = reduction_loops(sf, r)
    first = sf.loop_name(red[0]) if red else r.name
    operands = _operands(sf, r, sites)
    ev: dict = {"operands": {}}
    direct = [b for b in operands if sf.scope(b) == "global"]
    staged = [b for b in operands if sf.scope(b).startswith("shared")]
    # the stage just made and not placed yet first: its compute_at is the student's next step
    staged.sort(key=lambda b: b not in sf.unplaced())
    if direct and not (staged and staged[0] in sf.unplaced()):
        ev["global_operands"] = direct
        return CheckResult(
            name,
            False,
            f"block {r.name} reads {direct[0]} straight from global memory: cache_read it into a "
            f"'shared' buffer and compute_at that copy under the reduction loop {first}, so the "
            f"block's threads share one copy of each tile",
            r.name,
            ev,
        )
    if not staged:
        return None
    for b in staged:
        failed = _shared_tile(sf, r, k, b, operands[b], red, ev)
        if failed is not None:
            return failed
    parts = "; ".join(
        f"{b}: a {_tile_text(v['tile'])} tile under {v['under']}, each element read {v['reuse']:g} times"
        + (f" (through {', '.join(v['through'])})" if v["through"] else "")
        for b, v in ev["operands"].items()
    )
    return CheckResult(name, True, f"{r.name} reads its operands from shared memory ({parts})", r.name, ev)


def _shared_tile(sf: StepFacts, r, k: Kernel, b: str, through: list, red: list, ev: dict) -> CheckResult | None:
    """One operand staged in the shared buffer ``b`` (read ``through`` those local copies): the failing
    verdict when its copy is not placed in the compute's kernel, not under a reduction loop, or buys no
    reuse; None when it is a tile (what was found goes into ``ev["operands"][b]``)."""
    prods = sf.producers(b)
    if not prods:
        return None
    p = prods[0]
    first = sf.loop_name(red[0]) if red else r.name
    under = [lid for lid in p.loops if lid in red]
    tile = list(sf.facts.allocated.get(b, sf.prog.buffers[b].shape))
    info = ev["operands"][b] = {"copy": p.name, "tile": tile, "through": through}
    if b in sf.unplaced() or sf.kernel_of(p.name) is not k:
        info["placed"] = False
        why = (
            f"block {p.name} fills all of {b} ({_tile_text(tile)} elements) {_where_copy(sf, p.name)}, "
            f"so TVM keeps {b} in global memory: compute_at {p.name} under {first} so each block "
            f"holds one tile"
        )
        return CheckResult("shared_memory_tiling", False, why, p.name, ev)
    if not under:
        why = (
            f"{b} is filled once for the whole reduction ({_tile_text(tile)} elements, above loop "
            f"{first}): compute_at block {p.name} under {first} so it holds one slice of the "
            f"reduction at a time"
        )
        return CheckResult("shared_memory_tiling", False, why, p.name, ev)
    info["under"] = sf.loop_name(under[-1])
    reuse = _reads_per_copied(sf, r, k, p, b, under[-1], tile)
    info["reuse"] = round(reuse, 2)
    if reuse <= 1:
        why = (
            f"each element of {_copied(p, b)} that block {p.name} copies into {b} is read only {reuse:.2g} times "
            f"by {r.name}: the copy buys no reuse"
        )
        return CheckResult("shared_memory_tiling", False, why, p.name, ev)
    return None


def _reads_per_copied(sf: StepFacts, r, k: Kernel, p, b: str, place, tile: list) -> float:
    """How many times the compute ``r`` reads each element of ``b`` that its copy ``p``, placed under the
    loop ``place``, copies in one phase (one iteration of ``place``)."""
    # every iteration inside one phase reads once: the serial loops and the virtual threads (each a
    # copy of the thread's work), not the thread loops (counted by k.threads)
    inside = [
        lid
        for lid in r.loops[r.loops.index(place) + 1 :]
        if (tag := sf.loop(lid).tag) is None or tag.startswith("vthread")
    ]
    per_phase = k.threads * math.prod(int(sf.loop(lid).extent) for lid in inside)
    elements = _copied_per_phase(sf, k, r, p, b) or math.prod(int(x) for x in tile) or 1
    return per_phase / elements


def _copied_per_phase(sf: StepFacts, k, r, p, buf: str) -> int | None:
    """How many distinct elements the copy block writes in one step of the loops it shares with the
    compute (TVM may allocate a larger box than it fills)."""
    w = next((s for s in sf.block_sites(p.name) if s.access.kind == "write" and s.access.buffer == buf), None)
    if w is None:
        return None
    fixed = _fixed_blocks()
    fixed.update({lp.id: int(lp.min) for lp in w.chain if lp.tag is None and lp.id in set(r.loops)})
    out = sf.enumerate(w, k, fixed=fixed)  # the loops the index uses: which thread copies is not asked
    if out is None:
        return None
    idx, active, _env, _axes = out
    lin = np.zeros(active.shape, dtype=np.int64)
    for i, n in zip(idx, linear_shape(sf.prog.buffers[buf].shape)):
        lin = lin * n + np.clip(i, 0, max(n - 1, 0))
    return _distinct(lin[active]) or None


def _in_registers(scope: str) -> bool:
    """A thread's registers: 'local', or a tensor-core accumulator fragment (held in registers)."""
    return scope.startswith("local") or scope == "wmma.accumulator"


def _where_copy(sf: StepFacts, block: str) -> str:
    k = sf.kernel_of(block)
    return "at the root, outside every kernel" if k is None else "in a kernel of its own"


@gpu_check("register_tiling", "register tiling")
def register_tiling(sf: StepFacts, r, k: Kernel, sites: list) -> CheckResult | None:
    name = "register_tiling"
    ws = _write_site(sites)
    red = set(reduction_loops(sf, r))
    acc = ws.access.buffer
    thread = [lid for lid in r.loops if sf.loop(lid).tag in THREAD_TAGS]
    if not thread:
        return _unjudged(
            name,
            f"register tiling is not judged yet: no loop of {r.name} is bound to threadIdx, so no thread has a "
            f"tile of its own; bind the inner tile loops to threadIdx first",
            r.name,
        )
    if acc in sf.unplaced():
        return _unjudged(
            name,
            f"register tiling is not judged yet: the local accumulator {acc} of {r.name} is written back "
            f"outside its kernel; reverse_compute_at {acc} under {sf.loop_name(thread[-1])} first",
            r.name,
        )
    if not _in_registers(sf.scope(acc)):
        where = f"{sf.scope(acc)} memory"
        at = f" and reverse_compute_at the copy under {sf.loop_name(thread[-1])}" if thread else ""
        return CheckResult(
            name,
            False,
            f"each thread of {r.name} accumulates into {acc}, {where}, not into registers: cache_write "
            f"{r.name} to a 'local' buffer{at}, so each thread keeps its tile of {acc} in registers",
            r.name,
            {"accumulator": acc, "scope": sf.scope(acc)},
        )
    fixed = _fixed_blocks()
    fixed.update({tag: 0 for tag in THREAD_TAGS})
    fixed.update({lid: int(sf.loop(lid).min) for lid in red})
    out = sf.enumerate(ws, k, fixed=fixed)
    ev: dict = {"accumulator": ws.access.buffer}
    if out is None:
        return CheckResult(
            name, False, f"the tile each thread of {r.name} computes could not be worked out", r.name, ev
        )
    idx, active, _env, _axes = out
    box = _box(idx, active)
    ev["thread_tile"] = box
    ev["outputs_per_step"] = int(np.count_nonzero(active))
    wide = [n for n in box if n > 1]
    inner = sf.loop_name(max(red, key=lambda lid: r.loops.index(lid))) if red else r.name
    if len(wide) < 2:
        return CheckResult(
            name,
            False,
            f"each thread of {r.name} updates a {_tile_text(box)} tile of {ws.access.buffer} per step "
            f"of {inner}: split i and j once more inside the thread loops and place those loops under "
            f"{inner}, so that each value a thread loads is used for several outputs",
            r.name,
            ev,
        )
    reuse = min(wide)
    ev["loads_reused"] = reuse
    # each operand staged in shared memory -> the register-level copies it is read through ([]: straight)
    ev["read_copies"] = {b: via for b, via in _operands(sf, r, sites).items() if sf.scope(b).startswith("shared")}
    return CheckResult(
        name,
        True,
        f"each thread of {r.name} accumulates a {_tile_text(box)} tile of {ws.access.buffer} per step "
        f"of {inner}, so each value it loads is used {reuse} times",
        r.name,
        ev,
    )


@gpu_check("cooperative_fetching", "cooperative fetching", tiles=_reduces)
def cooperative_fetching(sf: StepFacts, r, k: Kernel, sites: list) -> CheckResult | None:
    name = "cooperative_fetching"
    staged = [b for b in _operands(sf, r, sites) if sf.scope(b).startswith("shared")]
    if not staged:
        if not reuse_dims(sf):  # no tile of it shares inputs: there is never a copy to spread
            return None
        return _unjudged(
            name,
            f"cooperative fetching is not judged yet: {r.name} reads no shared buffer yet; it judges the "
            f"copies into shared memory once shared-memory tiling stages {r.name}'s inputs there",
            r.name,
        )
    ev: dict = {}
    for b in staged:
        prods = sf.producers(b)
        if not prods:
            continue
        p = prods[0]
        pk = sf.kernel_of(p.name)
        if pk is None:
            return _unjudged(
                name,
                f"cooperative fetching is not judged yet: block {p.name} copies {_copied(p, b)} into {b} on "
                f"the host, outside every kernel; compute_at it into the kernel of {r.name} first",
                p.name,
            )
        psites = sf.block_sites(p.name)
        w = next((s for s in psites if s.access.kind == "write" and s.access.buffer == b), None)
        rd = next((s for s in psites if s.access.kind == "read" and sf.scope(s.access.buffer) == "global"), None)
        if w is None:
            continue
        verdict = _one_copy(sf, name, pk, r, p, b, w, rd, ev)
        if verdict is not None:
            return verdict
    if not ev:
        return None
    parts = "; ".join(
        f"{b}: all {v.get('threads')} threads"
        + (
            f", {v['sectors_per_request']:g} sectors per warp request ({v['efficiency']:.0%} of the bytes moved used)"
            if v.get("efficiency") is not None
            else ""
        )
        + (f", {v['max_ways']}-way bank access at most" if "max_ways" in v else "")
        for b, v in ev.items()
    )
    first = next(iter(ev.values()))["copy"]
    return CheckResult(
        name, True, f"the copies into shared memory are spread over the thread block ({parts})", first, ev
    )


def _one_copy(sf: StepFacts, name: str, k, r, p, b: str, w: Site, rd: Site | None, ev: dict) -> CheckResult | None:
    """The verdict on one copy into shared memory (None: it is cooperative and coalesced)."""
    # one phase: the loops above the copy that do not bind threads, held at their first value
    fixed = _fixed_blocks()
    fixed.update({lp.id: int(lp.min) for lp in w.chain if lp.tag is None and lp.id in set(r.loops)})
    out = sf.enumerate(w, k, fixed=fixed, all_threads=True)
    info: dict = {"copy": p.name}
    ev[b] = info
    if out is None:
        return None
    idx, active, _env, axes = out
    tid = np.broadcast_to(sf.thread_ids(k, axes), active.shape)[active]
    shape = linear_shape(sf.prog.buffers[b].shape)
    lin = np.zeros(active.shape, dtype=np.int64)
    for i, n in zip(idx, shape):
        lin = lin * n + np.clip(i, 0, max(n - 1, 0))
    lin = lin[active]
    elements = _distinct(lin)
    pairs = np.sort(_uniq(lin * max(1, k.threads) + tid) // max(1, k.threads))
    most = int(np.max(np.diff(np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1], True])))) if pairs.size else 0
    used = _distinct(tid)
    info.update(threads=used, block_threads=k.threads, elements=elements, most_copies=most)
    if pairs.size > elements or used < k.threads:
        if pairs.size > elements:
            every = pairs.size == elements * most
            how = (
                f"every element is copied by {most} threads" if every else f"some elements are copied by {most} threads"
            )
        else:
            how = f"only {used} of the block's {k.threads} threads take part"
        marked = p.annotation("meta_schedule.cooperative_fetch") is not None
        info["cooperative_fetch_annotation"] = marked
        note = (
            "; its meta_schedule.cooperative_fetch annotation asks meta_schedule's postprocessing "
            "(RewriteCooperativeFetch) for that, which tvm.compile alone does not run"
            if marked
            else ""
        )
        return CheckResult(
            name,
            False,
            f"block {p.name} is not spread over the thread block ({how}): fuse its loops, split "
            f"the fused loop by the block's thread counts and bind the parts to threadIdx{note}",
            p.name,
            ev,
        )
    stats = _warp_stats(sf, p.name, w)
    info.update(stats)
    eff = stats.get("efficiency")
    if rd is not None and eff is not None and eff < _GOOD_EFFICIENCY:
        return CheckResult(
            name,
            False,
            f"the copy into {b} (block {p.name}) is not coalesced: a warp's read of "
            f"{rd.access.buffer} touches {stats['sectors_per_request']:g} 32-byte sectors per "
            f"request and uses {eff:.0%} of the bytes moved; bind threadIdx.x to the loop that "
            f"walks along the rows of {rd.access.buffer}",
            p.name,
            ev,
        )
    ways = stats.get("max_ways")
    if ways is not None and ways > _BAD_WAYS:
        return CheckResult(
            name,
            False,
            f"the copy into {b} (block {p.name}) has {ways}-way shared-memory bank conflicts: "
            f"consecutive threads should write consecutive words of {b}",
            p.name,
            ev,
        )
    return None


def _uniq(a: np.ndarray) -> np.ndarray:
    s = np.sort(a, kind="stable")
    if s.size == 0:
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]


def _distinct(a: np.ndarray) -> int:
    """Number of distinct values (by sorting: numpy's hash-based unique is slow on these arrays)."""
    if a.size == 0:
        return 0
    s = np.sort(a, kind="stable")
    return 1 + int(np.count_nonzero(s[1:] != s[:-1]))


def _warp_stats(sf: StepFacts, block: str, w: Site) -> dict:
    """Coalescing and bank conflicts of one warp of the copy, from the access analysis."""
    from mlc_lab.core.access import gpu_stats

    # one request is enough to judge: the copy's innermost loop, the loops above it at their first
    # value (its thread loops, enclosing or not, are the warp's lanes, a vectorized loop its vector)
    loop = w.chain[-1] if w.chain else None
    if loop is None or not isinstance(loop.extent, int) or loop.extent > _MAX_REQUESTS:
        return {}
    try:
        stats = gpu_stats(sf.prog, loop.id, None, warp=0)
    except Exception:  # noqa: BLE001 - no figure: the check judges what it has
        return {}
    out: dict = {}
    for a in stats.accesses:
        if a.block != block:
            continue
        if a.sectors_per_request is not None:
            out["sectors_per_request"] = round(a.sectors_per_request, 2)
            out["efficiency"] = round(a.efficiency, 3) if a.efficiency is not None else None
        if a.max_ways is not None:
            out["max_ways"] = int(a.max_ways)
            out["bank_conflicts"] = int(a.bank_conflicts or 0)
    return out


@gpu_check("write_cache", "local write cache")
def write_cache(sf: StepFacts, r, k: Kernel, sites: list) -> CheckResult | None:
    name = "write_cache"
    ws = _write_site(sites)
    acc = ws.access.buffer
    red = reduction_loops(sf, r)
    steps = math.prod(int(sf.loop(lid).extent) for lid in red)
    ev: dict = {"accumulator": acc, "scope": sf.scope(acc)}
    if not _in_registers(sf.scope(acc)):
        return CheckResult(
            name,
            False,
            f"block {r.name} accumulates straight into {acc} in {sf.scope(acc)} memory, reading and "
            f"writing each element {steps} times: cache_write it to a 'local' buffer and write that "
            f"back once after the reduction",
            r.name,
            ev,
        )
    backs = [b for b in sf.consumers(acc) if b.name != r.name and acc not in b.writes]
    if not backs:
        return CheckResult(
            name, False, f"nothing writes the local accumulator {acc} of {r.name} back to memory", r.name, ev
        )
    away = [b for b in backs if sf.kernel_of(b.name) is not k]
    if away:
        b = away[0]
        thread = [lid for lid in r.loops if sf.loop(lid).tag in THREAD_TAGS]
        at = sf.loop_name(thread[-1]) if thread else (sf.loop_name(r.loops[0]) if r.loops else r.name)
        ev["write_back"] = b.name
        return CheckResult(
            name,
            False,
            f"block {b.name} writes {acc} back to {_dest(b, acc)} {sf.where_runs(b.name)}, not in the kernel of {r.name}: "
            f"reverse_compute_at {b.name} under {at} so each thread writes back its own tile",
            b.name,
            ev,
        )
    for b in backs:
        inside = [lid for lid in b.loops if lid in set(red)]
        ev["write_back"] = b.name
        if inside:
            times = math.prod(int(sf.loop(lid).extent) for lid in inside)
            ev["writes_per_element"] = times
            where = sf.loop_name(inside[0])
            pos = r.loops.index(red[0]) if red and red[0] in r.loops else 0
            above = f"loop {sf.loop_name(r.loops[pos - 1])}, just above {where}" if pos > 0 else f"a loop above {where}"
            return CheckResult(
                name,
                False,
                f"block {b.name} writes {acc} back to {_dest(b, acc)} inside the reduction loop {where}, {times} times "
                f"per element: reverse_compute_at it to {above}, so it runs once after the reduction",
                b.name,
                ev,
            )
    b = backs[0]
    return _placed_write_back(sf, r, k, b, acc, red, ev)


def _placed_write_back(sf: StepFacts, r, k: Kernel, b, acc: str, red: list, ev: dict) -> CheckResult:
    """The verdict on a write-back placed after the reduction in the compute's kernel: under the
    compute's thread loops (``placement`` "thread"), or above them, under a block loop, with loops of its
    own (``placement`` "block"): right when each thread writes back what it computed, racy when its
    loops give a thread elements another thread computed (local memory is private to each thread)."""
    from mlc_lab.core.checks.hazards import foreign_local_read

    name = "write_cache"
    thread = [lid for lid in r.loops if sf.loop(lid).tag in THREAD_TAGS]
    shared = [lid for lid in b.loops if lid in set(r.loops)]
    under = sf.loop_name(shared[-1]) if shared else None
    placement = "thread" if thread and thread[-1] in shared else "block"
    ev.update(writes_per_element=1, placement=placement, under=under)
    after = sf.loop_name(red[0]) if red else r.name
    if placement == "thread":
        return CheckResult(
            name,
            True,
            f"{r.name} accumulates in the local buffer {acc} and block {b.name} writes each element back "
            f"to {_dest(b, acc)} once, after loop {after}, under the thread loop {under}",
            b.name,
            ev,
        )
    foreign = foreign_local_read(sf, k, acc)
    at = f"under {under}, " if under else ""
    if foreign is not None:
        tid, element, who = foreign
        ev["foreign_read"] = {"thread": tid, "element": element}
        # the thread loop is a place for it only where it encloses the reduction (else it is inside it)
        outer = thread and red and r.loops.index(thread[-1]) < min(r.loops.index(x) for x in red if x in r.loops)
        other = f", or reverse_compute_at it under the thread loop {sf.loop_name(thread[-1])}" if outer else ""
        return CheckResult(
            name,
            False,
            f"block {b.name} writes {acc} back to {_dest(b, acc)} {at}above the thread loops, and its loops give a thread "
            f"elements another thread computed (thread {tid} writes back {element}, and {who}; each thread's "
            f"{acc} is its own): bind its loops to threadIdx as {r.name}'s are, so each thread writes back "
            f"its own tile{other}",
            b.name,
            ev,
        )
    return CheckResult(
        name,
        True,
        f"{r.name} accumulates in the local buffer {acc} and block {b.name} writes each element back "
        f"to {_dest(b, acc)} once, after loop {after}, {at}each thread the tile it computed (its loops "
        f"bound to the threads as {r.name}'s are)",
        b.name,
        ev,
    )


@register("epilogue_fusion", "cuda", "epilogue fusion")
def epilogue_fusion(sf: StepFacts) -> CheckResult | None:
    name = "epilogue_fusion"
    r0 = sf.reduction_block(sf.original)
    if r0 is None:
        return None
    out0 = r0.writes[0] if r0.writes else None
    epilogue = _after(sf.original, r0)
    if not epilogue:
        return None
    got = _gpu_preamble(name, sf, tiles=False)
    if got is None or isinstance(got, CheckResult):
        return got
    r, k, _sites = got
    kernel_blocks = {s.access.block for s in k.sites}
    finals = list(dict.fromkeys(w for b in epilogue for w in b.writes))
    ev: dict = {"epilogue": [b.name for b in epilogue], "outputs": finals, "fused_into": []}
    for buf in finals:  # an intermediate inlined away has no writer left: it is fused
        for w in [b.name for b in sf.producers(buf)]:
            if w in kernel_blocks:
                ev["fused_into"].append(w)
                continue
            inter = [x for x in sf.facts.blocks[w].reads if x == out0 or x in finals]
            ev["separate"] = [w]
            via = f", reading {inter[0]} back from global memory" if inter else ""
            k2 = sf.kernel_of(w)
            place = "in a kernel of its own" if k2 is not None else "on the host, outside every kernel"
            return CheckResult(
                name,
                False,
                f"block {w} computes {buf} {place}{via}: reverse_compute_inline it into the write-back of "
                f"{r.name}, or reverse_compute_at it under {r.name}'s thread loops",
                w,
                ev,
            )
    ev["fused_into"] = list(dict.fromkeys(ev["fused_into"]))
    written = [b for b in finals if sf.producers(b)]
    return CheckResult(
        name,
        True,
        f"the epilogue ({', '.join(ev['epilogue'])}) runs in the kernel of {r.name}: block"
        f"{'s' if len(ev['fused_into']) > 1 else ''} {', '.join(ev['fused_into'])} write"
        f"{'' if len(ev['fused_into']) > 1 else 's'} {', '.join(written)} without a round trip through global memory",
        (ev["fused_into"] or [None])[0],
        ev,
    )


def _after(facts, r0) -> list:
    """The blocks of the original program that use the reduction's result, directly or through
    another such block (every elementwise op after the reduction), in program order."""
    seen = set(r0.writes)
    out = []
    for b in facts.blocks.values():
        if b.name != r0.name and any(x in seen for x in b.reads):
            out.append(b)
            seen |= set(b.writes)
    return out
