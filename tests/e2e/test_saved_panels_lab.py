"""A saved explorer's panels without a kernel: a notebook run headless (nbclient, widget state
stored) whose explorer was asked, as its panels ask, for the Memory footprint of the selected
loop and the Compiler's lowering of two steps; exported with `mlc-lab export` and opened from
file:// with the network cut, the page shows those answers (at the steps they were asked at) and
says "needs a running kernel" for a step whose lowering was never asked. No console errors."""

from __future__ import annotations

import json

import pytest

from tests.e2e.lab import console_errors, write_notebook
from tests.e2e.saved import execute_saving_widgets, export_offline, widget_state

pytestmark = pytest.mark.e2e

CELL = """import mlc_lab
ex = mlc_lab.explore(mlc_lab.course_program("mm_relu"))
s = ex.session
j0, j1 = s.apply("split", "Y/j", factors=[None, 4])
s.apply("reorder", "Y/i", j0, "k", j1)
ex.select("j_1")

def ask(method, **params):  # what the explorer's panels send (js/explorer/view.ts, compiler.ts)
    ex._handle_request(ex, {"kind": "mlc-request", "id": method, "method": method, "params": params}, [])
    assert ex.wait(300)

ask("access_footprint", loop=ex.selection["name"], at={}, sweep_threads=True)
ask("lower", step=2, target="cpu")
ask("lower", step=1, target="cpu")
ex"""

COMPILER = ".mlc-explorer .mlc-compiler"


def _status_has(page, text: str) -> None:
    page.wait_for_function(
        "(t) => (document.querySelector('.mlc-explorer .mlc-compiler-status')?.textContent || '').startsWith(t)",
        arg=text,
        timeout=20_000,
    )


def test_saved_panels_offline(browser, artifacts, tmp_path):
    src = tmp_path / "panels_src.ipynb"
    write_notebook(src, [CELL])
    saved = tmp_path / "panels.ipynb"
    execute_saving_widgets(src, saved)
    size = saved.stat().st_size
    state = widget_state(json.loads(saved.read_text()))
    records = [m["state"]["key"] for m in state.values() if m["state"].get("key")]
    assert (
        sum(k.startswith("lower ") for k in records) == 2
        and sum(k.startswith("access_footprint ") for k in records) == 1
    )
    print(f"\nsaved notebook with 3 steps, 2 lowerings and 1 footprint recorded: {size / 1e6:.2f} MB")
    assert size < 2_000_000
    context = export_offline(browser, saved, tmp_path / "site")
    page = context.new_page()
    errors = console_errors(page)
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    try:
        page.goto((tmp_path / "site" / "panels.html").as_uri())
        page.wait_for_function("() => document.body.dataset.mlcLabReady === 'true'", timeout=60_000)
        ex = page.locator(".mlc-explorer").first
        # Memory: the footprint of j_1 at step 2, drawn from the record
        ex.locator(".mlc-memory-toggle").click()
        ex.locator(".mlc-acc-buffers canvas").first.wait_for(timeout=20_000)
        # Compiler: step 2's lowering, then step 1's (goto), both recorded
        ex.locator(".mlc-diff-mode").select_option("compiler")
        _status_has(page, "step 2:")
        assert ex.locator(".mlc-compiler-pass[data-index]").count() > 40
        ex.locator(".mlc-history-list [data-step]").nth(1).click()
        _status_has(page, "step 1:")
        ex.screenshot(path=str(artifacts / "saved-panels-compiler.png"))
        # step 0's lowering was never asked: the panel says it needs the kernel
        ex.locator(".mlc-history-list [data-step]").nth(0).click()
        page.wait_for_function(
            "() => (document.querySelector('.mlc-explorer .mlc-compiler-verdict')?.textContent || '').includes('needs a running kernel')",
            timeout=20_000,
        )
        assert page.locator(".mlc-offline-banner[data-refused=lower]").count() == 1
        assert [u for u in requests if not u.startswith(("file:", "blob:", "data:"))] == []
        assert not errors, errors
    finally:
        context.close()
