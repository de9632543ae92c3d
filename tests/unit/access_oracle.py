"""A brute-force interpreter of plain access programs (no TVM): the oracle of the core tests.

It runs every iteration of the program, one step per leaf execution, with the semantics of
``mlc_lab.core.access``: enclosing loops fixed by ``at``, a loop re-binding an enclosing thread
tag takes that thread's value (and skips its body, steps counted, when the value is past its
extent), inner loops run within their step, guards decide whether an access happens.
"""

from __future__ import annotations

import itertools

import numpy as np

from mlc_lab.core.access.expr import evaluate
from mlc_lab.model.access.program import Leaf, Loop, Seq

THREADS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCKS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def _steps(node, tags, bound) -> int:
    if isinstance(node, Leaf):
        return 1
    if isinstance(node, Loop):
        if node.tag is not None and node.tag in tags:
            return _steps(node.body, tags, bound)
        return bound[node.id] * _steps(node.body, {**tags, node.tag: 0} if node.tag else tags, bound)
    return sum(_steps(c, tags, bound) for c in node.children)


def _path(node, target, chain=()):
    if node is target:
        return chain
    if isinstance(node, Loop):
        return _path(node.body, target, chain + (node,))
    if isinstance(node, Seq):
        for c in node.children:
            found = _path(c, target, chain)
            if found is not None:
                return found
    return None


class PlainOracle:
    """A loop whose extent depends on enclosing loops runs to its largest extent (taken from the
    analysis's own bound, which only numbers the steps), iterations past the real extent skipped."""

    def __init__(self, prog):
        from mlc_lab.core.access.space import ProgramIndex

        self.prog = prog
        self.bound = ProgramIndex(prog).extents
        self.dims = {}
        for lp in prog.loops:
            if lp.tag and lp.role == "loop":
                self.dims[lp.tag] = max(self.dims.get(lp.tag, 1), int(lp.extent))

    def run(self, loop, at=None):
        at = dict(at or {})
        env, tags = {}, {}
        for lp in _path(self.prog.root, loop):
            if lp.tag is not None and lp.tag in tags:
                env[lp.id] = tags[lp.tag]
                continue
            v = at.get(lp.name, at.get(lp.id, int(lp.min)))
            env[lp.id] = v
            if lp.tag is not None:
                tags[lp.tag] = v
        self.res = {n: {} for n in self.prog.buffers}
        self.loop = loop
        self.step = 0
        self._node(loop, env, tags)
        return {n: self._arrays(n, r) for n, r in self.res.items()}

    def _arrays(self, name, cells):
        shape = tuple(int(s) for s in self.prog.buffers[name].shape)
        out = {
            "reads": np.zeros(shape, bool),
            "writes": np.zeros(shape, bool),
            "first_touch": np.full(shape, -1, np.int64),
            "count": np.zeros(shape, np.int64),
            "thread": np.full(shape, -1, np.int64),
            "block": np.full(shape, -1, np.int64),
        }
        for ix, (kinds, first, count, who) in cells.items():
            out["reads"][ix] = "read" in kinds
            out["writes"][ix] = "write" in kinds
            out["first_touch"][ix] = first
            out["count"][ix] = count
            out["thread"][ix], out["block"][ix] = who
        return out

    def _who(self, tags):
        def lin(names):
            vals = [tags.get(n) for n in names]
            if all(v is None for v in vals):
                return -1
            x, y, z = (v or 0 for v in vals)
            return x + self.dims.get(names[0], 1) * (y + self.dims.get(names[1], 1) * z)

        return lin(THREADS), lin(BLOCKS)

    def _node(self, node, env, tags):
        if isinstance(node, Leaf):
            for acc in node.accesses:
                self._access(acc, env, tags)
            self.step += 1
        elif isinstance(node, Seq):
            for c in node.children:
                self._node(c, env, tags)
        elif node.tag is not None and node.tag in tags:
            if tags[node.tag] < int(node.extent):
                self._node(node.body, {**env, node.id: tags[node.tag]}, tags)
            else:
                self.step += _steps(node.body, tags, self.bound)
        else:
            real = int(evaluate(node.extent, env)) if not isinstance(node.extent, int) else node.extent
            for v in range(int(node.min), int(node.min) + self.bound[node.id]):
                inner_tags = {**tags, node.tag: v} if node.tag else tags
                if v - int(node.min) >= real:
                    self.step += _steps(node.body, inner_tags, self.bound)
                    continue
                self._node(node.body, {**env, node.id: v}, inner_tags)

    def _access(self, acc, env, tags):
        if self.loop.id in acc.body_loops:  # an init that runs before the queried loop starts
            return
        ranges = [range(int(lp.min), int(lp.min) + int(lp.extent)) for lp in acc.inner]
        for vals in itertools.product(*ranges):
            e = dict(env)
            e.update({lp.id: v for lp, v in zip(acc.inner, vals)})
            if not all(bool(evaluate(g, e)) for g in acc.guards):
                continue
            ix = tuple(int(evaluate(i, e)) for i in acc.indices)
            shape = self.prog.buffers[acc.buffer].shape
            assert all(0 <= a < int(s) for a, s in zip(ix, shape)), (acc.buffer, ix)
            cells = self.res[acc.buffer]
            if ix not in cells:
                cells[ix] = (set(), self.step, 0, self._who(tags))
            kinds, first, count, who = cells[ix]
            kinds.add(acc.kind)
            cells[ix] = (kinds, first, count + 1, who)
