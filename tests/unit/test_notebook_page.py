"""`mlc-lab export`: a saved notebook becomes one offline page. The widgets' placeholders, the state
they need (and only that: the FrontEnd once, no other library's models), plotly inlined for plots,
and no external script or stylesheet left from nbconvert's template."""

from __future__ import annotations

import json
import re

import nbformat

from mlc_lab.cli import main
from mlc_lab.notebook_page import WIDGET_STATE, WIDGET_VIEW, export_notebook, prepare
from mlc_lab.widgets._base import front_end_code

FE, EXP, OTHER, LAYOUT = "f" * 32, "e" * 32, "a" * 32, "b" * 32


def saved_notebook(with_plot: bool = True) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}

    def view(mid: str) -> nbformat.NotebookNode:
        return nbformat.v4.new_output(
            "display_data",
            data={
                WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": mid},
                "text/plain": f"<widget {mid[:4]}>",
            },
        )

    outputs = [view(EXP), view(OTHER)]
    if with_plot:
        outputs.append(
            nbformat.v4.new_output(
                "display_data",
                data={"application/vnd.plotly.v1+json": {"data": [{"type": "scatter", "y": [1, 2]}], "layout": {}}},
            )
        )
    cell = nbformat.v4.new_code_cell("explorer", outputs=outputs)
    nb.cells = [nbformat.v4.new_markdown_cell("# Lecture"), cell]
    packed = front_end_code()
    nb.metadata["widgets"] = {
        WIDGET_STATE: {
            "version_major": 2,
            "version_minor": 0,
            "state": {
                FE: {
                    "model_name": "WidgetModel",
                    "model_module": "@jupyter-widgets/base",
                    "state": {"code": packed.code, "digest": packed.digest, "encoding": "gzip+base64"},
                },
                EXP: {
                    "model_name": "AnyModel",
                    "model_module": "anywidget",
                    "state": {
                        "_mlc_entry": "explorer",
                        "_mlc_front_end": f"anywidget:{FE}",
                        "layout": f"IPY_MODEL_{LAYOUT}",
                    },
                    "buffers": [{"path": ["loop_tree_json"], "encoding": "base64", "data": "e30="}],
                },
                LAYOUT: {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base", "state": {}},
                OTHER: {
                    "model_name": "IntSliderModel",
                    "model_module": "@jupyter-widgets/controls",
                    "state": {"value": 3},
                },
            },
        }
    }
    return nb


def test_prepare_keeps_what_the_widgets_need():
    nb, models, plots = prepare(saved_notebook())
    assert set(models) == {EXP, FE, LAYOUT} and plots == 1
    outs = nb.cells[1].outputs
    assert f'data-model-id="{EXP}"' in outs[0].data["text/html"]
    assert outs[1].data == {"text/plain": f"<widget {OTHER[:4]}>"}  # another library's widget: its text
    assert "widgets" not in nb.metadata  # nbconvert must not add its CDN widget manager


def test_export_page_is_offline(tmp_path):
    src = tmp_path / "lecture.ipynb"
    nbformat.write(saved_notebook(), str(src))
    report = export_notebook(src, tmp_path / "site")
    page = report.path.read_text()
    assert report.path == tmp_path / "site" / "lecture.html" and (report.widgets, report.plots) == (1, 1)
    assert not re.search(r"<script[^>]*\ssrc=[\"']https?:", page)
    assert not re.search(r"<link[^>]*\shref=[\"']https?:", page)
    state = json.loads(re.search(rf'<script type="{re.escape(WIDGET_STATE)}">(.*?)</script>', page, re.S).group(1))
    assert set(state["state"]) == {EXP, FE, LAYOUT}
    assert page.count(front_end_code().code[:300]) == 1  # the front end once
    assert "Plotly.newPlot" in page and "mlc-lab-saved" in page


def test_export_without_plots_has_no_plotly(tmp_path):
    src = tmp_path / "n.ipynb"
    nbformat.write(saved_notebook(with_plot=False), str(src))
    page = export_notebook(src, tmp_path).path.read_text()
    assert "Plotly.newPlot" not in page


def test_export_refuses_widgets_saved_without_state(tmp_path, capsys):
    nb = saved_notebook()
    del nb.metadata["widgets"]
    src = tmp_path / "n.ipynb"
    nbformat.write(nb, str(src))
    assert main(["export", str(src), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "saved without their state" in err and "--execute" in err
    assert main(["export", str(tmp_path / "missing.ipynb"), "-o", str(tmp_path)]) == 2
    assert "no such notebook" in capsys.readouterr().err


def test_cli_export_reports(tmp_path, capsys):
    src = tmp_path / "lecture.ipynb"
    nbformat.write(saved_notebook(), str(src))
    assert main(["export", str(src), "-o", str(tmp_path / "site")]) == 0
    out = capsys.readouterr().out
    assert "1 widget, 1 plots" in out and "MB of widget state" in out
    assert "--execute" not in out


def test_cli_export_of_an_unexecuted_notebook_hints_at_execute(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import mlc_lab\nmlc_lab.explore(PROGRAM)"))
    src = tmp_path / "fresh.ipynb"
    nbformat.write(nb, str(src))
    assert main(["export", str(src), "-o", str(tmp_path / "site")]) == 0
    out = capsys.readouterr().out
    assert "0 widgets" in out
    assert f"{src} shows no widgets: it was saved without outputs (never run, or cleared). Add --execute" in out


def test_cli_export_execute_prints_no_kernel_warning(tmp_path, capfd, monkeypatch):
    # Before: the kernel nbclient started talked over TCP and printed its warning ("Kernel is running
    # over TCP without encryption ...") into the command's output. Now it talks over local sockets in
    # a private folder, and is shut down before the command returns.
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell("print(6 * 7)"))
    src = tmp_path / "run.ipynb"
    nbformat.write(nb, str(src))
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(src), "-o", str(tmp_path / "site"), "--execute"]) == 0
    out, err = capfd.readouterr()  # the kernel's own output too: it writes to this process's fds
    assert err == "", err
    assert "WARNING" not in out and "1 widget" not in out
    assert "42" in (tmp_path / "site" / "run.html").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.ipynb", "site"]  # no socket files left behind
