"""Carrying out one way to the target: blocks inlined, cache stages made, each nest's owner tiled and
the other blocks moved into it, loop kinds and annotations, reductions decomposed.

The order is the one TVM accepts in general (thread bindings before ``compute_at``, since a shared
stage's region spans the threads bound above it; ``parallel`` and the loop kinds the init block
shares before ``decompose_reduction``). Every step is applied at once on the work schedule, and each
says in one sentence what of the target it makes.
"""

from __future__ import annotations

from typing import Any

from mlc_lab.tvm.path import fusesplit, rfchain
from mlc_lab.tvm.path.late import Pending, fuse_pending, hosts, leave_apart, places_of
from mlc_lab.tvm.path.blocks import Attach, Correspondence, Placement, rolled_blocks
from mlc_lab.tvm.path.ir import FuncView, Loop, iter_maps, plain, read_as, same_placement, substitute
from mlc_lab.tvm.path.explain import block_difference
from mlc_lab.tvm.path.regions import explicit_regions
from mlc_lab.tvm.path.stages import inline_all, inline_chain, make_stage, set_scope
from mlc_lab.tvm.path.tiling import tile
from mlc_lab.tvm.path.work import Refused, Unreachable, Work

_KIND_PRIMITIVE = {"parallel": "parallel", "vectorized": "vectorize", "unrolled": "unroll"}


class Run:
    """One attempt: the work schedule, the target and how its blocks correspond."""

    def __init__(self, work: Work, tgt: FuncView, corr: Correspondence, placement: Placement, options: dict):
        self.work = work
        self.tgt = tgt
        self.corr = corr
        self.placement = placement
        self.options = options
        self.names: dict[str, str] = dict(corr.same)  # target block -> block here
        for block, (_, update) in corr.decomposed.items():
            self.names[update] = block
        self.where: dict[int, tuple[str, int]] = {}  # target loop -> (block here, place in its chain)
        self.deferred: list[tuple[str, int, Loop]] = []  # loop kinds TVM refused when first asked
        # target blocks whose buffer rolling_buffer folds (block -> write index): moved, not tiled
        self.rolled = rolled_blocks(tgt)
        # the variant ``fuse_late``: these loops' pieces stay apart until the blocks sit inside them
        self.apart = hosts(tgt, placement) if options.get("fuse_late") else frozenset()
        self.pending: list[Pending] = []  # loops left apart, fused once the blocks sit inside

    # --- the whole way ------------------------------------------------------------------------------
    def go(self) -> None:
        scopes = [s for s in self.corr.stages if s.primitive == "set_scope"]
        # rfactor's buffer goes to its scope at once (the partial block's loops are placed after it)
        made = {s.old for s in self.corr.stages if s.primitive == "rfactor"}
        late = [s for s in self.corr.stages if rfchain.read_by_partial(self.tgt, self.corr, s)]
        for stage in self.corr.stages:
            if stage.primitive.startswith("cache") or stage.primitive in ("reindex", "pad_einsum"):
                if stage not in late:
                    make_stage(self.work, self.tgt, self.corr, self.names, stage)
        inlined = self.corr.inlined  # consumers first where asked: a block's reads then list in the target's order
        inlined = inlined[::-1] if self.options.get("consumers_first") else inlined
        after = inline_all(self.work, inlined, bool(self.options.get("inline_late")))
        for stage in self.corr.stages:
            if stage.primitive in ("transform_block_layout", "transform_layout", "rfactor"):
                make_stage(self.work, self.tgt, self.corr, self.names, stage)
        for stage in late:  # a copy the partial sums read: made once the rfactor has made their block
            make_stage(self.work, self.tgt, self.corr, self.names, stage)
        for stage in [s for s in scopes if s.old in made]:
            set_scope(self.work, self.names, stage)
        scopes = [s for s in scopes if s.old not in made]
        if self.options.get("scope_first"):
            for stage in scopes:
                set_scope(self.work, self.names, stage)
        for tb in self.tgt.blocks:  # a stated region first: compute_at covers what a block states it reads
            here = self.work.view.block(self.names.get(tb.name, tb.name))
            if here is not None:
                explicit_regions(self.work, here.name, here, tb)
        for attach in self.placement.order:
            self._place(attach)
        fuse_pending(self)
        self._nested_kinds()
        if after:
            inline_chain(self.work, after)
        for stage in scopes:
            set_scope(self.work, self.names, stage)
        for block, (init, update) in rfchain.decompose_order(list(self.corr.decomposed.items())):
            self._decompose(self.names.get(block, block), init, update)
        for name, place, tloop in self.deferred:  # refused earlier: TVM wanted something first
            here = name if self.work.view.block(name) is not None else f"{name}_update"
            self._kind(here, place, tloop, defer=False)
        for tname, index in self.rolled.items():
            name = self.names.get(tname, tname)
            why = f"the target's block {tname} writes into a buffer it folds over its loop (a % index)"
            self.work.apply("rolling_buffer", why, block=self.work.block_rv(name), write_buffer_index=index)
        self._annotate_blocks()

    # --- nests ----------------------------------------------------------------------------------------
    def _place(self, attach: Attach) -> None:
        work, tgt = self.work, self.tgt
        tblock = tgt.block(attach.block)
        assert tblock is not None
        blockize = next(
            (s for s in self.corr.stages if s.primitive == "blockize" and s.target_block == attach.block), None
        )
        if blockize is not None:
            self._blockize(blockize.old, attach, tblock)
            return
        name = self.names.get(attach.block)
        if name is None:
            raise Unreachable(f"the engine finds no block here for the target's block {attach.block}", "unread")
        if attach.loop is None:
            point, mark = work.checkpoint(), len(self.pending)
            try:
                self._tile(name, attach, tblock)
                self._check(name, tblock)
            except (Unreachable, Refused):
                work.restore(point)
                del self.pending[mark:]
                self._tile(name, attach, tblock, late=True)
                self._check(name, tblock)
        elif attach.block in self.rolled:  # compute_at's loops are rolling_buffer's: it adds the predicate
            self._move(name, attach, self._keeps_unit_loops(attach))
        else:
            keep = self._keeps_unit_loops(attach)
            point, mark = work.checkpoint(), len(self.pending)
            try:
                self._move(name, attach, keep)
                self._tile(name, attach, tblock)
                self._check(name, tblock)
            except (Unreachable, Refused):
                work.restore(point)
                del self.pending[mark:]
                try:
                    self._move(name, attach, not keep)
                    self._tile(name, attach, tblock)
                    self._check(name, tblock)
                except (Unreachable, Refused):  # a copy's loops fused, then split (dlight's gemv)
                    work.restore(point)
                    del self.pending[mark:]
                    steps = (self._move, self._own_count, self._check)
                    if not fusesplit.retile(self, steps, name, attach, tblock, (keep, not keep)):
                        raise
        places = places_of(self.pending, self.work.view, name, attach.own)
        for o, place in zip(attach.own, places):
            self.where[o] = (name, place)
            if not any(p.block == name and o in p.leaves for p in self.pending):
                self._kind(name, place, self.tgt.loops[o])

    def _nested_kinds(self) -> None:
        """The loop kinds inside a block that holds loops and blocks of its own (a nest the
        placements leave as it is: the same loops in the same block here)."""
        made = {s.target_block for s in self.corr.stages if s.primitive == "blockize"}
        for tb in self.tgt.blocks:
            if tb.scope is None or tb.scope in made:
                continue
            name = self.names.get(tb.name, tb.name)
            here = self.work.view.block(name)
            if here is None or here.scope != self.names.get(tb.scope, tb.scope) or tb.name in self.rolled:
                continue
            if [str(lp.extent) for lp in self.work.view.chain(here)] != [str(lp.extent) for lp in self.tgt.chain(tb)]:
                if tb.scope not in self.corr.same or any(b.scope == tb.name for b in self.tgt.blocks):
                    continue
                # the loops inside a block kept as it is (dlight's rules on a blockized program)
                tile(self.work, name, [lp.order for lp in self.work.view.chain(here)], self.tgt, tb, tb.chain)
                self._check(name, tb)
            self._kinds(name, tb.chain, 0)

    def _blockize_as_is(self, name: str, attach: Attach, outer: Any, tinner: Any) -> bool:
        """``blockize`` where the loops here are the target's already (its unit iterators kept or
        not), checked as the target's outer block sits; the schedule unchanged when not."""
        work = self.work
        chain = work.view.chain(work.view.block(name))  # type: ignore[arg-type]
        if len(chain) != len(attach.own) + len(tinner.chain):
            return False
        for keep in (False, True):
            point = work.checkpoint()
            why = f"the target's block {outer.name} holds block {tinner.name} and the loops inside it"
            try:
                loop = work.loop_rvs(name)[len(attach.own)]
                made = work.apply("blockize", why, target=loop, preserve_unit_iters=keep)
                self.names[outer.name] = str(work.get(made).name_hint)
                self._check(self.names[outer.name], outer)
                self._check(name, tinner)
            except (Unreachable, Refused):
                work.restore(point)
                continue
            for i, o in enumerate(attach.own):
                self.where[o] = (self.names[outer.name], i)
            return True
        return False

    def _blockize(self, inner: str, attach: Attach, outer: Any) -> None:
        """Tile the block over the outer block's loops and its own inside, then ``blockize`` at the
        first inner loop: the outer block is made of the loops above it."""
        work, tgt = self.work, self.tgt
        name = self.names.get(inner, inner)
        tinner = tgt.block(inner)
        if tinner is None or attach.loop is not None:
            raise Unreachable(f"block {outer.name} of the target is a blockize the engine does not read")
        here = work.view.block(name)
        assert here is not None
        if self._blockize_as_is(name, attach, outer, tinner):
            return
        mapping = [(iv.var, v) for iv, v in zip(outer.block.iter_vars, outer.values)]
        mapping += [(iv.var, v) for iv, v in zip(tinner.block.iter_vars, tinner.values)]
        try:
            values = [substitute(v, mapping) for v in read_as(here, tinner)]
        except LookupError as exc:
            raise Unreachable(str(exc), "computes") from None
        town = attach.own + tinner.chain
        chain = work.view.chain(here)
        tile(work, name, [lp.order for lp in chain], tgt, tinner, town, values=values)
        for place, o in enumerate(town):
            self._kind(name, place, tgt.loops[o])
        why = f"the target's block {outer.name} holds block {inner} and the loops inside it"
        loop = work.loop_rvs(name)[len(attach.own)]
        made = work.apply("blockize", why, target=loop, preserve_unit_iters=True)
        self.names[outer.name] = str(work.get(made).name_hint)
        for i, o in enumerate(attach.own):
            self.where[o] = (self.names[outer.name], i)
        self._check(self.names[outer.name], outer)

    def _check(self, name: str, tblock: Any) -> None:
        """The block sits as the target's does (its loops and bindings), or ``Unreachable``; where
        loops are left apart, as it will once they are fused (tried on a copy)."""
        if self.pending:
            point, saved = self.work.checkpoint(), (dict(self.where), list(self.deferred), list(self.pending))
            try:
                fuse_pending(self)
                self._check(name, tblock)
            finally:
                self.work.restore(point)
                self.where, self.deferred, self.pending = saved
            return
        view = self.work.view
        here = view.block(name)
        late = bool(self.options.get("inline_late"))  # the predicate comes with a later inline
        if here is None or not same_placement(view, here, self.tgt, tblock, predicate=not late):
            found = block_difference(view, here, self.tgt, tblock) if here is not None else None
            said = found[1] if found else f"block {tblock.name} does not come to sit as in the target"
            raise Unreachable(said, "partial")

    def _tile(self, name: str, attach: Attach, tblock: Any, late: bool = False) -> None:
        chain = self.work.view.chain(self.work.view.block(name))  # type: ignore[arg-type]
        own = [lp.order for lp in chain[len(chain) - self._own_count(name, attach) :]]
        inner = self._opaque_inner(name, tblock)
        if inner is not None:  # a block with no iterators: its loops are read through the block inside
            tile(self.work, name, own, self.tgt, tblock, attach.own, late, inner[1].values, inner[0].values)
            return
        apart = self.apart & set(attach.own)
        left = tile(self.work, name, own, self.tgt, tblock, attach.own, late, apart=apart)
        leave_apart(self, name, attach.own, left)

    def _opaque_inner(self, name: str, tblock: Any) -> tuple[Any, Any] | None:
        """(the block here, the target's) inside a block with no iterators, directly in its body."""
        if tblock.block.iter_vars:
            return None
        inside = [b for b in self.tgt.blocks if b.scope == tblock.name]
        here = self.work.view.block(name)
        if len(inside) != 1 or inside[0].chain or here is None:
            return None
        mine = self.work.view.block(self.names.get(inside[0].name, inside[0].name))
        if mine is None or mine.scope != name or mine.chain:
            return None
        return mine, inside[0]

    def _own_count(self, name: str, attach: Attach) -> int:
        """How many loops of the block here are its own (below where it sits)."""
        chain = self.work.view.chain(self.work.view.block(name))  # type: ignore[arg-type]
        if attach.loop is None:
            return len(chain)
        block_here, place = self.where[attach.loop]
        return len(chain) - place - 1

    def _move(self, name: str, attach: Attach, keep: bool) -> None:
        work = self.work
        host, place = self.where[attach.loop]  # type: ignore[index]
        loop_rv = work.loop_rvs(host)[place]
        tloop = self.tgt.loops[attach.loop]  # type: ignore[index]
        here = work.view.block(name)
        host_chain = work.view.block(host).chain  # type: ignore[union-attr]
        if here is not None and len(here.chain) > place and here.chain[: place + 1] == host_chain[: place + 1]:
            if len(here.chain) == place + 1 or here.chain[place + 1] not in host_chain:
                return  # already there
        why = f"in the target, block {attach.block} sits inside loop {tloop.name}"
        work.apply(attach.primitive, why, block=work.block_rv(name), loop=loop_rv, preserve_unit_loops=keep)

    def _keeps_unit_loops(self, attach: Attach) -> bool:
        """Whether the target keeps a loop of extent 1 that the block's binding reads (``v0 = ax0``):
        what ``preserve_unit_loops=True`` makes."""
        tblock = self.tgt.block(attach.block)
        units = [o for o in attach.own if self.tgt.loops[o].extent == 1]
        if not units or tblock is None:
            return False
        maps = iter_maps(self.tgt, tblock, attach.own)
        used = {t.leaf for ts in maps.terms for t in ts} if maps is not None else set()
        return any(o in used for o in units)

    def _kinds(self, name: str, town: list[int], base: int, only: set[int] | None = None) -> None:
        for i, o in enumerate(town):
            if only is not None and o not in only:
                continue
            self._kind(name, base + i, self.tgt.loops[o])

    def _kind(self, name: str, place: int, tloop: Loop, defer: bool = True) -> None:
        """The loop's kind and annotations as the target's; a kind TVM refuses now is tried again at
        the end (``defer``: TVM wants another step first, as decompose_reduction for a vectorize)."""
        work = self.work
        cur = work.view.chain(work.view.block(name))[place]  # type: ignore[arg-type]
        if (cur.kind, cur.thread) != (tloop.kind, tloop.thread):
            said = f"loop {cur.name} is {cur.kind} here and {tloop.kind} in the target"
            if cur.kind != "serial" and tloop.kind == "serial":
                raise Unreachable(said)  # no primitive makes a loop serial again
            rv = work.loop_rvs(name)[place]
            try:
                if tloop.kind == "thread_binding":
                    why = f"the target's loop {tloop.name} is bound to {tloop.thread}"
                    work.apply("bind", why, loop=rv, thread_axis=tloop.thread)
                else:
                    why = f"the target's loop {tloop.name} is {tloop.kind}"
                    work.apply(_KIND_PRIMITIVE[tloop.kind], why, loop=rv)
            except Refused:
                if cur.kind != "serial":  # TVM re-marks a bound loop (unroll after bind) or refuses: final
                    raise Unreachable(said) from None
                if not defer:
                    raise
                self.deferred.append((name, place, tloop))
                return
        self._annotations(("loop", name, place), cur.annotations, tloop.annotations, f"loop {tloop.name}")

    def _annotations(self, what: tuple, have: dict, want: dict, text: str) -> None:
        work = self.work
        for key in sorted(set(have) | set(want)):
            if have.get(key) == want.get(key):
                continue
            rv = work.loop_rvs(what[1])[what[2]] if what[0] == "loop" else work.block_rv(what[1])
            if key == "buffer_dim_align" and what[0] == "block":
                self._storage_align(rv, have.get(key) or [], want.get(key) or [], text)
                continue
            if key not in want:
                work.apply("unannotate", f"the target's {text} has no {key}", block_or_loop=rv, ann_key=key)
            else:
                value = want[key]
                if not _annotatable(value):
                    raise Unreachable(
                        f"the target's {text} carries {key}, which no annotate call writes", "no_primitive"
                    )
                why = f"the target's {text} carries {key}={value!r}"
                work.apply("annotate", why, block_or_loop=rv, ann_key=key, ann_val=value)

    def _storage_align(self, rv: Any, have: list, want: list, text: str) -> None:
        """``buffer_dim_align`` is written by ``storage_align``, one [buffer, axis, factor, offset] a call;
        a call on a (buffer, axis) aligned already updates its entry in place (TVM's storage_align)."""
        keys = [tuple(e[:2]) if isinstance(e, list) else e for e in have]
        if keys != [tuple(e[:2]) if isinstance(e, list) else e for e in want[: len(have)]]:
            raise Unreachable(f"the {text} aligns its buffers otherwise, and an alignment cannot be taken back")
        for n, entry in enumerate(want):
            if n < len(have) and have[n] == entry:
                continue
            if not (isinstance(entry, list) and len(entry) == 4 and all(isinstance(x, int) for x in entry)):
                raise Unreachable(
                    f"the {text} carries a buffer_dim_align that storage_align does not write", "no_primitive"
                )
            index, axis, factor, offset = entry
            why = f"the target's {text} aligns axis {axis} of its buffer {index} to {factor} (offset {offset})"
            self.work.apply("storage_align", why, block=rv, buffer_index=index, axis=axis, factor=factor, offset=offset)

    def _annotate_blocks(self) -> None:
        work, tgt = self.work, self.tgt
        if tgt.root is not None:
            have = work.view.root.annotations if work.view.root is not None else {}
            self._annotations(
                ("block", "root"), {str(k): plain(v) for k, v in have.items()}, _block_ann(tgt.root), "root block"
            )
        for tb in tgt.blocks:
            name = self.names.get(tb.name, tb.name)
            if work.view.block(name) is None and work.view.block(f"{name}_update") is not None:
                name = f"{name}_update"  # decomposed here after the names were taken
            here = work.view.block(name)
            if here is None:
                continue
            if explicit_regions(work, name, here, tb):
                here = work.view.block(name)
                assert here is not None
            self._annotations(("block", name), here.annotations, tb.annotations, f"block {tb.name}")

    # --- reductions -----------------------------------------------------------------------------------
    def _decompose(self, block: str, init: str, update: str) -> None:
        work, tgt = self.work, self.tgt
        tinit, tupd = tgt.block(init), tgt.block(update)
        assert tinit is not None and tupd is not None
        shared = 0
        while shared < min(len(tinit.chain), len(tupd.chain)) and tinit.chain[shared] == tupd.chain[shared]:
            shared += 1
        if shared >= len(tupd.chain):
            raise Unreachable(f"the target's {init} sits below every loop of {update}", "no_primitive")
        tloop = tgt.loops[tupd.chain[shared]]
        _, place = self.where[tupd.chain[shared]]
        why = f"the target initialises in a block of its own, {init}, above loop {tloop.name}"
        work.apply("decompose_reduction", why, block=work.block_rv(block), loop=work.loop_rvs(block)[place])
        made = rfchain.suffixed(block, "_init").split("#")[0]  # the later aliases are decomposed first
        if work.view.block(made) is None:
            raise Unreachable(f"decompose_reduction made no block {made}", "no_primitive")
        self.names[init] = made
        ichain = work.view.chain(work.view.block(made))  # type: ignore[arg-type]
        town = tinit.chain[shared:]
        if len(ichain) - shared != len(town):
            raise Unreachable(f"the target's {init} has loops that decompose_reduction does not make")
        for i, o in enumerate(town):
            self._kind(made, shared + i, tgt.loops[o])


def _annotatable(value: Any) -> bool:
    """Whether ``annotate`` writes the value: a scalar, a list of scalars, a dict of those."""
    scalar = (str, int, float)
    if isinstance(value, scalar):
        return True
    if isinstance(value, list):
        return all(isinstance(v, scalar) for v in value)
    if isinstance(value, dict):
        return all(
            isinstance(v, scalar) or (isinstance(v, list) and all(isinstance(x, scalar) for x in v))
            for v in value.values()
        )
    return False


def _block_ann(block: Any) -> dict[str, Any]:
    return {str(k): plain(v) for k, v in block.annotations.items()}
