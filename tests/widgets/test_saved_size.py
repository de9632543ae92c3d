"""Saved-size budget: a lecture's explorer (after the chapter-2 walk-through), memory view and
tuning dashboard (64 trials) saved as JupyterLab saves widget state stay under 2 MB, the front-end
bundle in it once. Prints the figures (run with -s to see them)."""

from __future__ import annotations

import json

import ipywidgets

from mlc_lab.core.session import Session
from mlc_lab.widgets._base import front_end_code
from mlc_lab.widgets.access.view import AccessView
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.widgets.tuning import TuningDashboard
from tests.fixtures.programs import MM_RELU
from tests.widgets.test_tuning_dashboard import RUN_ERROR, WorkDir

BUDGET = 2_000_000


def test_lecture_widgets_fit_the_budget(comms, tmp_path):
    ipywidgets.Widget.close_all()
    s = Session(MM_RELU)
    explorer = Explorer(s)
    s.apply("split", "Y/j", factors=[None, 4])
    s.apply("reorder", "Y/i", "j_0", "k", "j_1")
    s.apply("reverse_compute_at", "C", "j_0", preserve_unit_loops=False)
    s.apply("decompose_reduction", "Y", "k")
    memory = AccessView(s, "j_1")
    wd = WorkDir(tmp_path / "wd", total=64)
    for i in range(64):
        wd.add(None if i % 9 == 4 else 1e-4 * (1 + i % 7), RUN_ERROR if i % 9 == 4 else None)
    board = TuningDashboard(str(wd.path))
    state = ipywidgets.Widget.get_manager_state(drop_defaults=True)
    text = json.dumps(state)
    code = front_end_code().code
    per_widget = {
        name: len(json.dumps(state["state"][w.model_id]))
        for name, w in (("explorer", explorer), ("memory", memory), ("dashboard", board))
    }
    print(
        f"\nsaved widget state: {len(text) / 1e6:.2f} MB in all; front end {len(code) / 1e6:.2f} MB once; "
        + ", ".join(f"{k} {v / 1e3:.1f} kB" for k, v in per_widget.items())
    )
    assert text.count(code[:300]) == 1
    assert len(text) < BUDGET
    board.close()
