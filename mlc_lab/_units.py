"""One rule for showing a latency, the explorer's and the dashboard's (js/lib/units.ts formatLatency):
three significant digits in the unit that fits (s, ms, µs, ns); "—" when there is no figure.
tests/fixtures/latency_format.json holds both languages to it."""

from __future__ import annotations

import math

_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def format_latency(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    scale, name = next(((s, n) for s, n in _UNITS if abs(seconds) >= s), _UNITS[-1])
    v = seconds / scale
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f} {name}"
