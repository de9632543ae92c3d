"""mlc-lab export NOTEBOOK.ipynb -o DIR [--execute]: a static, offline HTML page, widgets live."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write a notebook as a static HTML page whose mlc_lab widgets work offline")
    p.add_argument("notebook", help="a .ipynb saved with widget state (or use --execute)")
    p.add_argument("-o", "--output", required=True, help="the folder to write NOTEBOOK.html into")
    p.add_argument("--execute", action="store_true", help="run the notebook first (a fresh kernel, widget state kept)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell with --execute (default 600)")
    return p


def run(args: argparse.Namespace) -> int:
    from mlc_lab.notebook_page import export_notebook

    report = export_notebook(args.notebook, args.output, run=args.execute, timeout=args.timeout)
    widgets = "1 widget" if report.widgets == 1 else f"{report.widgets} widgets"
    print(
        f"{report.path}: {widgets}, {report.plots} plots, "
        f"{report.widget_state_bytes / 1e6:.2f} MB of widget state, {report.page_bytes / 1e6:.2f} MB in all"
    )
    if report.widgets == 0 and not args.execute:
        print(
            f"{args.notebook} shows no widgets: it was saved without outputs (never run, or cleared). "
            "Add --execute to run it first, or run it in JupyterLab and save it."
        )
    return 0
