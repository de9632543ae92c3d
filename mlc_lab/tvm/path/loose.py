"""Targets no way can reach by TVM's own judgement: a block bound through a loop's or another
block's iterator out of its scope (TVM's ``cache_inplace`` leaves one so: the program's own
iterator, printed ``vi = T.int32()`` above the copy). Such a variable is defined nowhere, so TVM's
``structural_equal`` compares it by identity: two replays of the very trace that made the target
are not equal, and no way can be confirmed.

And blocks of one name (``cache_inplace`` names both its copies alike): a way that must go on from
one of them has no name to give it, since a step names its block (``twins``).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from mlc_lab.tvm.path.ir import Block, FuncView


def loose(view: FuncView) -> list[str]:
    """Names of the loop and block iterators some block's binding uses out of their scope."""
    known = [lp.var for lp in view.loops] + [iv.var for b in view.blocks for iv in b.block.iter_vars]
    out: list[str] = []
    for block in view.blocks:
        scope = _in_scope(view, block)
        for value in block.values:
            for var in tirx.analysis.undefined_vars(value, scope):
                if any(var.same_as(k) for k in known) and str(var.name) not in out:
                    out.append(str(var.name))
    return out


def _in_scope(view: FuncView, block: Block) -> list[Any]:
    """The loop and block iterators defined where ``block`` sits (through its enclosing blocks)."""
    out: list[Any] = []
    at: Block | None = block
    while at is not None:
        out.extend(lp.var for lp in view.chain(at))
        outer = view.block(at.scope) if at.scope is not None else None
        if outer is not None:
            out.extend(iv.var for iv in outer.block.iter_vars)
        at = outer
    return out


def sentence(names: list[str]) -> str:
    shown = ", ".join(names[:3])
    return (
        f"the target binds a block through {shown}, defined nowhere it is used (as TVM's cache_inplace leaves "
        "it): TVM's structural equality never holds for such a program, not even against a replay of its own trace"
    )


def twins(view: FuncView) -> list[str]:
    """Names that more than one block of the target carries (the view says the later ones ``X#k``)."""
    seen: list[str] = []
    out: list[str] = []
    for block in view.blocks:
        name = str(block.block.name_hint)
        if name in seen and name not in out:
            out.append(name)
        seen.append(name)
    return out


def twins_sentence(names: list[str]) -> str:
    return (
        f"the target has several blocks named {names[0]} (as cache_inplace names its copies); the engine does "
        f"not follow a way that goes on from one of them yet (a step names a later one {names[0]}#2, ...)"
    )
