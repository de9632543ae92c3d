"""Which block of the target is which block of the program, and where each one sits.

Blocks are matched by what they compute: the same block keeps its name and stays the same kind of
computation (a reduction stays one); the blocks and buffers primitives make are recognised by what
they are (``Stage``): a buffer in another scope is a cache stage (``cache_read`` when its copy is
read, ``cache_write`` when the computation writes it), ``set_scope`` (the same buffer, renamed), or
an ``rfactor``'s partial sums; a buffer laid out otherwise is a ``transform_layout``, a block that
iterates otherwise a ``transform_block_layout``, an outer block around one of the program's a
``blockize``, ``X_init`` and ``X_update`` a ``decompose_reduction``; a block the target no longer has
was inlined. A target block that is none of these is something the target computes and the program
does not. Names are TVM's own; a target named otherwise is renamed first (``names``).

Placements are read off the target's loop nests: in each nest one block owns the loops (they are its
own loops, split, reordered, fused), and every other block was moved under one of them
(``compute_at`` for a producer, ``reverse_compute_at`` for a consumer). Which block owns a nest is a
real choice; ``placements`` gives the choices cheapest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import tirx

from mlc_lab.tvm.block_names import split_alias
from mlc_lab.tvm.path import rfchain
from mlc_lab.tvm.path.ir import Block, FuncView, accesses, by_loop_depth, const, iter_maps, read_as
from mlc_lab.tvm.path.iterorder import iterators_permuted
from mlc_lab.tvm.path.padding import padded_name
from mlc_lab.tvm.path.work import Unreachable


@dataclass
class Stage:
    """A buffer the target has and the program does not, and the primitive that makes it:
    ``cache_read`` / ``cache_write`` (a copy into a buffer of another scope), ``rfactor`` (a partial
    reduction's buffer) or ``set_scope`` (the same buffer in another scope, renamed by TVM)."""

    primitive: str
    buffer: str  # the new buffer's name in the target
    scope: str
    target_block: str  # the block the step makes (its target name); set_scope: the buffer's writer
    old: str = ""  # set_scope: the buffer it replaces


@dataclass
class Correspondence:
    """How the target's blocks arise from the program's (names are the program's unless said)."""

    same: dict[str, str] = field(default_factory=dict)  # target block -> program block
    stages: list[Stage] = field(default_factory=list)
    decomposed: dict[str, tuple[str, str]] = field(default_factory=dict)  # program block -> (init, update) in target
    inlined: list[str] = field(default_factory=list)


def _blockized(cur: FuncView, tgt: FuncView, corr: Correspondence) -> set[str]:
    """Blocks of the target made by ``blockize``: an outer block holding a block of the program (and
    the init block blockize writes beside it). Returns the target blocks this explains."""
    explained: set[str] = set()
    for tb in tgt.blocks:
        outer = tgt.block(tb.scope) if tb.scope else None
        if outer is None or tb.name not in corr.same or outer.name in corr.same or outer.scope is not None:
            continue
        if any(s.target_block == outer.name for s in corr.stages):
            continue
        corr.stages.append(Stage("blockize", "", "", outer.name, tb.name))
        explained.add(outer.name)
        explained.update(b.name for b in tgt.blocks if b.scope == outer.name)
    return explained


def _same_kind_of_block(cb: Block, tb: Block, tgt: FuncView) -> None:
    """A block of the same name must be the same kind of computation: a reduction stays one (its
    iterators may be split, fused, reordered, factored by primitives; a reduction never appears)."""
    mine, theirs = 2 in cb.iter_kinds, 2 in tb.iter_kinds
    if mine != theirs:
        said = "a reduction" if theirs else "no reduction"
        raise Unreachable(
            f"block {tb.name} of the target is {said}, unlike the program's: it is another computation", "computes"
        )


def _buffers(view: FuncView) -> dict[str, Any]:
    out = {str(b.name): b for b in view.allocs()}
    for p in view.func.params:
        out[str(p.name)] = p
    return out


def correspond(cur: FuncView, tgt: FuncView) -> Correspondence:
    """The target's blocks in terms of the program's; ``Unreachable`` for a block the target computes
    and the program does not."""
    out = Correspondence()
    cur_names = {b.name for b in cur.blocks}
    for tb in tgt.blocks:
        if tb.name in cur_names:
            out.same[tb.name] = tb.name
            if tb.scope is None:
                _same_kind_of_block(cur.block(tb.name), tb, tgt)  # type: ignore[arg-type]
    blockized = _blockized(cur, tgt, out)
    for cb in cur.blocks:
        init, update = f"{cb.name}_init", f"{cb.name}_update"
        if cb.name not in out.same and tgt.block(init) is not None and tgt.block(update) is not None:
            out.decomposed[cb.name] = (init, update)
    explained = set(out.same) | {n for pair in out.decomposed.values() for n in pair} | blockized
    cur_bufs, tgt_bufs = _buffers(cur), _buffers(tgt)
    gone = [name for name in cur_bufs if name not in tgt_bufs]
    seen: dict[str, int] = {}
    for buf in tgt.allocs():
        name = str(buf.name)
        if name in cur_bufs:
            continue
        stage = _stage_for(name, tgt, cur, gone, out)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1 and stage.primitive == "rfactor":  # a second rfactor: its buffer named as the first's
            stage = Stage(
                stage.primitive, stage.buffer, stage.scope, rfchain.nth(stage.target_block, seen[name]), stage.old
            )
        out.stages.append(stage)
        if stage.primitive != "set_scope":
            explained.add(stage.target_block)
        if stage.primitive == "rfactor" and stage.buffer != stage.old:  # made, then moved to another scope
            out.stages.append(Stage("set_scope", name, scope_of(tgt, name), stage.target_block, stage.old))
        if stage.primitive == "pad_einsum" and stage.buffer != f"{stage.old}_pad":  # padded, then moved
            writer = next(b.name for b in tgt.blocks if name in b.writes())
            out.stages.append(Stage("set_scope", name, scope_of(tgt, name), writer, f"{stage.old}_pad"))
    for stage in out.stages:  # a block a primitive makes, then decomposed (an rfactor's partial sums)
        pair = (rfchain.suffixed(stage.target_block, "_init"), rfchain.suffixed(stage.target_block, "_update"))
        if tgt.block(pair[0]) is not None and tgt.block(pair[1]) is not None:
            out.decomposed[stage.target_block] = pair
            explained.update(pair)
    layouts = _layout_changes(cur, tgt, cur_bufs, tgt_bufs, out)
    permuted = _permuted_blocks(cur, tgt, out, {s.buffer for s in layouts})
    out.stages.extend(permuted + layouts)  # the block's iterators first: the layouts are then read by them
    out.stages.extend(_block_layout_changes(cur, tgt, out))
    for cb in cur.blocks:
        if cb.name not in out.same and cb.name not in out.decomposed:
            out.inlined.append(cb.name)
    for tb in tgt.blocks:
        if tb.name not in explained:
            _unexplained(tb, tgt, cur, cur_bufs)
    return out


def _unexplained(tb: Block, tgt: FuncView, cur: FuncView, cur_bufs: dict[str, Any]) -> None:
    """``Unreachable`` for a target block no stage explains: a copy into or out of a buffer the
    program lacks is a stage the engine does not read yet (the target computes the same thing);
    anything else is a computation the program does not have."""
    base = split_alias(tb.name)[0]
    twins = [b.name for b in tgt.blocks if str(b.block.name_hint) == base]
    if len(twins) > 1:  # TVM names a block as an earlier one (a second rfactor of one block, cache_inplace's copies)
        raise Unreachable(
            f"the target has several blocks named {base} (a primitive applied twice to one block, such as a "
            f"second rfactor, or cache_inplace's copies): the engine does not follow them ({', '.join(twins)}) yet",
            "unread",
        )
    moved = tb.stage_copy()
    if moved is not None and any(name not in cur_bufs for name in moved):
        dst, src = moved
        raise Unreachable(f"block {tb.name} copies {src} into {dst} ({scope_of(tgt, dst)})", "stage")
    made = _made_by_name(tb.name, {b.name for b in cur.blocks})
    if made is not None:
        raise Unreachable(f"block {tb.name} is what {made[0]} makes of block {made[1]}", "unread")
    raise Unreachable(f"the target has a block {tb.name} that the program does not compute", "computes")


def _made_by_name(name: str, blocks: set[str]) -> tuple[str, str] | None:
    """(primitive, program block) when ``name`` is TVM's own name for a block that primitive makes of
    one of ``blocks``: ``B_i_common`` (loop_partition of B on loop i), ``C_pad_const``
    (decompose_padding of C)."""
    if name.endswith("_pad_const") and name[: -len("_pad_const")] in blocks:
        return "decompose_padding", name[: -len("_pad_const")]
    if name.endswith("_common"):
        parts = name[: -len("_common")].split("_")
        for n in range(len(parts) - 1, 0, -1):
            if "_".join(parts[:n]) in blocks:
                return "loop_partition", "_".join(parts[:n])
    return None


def _stage_for(name: str, tgt: FuncView, cur: FuncView, gone: list[str], corr: Correspondence) -> Stage:
    """The step that makes the target's buffer ``name``."""
    buf = tgt.buffer(name)
    scope = str(buf.scope())
    writers = [b for b in tgt.blocks if name in b.writes()]
    if not writers:
        raise Unreachable(f"no block of the target writes its buffer {name}", "computes")
    writer = writers[0]
    if not writer.reads() and name.startswith("index_var_"):  # cache_index: an index computed once
        user = next((b for b in tgt.blocks if b is not writer and loads(b.block.body, name)), None)
        if user is not None and user.name in corr.same:
            return Stage("cache_index", name, scope, writer.name, user.name)
    here = cur.block(corr.same.get(writer.name, ""))
    if here is None:  # the writer's init decomposed in the target: the block here is the whole
        here = next((cur.block(b) for b, pair in corr.decomposed.items() if writer.name in pair), None)
    known = set(corr.same) | {n for pair in corr.decomposed.values() for n in pair}  # a decomposed reader too
    new_readers = [b for b in tgt.blocks if name in b.reads() and name not in b.writes() and b.name not in known]
    partial = all(split_alias(b.name)[0].endswith(("_rf", "_rf_update")) for b in new_readers)
    for old in gone if not new_readers or partial else []:  # an rfactor's partial block reads it as the einsum did
        if name == f"{old}_{scope}" and _same_shape(cur.buffer(old), buf) and here is not None and old in here.writes():
            return Stage("set_scope", name, scope, writer.name, old)
    if name.endswith((".rf", "_rf")):
        return Stage("rfactor", name, scope, _base(writer.name, tgt), name)
    if ".rf_" in name and name.endswith(f"_{scope}"):  # rfactor's buffer, then set_scope
        return Stage("rfactor", name, "global", _base(writer.name, tgt), name[: -len(scope) - 1])
    old = name[: -len("_pad")] if name.endswith("_pad") else padded_name(name, scope, cur.buffer)
    if old is not None and not name.endswith("_pad") and cur.buffer(f"{old}_pad") is not None:
        old = None  # the program pads it already (dlight's matmul prelude): X_pad_<scope> caches X_pad
    if old is not None and cur.buffer(old) is not None:
        copy = (
            writer
            if writer.name not in corr.same
            else next((b for b in tgt.blocks if name in b.reads() and old in b.writes()), None)
        )
        if copy is not None:
            return Stage("pad_einsum", name, scope, copy.name, old)
    reindexed = _reindex_stage(name, scope, tgt, cur, writer, corr)
    if reindexed is not None:
        return reindexed
    computed = set(corr.same) | {n for pair in corr.decomposed.values() for n in pair}
    if computed_through(tgt, name, computed) is not None:
        back = next(
            (b.name for b in tgt.blocks if name in b.reads() and name not in b.writes() and b.name not in corr.same),
            None,
        )
        if back is None:
            raise Unreachable(  # the copy back may be inlined into a consumer: the engine's reading, no proof
                f"the target computes into {name} and the engine finds no block that copies it back", "unread"
            )
        return Stage("cache_write", name, scope, back)
    return Stage("cache_read", name, scope, writer.name)


def computed_through(tgt: FuncView, buffer: str, computed: set[str]) -> tuple[Block, str] | None:
    """The block of ``computed`` that computes ``buffer`` in the target, directly or through copies
    (a cache_write of a cache_write: the block writes ``B_shared_local``, copied to ``B_shared``), and
    the buffer it writes; None when a block of another kind writes it."""
    seen: set[str] = set()
    while buffer not in seen:
        seen.add(buffer)
        writers = [b for b in tgt.blocks if buffer in b.writes()]
        if not writers:
            return None
        writer = next((b for b in writers if b.name in computed), writers[0])  # an update, not its init
        if writer.name in computed:
            return writer, buffer
        inputs = [r for r in writer.reads() if r not in writer.writes()]
        if len(inputs) != 1 or not inputs[0].startswith(f"{buffer}_") or writer.name != inputs[0]:
            return None
        buffer = inputs[0]
    return None


def _reindex_stage(
    name: str, scope: str, tgt: FuncView, cur: FuncView, writer: Block, corr: Correspondence
) -> Stage | None:
    """``reindex``: a buffer ``X_reindex`` laid out by the iterators of the one block that reads
    (or writes) ``X``, and the block that copies between the two."""
    if not name.endswith("_reindex") or cur.buffer(name[: -len("_reindex")]) is None:
        return None
    old = name[: -len("_reindex")]
    if writer.name in corr.same or any(writer.name in pair for pair in corr.decomposed.values()):
        copy = next((b for b in tgt.blocks if name in b.reads() and old in b.writes()), None)
        return Stage("reindex", name, scope, copy.name, old) if copy is not None else None
    if old in writer.reads():
        return Stage("reindex", name, scope, writer.name, old)
    return None


def _layout_changes(cur: FuncView, tgt: FuncView, cur_bufs: dict, tgt_bufs: dict, corr: Correspondence) -> list[Stage]:
    """Buffers both programs have, laid out otherwise in the target (``transform_layout``): another
    shape, or the same block indexing them otherwise."""
    import tvm_ffi

    out = []
    rolled = {tgt.block(b).writes()[i] for b, i in rolled_blocks(tgt).items()}  # type: ignore[union-attr]
    indexed = {s.old for s in corr.stages if s.primitive == "cache_index"}  # indices read from a buffer
    for name in [n for n in cur_bufs if n in tgt_bufs and n not in rolled]:  # rolling_buffer folds these
        for tb in tgt.blocks:
            cb = cur.block(corr.same.get(tb.name, "") or _update_of(tb.name, corr))
            if cb is None or tb.scope is not None or tb.name in indexed:  # a blockized one iterates its pieces
                continue
            if iterators_permuted(cb, tb):  # the block iterates otherwise, its buffers stay as they are
                break
            mine, theirs = accesses(cb, name), accesses(tb, name)
            if not mine or not theirs or len(cb.block.iter_vars) != len(tb.block.iter_vars):
                continue
            same = _same_shape(cur_bufs[name], tgt_bufs[name]) and bool(
                tvm_ffi.structural_equal(
                    [_used_vars(cb, mine), [i for _, ix in mine for i in ix]],
                    [_used_vars(tb, theirs), [i for _, ix in theirs for i in ix]],
                    map_free_vars=True,
                )
            )
            if not same and not _same_by_loops(cur, cb, mine, tgt, tb, theirs):
                out.append(Stage("transform_layout", name, str(tgt_bufs[name].scope()), tb.name))
            break
    return out


def _same_by_loops(cur: FuncView, cb: Block, mine: list, tgt: FuncView, tb: Block, theirs: list) -> bool:
    """Whether the block indexes the buffer alike here and in the target once each iterator is taken
    as the loop it is bound to (the target only reorders the block's iterators)."""
    import tvm_ffi

    a, b = by_loop_depth(cur, cb), by_loop_depth(tgt, tb)
    if a is None or b is None:
        return False
    return bool(
        tvm_ffi.structural_equal(
            [a, [i for _, ix in mine for i in ix]], [b, [i for _, ix in theirs for i in ix]], map_free_vars=True
        )
    )


def _used_vars(block: Block, found: list[tuple[str, list[Any]]]) -> list[Any]:
    """The block's iterators that index the buffer, in the block's order (an rfactor's final block
    puts the partial sums' iterator first; the buffer's layout is the same)."""
    indices = [i for _, ix in found for i in ix]
    used = []
    for iv in block.block.iter_vars:
        if any(_mentions(i, iv.var) for i in indices):
            used.append(iv.var)
    return used


def _mentions(expr: Any, var: Any) -> bool:
    if expr.same_as(var):
        return True
    subs = [getattr(expr, a, None) for a in ("a", "b", "value")] + list(getattr(expr, "args", None) or [])
    return any(_mentions(x, var) for x in subs if x is not None and hasattr(x, "same_as"))


def _permuted_blocks(cur: FuncView, tgt: FuncView, corr: Correspondence, laid_out: set[str]) -> list[Stage]:
    """Blocks whose iterators the target reorders (``transform_block_layout`` to as many
    iterators), read off the buffers whose layout stays as it is."""
    out = []
    if any(s.primitive == "rfactor" for s in corr.stages):
        return out  # an rfactor gives its final block the partial sums' iterators
    for tb in tgt.blocks:
        cb = cur.block(corr.same.get(tb.name, ""))
        if cb is None or tb.scope is not None or len(cb.block.iter_vars) != len(tb.block.iter_vars):
            continue
        try:
            reads = read_as(cb, tb, skip=laid_out)
        except LookupError:
            continue
        if _a_permutation(reads, tb):
            out.append(Stage("transform_block_layout", "", "", tb.name))
    return out


def _a_permutation(reads: list[Any], tb: Block) -> bool:
    """Whether the program's iterators are the target's in another order (each read as one of the
    target's iterators, unit ones aside, and not all in place)."""
    tvars = [iv.var for iv in tb.block.iter_vars]
    pairs = [(k, r) for k, (r, iv) in enumerate(zip(reads, tb.block.iter_vars)) if const(iv.dom.extent) != 1]
    if not pairs or not all(any(r.same_as(v) for v in tvars) for _, r in pairs):
        return False
    return any(not r.same_as(tvars[k]) for k, r in pairs)


def _block_layout_changes(cur: FuncView, tgt: FuncView, corr: Correspondence) -> list[Stage]:
    """Blocks whose iterators the target changed (``transform_block_layout``): another number of
    them, each of the program's read through the target's as an expression."""
    out = []
    for tb in tgt.blocks:
        cb = cur.block(corr.same.get(tb.name, ""))
        if cb is None or tb.scope is not None or any(s.primitive == "rfactor" for s in corr.stages):
            continue  # an rfactor gives its final block the partial sums' iterators
        if len(cb.block.iter_vars) != len(tb.block.iter_vars):
            out.append(Stage("transform_block_layout", "", "", tb.name))
    return out


def _update_of(name: str, corr: Correspondence) -> str:
    for block, (_, update) in corr.decomposed.items():
        if update == name:
            return block
    return ""


def scope_of(view: FuncView, buffer: str) -> str:
    buf = view.buffer(buffer)
    return str(buf.scope()) if buf is not None else "global"


def _base(name: str, tgt: FuncView) -> str:
    """The block ``decompose_reduction`` split into ``name`` (X for X_init / X_update), else ``name``."""
    for suffix in ("_init", "_update"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and tgt.block(f"{base}_init") is not None and tgt.block(f"{base}_update") is not None:
            return base
    return name


def _same_shape(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    return [const(x) for x in a.shape] == [const(x) for x in b.shape] and str(a.dtype) == str(b.dtype)


# --- placements --------------------------------------------------------------------------------------


@dataclass
class Attach:
    block: str  # target block name
    loop: int | None  # the target loop it sits under (pre-order place); None: its own nest
    primitive: str  # "compute_at" | "reverse_compute_at" | "" (the owner)
    own: list[int]  # its own loops in the target (pre-order places), outermost first


@dataclass
class Placement:
    """One way the target's nests arise: per nest, the owner first, then the blocks moved into it
    in an order TVM accepts."""

    order: list[Attach]
    cost: int


def _entities(tgt: FuncView, corr: Correspondence) -> list[Block]:
    """The target's blocks that own or join loops: an init block goes with its update block."""
    inits = {pair[0] for pair in corr.decomposed.values()}
    return [b for b in tgt.blocks if b.name not in inits and b.scope is None]


def placements(tgt: FuncView, corr: Correspondence, limit: int = 4) -> list[Placement]:
    """The ways the target's nests can arise, cheapest first (at most ``limit``)."""
    blocks = _entities(tgt, corr)
    nests: dict[int | None, list[Block]] = {}
    for b in blocks:
        top = b.chain[0] if b.chain else None
        nests.setdefault(top if top is not None else -1 - b.order, []).append(b)
    per_nest = [_nest_choices(tgt, members) for members in nests.values()]
    # the cheapest choice of every nest first; then, one nest at a time, its next choice
    base = [choices[0] for choices in per_nest]
    out = [Placement([a for c in base for a in c[1]], sum(c[0] for c in base))]
    for n, choices in enumerate(per_nest):
        for alt in choices[1:]:
            picked = base[:n] + [alt] + base[n + 1 :]
            out.append(Placement([a for c in picked for a in c[1]], sum(c[0] for c in picked)))
    out.sort(key=lambda p: p.cost)
    return out[:limit]


def _nest_choices(tgt: FuncView, members: list[Block]) -> list[tuple[int, list[Attach]]]:
    if len(members) == 1:
        b = members[0]
        return [(0, [Attach(b.name, None, "", list(b.chain))])]
    choices = []
    for owner in members:
        plan = _with_owner(tgt, owner, members)
        if plan is not None:
            choices.append(plan)
    if not choices:
        names = ", ".join(dict.fromkeys(b.name for b in members))
        raise Unreachable(  # the engine's reading of owners and moves, not a proof that no primitive makes it
            f"no block of {names} owns the loops they share in the target, as the engine reads owners and moves",
            "unread",
        )
    choices.sort(key=lambda c: c[0])
    return choices


def _with_owner(tgt: FuncView, owner: Block, members: list[Block]) -> tuple[int, list[Attach]] | None:
    """The blocks moved into ``owner``'s nest: the shallower first (of two as deep, the one earlier in
    the target owns the loops they share), else the later one first (a producer moved under its
    consumer's loop), else in the target's order or against it (dlight's reductions: every block
    moved after the first, each owning the loops it shares with those after it)."""
    if not _references_all(tgt, owner, owner.chain):
        return None
    others = [m for m in members if m is not owner]
    keys = (
        lambda m: (len(m.chain), m.order),
        lambda m: (len(m.chain), -m.order),
        lambda m: m.order,  # in the target's order: each block owns what it shares with the later ones
        lambda m: -m.order,
    )
    for key in keys:
        plan = _owner_plan(tgt, owner, sorted(others, key=key))
        if plan is not None:
            return plan
    return None


def _owner_plan(tgt: FuncView, owner: Block, others: list[Block]) -> tuple[int, list[Attach]] | None:
    owned = set(owner.chain)
    attaches = [Attach(owner.name, None, "", list(owner.chain))]
    cost = _tiling_cost(tgt, owner, owner.chain, canonical=None)
    for b in others:
        shared = [o for o in b.chain if o in owned]
        if not shared:
            return None
        att = shared[-1]
        own = b.chain[b.chain.index(att) + 1 :]
        if not _references_all(tgt, b, own):
            return None
        owned.update(own)
        attaches.append(Attach(b.name, att, "", own))
        cost += 1 + _tiling_cost(tgt, b, own, canonical=True)
    ordered = _attach_order(tgt, attaches) or _attach_order(tgt, attaches, by_reads=True)
    if ordered is None:
        return None
    return cost, ordered


def _references_all(tgt: FuncView, block: Block, own: list[int]) -> bool:
    maps = iter_maps(tgt, block, own)
    if maps is None:
        return False
    used = {t.leaf for ts in maps.terms for t in ts} | {x.leaf for f in maps.fused for x in f.terms}
    return all(o in used or const(tgt.loops[o].extent) == 1 for o in own)


def _tiling_cost(tgt: FuncView, block: Block, own: list[int], canonical: bool | None) -> int:
    """About how many primitives make ``own`` from one loop per iterator in the iterators' order."""
    maps = iter_maps(tgt, block, own)
    if maps is None:
        return 99
    cost = sum(1 for ts in maps.terms if len(ts) > 1) + 2 * len(maps.fused)
    leaves: dict[int, int] = {}
    for ts in maps.terms:
        for t in ts:
            if t.leaf is not None:
                leaves[t.leaf] = leaves.get(t.leaf, 0) + 1
    cost += sum(1 for n in leaves.values() if n > 1)
    first = [min((own.index(t.leaf) for t in ts if t.leaf is not None), default=-1) for ts in maps.terms]
    seen = [f for f in first if f >= 0]
    if seen != sorted(seen):
        cost += 1
    if canonical and any(const(tgt.loops[o].extent) == 1 for o in own):
        cost += 0  # unit loops come from preserve_unit_loops, at no extra step
    return cost


def _attach_order(tgt: FuncView, attaches: list[Attach], by_reads: bool = False) -> list[Attach] | None:
    """Name each move (producer: compute_at, consumer: reverse_compute_at) and order them so that a
    block moves after the blocks it must follow there (its consumers, resp. producers). ``by_reads``:
    a block that reads what another of the nest writes is a consumer (dlight's reductions: every
    block after the first moved after it), and a block moves after the one whose loop it joins."""
    under = {a.block for a in attaches}
    by_name = {a.block: a for a in attaches}
    writes = {name: set(tgt.block(name).writes()) for name in under}  # type: ignore[union-attr]
    reads = {name: set(tgt.block(name).reads()) for name in under}  # type: ignore[union-attr]
    for a in attaches[1:]:
        siblings = [b.name for b in tgt.blocks_under(tgt.loops[a.loop]) if b.name != a.block]  # type: ignore[index]
        produces = any(writes[a.block] & set(tgt.block(s).reads()) for s in siblings)  # type: ignore[union-attr]
        if by_reads:
            produces = not any(reads[a.block] & writes[b] for b in under if b != a.block)
        a.primitive = "compute_at" if produces else "reverse_compute_at"
    done = [attaches[0]]
    pending = attaches[1:]
    while pending:
        for a in pending:
            if a.primitive == "compute_at":
                waits = [b for b in under if b != a.block and writes[a.block] & reads[b]]
            else:
                waits = [b for b in under if b != a.block and reads[a.block] & writes[b]]
            if by_reads:
                waits += [b.block for b in attaches[1:] if b is not a and a.loop in b.own]
            if all(by_name[w] in done for w in waits):
                done.append(a)
                pending.remove(a)
                break
        else:
            # a consumer that owns no loop waits on a producer that waits on it: the program can only
            # keep that consumer under the owner's loops already (its move is then no step at all)
            bare = [a for a in pending if not a.own and a.primitive == "reverse_compute_at"]
            if not bare:
                return None
            done.append(bare[0])
            pending.remove(bare[0])
    return done


def rolled_blocks(tgt: FuncView) -> dict[str, int]:
    """The target's blocks that ``rolling_buffer`` made: an opaque iterator, and a buffer of the
    function written at an index folded by ``%`` (block -> the buffer's place among its writes)."""
    out: dict[str, int] = {}
    allocated = {str(b.name) for b in tgt.allocs()}
    for tb in tgt.blocks:
        if int(tirx.IterVar.Opaque) not in tb.iter_kinds:
            continue
        for index, name in enumerate(tb.writes()):
            stores = [ix for kind, ix in accesses(tb, name) if kind == "write"]
            if name in allocated and any(isinstance(i, tirx.FloorMod) for ix in stores for i in ix):
                out[tb.name] = index
                break
    return out


def loads(node: Any, name: str) -> bool:
    """Whether a statement or expression loads buffer ``name`` anywhere, in the indices of another
    load too (``A[n, index_var_0[vi]]``: what ``cache_index`` writes)."""
    if isinstance(node, tvm.ir.TensorLoad):
        return str(node.source.name) == name or any(loads(i, name) for i in node.indices)
    if isinstance(node, tirx.SeqStmt):
        return any(loads(sub, name) for sub in node.seq)
    subs = [getattr(node, f, None) for f in ("a", "b", "value", "condition", "true_value", "false_value", "body")]
    subs += [getattr(node, f, None) for f in ("then_case", "else_case")] + list(getattr(node, "indices", None) or [])
    subs += list(getattr(node, "args", None) or [])
    return any(sub is not None and hasattr(sub, "same_as") and loads(sub, name) for sub in subs)
