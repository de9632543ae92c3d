"""One rule for showing a latency, the dashboard's (js/tuning/data.ts formatLatency): µs below a
millisecond, ms below a second, then s; 3 significant-ish digits."""

from __future__ import annotations

import math


def latency_unit(seconds: float) -> tuple[str, float]:
    if not (seconds > 0) or not math.isfinite(seconds):
        return "ms", 1e3
    if seconds < 1e-3:
        return "µs", 1e6
    if seconds < 1:
        return "ms", 1e3
    return "s", 1.0


def format_latency(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    name, scale = latency_unit(seconds)
    v = seconds * scale
    digits = 1 if v >= 100 else 2 if v >= 10 else 3
    return f"{v:.{digits}f} {name}"
