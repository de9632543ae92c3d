"""One intent, one step, in a real JupyterLab (Debian chromium): the keys open forms with the focus
where the student types, Enter applies from any field (reorder rows too), a key pressed five times or
a double-click on Apply makes one step and no failed attempt; then what a cell shows when the
student's clicks moved the session on (the error reads sentence first, with the way back), and a
tuning run cancelled before its first measured candidate."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.lab import Lab, write_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e

# Where the screenshots of this test are copied for the note (besides test-artifacts/e2e).
SHOTS = os.environ.get("MLC_LAB_SHOTS_DIR")


def row(page, kind: str, name: str):
    return page.locator(f'.mlc-explorer .mlc-row[data-kind="{kind}"][data-name="{name}"]')


def prim(page, name: str):
    return page.locator(f'.mlc-explorer .mlc-prim[data-primitive="{name}"]')


def cell(page, i: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(i)


def run_cell(page, i: int) -> None:
    cell(page, i).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def steps(lab: Lab) -> list[str]:
    return lab.kernel_json("[s.label for s in ex.session.steps]")


def test_forms_keys_one_intent_one_step(lab_server, page, artifacts):
    url, root = lab_server
    write_notebook(
        root / "forms_keys.ipynb",
        [
            "import tempfile\nimport mlc_lab\nfrom mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU),
            "ex = explore(MM_RELU)\nex",
            "session = ex.session\nj0, j1 = session.apply('split', 'Y/j', factors=[None, 4])",
            "from mlc_lab.core.tuning import tune\nfrom mlc_lab.widgets.tuning import dashboard\n"
            "s0 = mlc_lab.Session(MM_RELU)\njob = tune(s0, trials=8, work_dir=tempfile.mkdtemp(prefix='mlc_tune_e2e_'))\n"
            "board = dashboard(job, s0)\nboard",
            "print(board.cancel())",
        ],
    )
    lab = Lab(page, url, artifacts, prefix="forms-keys")
    lab.open("forms_keys.ipynb")
    run_cell(page, 0)
    run_cell(page, 1)
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    shots: list[Path] = []

    # 1. s opens split with the focus in the factor field: typing 8 makes factors [None, 8]
    row(page, "loop", "Y/i").click()
    page.keyboard.press("ArrowDown")
    page.wait_for_selector('.mlc-explorer .mlc-row.mlc-selected[data-name="Y/j"]')
    page.keyboard.press("s")
    form = page.locator('.mlc-form[data-primitive="split"]')
    form.wait_for()
    assert page.evaluate("() => document.activeElement.classList.contains('mlc-factor')")
    page.keyboard.type("8")
    assert form.locator(".mlc-parts").input_value() == "2"  # still a 2-way split
    shots.append(lab.shot("s-focus-factor", explorer))
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('.mlc-form[data-primitive=\"split\"]')")
    assert steps(lab)[1:] == ["split(Y/j, factors=[None, 8])"]

    # 2. reorder: move a row with Alt+ArrowDown, Enter on the focused row applies
    row(page, "loop", "j_0").click()
    page.keyboard.press("r")
    items = page.locator('.mlc-form[data-primitive="reorder"] .mlc-order-item')
    items.nth(2).focus()
    page.keyboard.press("Alt+ArrowDown")
    assert [items.nth(i).get_attribute("data-loop") for i in range(4)] == ["Y/i", "j_0", "k", "j_1"]
    shots.append(lab.shot("reorder-row-focused", explorer))
    page.keyboard.press("Enter")
    page.wait_for_function("() => !document.querySelector('.mlc-form[data-primitive=\"reorder\"]')", timeout=20_000)
    assert steps(lab)[-1].startswith("reorder(")

    # 3. p five times on Y/i: one parallel step, and parallel is no longer offered there
    row(page, "loop", "Y/i").click()
    for _ in range(5):
        page.keyboard.press("p")
    page.wait_for_selector('.mlc-explorer .mlc-row[data-name="Y/i"] .mlc-kind-parallel', timeout=20_000)
    page.wait_for_timeout(1500)  # any further request would have landed by now
    assert [s for s in steps(lab) if s.startswith("parallel")] == ["parallel(Y/i)"]
    row(page, "loop", "Y/i").click()
    assert prim(page, "parallel").count() == 0
    shots.append(lab.shot("p-five-times-one-step", explorer))

    # 4. a double-click on Apply: one step, no failed attempt
    n = len(steps(lab))
    row(page, "loop", "k").click()
    page.keyboard.press("s")
    form = page.locator('.mlc-form[data-primitive="split"]')
    form.locator(".mlc-apply").dblclick()
    page.wait_for_function("() => !document.querySelector('.mlc-form[data-primitive=\"split\"]')", timeout=20_000)
    page.wait_for_timeout(1500)
    assert len(steps(lab)) == n + 1
    assert lab.kernel_json("len(ex.session.failed)") == 0
    assert page.locator(".mlc-explorer .mlc-hrow-failure").count() == 0
    assert page.locator(".mlc-explorer .mlc-banner").is_hidden()
    shots.append(lab.shot("double-click-apply-one-step", explorer))

    # 5. the walk-through's next cell after those clicks: the sentence first, the way back, no frames of ours
    run_cell(page, 2)
    err = cell(page, 2).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    err.wait_for(timeout=30_000)
    text = err.inner_text()
    assert text.startswith("NameResolutionError: there is no loop named 'Y/j'"), text
    assert "session.goto(0)" in text.splitlines()[0] and "Undo" in text.splitlines()[0]
    assert "in Cell In[" in text and "mlc_lab/" not in text and "Traceback" not in text
    cell(page, 2).scroll_into_view_if_needed()
    shots.append(lab.shot("error-sentence-first-with-way-back", cell(page, 2)))

    # 6. a tuning run cancelled before its first measured candidate: the dashboard says so
    run_cell(page, 3)
    page.wait_for_selector(".mlc-t-status", timeout=60_000)
    run_cell(page, 4)
    page.wait_for_function("() => document.querySelector('.mlc-t-status').textContent === 'cancelled'", timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.mlc-t-plot text')].some("
        "(t) => t.textContent.includes('cancelled before any candidate was measured'))",
        timeout=20_000,
    )
    board = page.locator(".mlc-tuning").first
    board.scroll_into_view_if_needed()
    shots.append(lab.shot("dashboard-cancelled-before-first-candidate", board))

    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        for p in shots:
            shutil.copy(p, Path(SHOTS) / p.name)


BAD_PROGRAM_CELL = '''import mlc_lab
# the program, as a string in the cell
PROGRAM = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def add(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + bias
"""
session = mlc_lab.Session(PROGRAM)'''


def test_a_program_error_names_the_cell_line(lab_server, page, artifacts):
    url, root = lab_server
    write_notebook(root / "program_error.ipynb", [BAD_PROGRAM_CELL])
    lab = Lab(page, url, artifacts, prefix="program-error")
    lab.open("program_error.ipynb")
    run_cell(page, 0)
    err = cell(page, 0).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    err.wait_for(timeout=60_000)
    text = err.inner_text()
    lines = text.splitlines()
    assert lines[0].startswith("LoadError: line 9 of the program text: TVMScript does not parse"), text
    # the string starts on the cell's line 3: the program's line 9 is the cell's line 11
    assert "line 9 of the program text is Cell In[1], line 11: B[vi] = A[vi] + bias" in text
    assert "mlc_lab/" not in text and "Traceback" not in text
    shot = lab.shot("cell-line-of-the-program", cell(page, 0))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(SHOTS) / shot.name)


def test_a_trace_document_shows_the_sentence_first(lab_server, lab_page, artifacts):
    """A double-clicked .trace whose third line fails, in its own kernel: the output under the
    document reads sentence first, naming the file and its line, with no mlc_lab frames."""
    from tests.e2e.test_labextension_lab import lab_setting

    url, root = lab_server
    page, _errors = lab_page
    lab_setting(url)  # documents start a kernel of their own
    (root / "bad.py").write_text(MM_RELU)
    (root / "bad.trace").write_text(
        'b0 = sch.get_sblock(name="Y", func_name="mm_relu")\n'
        "l1, l2, l3 = sch.get_loops(block=b0)\n"
        "sch.vectorize(loop=l9)\n"
    )
    page.goto(f"{url}/lab/tree/bad.trace?reset")
    err = page.locator(".mlc-lab-doc .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    err.wait_for(timeout=180_000)
    text = err.inner_text()
    assert text.startswith("TraceParseError: bad.trace, line 3: "), text
    assert "mlc_lab/" not in text and "Traceback" not in text
    assert "Cell In[" not in text  # the document's own code is not the student's: the file is where to look
    shot = artifacts / "trace-document-error-sentence-first.png"
    page.locator(".mlc-lab-doc").first.screenshot(path=str(shot))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(SHOTS) / shot.name)
