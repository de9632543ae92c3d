"""The ways to tile a loop: every ordered factorisation of its extent (what a sampled tiling's
decision may be changed to)."""

from __future__ import annotations

from typing import Iterable


def perfect_tilings(extent: int, n: int, max_innermost: int, limit: int = 5000) -> list[list[int]]:
    """Every ordered way to write ``extent`` as a product of ``n`` factors (innermost capped)."""
    out: list[list[int]] = []

    def rec(rest: int, k: int, prefix: list[int]) -> None:
        if len(out) >= limit:
            return
        if k == 1:
            if max_innermost <= 0 or rest <= max_innermost:
                out.append(prefix + [rest])
            return
        for d in _divisors(rest):
            rec(rest // d, k - 1, prefix + [d])

    if extent >= 1 and n >= 1:
        rec(extent, n, [])
    return out


def _divisors(n: int) -> list[int]:
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def product(values: Iterable[int]) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out
