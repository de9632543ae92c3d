"""A reduction factored twice (dlight's gemv and low-batch gemv: the partial sums summed in parts
again). TVM names the second partial block and buffer as the first (``X_rf``, ``Y.rf``); the engine's
view names the later block ``X_rf#2`` (``block_names``). This module keeps those names straight: the
stage of the k-th buffer of a name, the names a decomposition makes of an aliased block, and the
order that keeps the aliases of the blocks here equal to the target's while they are decomposed.
"""

from __future__ import annotations

from typing import Any

from mlc_lab.tvm.block_names import split_alias
from mlc_lab.tvm.path.ir import Block, FuncView, Term, const


def suffixed(name: str, suffix: str) -> str:
    """``X_init#2`` for ``(X#2, "_init")``: the name decompose_reduction gives an aliased block."""
    base, k = split_alias(name)
    return f"{base}{suffix}" if k == 1 else f"{base}{suffix}#{k}"


def nth(stage_block: str, k: int) -> str:
    """The k-th block made of the same name (``X`` for the first, ``X#k`` after)."""
    return stage_block if k == 1 else f"{stage_block}#{k}"


def alias_of(view: FuncView, node: Any) -> str:
    """The view's name (``X#k`` where several share X) of the block ``node`` here."""
    return next((b.name for b in view.blocks if b.block.same_as(node)), str(node.name_hint))


def own_reads_dropped(block: Block, found: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """The accesses past a partial block's store without its reads of its own buffer at the store's
    indices: the second partial block reads a buffer named as its own (the first's partial sums)."""
    if not found:
        return found
    store = found[0]
    kept = [
        (name, idx)
        for name, idx in found[1:]
        if not (name == store[0] and len(idx) == len(store[1]) and all(a.same_as(b) for a, b in zip(idx, store[1])))
    ]
    return [store, *kept]


def decompose_order(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The blocks to decompose, later aliases first: decomposing ``X_rf#2`` while ``X_rf`` is not
    yet keeps every name here unique until the last step (the first's init then takes ``X_rf_init``,
    the second's becomes ``X_rf_init#2``, as in the target)."""
    return sorted(items, key=lambda item: -split_alias(item[0])[1])


def around_units(terms: list[Term], rf_index: int) -> list[Term]:
    """The reduction's pieces outermost first, where a unit piece sits inside the partial index's
    range (scale 4 in a term of 128: a split into 32 x 1 x 4 whose 32 and 4 the partial index fuses,
    as dlight makes it when the reduction is shorter than its tiles): the partial index's term cut
    into its two pieces, the unit piece between them."""
    for t in terms:
        if t.leaf != rf_index or const(t.scale) is None or const(t.extent) is None:
            continue
        low, ext = const(t.scale), const(t.extent)
        units = [u for u in terms if u is not t and const(u.extent) == 1 and const(u.scale) is not None]
        inside = [u for u in units if low < const(u.scale) < low * ext and const(u.scale) % low == 0]  # type: ignore[operator]
        if len(inside) != 1 or ext % (const(inside[0].scale) // low) != 0:  # type: ignore[operator]
            continue
        u = inside[0]
        cut = const(u.scale) // low  # type: ignore[operator]
        outer = Term(rf_index, None, cut, ext // cut, const(u.scale))
        inner = Term(rf_index, None, 1, cut, low)
        out = []
        for x in terms:
            if x is t:
                out.extend([outer, u, inner])
            elif x is not u:
                out.append(x)
        return out
    return terms


def read_by_partial(tgt: FuncView, corr: Any, stage: Any) -> bool:
    """Whether ``stage`` is a cache_read whose copy only blocks an rfactor makes read (dlight's gemv
    copies the weight into local memory for the partial sums): made after the rfactor."""
    if stage.primitive != "cache_read":
        return False
    made = {s.target_block for s in corr.stages if s.primitive == "rfactor"}
    made |= {n for block, pair in corr.decomposed.items() if block in made for n in pair}
    readers = [b.name for b in tgt.blocks if stage.buffer in b.reads() and stage.buffer not in b.writes()]
    return bool(readers) and all(name in made for name in readers)


def copied(tgt: FuncView, corr: Any) -> dict[str, str]:
    """The target's copies the partial sums read, by the buffer each copies (``lv571_local`` ->
    ``lv571``): made after the rfactor, so the rfactor reads the source where the target reads the copy."""
    out = {}
    for stage in corr.stages:
        copy = tgt.block(stage.target_block) if read_by_partial(tgt, corr, stage) else None
        moved = copy.stage_copy() if copy is not None else None
        if moved is not None:
            out[moved[0]] = moved[1]
    return out
