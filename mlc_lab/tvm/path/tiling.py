"""The loops of one block, from how they are to how the target has them: splits, a reorder and fuses,
read off the target's iterator bindings with TVM's iter-map analysis.

Every block iterator is a sum of terms over loops (``ir.iter_maps``). Read from the target, the terms
of an iterator, outermost first, are the factors its loop is split into; a loop that several terms
share is a fuse of those pieces (split, then fuse: ``j_0`` with ``i_0`` into one bound loop); a mark
that several iterators slice is a fuse of their loops split again (fuse, then split: the copy loops
of a cooperative fetch). The order of the target's loops is the order of the reorder. Read from the
program as it is, the same terms say what is done already: a loop split as the target wants is split
no further, and a loop that is no piece of the target's cannot be undone (the way goes back first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlc_lab.tvm.path import padfuse, unitpad
from mlc_lab.tvm.path.ir import Block, FuncView, IterMaps, Term, const, iter_maps, outer_first
from mlc_lab.tvm.path.work import Unreachable, Work


@dataclass
class Apart:
    """A target loop whose pieces ``tile`` leaves unfused (blocks move in first): ``count`` loops
    here; for a mark, the ``factors`` its fuse is split by into the target's loops ``leaves``."""

    count: int
    factors: list[Any] | None = None
    leaves: list[int] = field(default_factory=list)


@dataclass
class _Piece:
    k: int  # the block iterator
    term: Term  # the target's term it becomes
    fused_from: int | None = None  # a term of fused mark ``fused_from`` (made by the fuse-then-split)


def _by_scale(terms: list[Term], place: dict[int, int], maps: IterMaps | None = None) -> list[Term]:
    """Terms outermost first: by scale, ties (unit pieces) by where their loop is; a unit piece of
    the scale of a longer piece sits inside it (a split's last factor 1: dlight's ``[None, 4, 1]``)."""

    def where(t: Term) -> int:
        if t.leaf is not None:
            return place.get(t.leaf, 0)
        if maps is not None and t.fused is not None:
            return min((place.get(x.leaf, 0) for x in maps.fused[t.fused].terms if x.leaf is not None), default=0)
        return 0

    if all(const(t.scale) is not None for t in terms):
        return sorted(terms, key=lambda t: (-const(t.scale), const(t.extent) == 1, where(t)))  # type: ignore[operator]
    return sorted(terms, key=where)


def tile(
    work: Work,
    block: str,
    own: list[int],
    tgt: FuncView,
    tblock: Block,
    town: list[int],
    late: bool = False,
    values: list[Any] | None = None,
    mine: list[Any] | None = None,
    apart: frozenset[int] = frozenset(),
) -> dict[int, "Apart"]:
    """Make the loops ``own`` (pre-order places) of ``block`` into the target's loops ``town`` around
    ``tblock`` (whose bindings are ``values`` when given: a block inside a blockized one), each step
    saying what of the target it makes. ``late`` is the second try where the first leaves a real
    choice wrong: unit pieces matched to the last unit loops here (``_align``), and unit loops no
    iterator reads split off a loop instead of added (``_unit_loops``). ``mine``: the bindings
    here in the place of the block's own (a block with no iterators: its inner block's). ``apart``:
    the target's loops blocks move into: the serial ones' pieces and a fuse-then-split's slices are
    left unfused (fused later, once the blocks sit inside); returns those, by their first loop. Raises ``Unreachable``."""
    tmaps = iter_maps(tgt, tblock, town, values)
    view = work.view
    cblock = view.block(block)
    assert cblock is not None
    cmaps = iter_maps(view, cblock, own, mine)
    if tmaps is None:
        # primitives keep affine bindings affine: only a program already otherwise leaves it open
        raise Unreachable(
            f"the loops around block {tblock.name} in the target are not affine in its iterators",
            "no_primitive" if cmaps is not None else "unread",
        )
    if cmaps is None:
        raise Unreachable(f"the loops around block {block} are not affine in its iterators")
    if len(cmaps.terms) != len(tmaps.terms):
        raise Unreachable(
            f"block {block} has {len(cmaps.terms)} iterators here, {len(tmaps.terms)} in the target (an iteration"
            " space laid out otherwise: reindex, transform_block_layout)",
            "unread",
        )
    if values is None:
        _no_primitive_makes(tgt, tblock, town, tmaps, cmaps)
        added = unitpad.fuse_then_pad(work, view, cblock, cmaps, tblock, tmaps) if mine is None else 0
        if not added and mine is None:
            added = padfuse.split_then_fuse(work, view, cblock, cmaps, tgt, tblock, tmaps)
        if added:
            chain = work.view.chain(work.view.block(block))  # type: ignore[arg-type]
            own = [lp.order for lp in chain[len(chain) - len(own) - added :]]
            return tile(work, block, own, tgt, tblock, town, late, values, mine, apart)
    tplace = {o: i for i, o in enumerate(town)}
    cplace = {o: i for i, o in enumerate(own)}
    if _same_structure(cmaps, tmaps, cplace, tplace):
        return {}
    unread_here, unread_there = _unread(view, own, cmaps, block), _unread(tgt, town, tmaps, tblock.name)
    added_only = {o for o in unread_there if _added_unit(tgt, o, view, own)}
    unread_there = [o for o in unread_there if o not in added_only]
    if len(unread_there) > len(unread_here):
        added = _lone_from_orphan(work, view, own, cmaps, tmaps, len(unread_there) - len(unread_here), tblock.name)
        if added is not None:  # a unit loop the target fuses away became its unit loops: read again
            chain = work.view.chain(work.view.block(block))  # type: ignore[arg-type]
            own = [lp.order for lp in chain[len(chain) - len(own) - added :]]
            return tile(work, block, own, tgt, tblock, town, late, values, mine, apart)
    kept = dict(zip(unread_here, unread_there))
    lone, fused = _unit_loops(tgt, town, tmaps, tblock.name, set(kept.values()), late, added_only)
    marks: dict[int, int] = {}
    done = _done_leaves(view, own, cmaps, tgt, town, tmaps, tplace, cplace, marks)
    done.update(kept)
    done_rvs = {o: work.loop_rv(o) for o in done}
    mark_rvs = {f: work.loop_rv(o) for o, f in marks.items()}
    say = _Say(tgt, tblock.name, town)
    pieces = _split_iterators(work, view, cmaps, tmaps, tplace, cplace, done, say, late, marks)
    pieces["marks_done"] = mark_rvs
    pieces["apart"] = apart
    pieces["own"] = own
    _fuse_then_split(work, tmaps, town, tplace, pieces, say)
    pieces["own"] = own
    pieces["block"] = block
    pieces["extents"] = {o: tgt.loops[o].extent for o in town}
    pieces["serial"] = {o for o in town if tgt.loops[o].kind == "serial"}
    return _reorder_and_fuse(work, tmaps, town, pieces, {done_rvs[c]: t for c, t in done.items()}, (lone, fused), say)


def _no_primitive_makes(tgt: FuncView, tblock: Block, town: list[int], tmaps: IterMaps, cmaps: IterMaps) -> None:
    """Loops no primitive makes: one that runs backwards, one that starts elsewhere than 0, an
    iterator offset by a constant in a block that sits in its own loops (unless the program's
    iterator has that offset already: ``cmaps``)."""
    for ts in tmaps.terms:
        for t in ts:
            if (const(t.scale) or 0) < 0 and t.leaf is not None:
                loop = tgt.loops[t.leaf]
                raise Unreachable(
                    f"loop {loop.name} runs backwards around block {tblock.name} in the target", "no_primitive"
                )
    for o in town:
        if const(tgt.loops[o].node.min) != 0:
            raise Unreachable(f"loop {tgt.loops[o].name} does not start at 0 in the target", "no_primitive")
    if len(town) == len(tblock.chain):
        for k, base in enumerate(tmaps.bases):
            mine = cmaps.bases[k] if k < len(cmaps.bases) else 0
            if const(base) not in (0, None) and const(base) != const(mine):
                raise Unreachable(
                    f"iterator {k} of block {tblock.name} is offset by {const(base)} in the target", "no_primitive"
                )


def _same_structure(cmaps: IterMaps, tmaps: IterMaps, cplace: dict, tplace: dict) -> bool:
    """The loops are already as the target's: the same terms over loops at the same places."""
    if len(cplace) != len(tplace) or len(cmaps.fused) != len(tmaps.fused):
        return False

    def key(t: Term, place: dict) -> tuple:
        return (place.get(t.leaf), t.fused, str(t.lower), str(t.extent), str(t.scale))

    for cf, tf in zip(cmaps.fused, tmaps.fused):
        if [key(t, cplace) for t in cf.terms] != [key(t, tplace) for t in tf.terms]:
            return False
    return all([key(t, cplace) for t in c] == [key(t, tplace) for t in t_] for c, t_ in zip(cmaps.terms, tmaps.terms))


def _lone_from_orphan(
    work: Work, view: FuncView, own: list[int], cmaps: IterMaps, tmaps: IterMaps, n: int, block: str
) -> int | None:
    """The target's unit loops that no iterator reads, made from a unit loop here whose iterator the
    target reads as a constant: fuse it alone (its variable goes), split into ``n`` when it must be
    several. Returns the loops added, or None when there is no such loop here."""
    for k, terms in enumerate(cmaps.terms):
        if tmaps.terms[k] or len(terms) != 1 or terms[0].leaf is None or const(terms[0].extent) != 1:
            continue
        loop = view.loops[terms[0].leaf]
        why = f"the target's unit loops around block {block} hold no iterator: {loop.name} becomes them"
        fused = work.apply("fuse", why, loops=[work.loop_rv(loop.order)])
        if n > 1:
            work.apply("split", why, loop=fused, factors=[1] * n)
        return n - 1
    return None


def _unread(view: FuncView, own: list[int], maps: IterMaps, name: str) -> list[int]:
    """The loops no iterator of the block reads: each must have extent 1 (a unit piece fused away)."""
    used = {t.leaf for ts in maps.terms for t in ts} | {x.leaf for f in maps.fused for x in f.terms}
    out = [o for o in own if o not in used]
    for o in out:
        if const(view.loops[o].extent) != 1:
            raise Unreachable(  # a block inside another, an opaque one, a repeated compute_at: not a proof
                f"loop {view.loops[o].name} around block {name} is no piece of its iterators", "unread"
            )
    return out


def _unit_loops(
    tgt: FuncView, town: list[int], tmaps: IterMaps, name: str, kept: set[int], split: bool, only_added: set[int]
) -> tuple[set[int], set[int]]:
    """The target's loops no iterator reads and no loop here matches: a loop of extent 1 (a unit
    piece fused away, its variable simplified out, or one ``add_unit_loop`` made); any other is
    refused. Made by ``add_unit_loop`` once the other loops are in place (the first set), or, with
    ``split``, split off an iterator (the next loop's, as its outermost term) and fused alone (the
    second set: a loop split with padding needs its outer unit piece so; never ``only_added``)."""
    used = {t.leaf for ts in tmaps.terms for t in ts} | {x.leaf for f in tmaps.fused for x in f.terms}
    added, fused = set(), set()
    for n, o in enumerate(town):
        if o in used or o in kept:
            continue
        loop = tgt.loops[o]
        if const(loop.extent) != 1:
            raise Unreachable(
                f"loop {loop.name} around block {name} in the target is no piece of the block's iterators",
                "unread",
            )
        if not split or not tmaps.terms or o in only_added:
            added.add(o)
            continue
        k = _iterator_near(tmaps, town, n)
        top = 1
        for t in tmaps.terms[k]:
            top = max(top, (const(t.scale) or 1) * (const(t.extent) or 1))
        tmaps.terms[k] = [Term(o, None, 1, 1, top)] + list(tmaps.terms[k])
        fused.add(o)
    return added, fused


def _added_unit(tgt: FuncView, o: int, view: FuncView, own: list[int]) -> bool:
    """A unit loop of the target that only ``add_unit_loop`` makes: its variable is an int32 one
    where the loops here are of another type (no split or fuse of theirs gives an int32 loop)."""
    loop = tgt.loops[o]
    kinds = {str(view.loops[x].var.ty) for x in own}
    return const(loop.extent) == 1 and str(loop.var.ty) == "int32" and bool(kinds) and "int32" not in kinds


def _iterator_near(tmaps: IterMaps, town: list[int], n: int) -> int:
    """The iterator of the first loop after place ``n`` that one reads (else before it; else 0)."""
    for o in town[n + 1 :] + town[:n][::-1]:
        for k, ts in enumerate(tmaps.terms):
            if any(t.leaf == o for t in ts):
                return k
    return 0


def _signature(terms: list[tuple[int, Term]]) -> list[tuple[int, Any, Any]]:
    return [(k, const(t.scale), const(t.extent)) for k, t in sorted(terms, key=lambda kt: -(const(kt[1].lower) or 0))]


def _done_leaves(
    view: FuncView,
    own: list[int],
    cmaps: IterMaps,
    tgt: FuncView,
    town: list[int],
    tmaps: IterMaps,
    tplace: dict,
    cplace: dict,
    marks: dict[int, int],
) -> dict[int, int]:
    """Loops that fuse pieces already: each must be one of the target's loops (its order -> the
    target loop's order), or the fuse the target splits again (into ``marks``: its order -> the
    mark's index); a fuse that the target does not have cannot be undone."""
    if cmaps.fused:
        raise Unreachable("a loop here is a fuse split again, and the target's loops are not that fuse")
    uses: dict[int, list[tuple[int, Term]]] = {}
    for k, ts in enumerate(cmaps.terms):
        for t in ts:
            uses.setdefault(t.leaf, []).append((k, t))  # type: ignore[arg-type]
    tuses: dict[int, list[tuple[int, Term]]] = {}
    for k, ts in enumerate(tmaps.terms):
        for t in ts:
            if t.leaf is not None:
                tuses.setdefault(t.leaf, []).append((k, t))
    done: dict[int, int] = {}
    for o, us in uses.items():
        if len(us) == 1 and const(us[0][1].lower) == 1 and _same_extent(us[0][1].extent, view.loops[o].extent):
            continue  # a simple loop: one piece of one iterator
        mark = _fused_mark(us, tmaps)
        if mark is not None:  # the fuse the target splits again: made already
            marks[o] = mark
            continue
        sig = _signature(us)
        match = [to for to, tus in tuses.items() if _signature(tus) == sig and to not in done.values()]
        if not match:
            raise Unreachable(f"loop {view.loops[o].name} fuses pieces that no loop of the target fuses")
        done[o] = match[0]
    return done


def _fused_mark(uses: list[tuple[int, Term]], tmaps: IterMaps) -> int | None:
    """The target's fused mark whose slices are exactly this loop's pieces, if one is."""
    mine = sorted((k, str(t.lower), str(t.extent), str(t.scale)) for k, t in uses)
    for f in range(len(tmaps.fused)):
        theirs = sorted(
            (k, str(t.lower), str(t.extent), str(t.scale))
            for k, ts in enumerate(tmaps.terms)
            for t in ts
            if t.fused == f
        )
        if mine == theirs:
            return f
    return None


def _same_extent(a: Any, b: Any) -> bool:
    ca, cb = const(a), const(b)
    if ca is not None or cb is not None:
        return ca == cb
    return str(a) == str(b)


def _split_iterators(
    work: Work,
    view: FuncView,
    cmaps: IterMaps,
    tmaps: IterMaps,
    tplace: dict,
    cplace: dict,
    done: dict[int, int],
    say: "_Say",
    late: bool,
    marks: dict[int, int],
) -> dict[tuple, Any]:
    """Split each loop that holds several of the target's pieces; return each target term's loop
    handle, keyed ("term", k, index) for iterator terms."""
    handles: dict[tuple, Any] = {}
    done_target = set(done.values())
    rvs_of = {o: work.loop_rv(o) for o in cplace}  # before any split moves the places
    for k, cterms in enumerate(cmaps.terms):
        cur = [t for t in _by_scale(cterms, cplace) if t.leaf not in done and t.leaf not in marks]
        want = [
            t
            for t in _by_scale(tmaps.terms[k], tplace, tmaps)
            if (t.leaf is None or t.leaf not in done_target) and t.fused not in marks.values()
        ]
        runs, orphans = _align(cur, want, view, late)
        if orphans:
            handles.setdefault("orphans", []).extend((cur[i].leaf, rvs_of[cur[i].leaf]) for i in orphans)
        for n, c in enumerate(cur):
            run = runs.get(n, [])
            if not run:
                continue
            rv = rvs_of[c.leaf]  # type: ignore[index]
            if len(run) > 1:
                factors = _factors([want[j] for j in run], view.loops[c.leaf].extent)  # type: ignore[index]
                leaves = [want[j].leaf for j in run]
                rvs = work.apply("split", say.split(view.loops[c.leaf].name, factors, leaves), loop=rv, factors=factors)  # type: ignore[index]
            else:
                rvs = [rv]
            for index, piece in zip(run, rvs):
                handles[("term", k, index)] = piece
            handles[("from", c.leaf)] = (rvs[0], rvs[-1])
        for index in range(len(want)):
            if ("term", k, index) not in handles:
                raise Unreachable("a piece of the target's loops has no loop here to come from")
        handles[("want", k)] = want
    return handles


def _align(
    cur: list[Term], want: list[Term], view: FuncView, late: bool = False
) -> tuple[dict[int, list[int]], list[int]]:
    """Which of the target's pieces (indices into ``want``, outermost first) each loop here holds,
    and the loops here of extent 1 that the target has no piece for (fused away later).

    Pieces of extent 1 are matched apart: to a unit loop here at the same scale (the first such, or
    with ``late`` the last: which one is a real choice), else split off the loop here whose range
    holds their scale."""
    runs: dict[int, list[int]] = {}
    consts = all(const(t.extent) is not None for t in cur + want)
    cn = [i for i, c in enumerate(cur) if not consts or const(c.extent) != 1]
    cu = [i for i in range(len(cur)) if i not in cn]
    wn = [j for j, t in enumerate(want) if not consts or const(t.extent) != 1]
    wu = [j for j in range(len(want)) if j not in wn]
    if not cn and wn:
        if not cu:
            raise Unreachable("the target iterates an axis that has no loop here")
        # a loop of extent 1 split with padding (split(b, [None, 64]) under a predicate)
        runs[cu[0]] = sorted(wn + wu)
        return runs, cu[1:]
    j = 0
    for n, i in enumerate(cn):
        need, prod, run = const(cur[i].extent), 1, []
        last = n == len(cn) - 1
        while j < len(wn) and (last or not run or (consts and prod < need)):  # type: ignore[operator]
            run.append(wn[j])
            prod = prod * const(want[wn[j]].extent) if consts else prod  # type: ignore[operator]
            j += 1
        runs[i] = run
    free = list(cu)
    by_scale: dict[Any, list[int]] = {}
    for j in wu:
        by_scale.setdefault(const(want[j].scale), []).append(j)
    for scale, js in by_scale.items():
        equal = [i for i in free if const(cur[i].scale) == scale]
        chosen = (equal[-len(js) :] if late else equal[: len(js)]) if equal else []
        for j, i in zip(js, chosen):
            runs[i] = [j]
            free.remove(i)
        for j in js[len(chosen) :]:
            host = next((i for i in cn + cu if _covers(cur[i], scale)), None)
            host = cn[0] if host is None and cn else host
            if host is None:
                raise Unreachable("a unit loop of the target has no loop here to come from")
            runs[host] = sorted(runs.get(host, []) + [j])
    for i in cn if consts else []:
        need, prod = const(cur[i].extent), 1
        for j in runs[i]:
            prod *= const(want[j].extent)  # type: ignore[operator]
        if prod != need and not (prod > need and len(runs[i]) > 1):  # type: ignore[operator]
            loop = view.loops[cur[i].leaf].name  # type: ignore[index]
            raise Unreachable(f"loop {loop} has extent {need}, which the target's pieces do not split evenly")
    return runs, free


def _covers(c: Term, scale: Any) -> bool:
    """Whether a piece at ``scale`` can be split off the loop of term ``c``."""
    low = const(c.scale) or 1
    return low <= (scale or 1) <= low * max(const(c.extent) or 1, 1)


def _factors(terms: list[Term], extent: Any) -> list[Any]:
    factors: list[Any] = [const(t.extent) for t in terms]
    prod = 1
    for f in factors:
        prod = prod * f if isinstance(f, int) and isinstance(prod, int) else None
    if factors.count(None) == 1 and factors[0] is not None:
        return factors  # one symbolic piece (ceildiv of a symbolic extent): TVM infers it, padding with a predicate
    whole = const(extent)
    if None not in factors and whole is not None and len(factors) > 1 and prod != whole:
        inner = prod // factors[0]
        if factors[0] != -(-whole // inner):  # more outer pieces than the extent needs: TVM pads them too
            return factors
    if None in factors or const(extent) is None or prod != const(extent):
        # the outermost factor follows from the others (TVM pads with a predicate when it must)
        factors[0] = None
    return factors


def _fuse_then_split(work: Work, tmaps: IterMaps, town: list[int], tplace: dict, handles: dict, say: "_Say") -> None:
    """Marks that several iterators slice: fuse those slices, then split the fused loop."""
    if not tmaps.fused:
        return
    for f, mark in enumerate(tmaps.fused):
        slices = [
            (t, handles[("term", k, i)])
            for k in range(len(tmaps.terms))
            for i, t in enumerate(handles.get(("want", k), []))
            if t.fused == f and ("term", k, i) in handles
        ]
        chain = outer_first([(t.lower, t.extent) for t, _ in slices])  # a symbolic lower factor too
        if chain is None:
            slices.sort(key=lambda s: -(const(s[0].lower) or 0))
        else:
            slices = [slices[i] for i in chain]
        rvs = [rv for _, rv in slices]
        if f in handles.get("marks_done", {}):
            rvs = [handles["marks_done"][f]]
        inner = _by_scale(mark.terms, tplace)
        if len(rvs) > 1:
            _orphans_into_mark(handles, rvs)
        if len(rvs) > 1 and any(t.leaf in handles.get("apart", ()) for t in inner):
            # blocks move in before the fuse: the slices stay apart, fused and split once they have
            handles[("late", f)] = (rvs, _factors(inner, None), [t.leaf for t in inner])
            continue
        if len(rvs) > 1:
            _reorder_chain(work, rvs, say.reorder())
            fused = work.apply("fuse", say.fuse_split([t.leaf for t in mark.terms]), loops=rvs)
        else:
            fused = rvs[0]
        if len(inner) > 1:
            factors = _factors(inner, None)
            pieces = work.apply(
                "split", say.split("the fused loop", factors, [t.leaf for t in inner]), loop=fused, factors=factors
            )
        else:
            pieces = [fused]
        for index, rv in enumerate(pieces):
            handles[("fused", f, index)] = (inner[index], rv)


def _orphans_into_mark(handles: dict, rvs: list[Any]) -> None:
    """A unit loop here that the target has no piece for, right outside a loop whose piece starts
    the fuse of a mark: fused with it (in place, outside that piece), as a fuse of all the loops is."""
    own, orphans = handles.get("own", []), handles.get("orphans", [])
    mine = {o for o, _ in orphans}
    kept = []
    for o, rv in orphans:
        later = [x for x in own[own.index(o) + 1 :] if x not in mine and ("from", x) in handles]
        at = next((i for i, r in enumerate(rvs) if later and r is handles[("from", later[0])][0]), None)
        if at is None:
            kept.append((o, rv))
        else:
            rvs.insert(at, rv)
    handles["orphans"] = kept


def _outermost_first(pieces: list[tuple[Term, Any, int]]) -> list[tuple[Term, Any, int]]:
    """Pieces of one target loop, outermost first: by their lower factors, symbolic ones as well
    (``n`` is outside ``1`` when the piece inside runs ``n``)."""
    chain = outer_first([(p[0].lower, p[0].extent) for p in pieces])
    if chain is None:
        return sorted(pieces, key=lambda p: -(const(p[0].lower) or 0))
    return [pieces[i] for i in chain]


def _reorder_chain(work: Work, rvs: list[Any], why: str) -> None:
    """Make the loops ``rvs`` adjacent, in this order (one reorder, only when they are not)."""
    orders = [work.order_of(rv) for rv in rvs]
    view = work.view
    consecutive = all(view.loops[b].parent == a for a, b in zip(orders, orders[1:]))
    if not consecutive:
        # a loop between them that is none of them goes after them (a reorder keeps an unlisted
        # loop where it is: the listed ones would stay apart)
        between, o = [], view.loops[max(orders)].parent
        while o is not None and o > min(orders):
            if o not in orders:
                between.append(o)
            o = view.loops[o].parent
        if o != min(orders):
            between = []
        work.apply("reorder", why, ordered_loops=rvs + [work.loop_rv(x) for x in reversed(between)])


def _reorder_and_fuse(
    work: Work, tmaps: IterMaps, town: list[int], handles: dict, done: dict, units: tuple, say: "_Say"
) -> dict[int, "Apart"]:
    """Order the pieces as the target's loops are, then fuse the pieces each target loop is made of
    (but those of the loops ``handles["apart"]``: their piece counts are returned)."""
    by_leaf: dict[int, list[tuple[Any, Any, int]]] = {o: [] for o in town}
    for k in range(len(tmaps.terms)):
        for i, t in enumerate(handles.get(("want", k), [])):
            if t.leaf is not None and ("term", k, i) in handles:
                by_leaf[t.leaf].append((t, handles[("term", k, i)], k))
    for key, value in handles.items():
        if key[0] == "fused":
            term, rv = value
            by_leaf[term.leaf].append((term, rv, -1))
    for o in by_leaf:
        by_leaf[o] = [(const(p[0].lower) or 0, p[1], p[2]) for p in _outermost_first(by_leaf[o])]
    _adopt_orphans(handles, by_leaf, done, handles.get("extents", {}))
    marks_apart: dict[int, Apart] = {}  # the first loop of a mark left apart -> its fuse and split
    for key, value in handles.items():
        if key[0] == "late":
            rvs, factors, leaves = value
            by_leaf[leaves[0]] = [(0, rv, -1) for rv in rvs]
            for leaf in leaves[1:]:
                by_leaf[leaf] = []
            marks_apart[leaves[0]] = Apart(len(rvs), factors, leaves)
    lone, fused = units
    done_rev = {t: rv for rv, t in done.items()}
    sequence, groups = [], []
    final: dict[int, Any] = {}  # target loop -> its loop here once made
    for o in town:
        if o in lone:
            continue
        if o in done_rev:
            sequence.append(done_rev[o])
            final[o] = done_rev[o]
            continue
        pieces = [p[1] for p in by_leaf[o]]
        if not pieces and any(o in a.leaves for a in marks_apart.values()):
            continue  # a loop the split of a mark left apart makes
        if not pieces:
            raise Unreachable("a loop of the target has no pieces here")
        sequence.extend(pieces)
        final[o] = pieces[0]
        if len(pieces) > 1 or o in fused:
            groups.append((o, pieces))
    if len(sequence) > 1:
        orders = [work.order_of(rv) for rv in sequence]
        if orders != sorted(orders) or not _is_chain(work.view, orders):
            # only the loops whose order changes: the loops outside keep their place (and may hold
            # other blocks, which a reorder cannot pass)
            ranked = sorted(orders)
            first = next(i for i in range(len(orders)) if orders[i] != ranked[i] or i + 1 == len(orders))
            last = max(i for i in range(len(orders)) if orders[i] != ranked[i] or i == first)
            if last > first:
                work.apply("reorder", say.reorder(), ordered_loops=sequence[first : last + 1])
    left: dict[int, Apart] = {}
    for leaf, pieces in groups:
        if leaf in marks_apart:
            left[leaf] = marks_apart[leaf]
            continue
        if leaf in handles.get("apart", ()) and leaf in handles.get("serial", ()) and len(pieces) > 1:
            left[leaf] = Apart(len(pieces))
            continue
        final[leaf] = work.apply("fuse", say.fuse(leaf), loops=pieces)
    for n, o in enumerate(town):  # unit loops no iterator reads, each right above the loop after it
        if o in lone:
            after = next((final[x] for x in town[n + 1 :] if x in final), None)
            where = after if after is not None else work.block_rv(handles["block"])
            work.apply("add_unit_loop", say.unit(o), block_or_loop=where)
    return left


def _adopt_orphans(handles: dict, by_leaf: dict, done: dict, units: dict) -> None:
    """A unit loop here that the target has no piece for is fused away: into the target loop made of
    the loop next to it here (before that loop's pieces), else of the loop before it (after them)."""
    orphans = handles.get("orphans", [])
    if not orphans:
        return
    own = handles["own"]
    mine = {o for o, _ in orphans}

    def leaf_holding(rv: Any) -> int | None:
        for leaf, pieces in by_leaf.items():
            if any(p[1] is rv for p in pieces):
                return leaf
        return None

    for o, rv in orphans:
        place = own.index(o)
        later = [x for x in own[place + 1 :] if x not in mine and ("from", x) in handles]
        earlier = [x for x in own[:place] if x not in mine and ("from", x) in handles][::-1]
        # beside the piece of the loop next to it here: right before it, or right after the one before
        homes = [(leaf_holding(handles[("from", x)][0]), handles[("from", x)][0], 0) for x in later]
        homes += [(leaf_holding(handles[("from", x)][1]), handles[("from", x)][1], 1) for x in earlier]
        homes = [h for h in homes if h[0] is not None]
        # a unit loop of the target keeps its variable: fusing into it drops that variable, unless
        # no other is there (a copy's unit loops fused, then split: dlight's gemv copies)
        homes = [h for h in homes if const(units.get(h[0], 2)) != 1] or homes[:1]
        if homes:
            home, anchor, after = homes[0]
            at = next((i for i, p in enumerate(by_leaf[home]) if p[1] is anchor), None)
            if at is None:
                at = 0 if not after else len(by_leaf[home]) - 1
            by_leaf[home].insert(at + after, (0, rv, -1))
            continue
        raise Unreachable("a unit loop here has no loop of the target to be fused into")


class _Say:
    """The sentence each tiling step says: what of the target's loops around the block it makes."""

    def __init__(self, tgt: FuncView, block: str, town: list[int]):
        self.tgt, self.block, self.town = tgt, block, town

    def _loop(self, o: int | None) -> str:
        return "a loop" if o is None else f"{self.tgt.loops[o].name} ({self.tgt.loops[o].extent})"

    def split(self, loop: str, factors: list[Any], leaves: list[int | None]) -> str:
        parts = " x ".join("*" if f is None else str(f) for f in factors)
        names = [self._loop(o) for o in leaves]
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        return f"{loop} runs {parts} in the target: its loops {listed} around block {self.block}"

    def reorder(self) -> str:
        names = ", ".join(self.tgt.loops[o].name for o in self.town)
        return f"the target runs the loops around block {self.block} in the order {names}"

    def fuse(self, leaf: int) -> str:
        return f"the target's loop {self._loop(leaf)} around block {self.block} runs over these loops as one"

    def unit(self, leaf: int) -> str:
        return f"the target has a loop {self._loop(leaf)} around block {self.block} that no iterator reads"

    def fuse_split(self, leaves: list[int | None]) -> str:
        names = ", ".join(self._loop(o) for o in leaves)
        return f"the target's loops {names} around block {self.block} split these loops run as one"


def _is_chain(view: FuncView, orders: list[int]) -> bool:
    return all(view.loops[b].parent == a for a, b in zip(orders, orders[1:]))
