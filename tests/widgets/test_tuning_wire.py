"""The tuning dashboard's plain data has the shape of its contract (mlc_lab.model.tuning), whose
TypeScript types js/tuning reads (generated into js/lib/model.ts)."""

from __future__ import annotations

from mlc_lab.model.tuning import BestTrial, FailureItem, Roof, TrialDetail
from mlc_lab.model.conform import problems
from tests.widgets.test_tuning_dashboard import dash, work_dir  # noqa: F401  (fixtures)


def test_the_dashboards_state_and_a_selected_trial_follow_the_contract(dash):  # noqa: F811
    assert dash.best and problems(dash.best, BestTrial) == []
    assert problems(dash.roof, Roof) == []
    assert dash.failures and all(problems(f, FailureItem) == [] for f in dash.failures)
    for trial in (1, 2, 3):  # a slower one (with a diff), a failed one, the best
        detail = dash.select(trial)
        assert problems(detail, TrialDetail) == [], trial
    assert problems(dash.select(None), TrialDetail) == []  # {}: nothing selected
    assert problems(dash.select(99), TrialDetail) == []  # a trial that does not exist: trial + problem


def test_a_key_the_contract_lacks_is_found():
    assert problems({"trial": 1, "latency": 2e-4}, TrialDetail) == [
        "value.latency: TrialDetail declares no key 'latency'"
    ]
