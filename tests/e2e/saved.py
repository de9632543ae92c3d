"""Lecture notebooks executed headless by nbclient with their widget state stored (as a teacher's
build would save them), for the tests that reopen them without a kernel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def export_offline(browser, notebook: Path, out: Path):
    """``mlc-lab export NOTEBOOK -o OUT`` (asserted to succeed), and a browser context with the network
    cut to open the pages it wrote in."""
    run = subprocess.run(
        [sys.executable, "-m", "mlc_lab.cli", "export", str(notebook), "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert run.returncode == 0, run.stderr
    return browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)


def execute_saving_widgets(src: Path, dest: Path, *, prelude: str = "", timeout: int = 600) -> float:
    """Run ``src`` in a fresh kernel (cwd = dest's folder) and write it with widget state to ``dest``.
    Returns the seconds it took."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(src), as_version=4)
    if prelude:
        nb.cells.insert(0, nbformat.v4.new_code_cell(prelude))
    for extra in src.parent.glob("*.py"):  # helper modules a notebook imports
        if not (dest.parent / extra.name).exists() and not extra.name.startswith("_"):
            shutil.copy(extra, dest.parent / extra.name)
    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t0 = time.monotonic()
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=True,
            resources={"metadata": {"path": str(dest.parent)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    nbformat.write(nb, str(dest))
    return time.monotonic() - t0


def widget_state(nb: dict) -> dict:
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def widget_views(nb: dict) -> list[str]:
    """Model ids of the widgets shown in outputs, in notebook order."""
    ids = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view:
                ids.append(view["model_id"])
    return ids


def plot_bytes(nb: dict) -> int:
    """Bytes of the notebook's plots (plotly figures and images): what the size budget leaves out."""
    total = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            for mime, value in out.get("data", {}).items():
                if mime.startswith("image/") or mime == "application/vnd.plotly.v1+json":
                    total += len(json.dumps(value))
    return total
