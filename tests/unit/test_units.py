"""One unit rule for a latency on the CLI's progress line, its closing line and the dashboard."""

from __future__ import annotations

from mlc_lab._cli.tune import _bar
from mlc_lab._units import format_latency


def test_the_dashboards_rule():
    # the same cases as formatLatency in js/tuning/data.ts
    assert format_latency(24.7e-6) == "24.70 µs"
    assert format_latency(2.75e-5) == "27.50 µs"
    assert format_latency(0.0123) == "12.30 ms"
    assert format_latency(1.5e-4) == "150.0 µs"
    assert format_latency(2.0) == "2.000 s"
    assert format_latency(None) == "—"


def test_the_progress_line_says_microseconds_below_a_millisecond():
    line = _bar(3, 8, 2.75e-5)
    assert line.endswith("3/8  best 27.50 µs"), line
    assert "ms" not in line
