"""The explorer keeps what a student works on in view (issue 27, items 3 and 4), in a real JupyterLab:
- the code view scrolls the selected loop and the lines a step changed into its own view (a loop on
  line 28 of a script whose view shows lines 1-20: select it, press `v`);
- the History pane keeps the current step's row in view, and room for rows, with the latency plot
  open in a 640 px explorer (the default height)."""

from __future__ import annotations

import pytest

from tests.e2e.lab import Lab, write_notebook
from tests.e2e.test_explorer_lab import row

pytestmark = pytest.mark.e2e

STEPS = (
    "s.apply('split', 'Y/j', factors=[None, 4])\n"
    "s.apply('reorder', 'Y/i', 'j_0', 'k', 'j_1')\n"
    "s.apply('reverse_compute_at', 'C', 'j_0')\n"
    "s.apply('decompose_reduction', 'Y', 'k')"
)
CELLS = [
    "import mlc_lab\nfrom tests.fixtures.programs import MM_RELU\ns = mlc_lab.Session(MM_RELU)\n" + STEPS,
    "ex = mlc_lab.explore(s)\nex",
]
SCROLLER = ".mlc-explorer .mlc-code-main .cm-scroller"

# Where the marked lines are against the code scroller's visible box (not CodeMirror's rendered range).
CODE_GEOMETRY_JS = """(sel) => {
  const sc = document.querySelector(sel);
  const box = sc.getBoundingClientRect();
  const top = box.top + sc.clientTop, bottom = top + sc.clientHeight;
  const seen = (el) => { const r = el.getBoundingClientRect(); return r.top >= top - 1 && r.bottom <= bottom + 1; };
  const lines = [...sc.querySelectorAll('.cm-content .cm-line')];
  const number = (el) => { const gutter = [...sc.querySelectorAll('.cm-lineNumbers .cm-gutterElement')]
    .find((g) => Math.abs(g.getBoundingClientRect().top - el.getBoundingClientRect().top) < 2); return gutter ? Number(gutter.innerText) : null; };
  const head = sc.querySelector('.mlc-line-selected-head');
  const changed = [...sc.querySelectorAll('.mlc-line-changed')];
  return {
    scrollTop: sc.scrollTop,
    shown: lines.filter(seen).map(number).filter((n) => n !== null),
    head: head ? { line: number(head), seen: seen(head) } : null,
    changed: changed.map((el) => ({ line: number(el), seen: seen(el) })),
  };
}"""


def _code_has(page, needle: str) -> None:
    page.wait_for_function(
        "([sel, n]) => (document.querySelector(sel)?.innerText || '').includes(n)",
        arg=[".mlc-explorer .mlc-code-main .cm-content", needle],
        timeout=20_000,
    )


def test_code_view_follows_the_selection_and_the_change(lab_server, lab_page, artifacts):
    url, root = lab_server
    page, errors = lab_page
    write_notebook(root / "follow_code.ipynb", CELLS)
    lab = Lab(page, url, artifacts, prefix="follow-code")
    lab.open("follow_code.ipynb")
    lab.run_all()
    row(page, "loop", "ax0").wait_for(timeout=60_000)
    page.locator(".mlc-explorer").scroll_into_view_if_needed()
    before = page.evaluate(CODE_GEOMETRY_JS, SCROLLER)
    # the loop is below what the view shows (CodeMirror has it rendered, in its margin)
    assert before["scrollTop"] == 0 and max(before["shown"]) < 28, before

    row(page, "loop", "ax0").click()
    page.keyboard.press("v")
    _code_has(page, "for ax0 in T.vectorized(4):")
    page.wait_for_timeout(500)  # the scroll lands in the next frame
    after = page.evaluate(CODE_GEOMETRY_JS, SCROLLER)
    lab.shot("after-v", page.locator(".mlc-explorer"))
    assert after["head"] == {"line": 28, "seen": True}, after
    assert after["changed"] and all(c["seen"] for c in after["changed"]), after
    assert 28 in [c["line"] for c in after["changed"]], after
    assert not errors, errors
