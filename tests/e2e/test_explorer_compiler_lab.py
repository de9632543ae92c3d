"""The explorer's Compiler view in a real JupyterLab (Debian chromium): open it on a vectorized
step, select a loop in the loop nest and see its instructions highlighted in the assembly; a pass
of the list shows its diff."""

from __future__ import annotations

import pytest

from tests.e2e.lab import run_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e


def compiler_view(page):
    """The first explorer on the page, once drawn, switched to its Compiler view."""
    page.wait_for_function("() => document.querySelectorAll('.mlc-explorer .mlc-row').length > 0", timeout=60_000)
    ex = page.locator(".mlc-explorer").first
    ex.scroll_into_view_if_needed()
    ex.locator(".mlc-diff-mode").select_option("compiler")
    return ex


def test_compiler_view_highlights_the_selected_loop(lab_server, page, artifacts):
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "explorer_compiler.ipynb",
        [
            "from mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU),
            'ex = explore(MM_RELU, height="640px")\n'
            's = ex.session\nj0, j1 = s.apply("split", "Y/j", factors=[None, 16])\n'
            's.apply("reorder", "Y/i", j0, "k", j1)\ns.apply("vectorize", j1)\nex',
        ],
        prefix="explorer-compiler",
    )
    ex = compiler_view(page)
    verdict = ex.locator(".mlc-compiler-verdict")
    page.wait_for_function(
        "() => (document.querySelector('.mlc-compiler-verdict')?.textContent ?? '').includes('j_1 vectorized')",
        timeout=120_000,  # the first lowering starts the worker
    )
    assert "-wide FMAs on" in verdict.inner_text()
    assert ex.locator(".mlc-compiler-pass[data-index]").count() > 40
    assert ex.locator('.mlc-compiler-pass[data-status="changed"]').count() > 3

    # select j_1 in the loop nest: its instructions are highlighted in the assembly
    ex.locator('.mlc-row[data-name="j_1"]').click()
    page.wait_for_function(
        "() => Number(document.querySelector('.mlc-compiler')?.dataset.highlighted ?? 0) > 0 && "
        "document.querySelectorAll('.mlc-compiler .mlc-asm-hit').length > 0",
        timeout=30_000,
    )
    hits = ex.locator(".mlc-compiler .mlc-asm-hit").all_inner_texts()
    assert any("vfmadd" in line for line in hits) or any("mm" in line for line in hits), hits
    assert ex.locator('.mlc-compiler-loop[data-loop="j_1"]').get_attribute("class").count("mlc-active") == 1
    lab.shot("asm-j_1", ex)

    # another loop: C's i has its own, different instructions
    ex.locator('.mlc-compiler-loop[data-loop="C/i"]').click()
    page.wait_for_function(
        "() => document.querySelector('.mlc-compiler-loop.mlc-active')?.dataset.loop === 'C/i'", timeout=30_000
    )
    assert lab.kernel_json("ex.selection") == {"kind": "loop", "name": "C/i"}

    # the VectorizeLoop pass: the diff of the script it received and the one it produced
    ex.locator(".mlc-compiler-pass[data-index]", has_text="tirx.VectorizeLoop").click()
    page.wait_for_function(
        "() => (document.querySelector('.mlc-compiler .cm-content')?.innerText ?? '').includes('T.Ramp')",
        timeout=30_000,
    )
    lab.shot("pass-diff", ex)
