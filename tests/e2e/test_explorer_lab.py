"""The explorer in a real JupyterLab, driven by Debian chromium: the course's chapter-2 schedule of
mm_relu by clicks, undo/redo, a decision knob, a step from Python, a failed attempt, and the
click-to-render latency."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from tests.e2e.lab import Lab, run_notebook
from tests.fixtures.programs import MM_RELU

pytestmark = pytest.mark.e2e


LATENCY_BUDGET_MS = 150.0

SCRIPT_HAS_JS = """([needle]) => {
  const el = document.querySelector('.mlc-explorer .mlc-code-main .cm-content');
  return !!el && el.innerText.includes(needle);
}"""


def code_text(page) -> str:
    return page.locator(".mlc-explorer .mlc-code-main .cm-content").inner_text()


def wait_code(page, needle: str, present: bool = True) -> None:
    js = SCRIPT_HAS_JS if present else SCRIPT_HAS_JS.replace("return !!el &&", "return !!el && !")
    page.wait_for_function(js, arg=[needle], timeout=20_000)


def assert_code_is_session_script(lab: Lab) -> None:
    """The TVMScript on the page is the Python session's script (blank lines aside)."""
    shown = [ln.rstrip() for ln in code_text(lab.page).splitlines() if ln.strip()]
    script = [ln.rstrip() for ln in lab.kernel_json("ex.session.script").splitlines() if ln.strip()]
    assert shown == script


def row(page, kind: str, name: str):
    return page.locator(f'.mlc-explorer .mlc-row[data-kind="{kind}"][data-name="{name}"]')


def prim(page, name: str):
    return page.locator(f'.mlc-explorer .mlc-prim[data-primitive="{name}"]')


def apply_at_loop(page, block: str, primitive: str, loop: str) -> None:
    """Select ``block``, open ``primitive``'s form, pick ``loop`` in it and apply."""
    row(page, "block", block).click()
    prim(page, primitive).click()
    form = page.locator(f'.mlc-form[data-primitive="{primitive}"]')
    form.locator('select[name="loop"]').select_option(loop)
    form.locator(".mlc-apply").click()


def unroll_and_undo(page, rounds: int, select: str | None = None) -> list[dict]:
    """``rounds`` times: unroll the selected loop (after clicking loop ``select``, when given), then
    undo, each waited for; the page's click-to-render samples after the first round (it warms caches)."""
    n = 0
    for _ in range(rounds):
        if select is not None:
            row(page, "loop", select).click()
        for button in (prim(page, "unroll"), page.locator(".mlc-explorer .mlc-undo")):
            button.click()
            n += 1
            page.wait_for_function("(n) => window.__mlcLab.latencies.length >= n", arg=n, polling=50)
    return page.evaluate("() => window.__mlcLab.latencies")[2:]


def test_chapter2_by_clicks(lab_server, page, artifacts):
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "explorer.ipynb",
        [
            "import mlc_lab\nfrom mlc_lab.widgets import explore\nMM_RELU = " + repr(MM_RELU),
            "ex = explore(MM_RELU)\nex",
        ],
        prefix="explorer",
    )
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=60_000)
    wait_code(page, "for i, j, k in T.grid(128, 128, 128):")
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    lab.shot("loaded", explorer)

    # 1. split j of Y by [None, 4]: select with the keyboard (click i, then arrow down), open split with "s".
    # JupyterLab's own shortcuts (arrows, s, r, z in command mode) must not fire inside the explorer.
    row(page, "loop", "Y/i").click()
    page.keyboard.press("ArrowDown")
    page.wait_for_selector('.mlc-explorer .mlc-row.mlc-selected[data-name="Y/j"]')
    page.keyboard.press("s")
    form = page.locator('.mlc-form[data-primitive="split"]')
    form.locator(".mlc-factor").nth(0).fill("")
    form.locator(".mlc-factor").nth(1).fill("4")
    assert "blank factor becomes 32" in form.locator(".mlc-factor-note").inner_text()
    form.locator(".mlc-apply").click()
    wait_code(page, "for i, j_0, j_1, k in T.grid(128, 32, 4, 128):")
    assert page.locator(".jp-Notebook .jp-Cell").count() == 2  # no cell was added/removed by our keys
    assert lab.kernel_json("ex.session.current.label") == "split(Y/j, factors=[None, 4])"
    assert_code_is_session_script(lab)
    lab.shot("split", explorer)

    # 2. reorder i, j_0, k, j_1 (move j_1 one down: below k)
    row(page, "loop", "j_0").click()
    page.keyboard.press("r")
    order = page.locator('.mlc-form[data-primitive="reorder"] .mlc-order-item')
    assert order.count() == 4
    order.nth(2).locator(".mlc-down").click()
    assert [order.nth(i).get_attribute("data-loop") for i in range(4)] == ["Y/i", "j_0", "k", "j_1"]
    page.locator('.mlc-form[data-primitive="reorder"] .mlc-apply').click()
    wait_code(page, "for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):")
    assert "reorder" in lab.kernel_json("ex.session.current.label")
    assert_code_is_session_script(lab)
    lab.shot("reorder", explorer)

    # 3. reverse_compute_at C under j_0
    apply_at_loop(page, "C", "reverse_compute_at", "j_0")
    wait_code(page, "for ax0 in range(4):")
    assert_code_is_session_script(lab)
    lab.shot("reverse_compute_at", explorer)

    # 4. decompose_reduction of Y above k
    apply_at_loop(page, "Y", "decompose_reduction", "k")
    wait_code(page, 'T.sblock("Y_init")')
    state = lab.kernel_json("[ex.session.current.primitive, 'Y_update' in ex.session.script, len(ex.session.steps)]")
    assert state == ["decompose_reduction", True, 5]
    assert_code_is_session_script(lab)
    lab.shot("decompose_reduction", explorer)

    # 5. undo (button), redo (keyboard)
    page.locator(".mlc-explorer .mlc-undo").click()
    wait_code(page, 'T.sblock("Y_init")', present=False)
    assert lab.kernel_json("ex.session.current.primitive") == "reverse_compute_at"
    row(page, "loop", "j_0").click()  # focus the explorer
    page.keyboard.press("Control+Shift+Z")
    wait_code(page, 'T.sblock("Y_init")')
    assert lab.kernel_json("ex.session.current.primitive") == "decompose_reduction"
    assert_code_is_session_script(lab)
    lab.shot("undo-redo", explorer)

    # 6. a failed attempt -> error shown, nothing changes. (vectorize is no longer offered for the
    # reduction loop k; parallel on j_0 over Y_init and Y_update is offered and TVM refuses it.)
    before = code_text(page)
    row(page, "loop", "j_0").click()
    prim(page, "parallel").click()
    banner = page.locator(".mlc-explorer .mlc-banner")
    banner.wait_for(state="visible")
    assert "reduction" in banner.inner_text()
    assert page.locator(".mlc-explorer .mlc-row.mlc-involved").count() >= 1
    assert page.locator(".mlc-explorer .mlc-hrow-failure").count() == 1
    assert code_text(page) == before
    assert lab.kernel_json("len(ex.session.steps)") == 5
    lab.shot("failed-attempt", explorer)
    page.keyboard.press("Escape")
    banner.wait_for(state="hidden")

    # 7. a step from Python shows up in the page at once
    lab.kernel('ex.session.apply("vectorize", "ax0")')
    page.wait_for_selector('.mlc-explorer .mlc-row[data-name="ax0"] .mlc-kind-vectorized', timeout=20_000)
    wait_code(page, "T.vectorized(4)")
    assert_code_is_session_script(lab)
    lab.shot("python-step", explorer)

    # 8. a decision knob: sample_perfect_tile on C's ax0? use j_1 (extent 4) and split by it
    row(page, "loop", "k").click()
    prim(page, "sample_perfect_tile").click()
    page.locator('.mlc-form[data-primitive="sample_perfect_tile"] .mlc-apply').click()
    wait_code(page, "k_0")
    page.locator(".mlc-explorer .mlc-tab-trace").click()
    page.wait_for_function("() => document.querySelectorAll('.mlc-explorer .mlc-knob').length === 1", timeout=20_000)
    knob = page.locator(".mlc-explorer .mlc-knob").first
    select = knob.locator("select")
    options = select.locator("option").all_inner_texts()
    current = lab.kernel_json("ex.session.decisions[0]['value']")
    target = next(i for i, o in enumerate(options) if o != "[" + ", ".join(map(str, current)) + "]")
    target_value = [int(x) for x in options[target].strip("[]").split(",")]
    steps_before = lab.kernel_json("len(ex.session.steps)")
    select.select_option(str(target))
    page.wait_for_function(
        "([v]) => { const el = document.querySelector('.mlc-explorer .mlc-knob .mlc-knob-value'); return el && el.textContent === v; }",
        arg=[options[target]],
    )
    assert lab.kernel_json("ex.session.decisions[0]['value']") == target_value
    assert lab.kernel_json("len(ex.session.steps)") == steps_before + 1
    assert_code_is_session_script(lab)
    lab.shot("decision-knob", explorer)

    # 8b. edit the trace, replay it: the refused line is marked; then "copy as Python"
    editor = page.locator(".mlc-explorer .mlc-trace-editor .cm-content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\nsch.bogus(1)")
    steps_before = lab.kernel_json("len(ex.session.steps)")
    page.locator(".mlc-explorer .mlc-replay").click()
    status = page.locator(".mlc-explorer .mlc-trace-status")
    page.wait_for_function(
        "() => /line \\d+/.test(document.querySelector('.mlc-explorer .mlc-trace-status').textContent)"
    )
    assert page.locator(".mlc-explorer .mlc-trace .mlc-line-error").count() == 1
    assert lab.kernel_json("len(ex.session.steps)") == steps_before
    lab.shot("replay-error", explorer)
    print("replay error shown as:", status.inner_text())
    page.locator(".mlc-explorer .mlc-revert").click()
    page.locator(".mlc-explorer .mlc-copy-python").click()
    dialog = page.locator(".mlc-explorer .mlc-python-dialog textarea")
    dialog.wait_for()
    assert dialog.input_value() == lab.kernel_json("ex.session.trace_python")
    page.locator(".mlc-explorer .mlc-python-dialog .mlc-btn").click()

    # 8c. export the trace as JSON (a download), import it back: a replayed branch, same program
    with page.expect_download() as dl:
        page.locator(".mlc-explorer .mlc-export-json").click()
    exported = artifacts / "explorer-trace.json"
    dl.value.save_as(exported)
    assert json.loads(exported.read_text()) == lab.kernel_json("ex.session.trace_json")
    script_before = lab.kernel_json("ex.session.script")
    steps_before = lab.kernel_json("len(ex.session.steps)")
    page.locator(".mlc-explorer .mlc-trace input[type=file]").set_input_files(str(exported))
    page.wait_for_function(
        "(n) => document.querySelectorAll('.mlc-explorer .mlc-hrow-step').length > n", arg=steps_before
    )
    assert lab.kernel_json("[ex.session.current.kind, ex.session.script]") == ["replay", script_before]
    assert_code_is_session_script(lab)
    first_trace_line = lab.kernel_json("ex.session.trace.splitlines()[0]")
    page.wait_for_function(  # the editor shows the session's trace again, not the imported JSON
        "([t]) => document.querySelector('.mlc-explorer .mlc-trace-editor .cm-content').innerText.startsWith(t)",
        arg=[first_trace_line],
    )

    # 9. diff view against the parent step
    page.locator(".mlc-explorer .mlc-diff-mode").select_option("unified")
    page.wait_for_selector(
        ".mlc-explorer .mlc-code-diff .cm-changedLine, .mlc-explorer .mlc-code-diff .cm-deletedChunk", timeout=20_000
    )
    lab.shot("diff-unified", explorer)
    page.locator(".mlc-explorer .mlc-diff-mode").select_option("split")
    page.wait_for_selector(".mlc-explorer .mlc-code-diff .cm-mergeView", timeout=20_000)
    lab.shot("diff-split", explorer)
    page.locator(".mlc-explorer .mlc-diff-mode").select_option("off")

    # 10. click-to-render latency: unroll a loop, then undo, several times. The page records each
    # click -> rendered time (window.__mlcLab); poll it slowly so the test itself adds little load.
    page.evaluate("() => { window.__mlcLab = { latencies: [] }; }")
    start_step = lab.kernel_json("ex.session.current.id")
    sel_name = "j_1_init"
    row(page, "loop", sel_name).click()
    samples = unroll_and_undo(page, 11)
    applies = [s["ms"] for s in samples if s["primitive"] == "unroll"]
    undos = [s["ms"] for s in samples if s["primitive"] == "undo"]
    med = statistics.median(applies)
    print(
        f"\nclick-to-render latency (unroll on mm_relu 128^3): median {med:.1f} ms, "
        f"min {min(applies):.1f}, max {max(applies):.1f}, n={len(applies)}; undo median {statistics.median(undos):.1f} ms"
    )
    print(
        "  (primitive, total ms, kernel ms, state arrived ms, draw ms):",
        [
            (
                s["primitive"],
                round(s["ms"]),
                round(s.get("kernelMs") or -1),
                round(s.get("stateMs") or -1),
                round(s.get("drawMs") or -1),
            )
            for s in samples
        ],
    )
    panels: dict[str, list[float]] = {}
    for s in samples:
        for name, ms in (s.get("panels") or {}).items():
            panels.setdefault(name, []).append(ms)
    print("  drawing per panel, median ms:", {k: round(statistics.median(v), 1) for k, v in panels.items()})
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    (artifacts / "explorer-latency.json").write_text(
        json.dumps({"apply_ms": applies, "undo_ms": undos, "median_apply_ms": med})
    )
    assert lab.kernel_json("ex.session.current.id") == start_step  # every unroll was undone
    assert len(applies) == 10
    check_latency(med)


def check_latency(median_ms: float) -> None:
    """The 150 ms budget holds on a machine that is not oversubscribed. On a shared box whose load
    is well above its core count the transport through Jupyter dominates; the numbers are still
    printed and the test is marked xfail (MLC_LAB_LATENCY_STRICT=1 makes it fail instead)."""
    if median_ms < LATENCY_BUDGET_MS:
        return
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    message = (
        f"median click-to-render {median_ms:.1f} ms is over {LATENCY_BUDGET_MS} ms (load {load:.1f} on {cores} cores)"
    )
    if load > 1.5 * cores and os.environ.get("MLC_LAB_LATENCY_STRICT") != "1":
        pytest.xfail(message + ": machine overloaded")
    raise AssertionError(message)


def chain_program(stages: int, n: int = 64) -> str:
    """A chain of elementwise stages; 72 stages print as a TVMScript of about 500 lines."""
    lines = [
        "from tvm.script import ir as I",
        "from tvm.script import tirx as T",
        "",
        "@I.ir_module",
        "class Chain:",
        "    @T.prim_func(s_tir=True)",
        f'    def chain(A: T.Buffer(({n}, {n}), "float32"), Out: T.Buffer(({n}, {n}), "float32")):',
        '        T.func_attr({"global_symbol": "chain", "tirx.noalias": True})',
    ]
    lines += [f'        B{s} = T.sblock_alloc_buffer(({n}, {n}), dtype="float32")' for s in range(stages - 1)]
    src = "A"
    for s in range(stages):
        dst = "Out" if s == stages - 1 else f"B{s}"
        lines += [
            f"        for i, j in T.grid({n}, {n}):",
            f'            with T.sblock("S{s}"):',
            '                vi, vj = T.axis.remap("SS", [i, j])',
            f"                {dst}[vi, vj] = {src}[vi, vj] * T.float32({s % 7 + 1}) + T.float32(1)",
        ]
        src = dst
    return "\n".join(lines) + "\n"


def test_large_script_theme_and_export(lab_server, page, artifacts):
    """A ~500-line script stays responsive; the dark theme is followed; the HTML export works offline."""
    _url, root = lab_server
    lab = run_notebook(
        page,
        lab_server,
        artifacts,
        "large.ipynb",
        ["from mlc_lab.widgets import explore\nBIG = " + repr(chain_program(72)), "big = explore(BIG)\nbig"],
        prefix="explorer-large",
    )
    page.wait_for_selector(".mlc-explorer .mlc-row", timeout=90_000)
    explorer = page.locator(".mlc-explorer")
    explorer.scroll_into_view_if_needed()
    n_lines = lab.kernel_json("len(big.session.script.splitlines())")
    assert n_lines >= 500
    rows = page.locator(".mlc-explorer .mlc-row").count()
    assert rows == 1 + 72 * 3  # the function, and i, j, block per stage
    # CodeMirror draws only what is on screen: the DOM stays small for a long script.
    assert page.locator(".mlc-explorer .mlc-code-main .cm-line").count() < n_lines

    page.evaluate("() => { window.__mlcLab = { latencies: [] }; }")
    # selecting the last stage scrolls the code to it
    row(page, "block", "S71").click()
    page.wait_for_function(
        "() => document.querySelector('.mlc-explorer .mlc-code-main .cm-content').innerText.includes('S71')"
    )
    samples = unroll_and_undo(page, 5, select="S71/j")
    applies = [s["ms"] for s in samples if s["primitive"] == "unroll"]
    kernel = [s.get("kernelMs") or 0 for s in samples if s["primitive"] == "unroll"]
    print(
        f"\n{n_lines}-line script: click-to-render median {statistics.median(applies):.1f} ms "
        f"(kernel {statistics.median(kernel):.1f} ms), draw median "
        f"{statistics.median([s.get('drawMs') or 0 for s in samples]):.1f} ms, load {os.getloadavg()[0]:.1f}"
    )
    lab.shot("large-script", explorer)

    # Scrolling the long script keeps drawing lines (virtualised view).
    scroller = page.locator(".mlc-explorer .mlc-code-main .cm-scroller")
    scroller.evaluate("(el) => { el.scrollTop = 0; }")
    page.wait_for_function(
        "() => document.querySelector('.mlc-explorer .mlc-code-main .cm-content').innerText.includes('class Module')"
    )

    # Dark theme: the explorer's colours come from --jp-* variables.
    light_bg = explorer.evaluate("(el) => getComputedStyle(el).backgroundColor")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.wait_for_function(
        "([bg]) => getComputedStyle(document.querySelector('.mlc-explorer')).backgroundColor !== bg", arg=[light_bg]
    )
    lab.shot("dark-theme", explorer)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")

    # Static export: one file, opened with the network cut off.
    out = root / "big.html"
    lab.kernel(f"big.session.apply('parallel', 'S0/i'); big.to_html({str(out)!r})")
    context = page.context.browser.new_context(offline=True)
    offline = context.new_page()
    requests = []
    offline.on("request", lambda r: requests.append(r.url))
    offline.goto(out.as_uri())
    offline.wait_for_selector("section.step:visible h2")
    assert offline.locator("section.step").count() == lab.kernel_json("len(big.session.steps)")
    assert offline.locator("section.step:visible").count() == 1
    offline.locator("nav a[data-step='0']").click()
    assert "original program" in offline.locator("section.step:visible h2").inner_text()
    assert all(u.startswith("file:") for u in requests), requests
    offline.screenshot(path=str(artifacts / "explorer-large-export-offline.png"))
    context.close()
