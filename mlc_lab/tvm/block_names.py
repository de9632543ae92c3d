"""Blocks that share a name, found by their place: ``name#k`` is the k-th block called ``name`` in
the printed program's order (pre-order), ``name`` alone the first.

TVM lets two blocks share a name (a second ``rfactor`` of one block names its new block as the first
did); ``get_sblock`` then finds neither. A name a person types that TVM finds is TVM's answer as
before; only a name TVM cannot find is looked up by place, through ``get_child_blocks`` (which TVM's
trace records and replays as it does any look-up).
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Iterator

from tvm import s_tir

_get_sblock = inspect.unwrap(s_tir.Schedule.get_sblock)
_get_child_blocks = inspect.unwrap(s_tir.Schedule.get_child_blocks)
_get = inspect.unwrap(s_tir.Schedule.get)
_ALIAS = re.compile(r"^(?P<base>.+)#(?P<k>[1-9][0-9]*)$")


def split_alias(name: str) -> tuple[str, int]:
    """``("X", k)`` for ``X#k``; ``(name, 1)`` for a plain name."""
    m = _ALIAS.match(name)
    return (m.group("base"), int(m.group("k"))) if m else (name, 1)


def aliases(names: list[str]) -> list[str]:
    """The names in order, each later block of a name several share as ``name#k``."""
    out: list[str] = []
    for n, name in enumerate(names):
        k = names[:n].count(name)
        out.append(name if k == 0 else f"{name}#{k + 1}")
    return out


def get_block(sch: s_tir.Schedule, name: str, func: str) -> Any:
    """The handle of block ``name`` (``X#k``: the k-th block called X); TVM's own error when there
    is no such block."""
    try:
        return _get_sblock(sch, name, func)
    except Exception as exc:  # noqa: BLE001  (TVM's error: no block of that name, or several)
        error = exc
    base, k = split_alias(name)
    try:
        root = _get_sblock(sch, "root", func)
    except Exception:  # noqa: BLE001  (a function without a root block: TVM's first answer stands)
        raise error from None
    seen = 0
    for rv in _in_order(sch, root):
        if str(_get(sch, rv).name_hint) == base:
            seen += 1
            if seen == k:
                return rv
    raise error


def _in_order(sch: s_tir.Schedule, parent: Any) -> Iterator[Any]:
    for rv in _get_child_blocks(sch, parent):
        yield rv
        yield from _in_order(sch, rv)
