"""A widget's fallback (the text/plain and text/html next to the widget view in its output) is
honest: it names the widget and how to see it live, never a snapshot of its state at display time.

Checked as a user meets it: a notebook executed in a real kernel (the explorer displayed at step 0,
then ten steps applied from later cells), saved without widget state as JupyterLab saves by default,
then converted by a real ``jupyter nbconvert --to html``."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys

import nbformat
import pytest

from mlc_lab.core.session import Session
from mlc_lab.widgets._base import SEE_IT_LIVE, fallback_bundle
from mlc_lab.widgets.access.view import AccessView
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.widgets.tuning import TuningDashboard
from tests.e2e.saved import REPO
from tests.fixtures.programs import MM_RELU
from tests.widgets.test_tuning_dashboard import WorkDir

FIRST_STEP_LINE = "for i, j, k in T.grid(128, 128, 128)"  # mm_relu's script at step 0 (gone after the split)

CELLS = [
    "import mlc_lab\nex = mlc_lab.explore(mlc_lab.course_program('mm_relu'))\nex",
    "s = ex.session\n"
    "s.apply('split', 'Y/j', factors=[None, 4])\n"
    "s.apply('split', 'Y/i', factors=[None, 8])\n"
    "for _ in range(4):\n"
    "    s.undo(); s.redo()\n"
    "s.apply('reorder', 'i_0', 'j_0', 'i_1', 'j_1')\n"
    "s.apply('split', 'Y/k', factors=[None, 4])\n"
    "s.apply('split', 'C/i', factors=[None, 8])\n"
    "s.apply('split', 'C/j', factors=[None, 4])\n"
    "s.apply('split', 'k_1', factors=[None, 2])\n"
    "s.apply('split', 'C/i_1', factors=[None, 2])\n"
    "s.apply('split', 'C/j_1', factors=[None, 2])\n"
    "s.apply('split', 'Y/i_1', factors=[None, 2])\n"
    "print('at step', s.current.id)",
    "mlc_lab.access_view(s, 'k_1_1')",
]


def shown(widget) -> dict:
    """The data of a widget's display bundle (anywidget answers with (data, metadata))."""
    bundle = widget._repr_mimebundle_()
    return bundle[0] if isinstance(bundle, tuple) else bundle


def test_every_widget_says_what_it_is_and_not_its_state(comms, tmp_path):
    s = Session(MM_RELU)
    explorer = Explorer(s)
    before = shown(explorer)
    s.apply("split", "Y/j", factors=[None, 4])
    after = shown(explorer)
    assert before["text/plain"] == after["text/plain"] and before["text/html"] == after["text/html"]
    assert "schedule explorer of `mm_relu`" in after["text/plain"] and SEE_IT_LIVE in after["text/plain"]
    assert "trust the notebook" in after["text/plain"] and "trust the notebook" in after["text/html"]
    assert FIRST_STEP_LINE not in after["text/plain"] and "step" not in after["text/plain"].split(":")[0]
    assert after["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.model_id
    memory = AccessView(s, "j_1")
    assert "memory-access view of `mm_relu`" in shown(memory)["text/plain"]
    wd = WorkDir(tmp_path / "wd", total=4)
    wd.add(1e-4)
    board = TuningDashboard(str(wd.path))
    bundle = shown(board)
    assert f"tuning dashboard of the run in {wd.path}" in bundle["text/plain"]
    assert html.escape(SEE_IT_LIVE) in bundle["text/html"]
    board.close()
    memory.close()
    explorer.close()


def test_fallback_html_is_escaped():
    rich = fallback_bundle("view of `<b>`")["text/html"]
    assert "<b>`" not in rich.split("</b>", 1)[1] and "&lt;b&gt;" in rich


@pytest.mark.slow
def test_nbconvert_html_of_an_executed_notebook_is_honest(tmp_path):
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:  # JupyterLab's default save: no widget state
        NotebookClient(
            nb,
            timeout=300,
            kernel_name="python3",
            store_widget_state=False,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    assert "at step 10" in "".join(o.get("text", "") for o in nb.cells[1].outputs)
    src = tmp_path / "lecture.ipynb"
    nbformat.write(nb, str(src))
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "lecture.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "mlc_lab schedule explorer of `mm_relu`: an interactive widget" in text
    assert "mlc_lab memory-access view of `mm_relu`: an interactive widget" in text
    assert text.count(SEE_IT_LIVE) == 2
    # Nothing of the explorer's state when it was displayed: not its step, not its script.
    assert FIRST_STEP_LINE not in text and "step 0" not in text
    assert "mlc-lab-fallback" in page
