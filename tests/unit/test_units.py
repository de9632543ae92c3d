"""One rule for a latency: the CLI's progress and closing lines (mlc_lab/_units.py) and the page's
(js/lib/units.ts, the explorer and the tuning dashboard) answer tests/fixtures/latency_format.json."""

from __future__ import annotations

import json
from pathlib import Path

from mlc_lab._cli.tune import _bar
from mlc_lab._units import format_latency

CASES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "latency_format.json").read_text())["cases"]


def test_the_shared_cases():
    assert [format_latency(s) for s, _ in CASES] == [text for _, text in CASES]


def test_the_progress_line_says_microseconds_below_a_millisecond():
    line = _bar(3, 8, 2.75e-5)
    assert line.endswith("3/8  best 27.5 µs"), line
    assert "ms" not in line
