"""Helpers to drive a notebook in JupyterLab from Playwright (kernel-ready wait, run-all, kernel exec)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import nbformat

KERNEL_READY_JS = """() => {
  const app = window.jupyterapp;
  const w = app && app.shell.currentWidget;
  const ctx = w && w.sessionContext;
  const k = ctx && ctx.session && ctx.session.kernel;
  return !!(ctx && ctx.isReady && k && k.connectionStatus === 'connected' && k.status === 'idle');
}"""

# Run code in the notebook's kernel (as a hidden cell would) and return its stdout and errors.
KERNEL_EXEC_JS = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({ code, silent: false, store_history: false });
  let out = '';
  future.onIOPub = (msg) => {
    const t = msg.header.msg_type;
    if (t === 'stream') out += msg.content.text;
    if (t === 'error') out += 'ERROR: ' + msg.content.ename + ': ' + msg.content.evalue + '\\n' + (msg.content.traceback || []).join('\\n');
  };
  await future.done;
  return out;
}"""


def console_errors(page) -> list[str]:
    """A list that collects the page's console errors and uncaught exceptions from now on."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return errors


def lab_api(url: str, method: str = "GET"):
    """One call of JupyterLab's REST API: its JSON answer (None when it has no body)."""
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


def forget(url: str, notebook: str, workspaces: bool = True) -> None:
    """Shut down the kernels of ``notebook`` and (``workspaces``) delete every saved workspace, so that
    the next test finds no kernel of it running and JupyterLab does not reopen it."""
    for s in lab_api(f"{url}/api/sessions") or []:
        if s.get("path", "").endswith(notebook):
            lab_api(f"{url}/api/sessions/{s['id']}", "DELETE")
    if not workspaces:
        return
    for ws in (lab_api(f"{url}/lab/api/workspaces") or {}).get("workspaces", {}).get("ids", []):
        lab_api(f"{url}/lab/api/workspaces/{ws}", "DELETE")


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbformat.write(nb, str(path))


class Lab:
    def __init__(self, page, base_url: str, artifacts: Path, prefix: str = "lab"):
        self.page = page
        self.base_url = base_url
        self.artifacts = artifacts
        self.prefix = prefix
        self.shots = 0

    def open(self, name: str) -> None:
        # `?reset` starts from an empty workspace: notebooks earlier tests left open stay closed, so
        # the notebook we wait for below is the one on screen.
        self.page.goto(f"{self.base_url}/lab/tree/{name}?reset")
        self.page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook", timeout=60_000)
        # A kernel-selection dialog appears when the kernelspec is unknown; accept the default. The
        # kernel is awaited at once (no fixed wait for a dialog that usually never comes): a dialog
        # shown before it is ready is accepted, then the kernel is awaited again.
        accept = ".jp-Dialog .jp-mod-accept"
        ready_or_dialog = f"() => ({KERNEL_READY_JS})() || !!document.querySelector({json.dumps(accept)})"
        self.page.wait_for_function(ready_or_dialog, timeout=90_000)
        if not self.page.evaluate(KERNEL_READY_JS) and self.page.locator(accept).count():
            self.page.locator(accept).first.click()
        self.page.wait_for_function(KERNEL_READY_JS, timeout=90_000)

    def run_all(self) -> None:
        self.page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def kernel(self, code: str) -> str:
        out = self.page.evaluate(KERNEL_EXEC_JS, code)
        assert "ERROR:" not in out, out
        return out

    def kernel_json(self, expr: str):
        out = self.kernel(f"import json as _j; print(_j.dumps({expr}))")
        return json.loads(out.strip().splitlines()[-1])

    def shot(self, name: str, locator=None) -> Path:
        self.shots += 1
        path = self.artifacts / f"{self.prefix}-{self.shots:02d}-{name}.png"
        (locator or self.page).screenshot(path=str(path))
        return path


def run_notebook(page, lab_server, artifacts: Path, name: str, cells: list[str], prefix: str) -> Lab:
    """Write ``cells`` as the notebook ``name`` in the server's folder, open it in JupyterLab and run
    all its cells; the Lab that drives it (screenshots named ``prefix``-NN-...)."""
    url, root = lab_server
    write_notebook(root / name, cells)
    lab = Lab(page, url, artifacts, prefix=prefix)
    lab.open(name)
    lab.run_all()
    return lab
