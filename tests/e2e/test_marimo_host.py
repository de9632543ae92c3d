"""mlc_lab in marimo (a native anywidget host), driven by Debian chromium: `marimo run` of a small app
(an explorer, a memory view, and a dashboard reopened from a tuning work directory), opened by two
browser sessions at once.

marimo renders each widget in its own shadow root, so mlc_lab's stylesheets and CodeMirror's must be
put in that root (rules in document.head do not reach it); and it serves every browser session from
one process, so each session needs its own FrontEnd model (a model reaches only the session that
made it: the second browser used to show "Model not found")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, serving
from tests.widgets.test_tuning_dashboard import LATENCIES, RUN_ERROR, WorkDir
from tests.unit.processes import free_port

pytestmark = pytest.mark.e2e

SHOTS = Path(os.environ.get("MLC_LAB_SHOTS", "/work/notes/shots"))

APP = """
import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import os

    from mlc_lab.widgets import explore
    from mlc_lab.widgets.access.view import access_view
    from mlc_lab.widgets.tuning import TuningDashboard
    from tests.fixtures import programs_access as P
    from tests.fixtures.programs import MM_RELU
    import mlc_lab
    return MM_RELU, P, TuningDashboard, access_view, explore, mlc_lab, os


@app.cell
def _(MM_RELU, explore):
    ex = explore(MM_RELU)
    ex
    return (ex,)


@app.cell
def _(P, access_view, mlc_lab):
    ws = access_view(mlc_lab.Session(P.sched_window_sum(1024, 128).mod), "i_1", at={"i_0": 1})
    ws
    return (ws,)


@app.cell
def _(TuningDashboard, os):
    dash = TuningDashboard.from_work_dir(os.environ["MLC_MARIMO_WORK_DIR"])
    dash
    return (dash,)


if __name__ == "__main__":
    app.run()
"""

# Computed values that only mlc_lab's stylesheets set (custom properties of each widget's root), and
# whether CodeMirror's highlighting reached the code pane: a keyword's colour (lib/cm_theme.ts gives
# keywords var(--jp-mirror-editor-keyword-color, #008000); marimo has no --jp-* variables).
STYLE_PROBE_JS = """() => {
  const found = (sel) => {
    const todo = [document];
    while (todo.length) {
      const root = todo.pop();
      const hit = root.querySelector(sel);
      if (hit) return hit;
      for (const el of root.querySelectorAll('*')) if (el.shadowRoot) todo.push(el.shadowRoot);
    }
    return null;
  };
  const prop = (sel, name) => { const el = found(sel); return el ? getComputedStyle(el).getPropertyValue(name).trim() : null; };
  const code = found('.mlc-explorer .mlc-code-main .cm-content');
  const keywords = code ? [...code.querySelectorAll('span')].filter((s) => s.textContent === 'for') : [];
  const explorer = found('.mlc-explorer');
  return {
    explorerBg: prop('.mlc-explorer', '--mlc-bg'),
    accessFg: prop('.mlc-access', '--acc-fg'),
    tuningBorder: found('.mlc-tuning') ? getComputedStyle(found('.mlc-tuning')).borderTopStyle : null,
    keywordColours: keywords.map((s) => getComputedStyle(s).color),
    inShadowRoot: !!explorer && explorer.getRootNode() instanceof ShadowRoot,
    headHasExplorerStyle: !!document.getElementById('mlc-lab-explorer-style'),
    notFound: document.body.innerText.includes('Model not found'),
  };
}"""


@pytest.fixture()
def marimo_app(tmp_path):
    """(url, log path) of `marimo run` serving the app above."""
    wd = WorkDir(tmp_path / "tune_wd")
    for lat in LATENCIES:
        wd.add(lat, RUN_ERROR if lat is None else None)
    app = tmp_path / "mlc_app.py"
    app.write_text(APP)
    port = free_port()
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        MLC_MARIMO_WORK_DIR=str(wd.path),
        TVM_NUM_THREADS=env.get("TVM_NUM_THREADS", "2"),
        MARIMO_SKIP_UPDATE_CHECK="1",
        ANYWIDGET_HMR="0",
    )
    log_path = tmp_path / "marimo.log"
    cmd = [
        sys.executable,
        "-m",
        "marimo",
        "run",
        str(app),
        "--headless",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-token",
    ]
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, log_path, url, 60, "marimo run", cwd=tmp_path, env=env):
        yield url, log_path


def _open(browser, url):
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return context, page, errors


def _code(page) -> str:
    return page.locator(".mlc-explorer .mlc-code-main .cm-content").inner_text()


def test_two_marimo_sessions_styled_and_answering(marimo_app, browser):
    url, log_path = marimo_app
    SHOTS.mkdir(parents=True, exist_ok=True)
    sessions = [_open(browser, url), _open(browser, url)]  # both open before either has drawn
    try:
        for n, (_ctx, page, _errors) in enumerate(sessions, start=1):
            # Playwright's CSS locators go through open shadow roots, as a user's eyes do
            page.locator(".mlc-explorer .mlc-row").first.wait_for()
            page.locator(".mlc-access canvas").first.wait_for()
            page.locator(".mlc-tuning .js-plotly-plot").first.wait_for()
            page.wait_for_function(
                STYLE_PROBE_JS.replace("() => {", "() => { const r = (() => {", 1)
                + ")(); return r.keywordColours.length > 0; }"
            )
            probe = page.evaluate(STYLE_PROBE_JS)
            assert not probe["notFound"], f"session {n}: a widget says 'Model not found'"
            assert probe["inShadowRoot"], "marimo no longer renders widgets in a shadow root: this test checks nothing"
            assert probe["explorerBg"] == "#fff", f"session {n}: explorer.css did not reach the widget: {probe}"
            assert probe["accessFg"] == "#222", f"session {n}: access.css did not reach the memory view: {probe}"
            assert probe["tuningBorder"] == "solid", f"session {n}: dashboard.css did not reach the dashboard: {probe}"
            assert set(probe["keywordColours"]) == {"rgb(0, 128, 0)"}, (
                f"session {n}: no CodeMirror highlighting: {probe}"
            )
            assert not probe["headHasExplorerStyle"]  # the styles live in the widget's root, not document.head
            page.screenshot(path=str(SHOTS / f"marimo_session{n}_loaded.png"), full_page=True)
            page.locator(".mlc-access >> visible=true").first.screenshot(
                path=str(SHOTS / f"marimo_session{n}_memory.png")
            )
            dash = page.locator(".mlc-tuning >> visible=true").first
            dash.locator(".js-plotly-plot").first.hover()  # plotly shows its mode bar
            dash.screenshot(path=str(SHOTS / f"marimo_session{n}_dashboard.png"))

        # A click answered in each session (its own kernel state): unroll k of Y from the primitives pane.
        for n, (_ctx, page, errors) in enumerate(sessions, start=1):
            assert "T.unroll" not in _code(page)
            page.locator('.mlc-explorer .mlc-row[data-kind="loop"][data-name="k"]').first.click()
            page.locator('.mlc-explorer .mlc-prim[data-primitive="unroll"]').click()
            page.wait_for_function(
                """() => { const todo = [document];
                  while (todo.length) { const r = todo.pop();
                    const c = r.querySelector('.mlc-explorer .mlc-code-main .cm-content');
                    if (c) return c.textContent.includes('T.unroll');
                    for (const el of r.querySelectorAll('*')) if (el.shadowRoot) todo.push(el.shadowRoot); }
                  return false; }""",
                timeout=30_000,
            )
            page.locator(".mlc-explorer").first.screenshot(path=str(SHOTS / f"marimo_session{n}_unrolled.png"))
            if n == 1:  # full window: the explorer stays in its shadow root, styled, over the whole page
                page.locator(".mlc-explorer .mlc-maximize").first.click()
                page.locator(".mlc-explorer.mlc-maximized").wait_for()
                box = page.locator(".mlc-explorer.mlc-maximized").bounding_box()
                assert box["width"] > 1400 and box["height"] > 1000, box
                full = page.locator(".mlc-explorer.mlc-maximized")
                assert full.evaluate("(el) => getComputedStyle(el).position") == "fixed"
                assert full.evaluate("(el) => el.getRootNode() instanceof ShadowRoot")
                page.screenshot(path=str(SHOTS / "marimo_session1_full_window.png"))
                page.keyboard.press("Escape")
                page.locator(".mlc-explorer.mlc-maximized").wait_for(state="detached")
            assert not errors, f"session {n}: page errors {errors}"
    except Exception:
        print(log_path.read_text()[-4000:])
        raise
    finally:
        for ctx, _page, _errors in sessions:
            ctx.close()
