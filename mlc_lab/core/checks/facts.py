"""The facts of one step that the named checks and the hazards read, and the hazards themselves.

``mlc_lab.tvm.checks.facts`` gives plain facts (``ScheduleFacts``: the access program, the blocks,
loop annotations, the sizes TVM allocates buffers with); here they are judged with numpy.

The GPU model is TVM's code generation, as read in the CUDA it writes: a kernel is a subtree under
thread-bound loops; each thread tag is launched with the extent of the *last* loop bound to it (in
program order), and every loop bound to a tag takes every value of the launched range, unguarded
(so a stage bound with a smaller extent than the launch runs its loop past its end). Within a kernel,
TVM inserts a barrier between stages that share a shared buffer; nothing orders global or local
memory between threads.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlc_lab.core.access.expr import evaluate
from mlc_lab.core.access import AccessProgram, Leaf, Loop, Seq
from mlc_lab.model.access.program import free_vars
from mlc_lab.model.checks.facts import BlockFact, ScheduleFacts

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
MAX_POINTS = 1 << 22  # points one enumeration may cover (an access over its relevant loops)


@dataclass
class Site:
    """One access as it runs: the access, the loops above it (outermost first) and its block."""

    access: Any
    chain: tuple  # Loop objects of role "loop", outermost first
    leaf: Any
    index: int  # position of the leaf in program order


@dataclass
class Kernel:
    root: Loop
    loops: list  # every Loop of the kernel (role "loop")
    launch: dict  # tag -> launched extent
    sites: list  # Sites inside the kernel

    @property
    def ids(self) -> set:
        if not hasattr(self, "_ids"):
            self._ids = {lp.id for lp in self.loops}
        return self._ids

    @property
    def threads(self) -> int:
        return math.prod(self.launch.get(t, 1) for t in THREAD_TAGS)

    @property
    def blocks(self) -> int:
        return math.prod(self.launch.get(t, 1) for t in BLOCK_TAGS)


@dataclass
class StepFacts:
    """The facts of one step, for one target, with the helpers every check needs."""

    facts: ScheduleFacts
    original: ScheduleFacts
    target: Any
    step: int
    _cache: dict = field(default_factory=dict)

    def memo(self, key: str, compute):
        """A fact of the step computed once (``compute()``) and kept with the step's other facts."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # --- structure -----------------------------------------------------------------------------
    @property
    def prog(self) -> AccessProgram:
        return self.facts.program

    def sites(self) -> list:
        if "sites" not in self._cache:
            out: list[Site] = []
            _collect_sites(self.prog.root, (), out, [0])
            self._cache["sites"] = out
        return self._cache["sites"]

    def kernels(self) -> list:
        if "kernels" not in self._cache:
            self._cache["kernels"] = _kernels(self.prog, self.sites())
        return self._cache["kernels"]

    def kernel_of(self, block: str) -> Kernel | None:
        for k in self.kernels():
            if any(s.access.block == block for s in k.sites):
                return k
        b = self.facts.blocks.get(block)  # a block with no access of its own (blockize's outer block)
        if b is not None and b.loops:
            return next((k for k in self.kernels() if b.loops[-1] in k.ids), None)
        return None

    def block_sites(self, block: str) -> list:
        return [s for s in self.sites() if s.access.block == block]

    def loop(self, lid: int) -> Loop:
        return self.prog.loops[lid]

    def loop_name(self, lid: int) -> str:
        """The loop's name as a user can pass it back: qualified by a block when it is not unique."""
        lp = self.prog.loops[lid]
        same = [x for x in self.prog.loops if x.name == lp.name and x.role == "loop"]
        if len(same) <= 1:
            return lp.name
        for s in self.sites():
            if any(c.id == lid for c in s.chain) and s.access.block:
                return f"{s.access.block}/{lp.name}"
        return lp.name

    def reduction_block(self, facts: ScheduleFacts | None = None) -> BlockFact | None:
        """The main computation: the reduction block with the most iterations (its update, after
        decompose_reduction)."""
        f = facts or self.facts
        best, best_n = None, -1
        for b in f.blocks.values():
            if not b.loops_of("R") or b.tensorized:
                continue
            n = math.prod(
                int(f.program.loops[lid].extent) for lid in b.loops if isinstance(f.program.loops[lid].extent, int)
            )
            if n > best_n:
                best, best_n = b, n
        return best

    def producers(self, buffer: str) -> list:
        return [b for b in self.facts.blocks.values() if buffer in b.writes]

    def consumers(self, buffer: str) -> list:
        return [b for b in self.facts.blocks.values() if buffer in b.reads]

    def scope(self, buffer: str) -> str:
        info = self.prog.buffers.get(buffer)
        return info.scope if info is not None else "global"

    def copy_source(self, buffer: str) -> tuple:
        """The buffer a register-level copy copies, looked through: ``(source, copy blocks)``. A local
        buffer written by a plain copy block (one buffer read, no reduction) stands for what it copies."""
        via: list = []
        while self.scope(buffer).startswith("local"):
            prods = self.producers(buffer)
            if len(prods) != 1 or prods[0].loops_of("R") or len(prods[0].reads) != 1 or prods[0] in via:
                break
            via.append(prods[0])
            buffer = prods[0].reads[0]
        return buffer, via

    def written_back(self, buffer: str) -> str:
        """Where a cache stage ends up: a local or shared buffer that one plain copy block (one buffer
        read, one written, no reduction) writes on to another stands for that one (C_local -> C)."""
        seen = {buffer}
        while not self.scope(buffer) == "global":
            copies = [
                b
                for b in self.consumers(buffer)
                if not b.loops_of("R") and tuple(b.reads) == (buffer,) and len(b.writes) == 1
            ]
            if len(copies) != 1 or copies[0].writes[0] in seen:
                break
            buffer = copies[0].writes[0]
            seen.add(buffer)
        return buffer

    def unplaced(self) -> set:
        """Shared and local buffers not yet placed in one kernel: some access runs outside every kernel,
        or in two kernels. TVM keeps such a buffer in global memory (a workspace), whatever its scope: a
        state the next compute_at (or reverse_compute_at) resolves, not a kernel's shared or local array."""
        if "unplaced" not in self._cache:
            home: dict = {}
            for s in self.sites():
                if self.scope(s.access.buffer) == "global":
                    continue
                k = next((i for i, k in enumerate(self.kernels()) if s in k.sites), None)
                home.setdefault(s.access.buffer, set()).add(k)
            self._cache["unplaced"] = {b for b, ks in home.items() if None in ks or len(ks) > 1}
        return self._cache["unplaced"]

    def where_runs(self, block: str) -> str:
        """Where a block runs, as a sentence part: "outside every kernel" or "in a kernel of its own"."""
        k = self.kernel_of(block)
        return "on the host, outside every kernel" if k is None else f"in the kernel under {self.loop_name(k.root.id)}"

    def why_not(self, check: str) -> str:
        """Why ``check`` found nothing to judge in this program."""
        if self.reduction_block() is None:
            return "it has no reduction (no block with a reduction loop)"
        if check == "epilogue_fusion":
            return "no block of the original program uses the reduction's result"
        if check == "cooperative_fetching":
            return "the reduction reads no shared buffer, so there is no copy to spread over threads"
        return "the program has nothing this check looks at"

    # --- enumeration ---------------------------------------------------------------------------
    def enumerate(
        self,
        site: Site,
        kernel: Kernel | None,
        *,
        fixed: dict | None = None,
        extra_loops: tuple = (),
        all_threads: bool = False,
    ) -> tuple | None:
        """The site's element indices over the loops its indices and guards use (plus ``extra_loops``,
        and with ``all_threads`` every thread the kernel launches, bound loop or not),
        with loops in ``fixed`` held at a value. Thread-bound loops run over the launched range of their
        tag (one shared axis per tag). Returns (indices per dimension, active mask, env, axes) as
        broadcast arrays, or None when too large or not evaluable."""
        acc = site.access
        used = set()
        for e in acc.indices + tuple(acc.guards):
            used |= free_vars(e)
        used |= {lp.id for lp in extra_loops}
        fixed = dict(fixed or {})
        if kernel is not None:  # loops above the kernel run on the host: one launch at a time
            fixed.update(
                {
                    lp.id: int(lp.min)
                    for lp in site.chain
                    if lp.id not in kernel.ids and isinstance(lp.min, int) and lp.id not in fixed
                }
            )
        loops = [lp for lp in site.chain] + list(acc.inner)
        axes: list = []  # (key, extent): key is a tag or a loop id
        for lp in loops:
            if lp.id not in used or lp.id in fixed or (lp.tag and lp.tag in fixed):
                continue
            key = lp.tag if (lp.tag and kernel is not None and lp.tag in kernel.launch) else lp.id
            if any(k == key for k, _ in axes):
                continue
            ext = kernel.launch[key] if isinstance(key, str) and kernel is not None else lp.extent
            if not isinstance(ext, int):
                return None
            axes.append((key, int(ext)))
        if all_threads and kernel is not None:  # a statement of a kernel runs in every launched thread
            for tag in THREAD_TAGS:
                if tag in kernel.launch and not any(k == tag for k, _ in axes):
                    axes.append((tag, int(kernel.launch[tag])))
        if math.prod(n for _, n in axes) > MAX_POINTS:
            return None
        nd = len(axes)
        env: dict = {}
        for d, (key, n) in enumerate(axes):
            shape = [1] * nd
            shape[d] = n
            arr = np.arange(n, dtype=np.int64).reshape(shape)
            if isinstance(key, str):
                for lp in loops:
                    if lp.tag == key:
                        env[lp.id] = arr
            else:
                env[key] = arr + int(self.prog.loops[key].min)
        for lp in loops:
            if lp.id in env:
                continue
            if lp.id in fixed:
                env[lp.id] = fixed[lp.id]
            elif lp.tag and kernel is not None and lp.tag in fixed:
                env[lp.id] = fixed[lp.tag]
            else:
                env[lp.id] = int(lp.min) if isinstance(lp.min, int) else 0
        try:
            idx = [
                np.broadcast_to(np.asarray(evaluate(e, env), dtype=np.int64), [n for _, n in axes] or [1])
                for e in acc.indices
            ]
            active = np.ones([n for _, n in axes] or [1], dtype=bool)
            for g in acc.guards:
                active = active & np.asarray(evaluate(g, env), dtype=bool)
        except Exception:  # noqa: BLE001 - an index the analysis cannot evaluate: no claim about it
            return None
        return idx, active, env, axes

    def points(self, site: Site, kernel: Kernel | None, fixed: dict) -> int:
        """How many points ``enumerate`` would cover for the site (without ``extra_loops``)."""
        used = set()
        for e in site.access.indices + tuple(site.access.guards):
            used |= free_vars(e)
        seen, n = set(), 1
        for lp in list(site.chain) + list(site.access.inner):
            if lp.id not in used or lp.id in fixed or (lp.tag and lp.tag in fixed):
                continue
            if kernel is not None and lp.id not in kernel.ids and lp in site.chain:
                continue
            key = lp.tag if (lp.tag and kernel is not None and lp.tag in kernel.launch) else lp.id
            if key in seen:
                continue
            seen.add(key)
            ext = kernel.launch[key] if isinstance(key, str) and kernel is not None else lp.extent
            n *= int(ext) if isinstance(ext, int) else 1
        return n

    def affine_range(self, site: Site, kernel: Kernel | None, fixed: dict, e) -> tuple | None:
        """(min, max) of index ``e`` over the site's points from its affine form, when that is exact:
        no guard, and every loop split into digits that tile its extent. None otherwise."""
        from mlc_lab.core.access.expr import Affine, Decomposer, Digit, NonAffine, digit_range

        if site.access.guards:
            return None
        values: dict = {}
        extents: dict = {}
        for lp in list(site.chain) + list(site.access.inner):
            key = lp.tag if (lp.tag and kernel is not None and lp.tag in kernel.launch) else lp.id
            if (
                lp.id in fixed
                or (lp.tag and lp.tag in fixed)
                or (kernel is not None and lp in site.chain and lp.id not in kernel.ids)
            ):
                v = fixed.get(lp.id, fixed.get(lp.tag, lp.min))
                values[lp.id] = Affine(const=int(v) if isinstance(v, int) else 0)
                continue
            ext = kernel.launch[key] if isinstance(key, str) and kernel is not None else lp.extent
            if not isinstance(ext, int) or not isinstance(lp.min, int):
                return None
            kid = -1 - (THREAD_TAGS + BLOCK_TAGS).index(key) if isinstance(key, str) else key
            extents[kid] = int(ext)
            values[lp.id] = Affine({Digit(kid, 1, None): 1}, int(lp.min) if isinstance(key, int) else 0)

        def value_of(v):
            if v.id not in values:
                raise NonAffine
            return values[v.id]

        try:
            form = Decomposer(value_of, extents).lin(e)
        except NonAffine:
            return None
        lo = hi = form.const
        spans: dict = {}  # loop -> the [place, place * n) ranges of its digits: exact only if disjoint
        for d, coef in form.terms.items():
            n = digit_range(d, extents)
            if extents[d.loop] % (d.place * n):
                return None
            for a, b in spans.get(d.loop, []):
                if d.place < b and a < d.place * n:  # a // 4 and a // 12 of one loop move together
                    return None
            spans.setdefault(d.loop, []).append((d.place, d.place * n))
            lo += min(0, coef * (n - 1))
            hi += max(0, coef * (n - 1))
        return int(lo), int(hi)

    def thread_ids(self, kernel: Kernel, axes: list) -> np.ndarray:
        """Linear thread id (x fastest) broadcast over the axes of an enumeration."""
        nd = len(axes)
        shape = [n for _, n in axes] or [1]
        tid = np.zeros(shape, dtype=np.int64)
        mult = 1
        for tag in THREAD_TAGS:
            n = kernel.launch.get(tag, 1)
            for d, (key, ext) in enumerate(axes):
                if key == tag:
                    s = [1] * nd
                    s[d] = ext
                    tid = tid + np.arange(ext, dtype=np.int64).reshape(s) * mult
            mult *= n
        return tid


SYMBOLIC_EXTENT = 1 << 20  # a symbolic dimension is laid out as if this long (to number elements)


def linear_shape(shape) -> list:
    """Sizes to number a buffer's elements by: its shape, a symbolic dimension taken as very long."""
    return [int(n) if isinstance(n, int) else SYMBOLIC_EXTENT for n in shape]


def _collect_sites(node, chain: tuple, out: list, counter: list) -> None:
    if isinstance(node, Loop):
        if node.body is not None:
            _collect_sites(node.body, chain + ((node,) if node.role == "loop" else ()), out, counter)
    elif isinstance(node, Seq):
        for c in node.children:
            _collect_sites(c, chain, out, counter)
    elif isinstance(node, Leaf):
        for acc in node.accesses:
            out.append(Site(acc, chain, node, counter[0]))
        counter[0] += 1


def _kernels(prog: AccessProgram, sites: list) -> list:
    out: list[Kernel] = []

    def walk(node, in_kernel: bool):
        if isinstance(node, Loop):
            if (
                node.tag
                and node.role == "loop"
                and not in_kernel
                and (node.tag in THREAD_TAGS or node.tag in BLOCK_TAGS)
            ):
                loops: list = []
                _loops_under(node, loops)
                launch: dict = {}
                for lp in loops:  # program order: the last loop bound to a tag sets its extent
                    if lp.tag in THREAD_TAGS or lp.tag in BLOCK_TAGS:
                        if isinstance(lp.extent, int):
                            launch[lp.tag] = int(lp.extent)
                ids = {lp.id for lp in loops}
                ksites = [s for s in sites if any(c.id in ids for c in s.chain)]
                out.append(Kernel(node, loops, launch, ksites))
                return
            if node.body is not None:
                walk(node.body, in_kernel)
        elif isinstance(node, Seq):
            for c in node.children:
                walk(c, in_kernel)

    walk(prog.root, False)
    return out


def _loops_under(node, out: list) -> None:
    if isinstance(node, Loop):
        if node.role == "loop":
            out.append(node)
        if node.body is not None:
            _loops_under(node.body, out)
    elif isinstance(node, Seq):
        for c in node.children:
            _loops_under(c, out)


# --- building the facts of a step ------------------------------------------------------------------

_FACTS: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def schedule_facts(session: Any, step: int) -> ScheduleFacts:
    from mlc_lab.tvm.checks import facts as tfacts

    cache = _FACTS.setdefault(session, {})
    if step not in cache:
        cache[step] = tfacts.of_module(session.module_at(step), session.func_name)
    return cache[step]


def forget(session: Any) -> None:
    _FACTS.pop(session, None)


def step_facts(session: Any, step: int | None, target: Any) -> StepFacts:
    sid = session.current.id if step is None else step
    return StepFacts(schedule_facts(session, sid), schedule_facts(session, 0), target, sid)


def binds_threads(session: Any, step: int | None = None) -> bool:
    sid = session.current.id if step is None else step
    prog = schedule_facts(session, sid).program
    return any(lp.tag for lp in prog.loops)
