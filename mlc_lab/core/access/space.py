"""The iteration space of a query: which loops run, which are fixed, how steps are numbered.

:class:`ProgramIndex` is built once per program: parents, thread-tag aliases, steps per subtree
and the loops each access runs under. :class:`Query` is one question: loop ``L`` runs over its
whole range, the loops that enclose it are fixed at the values of ``at``.

Steps: each execution of a leaf is one step; the step of an iteration is a mixed-radix number of
the loop indices (``weights``: steps per iteration of each loop). A loop bound to a thread tag
that an enclosing loop already binds does not iterate (its *alias* does: the per-thread program
of CUDA). Loops of role ``"inner"`` run within one step (weight 0).

A loop whose extent depends on enclosing loops (``compute_at`` of a non-divisible tile writes
``range(k % 2 * 3 + 12)``) runs over the largest extent it can take (interval arithmetic over the
enclosing ranges), the iterations past its real extent guarded off; like a predicated-off
iteration they still count as steps.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from mlc_lab.model.access.program import AccessProgram, Const, Leaf, Loop, Op, Seq, Var
from mlc_lab.errors import AccessAnalysisError

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def _constant(lp: Loop, what: str) -> int | None:
    value = getattr(lp, what)
    if isinstance(value, int):
        return value
    if isinstance(value, Const):
        return value.value
    return None


def _refuse_range(lp: Loop, what: str, why: str = "") -> NoReturn:
    value = getattr(lp, what)
    names = sorted({v.name for v in _vars(value)})
    raise AccessAnalysisError(
        f"loop {lp.name} has a range that depends on {', '.join(names) or 'a value'} (its {what} is {value}){why}; "
        f"only loops with constant starts and bounded extents can be analysed"
    )


def interval(e, ranges: dict) -> tuple[int, int]:
    """Bounds [lo, hi] of an integer expression, loop variables within ``ranges`` (id -> (lo, hi))."""
    if isinstance(e, int):
        return e, e
    if isinstance(e, Const):
        return e.value, e.value
    if isinstance(e, Var):
        if e.id not in ranges:
            raise KeyError(e.name)
        return ranges[e.id]
    if not isinstance(e, Op):
        raise KeyError(str(e))
    if e.op == "select":
        (a, b), (c, d) = interval(e.args[1], ranges), interval(e.args[2], ranges)
        return min(a, c), max(b, d)
    (a, b), (c, d) = interval(e.args[0], ranges), interval(e.args[1], ranges)
    if e.op == "add":
        return a + c, b + d
    if e.op == "sub":
        return a - d, b - c
    if e.op == "mul":
        p = (a * c, a * d, b * c, b * d)
        return min(p), max(p)
    if e.op == "min":
        return min(a, c), min(b, d)
    if e.op == "max":
        return max(a, c), max(b, d)
    if e.op in ("floordiv", "floormod") and c == d and c > 0:
        if e.op == "floordiv":
            return a // c, b // c
        return (a % c, b % c) if a // c == b // c else (0, c - 1)
    raise KeyError(e.op)


def _vars(e) -> list:
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Var):
            out.append(x)
        elif isinstance(x, Op):
            stack.extend(x.args)
    return out


class ProgramIndex:
    """Facts of a program that every query needs (built once; the program has int extents)."""

    def __init__(self, prog: AccessProgram):
        self.prog = prog
        self.loops: list[Loop] = prog.loops
        self.parent: dict[int, int | None] = {}
        self.alias: dict[int, int] = {}  # loop id -> enclosing loop with the same tag
        self.chain: dict[int, tuple] = {}  # id(access) -> loops it runs under (ids)
        self.leaf_of: dict[int, Leaf] = {}  # id(access) -> its leaf
        self.counts: dict[int, int] = {}  # id(node) -> steps
        self.guards: dict[int, tuple] = {}  # id(access) -> its guards and those of variable extents
        self.extents: dict[int, int] = {}
        self._ranges: dict[int, tuple] = {}
        self._tagged: dict[int, bool] = {}
        self._walk(prog.root, (), ())
        self._count(prog.root)

    def _extent(self, lp: Loop, range_guards: tuple) -> tuple:
        """Record the loop's (largest) extent; the guard of a variable extent joins ``range_guards``."""
        lo = _constant(lp, "min")
        if lo is None:
            _refuse_range(lp, "min")
        ext = _constant(lp, "extent")
        if ext is None:
            try:
                ext = max(0, interval(lp.extent, self._ranges)[1])
            except KeyError:
                _refuse_range(lp, "extent", ", which cannot be bounded")
            range_guards = range_guards + (Op("lt", (Op("sub", (lp.var, Const(lo))), lp.extent)),)
        self.extents[lp.id] = ext
        self._ranges[lp.id] = (lo, lo + max(ext, 1) - 1)
        return range_guards

    def _walk(self, node, chain: tuple, range_guards: tuple) -> None:
        if isinstance(node, Loop):
            range_guards = self._extent(node, range_guards)
            self.parent[node.id] = chain[-1] if chain else None
            if node.tag is not None:
                for outer in reversed(chain):
                    lp = self.loops[outer]
                    if lp.tag == node.tag and outer not in self.alias:
                        self.alias[node.id] = outer
                        break
            self._walk(node.body, chain + (node.id,), range_guards)
        elif isinstance(node, Seq):
            for c in node.children:
                self._walk(c, chain, range_guards)
        elif isinstance(node, Leaf):
            for acc in node.accesses:
                guards = range_guards
                for lp in acc.inner:
                    guards = self._extent(lp, guards)
                    self.parent.setdefault(lp.id, chain[-1] if chain else None)
                self.chain[id(acc)] = chain + tuple(lp.id for lp in acc.inner)
                self.guards[id(acc)] = tuple(acc.guards) + guards
                self.leaf_of[id(acc)] = node

    def trips(self, lp: Loop) -> int:
        return 1 if lp.id in self.alias else self.extents[lp.id]

    def _count(self, node) -> int:
        if isinstance(node, Leaf):
            n = 1
        elif isinstance(node, Loop):
            n = self.trips(node) * self._count(node.body)
        else:
            n = sum(self._count(c) for c in node.children)
        self.counts[id(node)] = n
        return n

    def count(self, node) -> int:
        return self.counts[id(node)]

    def has_tags(self, node) -> bool:
        """Whether a loop under ``node`` (itself included) binds a thread or block index (a loop
        re-binding an enclosing loop's tag, as a cooperative fetch does, binds nothing new)."""
        key = id(node)
        if key not in self._tagged:
            if isinstance(node, Loop):
                binds = node.tag in THREAD_TAGS + BLOCK_TAGS and node.id not in self.alias
                self._tagged[key] = binds or self.has_tags(node.body)
            elif isinstance(node, Seq):
                self._tagged[key] = any(self.has_tags(c) for c in node.children)
            else:
                self._tagged[key] = False
        return self._tagged[key]

    def resolve(self, loop_id: int) -> Loop:
        """The loop that iterates for ``loop_id`` (itself, or the enclosing loop of its thread tag)."""
        while loop_id in self.alias:
            loop_id = self.alias[loop_id]
        return self.loops[loop_id]

    def enclosing(self, lp: Loop) -> list[Loop]:
        out = []
        p = self.parent.get(lp.id)
        while p is not None:
            out.append(self.loops[p])
            p = self.parent.get(p)
        return out[::-1]

    def launch(self) -> dict[str, int]:
        """Grid and block sizes: the largest extent bound to each tag."""
        dims: dict[str, int] = {}
        for lp in self.loops:
            if lp.tag and lp.id not in self.alias and lp.role == "loop":
                dims[lp.tag] = max(dims.get(lp.tag, 1), self.extents[lp.id])
        return dims


_ALL_TAGS = THREAD_TAGS + BLOCK_TAGS
_TABLE_MAX = 1 << 16  # iterations of a chain of loops whose tag values are looked up in a table


def _mod(a: np.ndarray, m: int) -> np.ndarray:
    """``a % m`` for non-negative ``a``: numpy divides by a scalar fast, but its modulo is slow."""
    return a - (a // m) * m


class _Tags:
    """Values of the thread and block tags at n points (-1: not bound there)."""

    def __init__(self, n: int, dtype=np.int64):
        self.n = n
        self.dtype = dtype
        self.values: dict[str, Any] = {}  # a tag -> its value everywhere (an int) or at each point (an array)
        self.partial = False

    def put(self, tag: str, value, at) -> None:
        if at is None:
            self.values[tag] = value
            return
        arr = self.values.get(tag, -1)
        if np.ndim(arr) == 0:
            arr = np.full(self.n, arr, self.dtype)
            self.partial = self.partial or int(self.values.get(tag, -1)) < 0
        arr[at] = value
        self.values[tag] = arr

    def linear(self, names: tuple, launch: dict):
        if not any(t in self.values for t in names):
            return np.full(self.n, -1, np.int64)
        nx, ny = launch.get(names[0], 1), launch.get(names[1], 1)
        big = nx * ny * launch.get(names[2], 1) >= 2**31  # ids past int32
        if not self.partial:  # every value is a tag's (>= 0) or absent (0): few passes over n
            x, y, z = (self.values.get(t, 0) for t in names)
            if big:
                x, y, z = (np.asarray(v, dtype=np.int64) for v in (x, y, z))
            inner = y if np.ndim(z) == 0 and z == 0 else y + ny * z
            lin = x if np.ndim(inner) == 0 and inner == 0 else x + nx * inner
            return np.broadcast_to(lin, (self.n,))
        x, y, z = (self.values.get(t, -1) for t in names)
        if big:
            x, y, z = (np.asarray(v, dtype=np.int64) for v in (x, y, z))
        lin = np.maximum(x, 0) + nx * (np.maximum(y, 0) + ny * np.maximum(z, 0))
        if self.partial:
            lin = np.where((np.asarray(x) >= 0) | (np.asarray(y) >= 0) | (np.asarray(z) >= 0), lin, -1)
        return np.broadcast_to(lin, (self.n,))


class Query:
    """Loop ``L`` over its range, the loops enclosing it fixed (``at``: id or name -> value).

    With ``sweep_threads``, the enclosing loops bound to ``threadIdx`` run over their whole range
    instead (thread after thread, x fastest): what the whole thread block does at this point of
    the program, for a per-thread colouring of the loop's footprint.
    """

    def __init__(self, index: ProgramIndex, L: Loop, at: dict | None, sweep_threads: bool = False):
        if L.role != "loop":
            raise AccessAnalysisError(
                f"loop {L.name} runs inside a T.init() or a tensorized block; pick a loop that encloses the block"
            )
        self.index = index
        self.L = L
        self.enclosing = index.enclosing(L)
        self.fixed: dict[int, int] = {}  # loop id -> value
        self._fix(dict(at or {}))
        self.inside: dict[int, Loop] = {}  # iterating loops under L (after aliasing)
        self.weights: dict[int, int] = {}  # loop id -> steps per iteration
        self.leaf_offset: dict[int, int] = {}  # id(leaf) -> first step
        self.leaves: list[Leaf] = []
        self._layout(L, 0)
        self.total_steps = index.count(L)
        if sweep_threads:
            self._sweep()

    def _sweep(self) -> None:
        swept = [lp for lp in self.enclosing if lp.tag in THREAD_TAGS and lp.id not in self.index.alias]
        # x fastest: threadIdx.x innermost in the step order, whatever the nesting of the loops
        swept.sort(key=lambda lp: -THREAD_TAGS.index(lp.tag))
        for lp in self.enclosing:
            if self.index.resolve(lp.id) in swept:
                self.fixed.pop(lp.id, None)
        w = self.total_steps
        for lp in reversed(swept):
            self.weights[lp.id] = w
            self.inside[lp.id] = lp
            w *= self.index.extents[lp.id]
        self.total_steps = w

    def _fix(self, at: dict) -> None:
        chain = self.enclosing
        by_key: dict[int | str, Loop] = {}
        for lp in chain:
            by_key[lp.id] = lp
            by_key.setdefault(lp.name, lp)
        unknown = [k for k in at if not (k in by_key or isinstance(k, Loop) and k.id in by_key)]
        if unknown:
            names = [self._name(k) for k in unknown]
            raise AccessAnalysisError(
                f"'at' names loops that do not enclose {self.L.name}: {sorted(names)}; "
                f"enclosing loops are {[lp.name for lp in chain]}"
            )
        given = {}
        for k, v in at.items():
            lp = by_key[k.id if isinstance(k, Loop) else k]
            given[lp.id] = v
        for lp in chain:
            if lp.id in self.index.alias:
                self.fixed[lp.id] = self.fixed[self.index.alias[lp.id]]
                continue
            lo, ext = int(lp.min), self.index.extents[lp.id]
            v = int(given.get(lp.id, lo))
            if not lo <= v < lo + ext:
                raise AccessAnalysisError(f"at[{lp.name!r}] = {v} is outside the loop's range [{lo}, {lo + ext})")
            self.fixed[lp.id] = v

    def _name(self, key) -> str:
        if isinstance(key, Loop):
            return key.name
        if isinstance(key, int) and 0 <= key < len(self.index.loops):
            return self.index.loops[key].name
        return str(key)

    def _layout(self, node, offset: int) -> None:
        if isinstance(node, Leaf):
            self.leaf_offset[id(node)] = offset
            self.leaves.append(node)
            for acc in node.accesses:
                for lp in acc.inner:
                    self.inside[lp.id] = lp
                    self.weights[lp.id] = 0
            return
        if isinstance(node, Loop):
            self.weights[node.id] = self.index.count(node.body)
            if node.id not in self.index.alias:
                self.inside[node.id] = node
            self._layout(node.body, offset)
            return
        for c in node.children:
            self._layout(c, offset)
            offset += self.index.count(c)

    def resolve(self, loop_id: int) -> Loop:
        return self.index.resolve(loop_id)

    def who(self, steps: np.ndarray, launch: dict) -> tuple[np.ndarray, np.ndarray]:
        """The thread and the block (linear ids, x fastest; -1 where no loop binds one) that run
        each of ``steps``. A step fixes every loop that iterates (inner loops bind no threads),
        so these follow from the first touch alone and need not be tracked per point."""
        steps = np.asarray(steps).reshape(-1)  # int32 when the steps fit: it divides faster
        tags = _Tags(steps.size, steps.dtype)
        for lp in self.enclosing:
            if lp.tag not in _ALL_TAGS or lp.id in self.index.alias:
                continue
            if lp.id in self.fixed:
                tags.put(lp.tag, self.fixed[lp.id], None)
            else:  # swept: a digit above the loop's own steps
                tags.put(lp.tag, int(lp.min) + steps // self.weights[lp.id] % self.index.extents[lp.id], None)
        if self.total_steps != self.index.count(self.L):  # swept threads: the step within L
            steps = _mod(steps, max(1, self.index.count(self.L)))
        run = self._tag_run()
        if run and self.index.count(self.L) // run < steps.size and not any(map(np.ndim, tags.values.values())):
            # the ids change only every `run` steps: work them out once per run, then look them up
            runs = _Tags(self.index.count(self.L) // run, steps.dtype)
            runs.values.update(tags.values)
            self._decode(self.L, np.arange(runs.n, dtype=steps.dtype) * run, None, runs)
            which = steps // run
            return (
                np.take(np.ascontiguousarray(runs.linear(THREAD_TAGS, launch)), which),
                np.take(np.ascontiguousarray(runs.linear(BLOCK_TAGS, launch)), which),
            )
        self._decode(self.L, steps, None, tags)
        return tags.linear(THREAD_TAGS, launch), tags.linear(BLOCK_TAGS, launch)

    def _tag_run(self) -> int | None:
        """Steps per iteration of the innermost tag-binding loop, when every such loop under L
        sits on the nest's single chain of loops (no sequence above one): the tags are then
        constant over runs of that many steps. None otherwise."""
        index, run = self.index, None
        node: Loop | Seq | Leaf | None = self.L
        while isinstance(node, Loop) and index.has_tags(node):
            if node.tag in _ALL_TAGS and node.id not in index.alias:
                run = max(1, index.count(node.body))
            node = node.body
        if isinstance(node, Seq) and index.has_tags(node):
            return None
        return run

    def _decode(self, node, s: np.ndarray, at, tags: "_Tags") -> None:
        """The values of the tag-bound loops under ``node`` at steps ``s`` counted from the
        node's first step (``at``: the positions they stand for; None: all).

        The loops on the chain from ``node`` down to a sequence are decoded from one division,
        ``s // width`` (``width``: the steps of the sequence), and, when the chain has few
        iterations, looked up in a table of each tag's value per iteration."""
        index = self.index
        head, loops = node, []
        while isinstance(node, Loop) and index.has_tags(node):
            loops.append(node)
            node = node.body
        seq = isinstance(node, Seq) and index.has_tags(node)
        if loops:
            width = max(1, index.count(node))
            which = s // width
            bound = [(lp, lp.tag) for lp in loops if lp.tag in _ALL_TAGS and lp.id not in index.alias]
            n_iter = max(1, index.count(head) // width)
            lookup = n_iter <= _TABLE_MAX and n_iter < which.size
            t = np.arange(n_iter, dtype=which.dtype) if lookup else which
            for lp, tag in bound:
                value = int(lp.min) + _mod(t // (max(1, index.count(lp.body)) // width), index.trips(lp))
                tags.put(tag, np.take(value, which) if lookup else value, at)
            if seq:
                s = s - which * width
        if not seq:
            return
        starts = np.cumsum([0] + [index.count(c) for c in node.children])
        if s.size:  # the usual case: every step in one child (the stage that touches a buffer first)
            first = int(np.searchsorted(starts, s.min(), side="right")) - 1
            if s.max() < starts[first + 1]:
                if index.has_tags(node.children[first]):
                    self._decode(node.children[first], s - starts[first] if starts[first] else s, at, tags)
                return
        which = np.searchsorted(starts, s, side="right") - 1
        for k, child in enumerate(node.children):
            if index.has_tags(child):
                sel = np.flatnonzero(which == k)
                if sel.size:
                    self._decode(child, s[sel] - starts[k], sel if at is None else at[sel], tags)

    def chain(self, acc) -> tuple:
        return self.index.chain[id(acc)]

    def iterating(self, acc) -> list[Loop]:
        """The loops under L that iterate for ``acc`` (aliases resolved), outermost first."""
        out = []
        for lid in self.chain(acc):
            t = self.resolve(lid)
            if t.id in self.inside and t not in out:
                out.append(t)
        return out
