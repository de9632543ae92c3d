"""The Memory panel on a 4096^3 matmul's outer loop, in a real JupyterLab (Debian chromium).

Before: the analysis ran on the kernel's message loop, so the panel said "analysing…" for 16 s with
no progress and no cancel, and a step clicked meanwhile waited behind it (13.5 s). Now the analysis
runs beside the steps: an undo pressed while it runs is drawn at once; the next step makes the stale
analysis stop; the answer comes pooled to what the panel draws, and says so. The function's name is
208 characters long: its row in the loop tree stays one line (it wrapped over 8). At 1400 px the
toolbar is one row (it wrapped).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.lab import Lab, write_notebook
from tests.e2e.test_access_view_lab import leave_no_trace  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e

LONG_NAME = "matmul_" + "x" * 201  # 208 characters
BIG = f"""
from tvm.script import ir as I
from tvm.script import tirx as T

@I.ir_module
class Big:
    @T.prim_func(s_tir=True)
    def {LONG_NAME}(A: T.Buffer((4096, 4096), "float32"), B: T.Buffer((4096, 4096), "float32"),
             C: T.Buffer((4096, 4096), "float32")):
        for i, j, k in T.grid(4096, 4096, 4096):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

CELLS = [
    "import mlc_lab\nfrom mlc_lab.widgets import explore\nBIG = " + repr(BIG),
    "ex = explore(BIG)\nex.session.apply('split', 'k', factors=[None, 8])\nex",
]

PANEL = ".mlc-explorer .mlc-access"


def test_a_big_outer_loop_leaves_the_steps_free(lab_server, page, artifacts, leave_no_trace):  # noqa: F811
    url, root = lab_server
    write_notebook(root / "access.ipynb", CELLS)  # the name leave_no_trace cleans up after
    lab = Lab(page, url, artifacts, prefix="memory-big")
    page.set_viewport_size({"width": 1400, "height": 1000})
    lab.open("access.ipynb")
    lab.run_all()
    page.wait_for_selector('.mlc-explorer .mlc-row[data-kind="loop"][data-name="i"]', timeout=120_000)
    ex = page.locator(".mlc-explorer")
    ex.scroll_into_view_if_needed()

    # the toolbar is one row at 1400 px (the step label gives way, cut with an ellipsis; it wrapped)
    bar = ex.locator(".mlc-toolbar").bounding_box()["height"]
    button = ex.locator(".mlc-toolbar .mlc-undo").bounding_box()["height"]
    what = page.evaluate(
        "() => [...document.querySelector('.mlc-explorer .mlc-toolbar').children].filter((el) => el.offsetParent)"
        ".map((el) => `${el.className}:${el.textContent}@${Math.round(el.getBoundingClientRect().bottom)}`).slice(6)"
    )
    assert bar < 1.7 * button, (bar, button, what)

    # the long function name: one line of the tree, cut, whole on hover
    name = ex.locator(".mlc-row .mlc-func-name").first
    assert name.get_attribute("title") == LONG_NAME
    line = ex.locator('.mlc-row[data-kind="loop"][data-name="i"] .mlc-row-main').bounding_box()["height"]
    func_row = name.locator("xpath=ancestor::div[contains(@class,'mlc-row-main')][1]").bounding_box()["height"]
    assert func_row <= 1.5 * line, (func_row, line)

    # the outer loop in the Memory panel; while it is analysed, ctrl+z is answered at once
    ex.locator(".mlc-memory-toggle").click()
    ex.locator('.mlc-row[data-kind="loop"][data-name="i"]').click()
    page.wait_for_selector(f"{PANEL}.mlc-acc-loading", timeout=10_000)
    assert not page.locator(f"{PANEL} .mlc-acc-cancel").is_hidden()
    assert "Analysing loop i…" in page.locator(f"{PANEL} .mlc-acc-head").inner_text()  # the loop asked about
    lab.shot("analysing", ex)
    t0 = time.monotonic()
    ex.locator('.mlc-row[data-kind="loop"][data-name="i"]').click()  # focus in the explorer
    page.keyboard.press("Control+z")
    ex.locator('.mlc-hrow.mlc-current[data-step="0"]').wait_for(timeout=30_000)
    undo_s = time.monotonic() - t0

    # back at the original program: the panel asks again and the answer comes pooled, and says so
    ex.locator('.mlc-row[data-kind="loop"][data-name="i"]').click()
    t1 = time.monotonic()
    page.wait_for_selector(f'{PANEL} .mlc-acc-card[data-buffer="C"]', timeout=120_000)
    page.wait_for_function(f"() => !document.querySelector('{PANEL}').classList.contains('mlc-acc-loading')")
    answer_s = time.monotonic() - t1
    head = page.locator(f"{PANEL} .mlc-acc-head").inner_text()
    assert "drawn pooled: one pixel per 21×21 elements" in head, head  # 4096 on 200 pixels, as the hover says
    stats = page.locator(f'{PANEL} .mlc-acc-card[data-buffer="A"] .mlc-acc-stats').inner_text()
    assert "16,777,216" in stats, stats  # exact: every element of A
    page.locator(PANEL).scroll_into_view_if_needed()
    lab.shot("pooled", page.locator(PANEL))

    # another loop: while it is analysed the head names it and the picture of i is greyed; back to i,
    # the answer kept for this step is drawn at once (it was analysed again: seconds under load)
    ex.locator('.mlc-row[data-kind="loop"][data-name="j"]').click()
    page.wait_for_function(f"() => document.querySelector('{PANEL} .mlc-acc-head').innerText.includes('loop j')")
    if page.evaluate(f"() => document.querySelector('{PANEL}').classList.contains('mlc-acc-loading')"):
        assert page.evaluate(f"() => document.querySelector('{PANEL}').classList.contains('mlc-acc-stale')")
        lab.shot("analysing-j-over-i-greyed", page.locator(PANEL))
    page.wait_for_function(
        f"() => !document.querySelector('{PANEL}').classList.contains('mlc-acc-loading')", timeout=120_000
    )
    t2 = time.monotonic()
    ex.locator('.mlc-row[data-kind="loop"][data-name="i"]').click()
    page.wait_for_function(
        f"() => document.querySelector('{PANEL} .mlc-acc-head').innerText.startsWith('Memory touched by loop i')"
    )
    again_s = time.monotonic() - t2
    assert again_s < 1.5, f"loop i, analysed a minute before at this step, took {again_s:.1f} s again"
    (artifacts / "memory-big-timings.json").write_text(
        json.dumps({"undo_s": undo_s, "answer_s": answer_s, "again_s": again_s})
    )
    assert undo_s < 5, f"the undo waited {undo_s:.1f} s behind the analysis"
