"""A notebook as one static, offline HTML page whose mlc_lab widgets stay live (``mlc-lab export``).

The page carries the notebook's saved widget state (only what its mlc_lab widgets need: their
models and the one FrontEnd model holding the front-end code) and a small script that renders each
widget from it, the way JupyterLab renders a saved notebook with no kernel: the explorer still
steps through its history, the memory view scrubs and plays, the dashboard shows its trials.
Plotly figures are drawn by plotly.js inlined from the plotly package. Nothing is fetched: every
script and style is in the page, and the external scripts nbconvert's template would add are not.

Plain data in (a notebook file), an HTML file out; no TVM, no kernel unless asked to execute.
"""

from __future__ import annotations

import copy
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlc_lab.errors import UsageError

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PLOTLY = "application/vnd.plotly.v1+json"
STATIC = Path(__file__).resolve().parent / "static"
SAVED_PAGE_SCRIPT = STATIC / "saved_page.js"

_EXTERNAL = re.compile(
    r"<script[^>]*\ssrc=[\"']https?://[^>]*>\s*</script>|<link[^>]*\shref=[\"']https?://[^>]*>", re.I
)


@dataclass
class PageReport:
    path: Path
    widgets: int
    plots: int
    widget_state_bytes: int
    page_bytes: int


def saved_widget_state(nb: dict) -> dict[str, Any]:
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}) or {}


def _needed_models(state: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    """The saved models the shown widgets reach: themselves, their front end, their children."""
    keep: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        mid = todo.pop()
        if mid in keep or mid not in state:
            continue
        keep[mid] = state[mid]
        text = json.dumps(state[mid].get("state", {}))
        todo.extend(re.findall(r"(?:anywidget:|IPY_MODEL_)([0-9a-f]{32})", text))
    return keep


def execute(nb: Any, cwd: Path, timeout: int) -> None:
    """Run a notebook in a fresh kernel, keeping the widget state (nbclient's store_widget_state).

    The kernel talks over local sockets in a private folder (ZeroMQ's ipc transport), not TCP: no
    port on the machine carries the notebook's code and outputs in plain text, and the kernel has no
    reason to print its warning that it does ("Kernel is running over TCP without encryption")."""
    import tempfile

    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    with tempfile.TemporaryDirectory(prefix="mlc_lab_kernel_") as sockets:
        km = KernelManager(kernel_name=name, transport="ipc", ip=str(Path(sockets) / "kernel"))
        try:
            NotebookClient(
                nb,
                km=km,
                timeout=timeout,
                kernel_name=name,
                store_widget_state=True,
                resources={"metadata": {"path": str(cwd)}},
            ).execute()
        finally:  # nbclient leaves a kernel it was given running: shut it down before the sockets go
            if km.has_kernel:
                km.shutdown_kernel(now=False)


def _placeholder(model_id: str) -> str:
    # Replaced by the live widget as soon as the page's script runs; never the output's text/plain,
    # which (for mlc_lab widgets) only says how to see the widget, e.g. with this very page.
    return (
        f'<div class="mlc-lab-saved" data-model-id="{html.escape(model_id)}">'
        "<pre>Loading the mlc_lab widget from the state saved in this page "
        "(it needs JavaScript; nothing is fetched).</pre></div>"
    )


def _plot_div(index: int, figure: dict) -> str:
    payload = json.dumps(figure).replace("</", "<\\/")
    return (
        f'<div class="mlc-lab-plot" id="mlc-lab-plot-{index}"></div>'
        f'<script type="application/json" class="mlc-lab-plot-data" data-target="mlc-lab-plot-{index}">{payload}</script>'
    )


def prepare(nb: Any) -> tuple[Any, dict[str, Any], int]:
    """A copy of ``nb`` whose widget and plotly outputs are placeholders this page's script fills,
    the saved models those widgets need, and the number of plots."""
    nb = copy.deepcopy(nb)
    state = saved_widget_state(nb)
    shown: list[str] = []
    plots = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data")
            if not data:
                continue
            view = data.get(WIDGET_VIEW)
            if view is not None:
                mid = view.get("model_id", "")
                entry = state.get(mid, {}).get("state", {}).get("_mlc_entry")
                if entry:
                    shown.append(mid)
                    out["data"] = {"text/html": _placeholder(mid)}
                else:  # another library's widget, or state not saved: its text stands in
                    out["data"] = {k: v for k, v in data.items() if k != WIDGET_VIEW}
                    if not out["data"]:
                        out["data"] = {"text/plain": "(a widget whose state was not saved)"}
                continue
            if PLOTLY in data:
                out["data"] = {"text/html": _plot_div(plots, data[PLOTLY])}
                plots += 1
    nb.metadata.pop("widgets", None)  # nbconvert would add a CDN widget manager for it
    return nb, _needed_models(state, shown), plots


_PAGE_CSS = """
.mlc-lab-saved { margin: 4px 0; }
.mlc-lab-saved > pre { color: #667085; }
.mlc-lab-plot { min-height: 360px; }
"""

_PLOTS_JS = """
for (const s of document.querySelectorAll('script.mlc-lab-plot-data')) {
  const fig = JSON.parse(s.textContent);
  const el = document.getElementById(s.dataset.target);
  window.Plotly.newPlot(el, fig.data || [], fig.layout || {}, Object.assign({responsive: true, displaylogo: false}, fig.config || {}));
}
"""


def render_page(nb: Any, *, title: str) -> tuple[str, int, int, int]:
    """The page's HTML, the number of widgets and plots on it, and the bytes of widget state."""
    from nbconvert import HTMLExporter

    prepared, models, plots = prepare(nb)
    exporter = HTMLExporter(template_name="lab")
    body, _resources = exporter.from_notebook_node(prepared, resources={"metadata": {"name": title}})
    body = _EXTERNAL.sub("", body)
    if not SAVED_PAGE_SCRIPT.is_file():
        raise UsageError(f"{SAVED_PAGE_SCRIPT} is missing: build the front end first (npm run build)")
    state_json = json.dumps({"version_major": 2, "version_minor": 0, "state": models}).replace("</", "<\\/")
    extra = [
        f"<style>{_PAGE_CSS}</style>",
        f'<script type="{WIDGET_STATE}">{state_json}</script>',
        f'<script type="module">{SAVED_PAGE_SCRIPT.read_text(encoding="utf-8")}</script>',
    ]
    if plots:
        from plotly.offline import get_plotlyjs

        extra.append(f"<script>{get_plotlyjs()}</script>")
        extra.append(f"<script>{_PLOTS_JS}</script>")
    widgets = sum(1 for m in models.values() if m.get("state", {}).get("_mlc_entry"))
    page = body.replace("</body>", "\n".join(extra) + "\n</body>", 1)
    return page, widgets, plots, len(state_json)


def export_notebook(path: str | Path, out_dir: str | Path, *, run: bool = False, timeout: int = 600) -> PageReport:
    """Write ``out_dir/<notebook name>.html``: the notebook with its widgets live, offline."""
    import nbformat

    src = Path(path)
    if not src.is_file():
        raise UsageError(f"{src}: no such notebook")
    try:
        nb = nbformat.read(str(src), as_version=4)
    except Exception as exc:  # noqa: BLE001  (nbformat raises several types for a bad file)
        raise UsageError(
            f"{src}: not a readable notebook ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    if run:
        execute(nb, src.resolve().parent, timeout)
    elif not saved_widget_state(nb) and any(
        WIDGET_VIEW in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    ):
        raise UsageError(
            f"{src}: its widgets were saved without their state; export with --execute "
            "(or save it with widget state: nbclient's store_widget_state)"
        )
    page, widgets, plots, state_bytes = render_page(nb, title=src.stem)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{src.stem}.html"
    target.write_text(page, encoding="utf-8")
    return PageReport(target, widgets, plots, state_bytes, len(page.encode("utf-8")))
