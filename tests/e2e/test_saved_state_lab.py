"""Saved widgets outlive the kernel: lecture notebook 1, executed by nbclient with its widget state
stored, reopened in JupyterLab with no kernel and in Notebook 7: each widget renders its last state,
says it has no kernel, and the page carries the front-end code once. No console errors."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from tests.e2e.lab import console_errors
from tests.e2e.saved import REPO, execute_saving_widgets, export_offline, plot_bytes, widget_state, widget_views

pytestmark = pytest.mark.e2e

CODE = ".mlc-explorer .mlc-code-main .cm-content"


@pytest.fixture(scope="module")
def saved_lecture(lab_server, artifacts):
    """notebooks/01_tensorir.ipynb run headless (quick sweep), saved with its widget state."""
    _url, root = lab_server
    dest = root / "saved_01.ipynb"
    secs = execute_saving_widgets(
        REPO / "notebooks" / "01_tensorir.ipynb", dest, prelude='import os\nos.environ["MLC_LAB_QUICK"] = "1"'
    )
    nb = json.loads(dest.read_text())
    # No kernel when reopened: an unknown kernelspec makes JupyterLab ask, and we answer "No Kernel".
    # (language too: JupyterLab would otherwise start the default kernel of that language).
    nb["metadata"]["kernelspec"] = {"name": "mlc-lab-none", "display_name": "none", "language": "mlc-lab-none"}
    nb["metadata"].pop("language_info", None)
    dest.write_text(json.dumps(nb))
    # Saved widgets run code from the file: like ipywidgets, only in a trusted notebook.
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(dest)], check=True, capture_output=True)
    (artifacts / "saved_01.ipynb").write_text(json.dumps(nb))
    print(f"executed 01_tensorir with widget state in {secs:.1f} s")
    # Budget: the widget state of a saved lecture (explorer + memory view here; the dashboard's is
    # measured in tests/widgets/test_saved_size.py) stays under 2 MB beyond its plots.
    state_bytes = len(json.dumps(nb["metadata"]["widgets"]))
    assert state_bytes < 2_000_000, state_bytes
    assert len(dest.read_text()) - plot_bytes(nb) < 2_000_000
    return dest, nb


def _no_kernel_dialog(page, artifacts, name) -> None:
    dialog = page.locator(".jp-Dialog")
    try:
        dialog.wait_for(timeout=60_000)
    except Exception:
        page.screenshot(path=str(artifacts / f"{name}-no-dialog.png"))
        raise
    select = dialog.locator("select")
    labels = select.locator("option").all_inner_texts()
    select.select_option(label=next(t for t in labels if "No Kernel" in t))
    dialog.locator(".jp-mod-accept").click()


def _assert_saved_widgets(page, nb) -> None:
    state = widget_state(nb)
    shown = [state[i]["state"].get("_mlc_entry") for i in widget_views(nb) if i in state]
    assert shown.count("explorer") == 1 and shown.count("access_view") == 1, shown
    page.wait_for_selector(".mlc-explorer", timeout=60_000)
    page.wait_for_selector(".mlc-access-view", timeout=60_000)
    assert page.locator(".jp-OutputArea-output >> text=model not found").count() == 0
    # The explorer shows the last step the notebook applied (decompose_reduction makes Y_init).
    page.wait_for_function(
        "(sel) => (document.querySelector(sel)?.innerText || '').includes('T.sblock(\"Y_init\")')",
        arg=CODE,
        timeout=30_000,
    )
    assert page.locator(".mlc-offline-banner").count() == 2
    # The front end was imported once for the page, for both widgets.
    assert page.evaluate("() => globalThis.__mlc_lab_front_ends__ && globalThis.__mlc_lab_front_ends__.size") == 1


def code_has(page, needle: str, present: bool = True) -> None:
    page.wait_for_function(
        "([sel, n, p]) => (document.querySelector(sel)?.innerText || '').includes(n) === p",
        arg=[CODE, needle, present],
        timeout=15_000,
    )


def step_offline(page) -> None:
    """Step through the explorer's recorded history with no kernel: goto, undo, redo."""
    rows = page.locator(".mlc-explorer .mlc-history-list [data-step]")
    rows.first.wait_for()
    assert rows.count() >= 5, rows.all_inner_texts()  # the whole history, from the records
    rows.nth(1).click()  # step 1: split
    code_has(page, "for i, j_0, j_1, k in T.grid(128, 32, 4, 128):")
    code_has(page, 'T.sblock("Y_init")', present=False)
    page.locator(".mlc-explorer .mlc-undo").first.click()  # back to the original
    code_has(page, "for i, j, k in T.grid(128, 128, 128):")
    page.locator(".mlc-explorer .mlc-redo").first.click()
    code_has(page, "j_0")
    rows.nth(4).click()  # the last step again
    code_has(page, 'T.sblock("Y_init")')
    refused = page.eval_on_selector_all(".mlc-offline-banner[data-refused]", "els => els.map(e => e.dataset.refused)")
    assert refused == []  # nothing was refused


def memory_offline(page) -> None:
    """The memory view draws the footprint it was showing, and plays it, with no kernel."""
    view = page.locator(".mlc-access-view").first
    view.scroll_into_view_if_needed()
    view.locator(".mlc-acc-buffers canvas").first.wait_for(timeout=20_000)
    view.locator(".mlc-acc-play").click()
    page.wait_for_function(
        "() => document.querySelector('.mlc-access-view .mlc-acc-scrub')?.value !== '0'", timeout=10_000
    )


@contextlib.contextmanager
def _opened_without_kernel(browser, address: str, artifacts, prefix: str):
    """The saved lecture opened at ``address`` in a context of its own, past the "no kernel" dialog:
    yields the page and the console errors it logs."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    errors = console_errors(page)
    try:
        page.goto(address)
        _no_kernel_dialog(page, artifacts, prefix)
        yield page, errors
    finally:
        context.close()


def test_saved_notebook_in_jupyterlab_without_kernel(lab_server, saved_lecture, browser, artifacts):
    url, _root = lab_server
    _path, nb = saved_lecture
    address = f"{url}/lab/tree/saved_01.ipynb?reset"
    with _opened_without_kernel(browser, address, artifacts, "saved-lab") as (page, errors):
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
        _assert_saved_widgets(page, nb)
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session") is None
        step_offline(page)
        memory_offline(page)
        # A control that needs Python says so instead of waiting.
        page.locator(".mlc-explorer .mlc-measure, .mlc-explorer button:has-text('Measure')").first.click()
        page.wait_for_selector(
            ".mlc-offline-banner[data-refused=measure] >> text=needs a running kernel", timeout=10_000
        )
        page.locator(".mlc-explorer").first.screenshot(path=str(artifacts / "saved-lab-explorer.png"))
        assert not errors, errors


def test_saved_notebook_in_notebook7(lab_server, saved_lecture, browser, artifacts):
    url, _root = lab_server
    _path, nb = saved_lecture
    with _opened_without_kernel(browser, f"{url}/notebooks/saved_01.ipynb", artifacts, "saved-nb7") as (page, errors):
        _assert_saved_widgets(page, nb)
        page.locator(".mlc-explorer").first.screenshot(path=str(artifacts / "saved-nb7-explorer.png"))
        page.locator(".mlc-explorer").first.hover()  # Notebook 7 has no side panels to offer
        assert page.locator(".mlc-explorer .mlc-side-panel").first.is_hidden()
        # Notebook 7.6 itself raises these on this server's pages (its shortcut settings read a
        # plugin it does not have; its tree plugin calls a file-browser command it did not
        # register): reproduced with no mlc_lab extension installed, so not asserted here.
        known = ("reading 'schema'", "Command 'filebrowser:open-path' not registered")
        ours = [e for e in errors if not any(k in e for k in known)]
        assert not ours, ours


def test_exported_page_offline_from_file(lab_server, saved_lecture, browser, artifacts, tmp_path):
    """`mlc-lab export` of the saved lecture, opened from file:// with the network cut."""
    path, _nb = saved_lecture
    out = tmp_path / "site"
    page_file = out / "saved_01.html"
    context = export_offline(browser, path, out)
    page = context.new_page()
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    errors = console_errors(page)
    try:
        page.goto(page_file.as_uri())
        page.wait_for_function("() => document.body.dataset.mlcLabReady === 'true'", timeout=60_000)
        assert page.locator(".mlc-lab-saved[data-rendered=true]").count() == 2
        assert page.locator(".mlc-lab-plot .main-svg").count() >= 3  # the notebook's plotly figures
        step_offline(page)
        memory_offline(page)
        page.locator(".mlc-explorer").first.screenshot(path=str(artifacts / "export-explorer.png"))
        assert [u for u in requests if not u.startswith(("file:", "blob:", "data:"))] == []
        assert not errors, errors
    finally:
        context.close()
