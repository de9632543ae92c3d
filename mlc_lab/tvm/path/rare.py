"""One step the plan does not read, named by the target itself and tried where the plan fails: the
target's block names or loops say which primitive made them, and the few places it can apply are
tried one by one, TVM's ``structural_equal`` judging each.

- ``X_init`` and ``X_update`` where the program has ``X`` holding blocks of its own (whose loops
  the plan does not tile): ``decompose_reduction`` of ``X`` at one of its loops;
- ``X_rf`` where the program has the reduction ``X``: ``rfactor`` at one of ``X``'s loops, the new
  axis where the target's partial-sum buffer has a dimension of that loop's extent;
- ``X_pad_const``: ``decompose_padding`` of ``X`` at one of its loops;
- a block whose bindings are not affine in its loops (here and in the target): its loops reordered
  and fused as the target has them (no split: a split of such a loop is no piece of an iterator);
- a buffer of another shape that the target's block indexes with its own iterators alone:
  ``transform_layout`` with padding (the pad value what the target stores under its condition).

Where no single step gives the target, the engine goes on from each named step (a few at most, a
few seconds in all) as from a start of its own, but not from an rfactor (the plan reads an rfactor of
a split loop itself: a failure there has another cause).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable

from mlc_lab.tvm.path.ir import Block, FuncView, accesses, const, iter_maps, read, read_as, substitute
from mlc_lab.tvm.path.work import Op, Refused, Unreachable, Work

_MOST_ORDERS = 120  # reorder-and-fuse candidates for one block (5 loops: 5! orders)
_GO_ON = 3  # named steps the engine goes on from when none reaches the target alone
_GO_ON_S = 4.0  # and the seconds it has for them, all together
_TRY_S = 1.5  # the seconds the single steps have, all together


@dataclass
class _Step:
    """One candidate: applied on a work schedule; ``go_on``: the engine may go on from it."""

    say: str
    apply: Callable[[Work], None]
    go_on: bool = True


def find(
    make: Callable[[], Any],
    func: str,
    target: Any,
    same: Callable[[Any, Any], bool],
    deadline_s: float,
    go_on: Callable[[Callable[[], Any], float], Any],
) -> tuple[list[Op], Any] | None:
    """(the ops, the schedule) of a way that starts with one step the target names, or None.
    ``go_on(make, seconds)`` is the engine from another start (a ``Found``)."""
    started = time.perf_counter()
    start = make()
    cur, tgt = read(start.mod[func]), read(target)
    try:
        steps = _steps(cur, tgt)
    except Exception:  # noqa: BLE001  (a construct these readings do not know: no step named)
        return None
    if not steps:
        return None
    tried: list[Work] = []
    for step in steps:
        if time.perf_counter() - started > min(deadline_s, _TRY_S):
            break
        work = Work(start.copy(), func)
        try:
            step.apply(work)
        except (Refused, Unreachable, IndexError):  # TVM refuses it, or the loop is not there
            continue
        if same(work.mod[func], target):
            return list(work.ops), work.sch
        if step.go_on and len(tried) < _GO_ON:
            tried.append(work)
    going = time.perf_counter()
    for work in tried:  # within a few seconds in all: a fallback must not make every failure slow
        left = min(deadline_s - (going - started), _GO_ON_S) - (time.perf_counter() - going)
        if left < 0.5:
            return None
        got = go_on(lambda w=work: w.sch.copy(), left)
        if got.status == "reached":
            return list(work.ops) + list(got.ops), got.sch
    return None


def _steps(cur: FuncView, tgt: FuncView) -> list[_Step]:
    out: list[_Step] = []
    for cb in cur.blocks:
        out += _decompose(cb, tgt, cur)
        out += _rfactor(cb, tgt, cur)
        out += _padding(cb, tgt, cur)
        out += _not_affine(cb, tgt, cur)
        out += _padded_layout(cb, tgt, cur)
    return out


def _loop_step(primitive: str, block: str, place: int, why: str, go_on: bool = True, **extra: Any) -> _Step:
    def apply(work: Work) -> None:
        loop = work.loop_rvs(block)[place]
        if primitive == "rfactor":  # the loop alone names the block
            work.apply(primitive, why, loop=loop, **extra)
        else:
            work.apply(primitive, why, block=work.block_rv(block), loop=loop, **extra)

    return _Step(f"{primitive} of {block} at loop {place}", apply, go_on)


def _places(cur: FuncView, cb: Block, first: int | None) -> list[int]:
    """The places of the block's loops (TVM's ``get_loops``: up to the function's root), ``first``
    first."""
    n, scope = len(cb.chain), cb.scope
    while scope is not None:
        outer = cur.block(scope)
        if outer is None:
            break
        n, scope = n + len(outer.chain), outer.scope
    places = list(range(n))
    if first is not None and first in places:
        places.remove(first)
        places.insert(0, first)
    return places


def _decompose(cb: Block, tgt: FuncView, cur: FuncView) -> list[_Step]:
    init, update = tgt.block(f"{cb.name}_init"), tgt.block(f"{cb.name}_update")
    if not cb.has_init or init is None or update is None or cur.block(init.name) is not None:
        return []
    shared = 0
    while shared < min(len(init.chain), len(update.chain)) and init.chain[shared] == update.chain[shared]:
        shared += 1
    if not any(b.scope == cb.name for b in cur.blocks):
        return []  # the plan decomposes a block without blocks inside itself
    why = f"the target initialises {cb.name} in a block of its own, {init.name}"
    return [_loop_step("decompose_reduction", cb.name, p, why) for p in _places(cur, cb, shared)]


def _rfactor(cb: Block, tgt: FuncView, cur: FuncView) -> list[_Step]:
    trf = tgt.block(f"{cb.name}_rf")
    if not cb.has_init or trf is None or cur.block(trf.name) is not None or len(trf.block.writes) != 1:
        return []
    shape = [const(d) for d in trf.block.writes[0].source.shape]
    chain = cur.chain(cb)
    base = len(_places(cur, cb, None)) - len(chain)
    why = f"the target's {trf.name} holds partial sums of {cb.name} over one of its loops"
    out = []
    for i, loop in enumerate(chain):
        for axis, extent in enumerate(shape):
            if extent is not None and extent == const(loop.extent):
                # the plan reads an rfactor of a split loop itself: this one step only, no going on
                out.append(_loop_step("rfactor", cb.name, base + i, why, go_on=False, factor_axis=axis))
    return out


def _padding(cb: Block, tgt: FuncView, cur: FuncView) -> list[_Step]:
    pad = tgt.block(f"{cb.name}_pad_const")
    if pad is None or cur.block(pad.name) is not None:
        return []
    why = f"the target fills the padding of {cb.name} in a block of its own, {pad.name}"
    return [_loop_step("decompose_padding", cb.name, p, why) for p in _places(cur, cb, None)]


def _not_affine(cb: Block, tgt: FuncView, cur: FuncView) -> list[_Step]:
    """The block's own loops in another order and fused in runs, where neither the block here nor
    the target's is affine in its loops (the plan reads only affine ones)."""
    tb = tgt.block(cb.name)
    n = len(cb.chain)
    if tb is None or not 0 < len(tb.chain) <= n or n > 5:
        return []
    here, there = cur.chain(cb), tgt.chain(tb)
    if [(lp.name, str(lp.extent)) for lp in here] == [(lp.name, str(lp.extent)) for lp in there]:
        return []  # the loops are the target's already
    if iter_maps(cur, cb, cb.chain) is not None or iter_maps(tgt, tb, tb.chain) is not None:
        return []
    base = len(_places(cur, cb, None)) - n
    out: list[_Step] = []
    for order in itertools.permutations(range(n)):
        for cuts in itertools.combinations(range(1, n), len(tb.chain) - 1):
            if list(order) == list(range(n)) and len(cuts) == n - 1:
                continue  # the loops as they are
            out.append(_reorder_fuse(cb.name, base, list(order), [0, *cuts, n], tb.name))
            if len(out) >= _MOST_ORDERS:
                return out
    return out


def _reorder_fuse(block: str, base: int, order: list[int], bounds: list[int], tname: str) -> _Step:
    def apply(work: Work) -> None:
        if order != sorted(order):
            rvs = work.loop_rvs(block)[base:]
            why = f"the target's loops around block {tname} come in another order"
            moved = [k for i, k in enumerate(order) if k != i]  # the loops that move alone (TVM
            # checks the bindings of the loops it reorders: the fixed ones may be the non-affine)
            work.apply("reorder", why, ordered_loops=[rvs[k] for k in moved])
        groups = [(bounds[g], bounds[g + 1]) for g in range(len(bounds) - 1)]
        for lo, hi in reversed(groups):  # inner runs first: the outer loops keep their places
            if hi - lo > 1:
                why = f"the target fuses {hi - lo} loops around block {tname} into one"
                work.apply("fuse", why, loops=work.loop_rvs(block)[base + lo : base + hi])

    return _Step(f"reorder {order} and fuse {bounds} around {block}", apply, go_on=False)


def _padded_layout(cb: Block, tgt: FuncView, cur: FuncView) -> list[_Step]:
    """A buffer of the block laid out in a padded shape (``transform_layout`` with ``pad_value``):
    the target's block indexes it with its own iterators alone, and reads the program's iterators
    through the other buffers (``i = i0 * 16 + i1``): the layout map is the inverse of that reading
    over the target's shape; the pad value is what the target's store writes under its condition."""
    tb = tgt.block(cb.name)
    if tb is None:
        return []
    out: list[_Step] = []
    for kind, names in (("write", cb.writes()), ("read", cb.reads())):
        for index, name in enumerate(names):
            have, want = cur.buffer(name), tgt.buffer(name)
            if have is None or want is None or [const(d) for d in have.shape] == [const(d) for d in want.shape]:
                continue
            index_map = _layout_map(cb, tb, name, [d for d in want.shape])
            if index_map is None:
                continue
            for pad in (*_pad_values(tb), None):
                out.append(_layout_step(cb.name, (kind, index), index_map, pad, name))
    return out


def _layout_map(cb: Block, tb: Block, name: str, shape: list[Any]) -> Any:
    from tvm import tirx

    mine, theirs = accesses(cb, name), accesses(tb, name)
    if not mine or not theirs:
        return None
    new = list(theirs[0][1])
    if not all(isinstance(v, tirx.Var) for v in new):
        return None
    try:
        reading = read_as(cb, tb, skip={name})
    except LookupError:
        return None
    mapping = [(iv.var, r) for iv, r in zip(cb.block.iter_vars, reading)]
    old = [substitute(i, mapping) for i in mine[0][1]]
    try:
        return tirx.IndexMap(new, old, None).inverse(shape)
    except Exception:  # noqa: BLE001  (TVM finds the reading not invertible over the target's shape)
        return None


def _pad_values(tb: Block) -> list[Any]:
    """The constants the target's block stores where ``if_then_else`` picks its padding branch."""
    import tvm
    from tvm import tirx

    body = tb.block.body
    value = getattr(body, "value", None)
    if isinstance(value, tvm.ir.Call) and str(value.op.name).endswith("if_then_else"):
        first = value.args[1]
        if isinstance(first, (tirx.FloatImm, tirx.IntImm)):
            return [first.value]
    return []


def _layout_step(block: str, buffer: tuple[str, int], index_map: Any, pad: Any, name: str) -> _Step:
    def apply(work: Work) -> None:
        why = f"the target lays {name} out in a padded shape" + (f", the padding {pad}" if pad is not None else "")
        work.apply(
            "transform_layout",
            why,
            block=work.block_rv(block),
            buffer=buffer,
            index_map=index_map,
            pad_value=pad,
            assume_injective_transform=False,
        )

    return _Step(f"transform_layout of {name} in {block}", apply)
