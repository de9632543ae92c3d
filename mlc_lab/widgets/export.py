"""Static export of a session: one self-contained HTML file (no network, no kernel needed).

Scripts are highlighted on the server with Pygments, diffs come from difflib, loop trees are
nested lists. A few lines of inline script switch between steps; without script every step is
shown one after the other. Input is plain data (see :func:`collect_export`), so this module needs
neither TVM nor a running widget.
"""

from __future__ import annotations

import difflib
import html
import json
from dataclasses import dataclass, field
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from mlc_lab.core.protocol import SessionLike


@dataclass
class StepExport:
    id: Any
    parent: Any
    children: list
    label: str
    kind: str
    script: str
    trace: str = ""
    loop_tree: dict | None = None
    changed_lines: list[int] = field(default_factory=list)


@dataclass
class SessionExport:
    func: str
    current: Any
    steps: list[StepExport] = field(default_factory=list)
    # step id (as text) -> a measurement as plain data (latency_s, gflops, correct, error, target, ...)
    measurements: dict[str, dict] = field(default_factory=dict)
    # failed attempts: {"parent", "label", "summary", "detail"} (what the explorer's history shows)
    failures: list[dict] = field(default_factory=list)


def _measurement_html(m: dict | None) -> str:
    if not m:
        return ""
    if m.get("error"):
        return (
            f'<p class="measure bad">measured on {html.escape(str(m.get("target") or "?"))}: '
            f"failed ({html.escape(str(m.get('error_kind') or 'error'))}): {html.escape(str(m['error']).splitlines()[0])}</p>"
        )
    lat = m.get("latency_s")
    parts = [f"{lat * 1e3:.3f} ms" if isinstance(lat, (int, float)) else "?"]
    if isinstance(m.get("gflops"), (int, float)):
        parts.append(f"{m['gflops']:.2f} GFLOP/s")
    if m.get("correct") is not None:
        parts.append("matches the original" if m["correct"] else "DIFFERS from the original")
    return (
        f'<p class="measure">measured on {html.escape(str(m.get("target") or "?"))}: '
        f"{html.escape(' · '.join(parts))}</p>"
    )


def _failures_html(failures: list[dict], step_id: Any) -> str:
    here = [f for f in failures if str(f.get("parent")) == str(step_id)]
    if not here:
        return ""
    items = "".join(
        f"<li><code>{html.escape(str(f.get('label') or f.get('primitive') or '?'))}</code>: {html.escape(str(f.get('summary') or ''))}"
        + (f'<pre class="plain">{html.escape(str(f["detail"]))}</pre>' if f.get("detail") else "")
        + "</li>"
        for f in here
    )
    return f'<details open class="failed"><summary>Failed attempts from this step ({len(here)})</summary><ul>{items}</ul></details>'


def collect_export(session: SessionLike) -> SessionExport:
    """Every step of a Session (its StepViews) as plain data."""
    steps = []
    for step in session.steps:
        view = session.step_view(step.id)
        steps.append(
            StepExport(
                id=view.id,
                parent=view.parent,
                children=list(step.children),
                label=view.label,
                kind=view.kind,
                script=view.script,
                trace=view.trace,
                loop_tree=view.loop_tree,
                changed_lines=list(view.changed_lines),
            )
        )
    tree_now = session.step_view().loop_tree
    return SessionExport(
        func=str(tree_now.get("func") or session.func_name),
        current=session.current.id,
        steps=steps,
        failures=[f.to_json() for f in session.failed],
    )


_CSS = """
:root { --bg:#fff; --fg:#1f2328; --muted:#667085; --border:#d0d7de; --accent:#1976d2; --accent-bg:#e3f2fd;
  --add:#e6ffec; --del:#ffebe9; --changed:#fff3cd; }
body.dark { --bg:#111418; --fg:#e6edf3; --muted:#8b949e; --border:#30363d; --accent:#58a6ff; --accent-bg:#14283d;
  --add:#12361f; --del:#3d1618; --changed:#3b2e0a; }
* { box-sizing:border-box; }
body { margin:0; background:var(--bg); color:var(--fg); font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
header { padding:10px 16px; border-bottom:1px solid var(--border); display:flex; gap:12px; align-items:center; }
header h1 { font-size:18px; margin:0; }
header .muted { color:var(--muted); }
header button { margin-left:auto; font:inherit; background:var(--bg); color:var(--fg); border:1px solid var(--border); border-radius:4px; padding:2px 10px; cursor:pointer; }
.layout { display:grid; grid-template-columns:minmax(220px, 22%) 1fr; min-height:calc(100vh - 50px); }
nav { border-right:1px solid var(--border); padding:8px 0; overflow:auto; font-family:ui-monospace, Menlo, Consolas, monospace; font-size:13px; }
nav ul { list-style:none; margin:0; padding-left:12px; }
nav > ul { padding-left:6px; }
nav a { color:var(--fg); text-decoration:none; display:block; padding:1px 6px; border-radius:3px; }
nav a:hover { background:var(--accent-bg); }
nav a.active { background:var(--accent-bg); font-weight:600; }
nav ul.history { padding-left:0; }
nav .mark { color:var(--muted); }
nav a.current .mark { color:var(--accent); }
nav li.failure a { color:#c62828; }
nav li.failure .mark { color:#c62828; }
main { padding:8px 16px 32px; min-width:0; }
section.step { border-bottom:1px solid var(--border); padding-bottom:16px; margin-bottom:16px; }
section.step h2 { font-size:16px; font-family:ui-monospace, Menlo, Consolas, monospace; }
details { margin:6px 0; }
summary { cursor:pointer; color:var(--muted); font-weight:600; }
.hl pre, pre.plain { margin:4px 0; padding:8px; border:1px solid var(--border); border-radius:4px; overflow:auto; font-size:12.5px; line-height:1.4; }
.hl .hll { background:var(--changed) !important; display:block; }
table.diff { border-collapse:collapse; font-family:ui-monospace, Menlo, Consolas, monospace; font-size:12.5px; width:100%; }
table.diff td { padding:0 6px; white-space:pre; vertical-align:top; }
table.diff td.n { color:var(--muted); text-align:right; user-select:none; width:1%; }
table.diff tr.add td.t { background:var(--add); }
table.diff tr.del td.t { background:var(--del); }
table.diff tr.hunk td { color:var(--muted); background:var(--accent-bg); }
.diffbox { border:1px solid var(--border); border-radius:4px; overflow:auto; }
ul.tree { list-style:none; padding-left:16px; margin:2px 0; font-family:ui-monospace, Menlo, Consolas, monospace; font-size:13px; }
ul.tree.top { padding-left:0; }
.badge { display:inline-block; font-size:11px; padding:0 6px; border-radius:8px; border:1px solid var(--border); color:var(--muted); margin-left:4px; }
.k-parallel { background:#2e7d32; color:#fff; border:none; } .k-vectorized { background:#6a1b9a; color:#fff; border:none; }
.k-unrolled { background:#ef6c00; color:#fff; border:none; } .k-thread_binding { background:#1565c0; color:#fff; border:none; }
.it-spatial { background:#00838f; color:#fff; border:none; border-radius:3px; } .it-reduce { background:#c62828; color:#fff; border:none; border-radius:3px; }
.kw { font-weight:bold; color:#008000; } body.dark .kw { color:#7ee787; }
.rw { color:var(--muted); font-size:12px; }
p.measure { margin:4px 0 8px; } p.measure.bad, details.failed summary { color:#c62828; }
"""

_SCRIPT = """
(function () {
  var sections = Array.prototype.slice.call(document.querySelectorAll('section.step'));
  var links = Array.prototype.slice.call(document.querySelectorAll('nav a[data-step]'));
  function show(id) {
    sections.forEach(function (s) { s.style.display = s.dataset.step === id ? '' : 'none'; });
    links.forEach(function (a) { a.classList.toggle('active', a.dataset.step === id); });
  }
  links.forEach(function (a) { a.addEventListener('click', function (e) { e.preventDefault(); show(a.dataset.step); history.replaceState(null, '', '#step-' + a.dataset.step); }); });
  // a failed attempt: the step it was tried from, opened at its "Failed attempts" list
  Array.prototype.slice.call(document.querySelectorAll('nav a[data-failure-of]')).forEach(function (a) {
    a.addEventListener('click', function (e) {
      e.preventDefault();
      show(a.dataset.failureOf);
      var list = document.querySelector('section.step[data-step="' + a.dataset.failureOf + '"] details.failed');
      if (list) { list.open = true; list.scrollIntoView(); }
    });
  });
  var start = (location.hash.match(/^#step-(.+)$/) || [])[1] || document.body.dataset.current;
  show(start);
  var dark = window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
  document.body.classList.toggle('dark', dark);
  document.getElementById('theme').addEventListener('click', function () { document.body.classList.toggle('dark'); });
  document.addEventListener('keydown', function (e) {
    var i = links.findIndex(function (a) { return a.classList.contains('active'); });
    if (e.key === 'ArrowDown' || e.key === 'j') { if (links[i + 1]) show(links[i + 1].dataset.step); }
    if (e.key === 'ArrowUp' || e.key === 'k') { if (links[i - 1]) show(links[i - 1].dataset.step); }
  });
})();
"""


def _pygments_css() -> str:
    light = HtmlFormatter(style="default").get_style_defs("body .hl")
    try:
        dark = HtmlFormatter(style="github-dark").get_style_defs("body.dark .hl")
    except Exception:  # noqa: BLE001  (older Pygments)
        dark = HtmlFormatter(style="monokai").get_style_defs("body.dark .hl")
    return light + "\n" + dark


def highlight_script(text: str, marked: list[int] | None = None) -> str:
    formatter = HtmlFormatter(cssclass="hl", hl_lines=marked or [], linenos=False)
    return highlight(text, PythonLexer(), formatter)


def diff_table(before: str, after: str, context: int = 3) -> str:
    """A unified diff as an HTML table (line numbers on both sides)."""
    a, b = before.splitlines(), after.splitlines()
    rows = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        i1, j1 = group[0][1], group[0][3]
        i2, j2 = group[-1][2], group[-1][4]
        rows.append(
            f'<tr class="hunk"><td class="n"></td><td class="n"></td><td class="t">@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@</td></tr>'
        )
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                for k in range(x2 - x1):
                    rows.append(_drow("ctx", x1 + k + 1, y1 + k + 1, " ", a[x1 + k]))
                continue
            for k in range(x1, x2):
                rows.append(_drow("del", k + 1, "", "-", a[k]))
            for k in range(y1, y2):
                rows.append(_drow("add", "", k + 1, "+", b[k]))
    if not rows:
        return '<p class="rw">No change to the script.</p>'
    return '<div class="diffbox"><table class="diff">' + "".join(rows) + "</table></div>"


def _drow(cls: str, left: Any, right: Any, sign: str, text: str) -> str:
    return f'<tr class="{cls}"><td class="n">{left}</td><td class="n">{right}</td><td class="t">{sign} {html.escape(text)}</td></tr>'


def tree_html(tree: dict | None) -> str:
    if not tree:
        return '<p class="rw">(not available)</p>'
    parts = ['<ul class="tree top">']
    for fn in tree.get("functions", []):
        bufs = ", ".join(
            f"{html.escape(b['name'])}[{'×'.join(str(x) for x in b.get('shape', []))}]" for b in fn.get("buffers", [])
        )
        parts.append(f'<li><span class="kw">def</span> {html.escape(fn["name"])} <span class="rw">{bufs}</span>')
        parts.append(_children(fn.get("children", [])))
        parts.append("</li>")
    parts.append("</ul>")
    return "".join(parts)


def _children(nodes: list) -> str:
    if not nodes:
        return ""
    out = ['<ul class="tree">']
    for n in nodes:
        if n.get("kind") == "loop":
            kind = n.get("loop_kind", "serial")
            badge = (
                ""
                if kind == "serial"
                else f'<span class="badge k-{html.escape(kind)}">{html.escape(n.get("thread") or kind)}</span>'
            )
            out.append(
                f'<li><span class="kw">for</span> {html.escape(n["name"])} <span class="badge">{html.escape(str(n.get("extent")))}</span>{badge}'
            )
        else:
            iters = "".join(
                f'<span class="badge it-{html.escape(iv.get("kind", ""))}" title="{html.escape(iv.get("name", ""))}">{html.escape(iv.get("kind", "?")[:1].upper())}</span>'
                for iv in n.get("iter_vars", [])
            )
            init = '<span class="badge">init</span>' if n.get("has_init") else ""
            rw = " · ".join(
                x
                for x in [
                    ("reads " + ", ".join(n.get("reads", []))) if n.get("reads") else "",
                    ("writes " + ", ".join(n.get("writes", []))) if n.get("writes") else "",
                ]
                if x
            )
            out.append(
                f'<li><span class="kw">block</span> {html.escape(n["name"])}{iters}{init} <span class="rw">{html.escape(rw)}</span>'
            )
        out.append(_children(n.get("children", [])))
        out.append("</li>")
    out.append("</ul>")
    return "".join(out)


def history_rows(data: SessionExport) -> list[dict]:
    """The step tree as rows, drawn as the explorer's History draws it (js/explorer/history.ts):
    pre-order; a step's first child continues at its depth (a linear history reads as a list),
    later children are branches one deeper; failed attempts hang under the step they were tried from."""
    by_id = {str(s.id): s for s in data.steps}
    failures_at: dict[str, list[dict]] = {}
    for f in data.failures:
        failures_at.setdefault(str(f.get("parent")), []).append(f)
    rows: list[dict] = []

    def visit(step: StepExport, depth: int, branch: bool) -> None:
        rows.append({"kind": "step", "step": step, "depth": depth, "branch": branch})
        for f in failures_at.get(str(step.id), []):
            rows.append({"kind": "failure", "failure": f, "parent": step.id, "depth": depth + 1, "branch": False})
        kids = [by_id[str(c)] for c in step.children if str(c) in by_id]
        for i, kid in enumerate(kids):
            visit(kid, depth if i == 0 else depth + 1, i > 0)

    for root in (s for s in data.steps if s.parent is None or str(s.parent) not in by_id):
        visit(root, 0, False)
    return rows


def _nav(data: SessionExport) -> str:
    items = []
    for row in history_rows(data):
        pad = f' style="padding-left:{6 + 14 * row["depth"]}px"'
        if row["kind"] == "failure":
            f = row["failure"]
            label = html.escape(str(f.get("label") or f.get("primitive") or "?"))
            summary = html.escape(str(f.get("summary") or ""))
            parent = html.escape(str(row["parent"]))
            items.append(
                f'<li class="hrow failure" data-depth="{row["depth"]}" data-failure-of="{parent}"{pad}>'
                f'<a href="#step-{parent}" data-failure-of="{parent}" title="{summary}">'
                f'<span class="mark">✗</span> {label}</a></li>'
            )
            continue
        step = row["step"]
        sid = html.escape(str(step.id))
        current = str(step.id) == str(data.current)
        mark = "●" if current else "┬" if row["branch"] else "○"
        cls = " ".join(["hrow", "step"] + (["branch"] if row["branch"] else []))
        items.append(
            f'<li class="{cls}" data-step="{sid}" data-depth="{row["depth"]}"{pad}>'
            f'<a href="#step-{sid}" data-step="{sid}" class="{"current" if current else ""}">'
            f'<span class="mark">{mark}</span> {sid}: {html.escape(step.label)}</a></li>'
        )
    return '<ul class="history">' + "".join(items) + "</ul>"


def render_html(data: SessionExport, *, title: str | None = None) -> str:
    """The whole page as one string."""
    by_id = {str(s.id): s for s in data.steps}
    title = title or f"mlc_lab schedule of {data.func}"
    sections = []
    for step in data.steps:
        parent = by_id.get(str(step.parent)) if step.parent is not None else None
        marked = step.changed_lines if parent else []
        parts = [
            f'<section class="step" id="step-{html.escape(str(step.id))}" data-step="{html.escape(str(step.id))}">',
            f"<h2>step {html.escape(str(step.id))}: {html.escape(step.label)}</h2>",
        ]
        if parent is not None:
            parts.append(
                f"<details open><summary>Diff against step {html.escape(str(parent.id))} ({html.escape(parent.label)})</summary>"
                f"{diff_table(parent.script, step.script)}</details>"
            )
        parts.append(
            f"<details open><summary>TVMScript{' (changed lines marked)' if marked else ''}</summary>{highlight_script(step.script, marked)}</details>"
        )
        parts.append(_measurement_html(data.measurements.get(str(step.id))))
        parts.append(f"<details open><summary>Loop nest</summary>{tree_html(step.loop_tree)}</details>")
        parts.append(_failures_html(data.failures, step.id))
        if step.trace:
            parts.append(
                f'<details><summary>Trace</summary><pre class="plain">{html.escape(step.trace)}</pre></details>'
            )
        parts.append("</section>")
        sections.append("".join(parts))
    meta = json.dumps({"func": data.func, "current": data.current, "steps": len(data.steps)})
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>'
        f'<script type="application/json" id="mlc-lab-meta">{html.escape(meta, quote=False)}</script>'
        f"<style>{_CSS}\n{_pygments_css()}</style></head>"
        f'<body data-current="{html.escape(str(data.current))}">'
        f'<header><h1>{html.escape(title)}</h1><span class="muted">{len(data.steps)} steps · current: step {html.escape(str(data.current))} · ↑↓ to move</span>'
        '<button id="theme" type="button">light / dark</button></header>'
        f'<div class="layout"><nav>{_nav(data)}</nav><main>{"".join(sections)}</main></div>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
