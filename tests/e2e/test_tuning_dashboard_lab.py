"""The tuning dashboard in a real JupyterLab, driven by Debian chromium: a small real meta_schedule
job (64^3 matmul, random search) is shown live while it runs, the Cancel button stops it with the
kernel idle, a trial shows its diff against the best, and the best opens in the explorer."""

from __future__ import annotations

import time

import pytest

from mlc_lab.tvm.course_programs import matmul
from tests.e2e.lab import Lab, write_notebook

pytestmark = pytest.mark.e2e

MATMUL = matmul(64, "mm")

POINTS_JS = "() => Number(document.querySelector('.mlc-tuning .mlc-t-plot')?.dataset.points || 0)"


def points(page) -> int:
    return page.evaluate(POINTS_JS)


def test_dashboard_live_cancel_detail_explorer(lab_server, page, artifacts):
    url, root = lab_server
    work_dir = root / "tune_wd"
    write_notebook(
        root / "tuning.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab.core.tuning import tune\nfrom mlc_lab.widgets.tuning import TuningDashboard\n"
            f"s = mlc_lab.Session({MATMUL!r})",
            # Far more trials than the test waits for: it is the Cancel button that ends the job.
            f"job = tune(s, trials=64, work_dir={str(work_dir)!r}, num_trials_per_iter=4,\n"
            "           strategy='replay-trace', cost_model='random')\n"
            "dash = TuningDashboard(job, session=s)\ndash",
        ],
    )
    shots = artifacts / "tuning_dashboard"
    shots.mkdir(exist_ok=True)
    lab = Lab(page, url, shots)
    lab.open("tuning.ipynb")
    t0 = time.monotonic()
    lab.run_all()
    board = page.locator(".mlc-tuning")
    board.wait_for(timeout=60_000)
    board.scroll_into_view_if_needed()
    assert page.locator(".mlc-tuning .mlc-t-status").get_attribute("data-status") == "running"
    assert page.locator(".mlc-tuning .mlc-t-title").inner_text() == "Tuning mm"

    # 1. live: the plot grows while the kernel sits idle (the polling runs in a thread)
    page.wait_for_function(f"() => ({POINTS_JS})() >= 4", timeout=90_000)
    first = points(page)
    t_first = time.monotonic()
    page.wait_for_function(f"() => ({POINTS_JS})() >= {first + 4}", timeout=60_000)
    t_more = time.monotonic()
    summary = page.locator(".mlc-tuning .mlc-t-summary").inner_text()
    assert "/ 64 trials" in summary and "best" in summary and "GFLOPS" in summary
    assert page.locator(".mlc-tuning .js-plotly-plot .scatterlayer .trace").count() >= 2  # points + best line
    assert lab.kernel_json("dash.polling") is True
    # what the job does now, between and during batches (building, measuring candidate k of n, ...)
    assert page.locator(".mlc-tuning .mlc-t-phase").inner_text().strip()
    lab.shot("running", board)

    # 2. Cancel: a custom message handled while the kernel is idle; the job's processes stop
    page.locator(".mlc-tuning .mlc-t-cancel").click()
    page.wait_for_selector(".mlc-tuning .mlc-t-status[data-status='cancelled']", timeout=30_000)
    t_cancel = time.monotonic()
    state = lab.kernel_json("[job.status, job.pid, len(job.records(with_traces=False)), dash.done]")
    assert state[0] == "cancelled" and state[1] is None
    lab.kernel("import time as _t\nfor _ in range(40):\n    if not dash.polling: break\n    _t.sleep(0.05)")
    assert lab.kernel_json("dash.polling") is False  # the polling thread ended with the job
    assert 8 <= state[2] < 64 and state[3] == state[2]  # stopped early; every measured trial shown
    assert page.locator(".mlc-tuning .mlc-t-cancel").is_hidden()
    assert f"{state[2]} / 64 trials" in page.locator(".mlc-tuning .mlc-t-summary").inner_text()
    lab.shot("cancelled", board)

    # 2b. the GFLOPS axis (the job recorded the program's FLOP count)
    page.locator(".mlc-tuning .mlc-t-metric[data-metric='gflops']").click()
    page.wait_for_selector(".mlc-tuning .js-plotly-plot .ytitle >> text=GFLOPS", timeout=10_000)
    lab.shot("gflops", board)
    page.locator(".mlc-tuning .mlc-t-metric[data-metric='latency']").click()
    page.wait_for_selector(".mlc-tuning .js-plotly-plot .ytitle >> text=latency", timeout=10_000)

    # 3. a trial's detail: click a point on the plot -> trace, and its diff against the best
    best = lab.kernel_json("dash.best['trial']")
    gd_points = page.locator(".mlc-tuning .js-plotly-plot .scatterlayer .trace").first.locator("path.point")
    clicked, differs = None, False
    for i in range(gd_points.count()):
        if i != best:
            box = gd_points.nth(i).bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            # a trial whose program differs from the best (about a third are re-measures of one)
            clicked, differs = lab.kernel_json("[dash.selected, bool(dash.detail.get('diff'))]")
            if clicked >= 0 and clicked != best and differs:
                break
    by_click = clicked is not None and clicked >= 0 and clicked != best and differs
    if not by_click:  # no clickable point with another program: pick the trial from Python
        clicked = lab.kernel_json(f"next(t for t in range(dash.done) if t != {best} and dash.select(t).get('diff'))")
        lab.kernel(f"dash.select({clicked})")
    page.wait_for_selector(f".mlc-tuning .mlc-t-detail-head >> text=Trial {clicked}", timeout=30_000)
    page.wait_for_selector(".mlc-tuning .mlc-t-tab[data-tab='diff']", timeout=30_000)
    page.locator(".mlc-tuning .mlc-t-tab[data-tab='diff']").click()
    diff = page.locator(".mlc-tuning .mlc-t-diff").inner_text()
    assert f"--- trial {best} (best)" in diff and f"+++ trial {clicked}" in diff
    assert page.locator(".mlc-tuning .mlc-t-diff .mlc-d-add").count() >= 1
    lab.shot("trial-diff", board)
    page.locator(".mlc-tuning .mlc-t-tab[data-tab='trace']").click()
    assert "sample_perfect_tile" in page.locator(".mlc-tuning .mlc-t-pre").inner_text()

    # 4. open the best trial in the explorer: a new branch of the session, rendered below
    page.locator(".mlc-tuning .mlc-t-show-best").click()
    page.wait_for_selector(f".mlc-tuning .mlc-t-detail-head >> text=Trial {best}", timeout=30_000)
    steps_before = lab.kernel_json("len(s.steps)")
    page.locator(".mlc-tuning .mlc-t-open").click()
    page.wait_for_selector(".mlc-tuning .mlc-t-explorer .mlc-explorer .cm-content", timeout=60_000)
    page.wait_for_function(
        "() => document.querySelector('.mlc-tuning .mlc-t-explorer .mlc-code-main .cm-content')?.innerText.includes('T.parallel')"
        " || document.querySelector('.mlc-tuning .mlc-t-explorer .mlc-code-main .cm-content')?.innerText.includes('T.vectorized')",
        timeout=30_000,
    )
    after = lab.kernel_json("[len(s.steps), s.current.kind, s.script == dash.detail['script']]")
    assert after[0] > steps_before and after[1] == "replay" and after[2] is True
    assert "is now step" in page.locator(".mlc-tuning .mlc-t-notice").inner_text()
    # the trial is the student's own steps: meta_schedule's internal enter_postproc() is not one of them
    assert lab.kernel_json("sum(1 for st in s.steps if 'enter_postproc' in str(getattr(st, 'label', '')))") == 0
    explorer = page.locator(".mlc-tuning .mlc-t-explorer")
    explorer.scroll_into_view_if_needed()
    lab.shot("best-in-explorer", explorer)

    # 5. reopened from the work directory (as after a kernel restart): the same job, nothing lost
    again = lab.kernel_json(
        f"(lambda d: [d.status, d.done, d.best['trial']])(TuningDashboard.from_work_dir({str(work_dir)!r}))"
    )
    assert again == ["cancelled", state[2], best]
    print(
        f"\ntuning dashboard e2e: first {first} points after {t_first - t0:.1f} s, +4 in {t_more - t_first:.1f} s, "
        f"cancelled {t_cancel - t_more:.1f} s after the click with {state[2]} trials; trial picked by a click on "
        f"the plot: {by_click}; total {time.monotonic() - t0:.1f} s"
    )


# The bundle alone in chromium (no JupyterLab, no kernel): a fake model with failed candidates, the
# way anywidget loads it (a module imported from a blob URL). Real plotly, real layout, a few seconds.
FAKE_MODEL_JS = """async ([code, state]) => {
  const handlers = new Map();
  const toBytes = (xs) => new DataView(new Float64Array(xs.map((x) => (x === null ? NaN : x))).buffer);
  state.latency = toBytes(state.latency);
  state.elapsed = toBytes(state.elapsed);
  const model = {
    get: (k) => state[k],
    set: (k, v) => { state[k] = v; for (const h of handlers.get('change:' + k) || []) h(); },
    on: (e, h) => { if (!handlers.has(e)) handlers.set(e, new Set()); handlers.get(e).add(h); },
    off: () => {},
    save_changes: () => { window.__saved = (window.__saved || 0) + 1; },
    send: () => {},
  };
  window.__model = model;
  const url = URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
  const widget = (await import(url)).default.widgets.tuning_dashboard;
  const el = document.createElement('div');
  el.style.width = '1100px';
  document.body.append(el);
  widget.render({ model, el, host: {} });
}"""

ERRORS = [
    "RuntimeError: Check failed: (n_threads * vector_bytes <= max_shared) is false: too much shared memory",
    "TimeoutError: the candidate ran for more than 10 s",
    "tvm.error.InternalError: Check failed: (is_one(loop->extent)) is false: cannot vectorize a loop with a reduction",
]


def test_failed_candidates_in_chromium(browser, artifacts):
    from pathlib import Path

    import math

    code = (Path(__file__).resolve().parents[2] / "mlc_lab" / "static" / "mlc_lab.js").read_text()
    lat, failures = [], []
    for i in range(40):
        if i % 9 == 4:
            lat.append(None)
            failures.append({"trial": i, "summary": ERRORS[len(failures) % len(ERRORS)]})
        else:
            lat.append(2e-4 * (1 + 0.8 * math.sin(i * 1.7)) / (1 + i / 10))
    ok = [x for x in lat if x is not None]
    best = lat.index(min(ok))
    state = {
        "work_dir": "/tmp/wd",
        "func": "mm_relu",
        "target": "llvm cascadelake 2 cores",
        "settings": "evolutionary · xgb · auto",
        "status": "running",
        "job_error": "",
        "done": 40,
        "total": 64,
        "latency": lat,
        "elapsed": [0.8 * (i + 1) for i in range(40)],
        "flops": 2 * 128**3 + 128**2,
        "best": {"trial": best, "latency_s": min(ok), "gflops": (2 * 128**3) / min(ok) / 1e9},
        "failed_count": len(failures),
        "failures": failures,
        "selected": -1,
        "detail": {},
        "notice": "",
        "explorer": None,
        "updated_at": 0,
        "height": "360px",
    }
    page = browser.new_page(viewport={"width": 1150, "height": 900})
    try:
        page.goto("about:blank")
        page.evaluate(FAKE_MODEL_JS, [code, state])
        page.wait_for_selector(".mlc-tuning .js-plotly-plot .scatterlayer .trace", timeout=20_000)
        assert page.locator(".mlc-tuning .mlc-t-failure").count() == len(failures)
        # failed trials are marked on the plot (a third trace of x markers)
        page.wait_for_function("() => document.querySelectorAll('.mlc-tuning .scatterlayer .trace').length >= 3")
        marks = page.locator(".mlc-tuning .scatterlayer .trace").nth(2).locator("path.point")
        assert marks.count() == len(failures)
        # a click on a failure mark selects that trial
        box = marks.nth(1).bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function("(t) => window.__model.get('selected') === t", arg=failures[1]["trial"], timeout=5_000)
        trial = failures[1]["trial"]
        page.evaluate(
            "([t, e]) => window.__model.set('detail', {trial: t, ok: false, error: 'Traceback (most recent call last):\\n  ...\\n' + e,"
            " error_summary: e, trace: 'sch.vectorize(loop=l7)', script: '', best_trial: 0})",
            [trial, failures[1]["summary"]],
        )
        page.wait_for_selector(f".mlc-tuning .mlc-t-detail-head >> text=Trial {trial}")
        assert page.locator(".mlc-tuning .mlc-t-failure.mlc-t-selected").count() == 1
        shots = artifacts / "tuning_dashboard"
        shots.mkdir(exist_ok=True)
        page.locator(".mlc-tuning").screenshot(path=str(shots / "failures.png"))
    finally:
        page.close()
