"""The steps that make or remove blocks and buffers: cache stages, ``rfactor``, ``set_scope`` and
inlining, each read off the target and applied to the program as it is at that moment (a cache of a
cache reads the first cache, made just before it).
"""

from __future__ import annotations

from typing import Any

import tvm

from mlc_lab.tvm.path.blocks import Correspondence, Stage, computed_through, loads
from mlc_lab.tvm.path.ir import (
    Block,
    FuncView,
    IterMaps,
    accesses,
    all_accesses,
    const,
    first_store,
    iter_maps,
    maps_of,
    outer_first,
    read_as,
)
from mlc_lab.tvm.path import padding, rfchain
from mlc_lab.tvm.path.iterorder import reindexed_read
from mlc_lab.tvm.path.work import Refused, Unreachable, Work


def make_stage(work: Work, tgt: FuncView, corr: Correspondence, names: dict[str, str], stage: Stage) -> None:
    """Apply the step that makes ``stage``; name its new block in ``names`` (target -> here)."""
    if stage.primitive == "cache_read":
        _cache_read(work, tgt, corr, names, stage)
    elif stage.primitive == "cache_write":
        _cache_write(work, tgt, names, stage)
    elif stage.primitive == "cache_index":
        _cache_index(work, tgt, names, stage)
    elif stage.primitive == "rfactor":
        renamed = {s.buffer: s.old for s in corr.stages if s.primitive == "set_scope"}
        renamed.update(rfchain.copied(tgt, corr))
        _rfactor(work, tgt, names, stage, renamed)
    elif stage.primitive == "reindex":
        _reindex(work, tgt, names, stage)
    elif stage.primitive == "pad_einsum":
        _pad_einsum(work, tgt, corr, names, stage)
    elif stage.primitive == "set_scope":
        set_scope(work, names, stage)
    elif stage.primitive == "blockize":
        return  # made with the block's loops, when its nest is placed (plan.Run._blockize)
    elif stage.primitive == "transform_layout":
        _transform_layout(work, tgt, names, stage)
    elif stage.primitive == "transform_block_layout":
        _transform_block_layout(work, tgt, names, stage)


def _cache_index(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage) -> None:
    """``cache_index`` of the block that reads the target's index buffers: one call makes them all,
    as many as its ``cse_thresh`` lets through (tried from 0 up, TVM saying which blocks it made)."""
    if stage.target_block in names:
        return  # made with another index buffer of the same block
    user = tgt.block(stage.old)
    assert user is not None
    want = {b.name for b in tgt.blocks if not b.reads() and any(loads(user.block.body, w) for w in b.writes())}
    before = {b.name for b in work.view.blocks}
    for thresh in range(9):
        point = work.checkpoint()
        why = f"the target computes the indices of block {stage.old} once into {stage.buffer} and others"
        try:
            work.apply(
                "cache_index",
                why,
                block=work.block_rv(names.get(stage.old, stage.old)),
                storage_scope=stage.scope,
                cse_thresh=thresh,
            )
        except Refused:
            continue
        if {b.name for b in work.view.blocks} - before == want:
            names.update({n: n for n in want})
            return
        work.restore(point)
    raise Unreachable(f"no cse_thresh of cache_index makes the index blocks {', '.join(sorted(want))}", "unread")


def _inputs(block: Block) -> list[str]:
    """The buffers a block reads and does not write (a reduction reads what it writes, and only
    while its init is in the block: the inputs line up before and after decompose_reduction)."""
    writes = set(block.writes())
    return [r for r in block.reads() if r not in writes]


def _readers(tgt: FuncView, corr: Correspondence, names: dict[str, str], stage: Stage) -> list[tuple[str, int]]:
    """The target's blocks that read the cache, through the caches made after it from it (a cache
    of a cache): (target block, which of its inputs)."""
    later = {s.target_block: s for s in corr.stages if s.primitive == "cache_read"}
    out: list[tuple[str, int]] = []

    def readers_of(buffer: str, besides: str) -> list[tuple[str, int]]:
        return [(b.name, _inputs(b).index(buffer)) for b in tgt.blocks if buffer in _inputs(b) and b.name != besides]

    stack = readers_of(stage.buffer, stage.target_block)
    while stack:
        name, index = stack.pop(0)
        if name in later and name not in names:
            stack.extend(readers_of(later[name].buffer, name))
        elif (name, index) not in out:
            out.append((name, index))
    return out


def _cache_read(work: Work, tgt: FuncView, corr: Correspondence, names: dict[str, str], stage: Stage) -> None:
    readers = _readers(tgt, corr, names, stage)
    if not readers:
        raise Unreachable(  # cache_index makes a buffer read only through the indices it computes
            f"no block of the target reads {stage.buffer} as the engine reads a cache stage", "unread"
        )
    view = work.view
    here = [(names.get(n, n), i) for n, i in readers]
    first = view.block(here[0][0])
    if first is None:
        raise Unreachable(f"the engine finds no block here for the target's block {readers[0][0]}", "unread")
    inputs = _inputs(first)
    if here[0][1] >= len(inputs):
        raise Unreachable(f"block {first.name} reads fewer buffers here than in the target")
    source = inputs[here[0][1]]
    through = _read_through_inlined(view, tgt, corr, stage, source)
    if through is not None:  # the copy is made for a block that is inlined later (its readers read it)
        first, source, here = through, _copy_source(tgt, stage), [(through.name, 0)]
    everyone = sorted({b.name for b in view.blocks if source in _inputs(b)})
    mine = sorted({n for n, _ in here})
    why = f"the target copies {source} into {stage.buffer} ({stage.scope}) for {', '.join(n for n, _ in readers)}"
    copy = tgt.block(stage.target_block)
    index_map = (
        reindexed_read(first, tgt.block(readers[0][0]), source, stage.buffer, copy)
        if len(here) == 1 and through is None
        else None
    )
    if index_map is not None:  # the one reader indexes the copy otherwise: the copy is laid out as it reads
        try:
            made = work.apply(
                "reindex_cache_read",
                why,
                block=work.block_rv(first.name),
                read_buffer_index=first.reads().index(source),
                storage_scope=stage.scope,
                index_map=index_map,
            )
            names[stage.target_block] = str(work.get(made).name_hint)
            return
        except Refused:
            pass  # a region, not a point: the plain copy, laid out later if the target needs it
    made = work.apply(
        "cache_read",
        why,
        block=work.block_rv(first.name),
        read_buffer_index=first.reads().index(source),
        storage_scope=stage.scope,
        consumer_blocks=None
        if everyone == mine and not _before_writer(tgt, source, stage)
        else [work.block_rv(n) for n in mine],
    )
    names[stage.target_block] = str(work.get(made).name_hint)


def _copy_source(tgt: FuncView, stage: Stage) -> str | None:
    copy = tgt.block(stage.target_block)
    moved = copy.stage_copy() if copy is not None else None
    return moved[1] if moved is not None else None


def _read_through_inlined(view: FuncView, tgt: FuncView, corr: Correspondence, stage: Stage, source: str) -> Any:
    """The block here that reads the target copy's source where the copy's readers do not: the
    readers read it through a block inlined into them (``cache_read`` of ``data`` for a cast, the
    cast inlined after), or None. Every block here that reads the source must be one inlined that
    computes (the copy stays a bare copy: what it reads is not computed in it)."""
    wanted = _copy_source(tgt, stage)
    if wanted is None or wanted == source or view.buffer(wanted) is None:
        return None
    readers = [b for b in view.blocks if wanted in _inputs(b)]
    if not readers or any(b.name not in corr.inlined or b.copy() is not None for b in readers):
        return None  # a block that only moves data may be inlined into the copy instead (a transpose)
    return readers[0]


def _before_writer(tgt: FuncView, source: str, stage: Stage) -> bool:
    """Whether the target copies ``source`` before any block writes it (a buffer read and written in
    place): TVM puts the copy there only when its readers are named, after the writer otherwise."""
    copy = tgt.block(stage.target_block)
    writers = [b.order for b in tgt.blocks if source in b.writes() and b.name != stage.target_block]
    return copy is not None and bool(writers) and copy.order < min(writers)


def _cache_write(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage) -> None:
    found = computed_through(tgt, stage.buffer, set(names))
    twriter, written = found if found is not None else (None, "")
    writer = work.view.block(names[twriter.name]) if twriter is not None else None
    if writer is None or twriter is None:
        raise Unreachable(f"no block here computes what the target computes into {stage.buffer}", "computes")
    index = twriter.writes().index(written)
    target = writer.writes()[index] if index < len(writer.writes()) else "?"
    why = f"the target computes {target} into {stage.buffer} ({stage.scope}) first and copies it back"
    # blocks that read the cache itself, not the copy: TVM then writes the copy back after them
    readers = [
        names[b.name]
        for b in tgt.blocks
        if b.name in names and b is not twriter and stage.buffer in _inputs(b) and work.view.block(names[b.name])
    ]
    index_map = (
        reindexed_read(writer, twriter, target, stage.buffer, tgt.block(stage.target_block)) if not readers else None
    )
    if index_map is not None:  # the writer indexes the cache otherwise: the cache is laid out as it writes
        try:
            made = work.apply(
                "reindex_cache_write",
                why,
                block=work.block_rv(writer.name),
                write_buffer_index=index,
                storage_scope=stage.scope,
                index_map=index_map,
            )
            names[stage.target_block] = str(work.get(made).name_hint)
            return
        except Refused:
            pass  # a region, not a point: the plain cache, laid out later if the target needs it
    made = work.apply(
        "cache_write",
        why,
        block=work.block_rv(writer.name),
        write_buffer_index=index,
        storage_scope=stage.scope,
        consumer_blocks=[work.block_rv(n) for n in readers] if readers else None,
    )
    names[stage.target_block] = str(work.get(made).name_hint)


def _pad_einsum(work: Work, tgt: FuncView, corr: Correspondence, names: dict[str, str], stage: Stage) -> None:
    """``pad_einsum``: the block computes over the target's larger extents, its inputs and output
    copied into padded buffers (``X_pad``) made all at once."""
    if stage.target_block in names:
        return  # made with another buffer of the same einsum
    einsum = next((b for b in tgt.blocks if b.name in corr.same and stage.buffer in b.reads() + b.writes()), None)
    einsum = einsum or padding.einsum_of(work.view, tgt, corr.same, stage.old)
    here = work.view.block(names[einsum.name]) if einsum is not None else None
    if einsum is None or here is None:
        raise Unreachable(f"no block here computes over {stage.old} as the target's does through {stage.buffer}")
    factors = padding.padding(here, tgt, einsum)
    if any(p is None for p in factors):
        raise Unreachable(f"the target pads block {einsum.name} to extents that are not constants")
    why = f"the target computes block {einsum.name} over {' x '.join(map(str, factors))}, its buffers padded"
    before = {b.name for b in work.view.blocks}
    work.apply("pad_einsum", why, block=work.block_rv(here.name), padding=factors)
    padding.inline_new_copies(work, before, tgt)
    for other in corr.stages:
        if other.primitive == "pad_einsum" and work.view.block(other.target_block) is not None:
            names[other.target_block] = other.target_block


def _reindex(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage) -> None:
    """``reindex`` the one access of ``stage.old`` by the block that reads (or writes) it in the
    target through ``stage.buffer``."""
    tcopy = tgt.block(stage.target_block)
    reads = tcopy is not None and stage.buffer in tcopy.reads()  # the copy reads X_reindex: a write reindex
    kind = "write" if reads else "read"
    user = next(
        (b for b in tgt.blocks if b.name in names and stage.buffer in (b.writes() if reads else _inputs(b))), None
    )
    here = work.view.block(names[user.name]) if user is not None else None
    if here is None:
        raise Unreachable(f"no block here uses {stage.old} as the target's block does through {stage.buffer}")
    regions = here.writes() if reads else here.reads()
    if stage.old not in regions:
        raise Unreachable(f"block {here.name} does not {kind} {stage.old} here", "computes")
    why = f"the target copies {stage.old} through {stage.buffer}, laid out as block {here.name} iterates"
    made = work.apply("reindex", why, block=work.block_rv(here.name), buffer=(kind, regions.index(stage.old)))
    names[stage.target_block] = str(work.get(made).name_hint)


def set_scope(work: Work, names: dict[str, str], stage: Stage) -> None:
    writer = next((b for b in work.view.blocks if stage.old in b.writes()), None)
    if writer is None:
        if any(stage.buffer in b.writes() for b in work.view.blocks):
            return  # done already
        raise Unreachable(f"no block writes {stage.old}, which the target keeps in {stage.scope} memory")
    why = f"the target keeps {stage.old} in {stage.scope} memory"
    work.apply(
        "set_scope",
        why,
        block=work.block_rv(writer.name),
        buffer_index=writer.writes().index(stage.old),
        storage_scope=stage.scope,
    )


def _transform_layout(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage) -> None:
    """Lay the buffer out as the target does: the index map takes the block's indices here to the
    target's indices of the same iterators."""
    tb = tgt.block(stage.target_block)
    cb = work.view.block(names.get(stage.target_block, stage.target_block)) if tb is not None else None
    if cb is None:
        raise Unreachable(f"the engine finds no block here for the target's block {stage.target_block}", "unread")
    mine, theirs = accesses(cb, stage.buffer), accesses(tb, stage.buffer)  # type: ignore[arg-type]
    kind, indices = mine[0]
    ivars = [iv.var for iv in cb.block.iter_vars]
    places = []
    for index in indices:
        place = next((k for k, v in enumerate(ivars) if isinstance(index, tvm.tirx.Var) and v.same_as(index)), None)
        if place is None or place in places:
            raise Unreachable(f"block {cb.name} indexes {stage.buffer} with expressions; no layout map starts there")
        places.append(place)
    target_vars = [iv.var for iv in tb.block.iter_vars]  # type: ignore[union-attr]
    initial = [target_vars[k] for k in places]
    if not all(_uses_only(e, initial) for e in theirs[0][1]):
        raise Unreachable(
            f"the target also changes the iterators of block {cb.name} (transform_block_layout), "
            "which the path engine does not read off yet"
        )
    final = list(theirs[0][1])
    if len(final) == len(initial) and all(isinstance(f, tvm.tirx.Var) and f.same_as(v) for f, v in zip(final, initial)):
        return  # the same layout: the block's iterators differ, not the buffer (an rfactor's final block)
    index_map = tvm.tirx.IndexMap(initial, final, None)
    regions = cb.writes() if kind == "write" else cb.reads()
    why = f"the target lays {stage.buffer} out as {stage.buffer}[{', '.join(str(i) for i in theirs[0][1])}]"
    work.apply(
        "transform_layout",
        why,
        block=work.block_rv(cb.name),
        buffer=(kind, regions.index(stage.buffer)),
        index_map=index_map,
        pad_value=None,
        assume_injective_transform=False,
    )


def _by_scale_chain(terms: list[Any]) -> list[Any]:
    """Terms of one sum, outermost first: by scale, a symbolic one too (``16`` inside ``(n + 15) // 16``)."""
    chain = outer_first([(t.scale, t.extent) for t in terms])
    if chain is None:
        return sorted(terms, key=lambda t: -(const(t.scale) or 0))
    return [terms[i] for i in chain]


def _split_factors(terms: list[Any]) -> list[Any]:
    """A split's factors: the outermost one follows from the others where it is symbolic (TVM takes
    no expression of the program's variables as a factor)."""
    factors = [t.extent for t in terms]
    if const(factors[0]) is None:
        factors[0] = None
    return factors


def _typed_like(index_map: Any, new: list[Any]) -> Any:
    """The map with each constant result typed as the target's iterator it becomes: the inverse
    gives a unit iterator ``0`` as int32 where the target's is ``T.int64(0)``."""
    final = list(index_map.final_indices)
    typed = [
        tvm.tirx.IntImm(var.ty, int(f.value)) if isinstance(f, tvm.tirx.IntImm) and f.ty != var.ty else f
        for f, var in zip(final, new)
    ]
    if all(a.same_as(b) for a, b in zip(final, typed)):
        return index_map
    return tvm.tirx.IndexMap(list(index_map.initial_indices), typed, None)


def _transform_block_layout(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage) -> None:
    """Give the block the target's iterators: the index map is the inverse of how the target's
    block reads the program's iterators."""
    tb = tgt.block(stage.target_block)
    cb = work.view.block(names.get(stage.target_block, stage.target_block)) if tb is not None else None
    if cb is None or tb is None:
        raise Unreachable(f"the engine finds no block here for the target's block {stage.target_block}", "unread")
    try:
        reads = read_as(cb, tb)
    except LookupError as exc:
        raise Unreachable(str(exc), "computes") from None
    new = [iv.var for iv in tb.block.iter_vars]
    shape = [iv.dom.extent for iv in tb.block.iter_vars]
    try:
        index_map = tvm.tirx.IndexMap(new, reads, None).inverse(shape)
    except Exception:  # noqa: BLE001  (TVM finds the map not invertible)
        raise Unreachable(
            f"block {tb.name} of the target iterates otherwise than any layout of the program's", "no_primitive"
        ) from None
    index_map = _typed_like(index_map, new)
    why = f"the target's block {tb.name} iterates over {', '.join(str(v) for v in new)} ({', '.join(map(str, shape))})"
    order = _iterators_alone(index_map, tgt, tb)
    if order is not None:  # the loops stay as they are: only the block's iterators are reordered
        try:
            work.apply("reorder_block_iter_var", why, block=work.block_rv(cb.name), new_order=order)
            return
        except Refused:
            pass
    work.apply("transform_block_layout", why, block=work.block_rv(cb.name), index_map=index_map)


def _iterators_alone(index_map: Any, tgt: FuncView, tb: Any) -> list[int] | None:
    """The new order of the block's iterators where the map only permutes them and the target's
    loops keep the program's order (each iterator bound to one loop): ``reorder_block_iter_var``
    then makes in one step what ``transform_block_layout`` and a ``reorder`` would."""
    old = list(index_map.initial_indices)
    order = []
    for f in index_map.final_indices:
        at = [k for k, v in enumerate(old) if f.same_as(v)]
        if not at or at[0] in order:
            return None
        order.append(at[0])
    if order == list(range(len(old))):
        return None
    depth = {loop.node.loop_var: d for d, loop in enumerate(tgt.chain(tb))}
    places = []
    for value in tb.realize.iter_values:
        place = next((d for var, d in depth.items() if value.same_as(var)), None)
        if place is None:
            return None
        places.append(place)
    by_loop = sorted(range(len(places)), key=lambda k: places[k])
    return order if by_loop == sorted(range(len(order)), key=lambda k: order[k]) else None


def _uses_only(expr: Any, allowed: list[Any]) -> bool:
    """Whether the variables of ``expr`` are among ``allowed``."""
    if isinstance(expr, tvm.tirx.Var):
        return any(expr.same_as(v) for v in allowed)
    subs = [getattr(expr, a, None) for a in ("a", "b", "value")] + list(getattr(expr, "args", None) or [])
    return all(_uses_only(x, allowed) for x in subs if x is not None and hasattr(x, "same_as"))


# --- rfactor -------------------------------------------------------------------------------------------


def _rfactor(work: Work, tgt: FuncView, names: dict[str, str], stage: Stage, renamed: dict[str, str]) -> None:
    """Split (or fuse, then split) the reduction loops as the target's partial block reads them, then
    ``rfactor`` the piece that the partial buffer is indexed by. ``renamed``: the target's buffers
    that ``set_scope`` renames later, by their name here."""
    if stage.target_block in names:
        return  # made already: one rfactor makes a partial buffer for each output (argmax's two)
    trf = tgt.block(stage.target_block) or tgt.block(rfchain.suffixed(stage.target_block, "_update"))
    if trf is None:
        raise Unreachable(f"the target's partial sums {stage.buffer} come from no block the engine reads")
    final = next((b for b in tgt.blocks if stage.buffer in b.reads() and stage.buffer not in b.writes()), None)
    block = work.view.block(names.get(final.name, final.name)) if final is not None else None
    if final is None or block is None:
        raise Unreachable(f"no block of the target reads the partial sums {stage.buffer}", "computes")
    reduce, maps, rf_index = _rf_reading(block, trf, renamed)
    why = f"the target sums {block.name} in parts first ({trf.name}), over a split of its reduction"
    split_already = {k: _split_already(work, block, k, ts) for k, ts in zip(reduce, maps.terms) if not maps.fused}
    loops = {k: work.loop_rv(_loop_of(work.view, block, k)) for k in reduce if split_already.get(k) is None}
    if maps.fused:
        mark = maps.fused[0]
        slices = sorted(
            ((const(t.lower) or 0, k) for k, ts in zip(reduce, maps.terms) for t in ts if t.fused == 0), reverse=True
        )
        rvs = [loops[k] for _, k in slices]
        fused = work.apply("fuse", why, loops=rvs) if len(rvs) > 1 else rvs[0]
        terms = _by_scale_chain(mark.terms)
        pieces = work.apply("split", why, loop=fused, factors=_split_factors(terms)) if len(terms) > 1 else [fused]
        piece = pieces[next(i for i, t in enumerate(terms) if t.leaf == rf_index)]
    else:
        piece = None
        for k, ts in zip(reduce, maps.terms):
            terms = rfchain.around_units(_by_scale_chain(ts), rf_index)
            if split_already.get(k) is not None:
                pieces = split_already[k]
            elif len(terms) > 1:
                pieces = work.apply("split", why, loop=loops[k], factors=_split_factors(terms))
            else:
                pieces = [loops[k]]
            mine = [rv for t, rv in zip(terms, pieces) if t.leaf == rf_index]
            if len(mine) > 1:  # pieces apart in the reduction, one partial index: moved inward and fused
                rest = [rv for t, rv in zip(terms, pieces) if t.leaf != rf_index]
                work.apply("reorder", why, ordered_loops=rest + mine)
                piece = work.apply("fuse", why, loops=mine)
            elif mine:
                piece = mine[0]
        if piece is None:
            raise Unreachable(
                f"the target's {trf.name} is indexed by no piece of a reduction of {block.name}", "computes"
            )
    store = first_store(trf.block.body)
    rf_var = trf.block.iter_vars[rf_index].var
    factor_axis = next(i for i, e in enumerate(store.indices) if isinstance(e, tvm.tirx.Var) and e.same_as(rf_var))
    made = work.apply("rfactor", why, loop=piece, factor_axis=factor_axis)
    names[stage.target_block] = rfchain.alias_of(work.view, work.get(made))


def _rf_reading(block: Block, trf: Block, renamed: dict[str, str]) -> tuple[list[int], IterMaps, int]:
    """Which reduction iterators of ``block`` are factored, how the partial block reads them (terms
    over its iterators) and which of its iterators indexes the partial buffer."""
    found = rfchain.own_reads_dropped(trf, all_accesses(trf))[1:]
    theirs = _by_buffer([(renamed.get(name, name), indices) for name, indices in found])
    mine = _by_buffer(all_accesses(block)[1:])
    ivars = [iv.var for iv in block.block.iter_vars]
    reduce = [k for k, iv in enumerate(block.block.iter_vars) if int(iv.iter_type) == 2]
    found: dict[int, Any] = {}
    pairs = [(m, t) for name in mine for m, t in zip(mine[name], theirs.get(name, []))]
    for idx, tidx in pairs:
        if len(idx) != len(tidx):
            continue
        for e, te in zip(idx, tidx):
            for k in reduce:
                if isinstance(e, tvm.tirx.Var) and e.same_as(ivars[k]):
                    found.setdefault(k, te)
    reduce = [k for k in reduce if k in found]
    by_var = {iv.var: n for n, iv in enumerate(trf.block.iter_vars)}
    dom = {iv.var: iv.dom for iv in trf.block.iter_vars}
    maps = maps_of([found[k] for k in reduce], dom, by_var) if reduce else None
    store = first_store(trf.block.body)
    store_vars = [e for e in (store.indices if store is not None else []) if isinstance(e, tvm.tirx.Var)]
    rf = [
        n
        for n, iv in enumerate(trf.block.iter_vars)
        if int(iv.iter_type) == 0 and any(iv.var.same_as(v) for v in store_vars)
    ]
    used = {t.leaf for ts in (maps.terms if maps else []) for t in ts} | {
        t.leaf for f in (maps.fused if maps else []) for t in f.terms
    }
    rf = [n for n in rf if n in used]
    if maps is None or not rf:
        raise Unreachable(  # rfactor's own buffer: a reading of it the engine lacks, not another computation
            f"the target's {trf.name} holds partial sums of {block.name} that the engine does not read as a split "
            "of its reduction yet",
            "unread",
        )
    return reduce, maps, rf[0]


def _by_buffer(found: list[tuple[str, list[Any]]]) -> dict[str, list[list[Any]]]:
    """Accesses grouped by buffer, in order: the n-th access of a buffer in one block is matched with
    the n-th in the other (a partial block without an init reads its own buffer fewer times)."""
    out: dict[str, list[list[Any]]] = {}
    for name, indices in found:
        out.setdefault(name, []).append(indices)
    return out


def _split_already(work: Work, block: Block, k: int, terms: list) -> list[Any] | None:
    """The loops iterator ``k`` of the block is split into here, when they are the pieces the
    target's partial block reads (outermost first); None when it is not split so."""
    view = work.view
    maps = iter_maps(view, block, block.chain)
    if maps is None or maps.fused:
        return None
    mine = sorted(maps.terms[k], key=lambda t: -(const(t.scale) or 0))
    wanted = [const(t.extent) for t in sorted(terms, key=lambda t: -(const(t.scale) or 0))]
    if len(mine) < 2 or [const(t.extent) for t in mine] != wanted or any(t.leaf is None for t in mine):
        return None
    return [work.loop_rv(t.leaf) for t in mine]


def _loop_of(view: FuncView, block: Block, k: int) -> int:
    """The loop whose variable is iterator ``k``'s binding (the reduction loop, not yet split)."""
    value = block.values[k]
    for o in block.chain:
        if isinstance(value, tvm.tirx.Var) and view.loops[o].var.same_as(value):
            return o
    raise Unreachable(f"the reduction of {block.name} is split already, not as the target's parts are")


# --- inlining ------------------------------------------------------------------------------------------


def inline_all(work: Work, inlined: list[str], backward_later: bool = False) -> list[str]:
    """Inline the blocks the target no longer has: into their consumers where those remain
    (``compute_inline``), else into their producer from the output backwards
    (``reverse_compute_inline``); with ``backward_later`` the latter are left for a second call
    once the blocks sit in their loops (a block inlined into a padded copy after it moved gets
    the predicate that trims the padding): returned."""
    view = work.view
    gone = set(inlined)
    forward, backward = [], []
    for name in inlined:
        (forward if _reaches_survivor(view, name, gone) or _unread(view, name) else backward).append(name)
    for name in forward:
        why = f"the target has no block {name}: its values are computed where they are used"
        try:
            work.apply("compute_inline", why, block=work.block_rv(name))
        except Refused:
            backward.append(name)
    if backward_later:
        return backward
    pending = sorted(backward, key=lambda n: -_order(work.view, n))
    while pending:  # one refused now may go after another is inlined (a constant it reads as well)
        for name in pending:
            if _inline_one(work, name):
                pending.remove(name)
                break
        else:
            _fuse_epilogue(work, pending.pop(0))
    return []


def inline_chain(work: Work, names: list[str]) -> None:
    """The blocks after a nest the target no longer has, once the nest sits in its loops: each into
    the blocks that read it where it has any (program order, ``compute_inline``), the rest into
    their producer (``reverse_compute_inline``), as dlight inlines a consumer chain."""
    rest = []
    for name in sorted(names, key=lambda n: _order(work.view, n)):
        why = f"the target has no block {name}: its values are computed where they are used"
        try:
            work.apply("compute_inline", why, block=work.block_rv(name))
        except Refused:
            rest.append(name)
    inline_all(work, rest)


def _inline_one(work: Work, name: str) -> bool:
    """``reverse_compute_inline``, else ``compute_inline`` (into consumers that remain for now)."""
    why = f"the target has no block {name}: it is computed where its input is produced"
    try:
        work.apply("reverse_compute_inline", why, block=work.block_rv(name))
        return True
    except Refused:
        pass
    why = f"the target has no block {name}: its values are computed where they are used"
    try:
        work.apply("compute_inline", why, block=work.block_rv(name))
        return True
    except Refused:
        return False


def _fuse_epilogue(work: Work, name: str) -> None:
    """An epilogue TVM will not inline into a reduction goes into the reduction itself
    (``fuse_reduction_epilogue``): the target computes it in the reduction's statement."""
    block = work.view.block(name)
    reads = set(block.reads()) if block is not None else set()
    producer = next((b for b in work.view.blocks if b.has_init and set(b.writes()) & reads), None)
    if producer is None:
        raise Refused("reverse_compute_inline", f"block {name} cannot be inlined into its producer")
    why = f"the target has no block {name}: the reduction {producer.name} applies it as it sums"
    work.apply(
        "fuse_reduction_epilogue", why, reduction_block=work.block_rv(producer.name), epilogue_block=work.block_rv(name)
    )


def _order(view: FuncView, name: str) -> int:
    block = view.block(name)
    return block.order if block is not None else -1


def _unread(view: FuncView, name: str) -> bool:
    """A block whose values no block reads and no parameter holds: ``compute_inline`` removes it."""
    block = view.block(name)
    if block is None:
        return False
    writes = set(block.writes())
    params = {str(p.name) for p in view.func.params}
    readers = [b for b in view.blocks if b.name != name and writes & set(b.reads())]
    return not readers and not writes & params


def _reaches_survivor(view: FuncView, name: str, gone: set[str]) -> bool:
    seen, stack = set(), [name]
    while stack:
        n = stack.pop()
        block = view.block(n)
        if block is None or n in seen:
            continue
        seen.add(n)
        writes = set(block.writes())
        consumers = [b.name for b in view.blocks if writes & set(b.reads()) and b.name != n]
        for c in consumers:
            if c not in gone:
                return True
            stack.append(c)
    return False
