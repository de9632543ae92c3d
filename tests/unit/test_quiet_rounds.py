"""`measure` takes its repeats again while a round was not quiet (mlc_lab._contention.quietest_round)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlc_lab._contention import describe, quiet, quietest_round, spread

ROUND = st.fixed_dictionaries(
    {
        "latency_s": st.floats(1e-6, 1.0),
        "iqr_s": st.floats(0.0, 0.5),
        "others_cores": st.sampled_from([0.0, 0.1, 0.3, 1.0]),
        "parallel_speed": st.sampled_from([None, 0.5, 0.95]),
    }
)


def _is_quiet(r: dict) -> bool:  # the rule, written out
    return (
        r["others_cores"] < 0.25
        and (r["parallel_speed"] is None or r["parallel_speed"] >= 0.8)
        and r["iqr_s"] / r["latency_s"] <= 0.10
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(ROUND, min_size=1, max_size=5), st.integers(1, 4))
def test_the_first_quiet_round_or_else_the_steadiest_calm_one(rounds, limit):
    calls = []

    def take():
        calls.append(len(calls))
        return dict(rounds[len(calls) - 1])

    limit = min(limit, len(rounds))
    got = quietest_round(take, limit)
    first_quiet = next((i for i, r in enumerate(rounds[:limit]) if _is_quiet(r)), None)
    if first_quiet is not None:
        assert len(calls) == first_quiet + 1 and got["rounds"] == first_quiet + 1
        assert {k: got[k] for k in rounds[0]} == rounds[first_quiet]
    else:
        assert len(calls) == limit and got["rounds"] == limit
        taken = rounds[:limit]
        calm = [r for r in taken if r["others_cores"] < 0.25 and (r["parallel_speed"] or 1) >= 0.8]
        pool = calm or taken  # a round another process or a shared core slowed only when all were
        assert got["iqr_s"] / got["latency_s"] == min(r["iqr_s"] / r["latency_s"] for r in pool)


def test_a_figure_whose_repeats_disagree_is_not_quiet_and_says_why():
    assert quiet(0.0, 0.95, spread(1e-4, 1e-3)) is True
    assert quiet(0.0, 0.95, spread(3e-4, 1e-3)) is False  # others idle, cores at full speed, repeats 30% apart
    assert quiet(0.0, None, None) is True and quiet(None, None, 0.5) is None
    text = describe(0.0, 0.95, 0.57)
    assert text.startswith("quiet machine") and "unsteady: the repeats spread 57% of their median" in text
    assert "unsteady" not in describe(0.0, 0.95, 0.05)


def test_the_explorers_quiet_rule_uses_the_same_thresholds():
    # js/measure/measure.ts words a measurement's hover text by the same rule: it reads the thresholds
    # from the generated js/lib/model.ts (no copy of its own), which holds the Python ones
    import re
    from pathlib import Path

    from mlc_lab import _contention

    js = Path(__file__).resolve().parents[2] / "js"
    ts = (js / "lib" / "model.ts").read_text()
    for name in ("QUIET_CORES", "PARALLEL_FLOOR", "STEADY_SPREAD"):
        m = re.search(rf"export const {name} = ([0-9.]+);", ts)
        assert m and float(m.group(1)) == getattr(_contention, name), name
    assert not re.search(
        r"const (QUIET_CORES|PARALLEL_FLOOR|STEADY_SPREAD) =", (js / "measure" / "measure.ts").read_text()
    )
