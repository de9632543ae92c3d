"""Running a class, end to end: a teacher starts the class server (`mlc-lab class serve`, a process on
127.0.0.1), three students submit from three explorers with the Submit bar, the students'
leaderboard and the teacher's dashboard show them (refreshed live), and a restart of the server
loses nothing (same submissions, same token, the widgets carry on).

Screenshots go to test-artifacts/e2e/ (prefix ``class``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.lab import Lab, console_errors, forget, write_notebook
from tests.unit.processes import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "tests" / "labs" / "classroom"


def start_class_server(folder: Path, port: int) -> tuple[subprocess.Popen, str | None]:
    """`mlc-lab class serve` as a teacher types it; (the process, the token it printed: None when it was
    made by an earlier start, and only its hash is kept)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlc_lab.cli",
            "class",
            "serve",
            str(LAB / "assignment.toml"),
            "--dir",
            str(folder),
            "--port",
            str(port),
            "--open",  # a demo class: the students type pseudonyms (test_classroom_identity: tokens)
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines: list[str] = []
    while True:
        line = proc.stderr.readline()
        assert line, "the class server exited: " + "".join(lines)
        lines.append(line)
        if "teacher's token:" in line:
            kept = "the one printed when it was made" in line
            return proc, None if kept else line.rsplit(":", 1)[1].strip()


def stop_class_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    proc.stderr.close()


@pytest.fixture()
def class_folder(tmp_path, lab_server):
    yield tmp_path / "class"
    url, _ = lab_server
    forget(url, "class_server.ipynb", workspaces=False)


def test_three_students_a_leaderboard_a_dashboard_and_a_restart(lab_server, page, artifacts, class_folder):
    url, root = lab_server
    port = free_port()
    server, token = start_class_server(class_folder, port)
    try:
        cells = [
            "import mlc_lab\nfrom mlc_lab.widgets import explore\n"
            f"SERVER = 'http://127.0.0.1:{port}'\nPROGRAM = mlc_lab.load({str(LAB / 'mm_relu.py')!r})",
            # three students, three explorers: ada does both tasks, bo parallelises, cy vectorises
            "ada = explore(PROGRAM, classroom=SERVER, height='420px')\n"
            "for p, *a in [('parallel', 'Y/i'), ('split', 'Y/j', [None, 8]), ('vectorize', 'Y/j_1')]:\n"
            "    ada.session.apply(p, *a)\nada",
            "bo = explore(PROGRAM, classroom=SERVER, height='420px')\nbo.session.apply('parallel', 'Y/i')\nbo",
            "cy = explore(PROGRAM, classroom=SERVER, height='420px')\ncy.session.apply('split', 'Y/j', [None, 16])\n"
            "cy.session.apply('vectorize', 'Y/j_1')\ncy",
            "board = mlc_lab.leaderboard(SERVER, refresh_s=1, highlight='bo')\nboard",
            f"dash = mlc_lab.class_dashboard(SERVER, {token!r}, refresh_s=1)\ndash",
        ]
        write_notebook(root / "class_server.ipynb", cells)
        errors = console_errors(page)
        lab = Lab(page, url, artifacts, prefix="class")
        lab.open("class_server.ipynb")
        lab.run_all()
        page.wait_for_selector(".mlc-class-dashboard .mlc-class-head", timeout=90_000)
        bars = page.locator(".mlc-explorer .mlc-class-bar")
        assert bars.count() == 3
        # Each bar shows the class's assignment (from the server): its title and its 2 tasks with points;
        # the Checks tab judges the class's 2 checks, not every CPU check; Submit is a styled button.
        for i in range(3):
            assert bars.nth(i).locator(".mlc-class-assignment-title").inner_text() == "Lab 1: mm_relu on the CPU"
            chips = bars.nth(i).locator(".mlc-class-task").all_inner_texts()
            assert chips == ["parallel · 5 pts", "vectorize · 5 pts"], chips
        page.wait_for_function(
            "() => /^Checks \\d\\/2/.test(document.querySelector('.mlc-explorer .mlc-tab-checks').textContent)",
            timeout=60_000,
        )
        button_bg = bars.nth(0).locator(".mlc-class-submit").evaluate("b => getComputedStyle(b).backgroundColor")
        defaults = ("rgba(0, 0, 0, 0)", "rgb(239, 239, 239)", "rgb(240, 240, 240)", "rgb(233, 233, 237)")
        assert button_bg not in defaults, button_bg  # the accent colour, not the native grey

        # Each student types a pseudonym and presses Submit (the three are graded one after another).
        # (cy double-clicks: one intent, one submission; the counts below say 3, not 4)
        for i, name in enumerate(["ada", "bo", "cy"]):
            bar = bars.nth(i)
            bar.locator(".mlc-class-name").fill(name)
            if name == "cy":
                bar.locator(".mlc-class-submit").dblclick()
            else:
                bar.locator(".mlc-class-submit").click()
        for i in range(3):
            bars.nth(i).locator('.mlc-class-verdict[data-state="graded"][data-rank]').wait_for(timeout=120_000)
        verdicts = [bars.nth(i).locator(".mlc-class-verdict").inner_text() for i in range(3)]
        assert verdicts[0].startswith("step 3: 10/10 points") and "ms" in verdicts[0], verdicts
        assert "5/10 points" in verdicts[1] and "failed: vectorize" in verdicts[1], verdicts
        assert "5/10 points" in verdicts[2] and "failed: parallel" in verdicts[2], verdicts
        assert bars.nth(0).locator(".mlc-class-verdict").get_attribute("data-rank") == "1"
        # colours that match: all points green, some amber; each task's chip says how it went
        marks = [bars.nth(i).locator(".mlc-class-verdict").get_attribute("data-verdict") for i in range(3)]
        assert marks == ["pass", "partial", "partial"], marks
        assert bars.nth(1).locator(".mlc-class-task").evaluate_all("cs => cs.map(c => c.dataset.verdict)") == [
            "pass",
            "fail",
        ]
        lab.shot("submitted", page.locator(".mlc-explorer").first)

        # The students' leaderboard (refreshed by the kernel, no re-run) ...
        board = page.locator(".mlc-leaderboard")
        page.wait_for_function(
            "() => document.querySelectorAll('.mlc-leaderboard .mlc-board-row').length === 3", timeout=30_000
        )
        names = board.locator(".mlc-board-row").evaluate_all("rows => rows.map(r => r.dataset.name)")
        assert names[0] == "ada" and sorted(names[1:]) == ["bo", "cy"]
        assert board.locator(".mlc-board-you").get_attribute("data-name") == "bo"
        assert re.fullmatch(
            r"[\d.]+ (ms|µs)( ± [\d.]+ (ms|µs))?( (⚠ busy machine, )?load [\d.]+)?",
            board.locator('.mlc-board-row[data-name="ada"] .mlc-board-latency').inner_text(),
        )
        lab.shot("leaderboard", board)

        # ... and the teacher's dashboard.
        dash = page.locator(".mlc-class-dashboard")
        page.wait_for_function(
            "() => (document.querySelector('.mlc-class-dashboard .mlc-class-counts') || {})"
            ".textContent === '3 students · 3 submissions'",
            timeout=30_000,
        )
        rates = dash.locator(".mlc-rate").evaluate_all(
            "rs => rs.map(r => [r.dataset.task, r.querySelector('.mlc-rate-text').textContent])"
        )
        assert rates == [["parallel", "2/3 (67%)"], ["vectorize", "2/3 (67%)"]]
        stuck = dash.locator(".mlc-stuck-row").evaluate_all("rs => rs.map(r => [r.dataset.name, r.dataset.task])")
        assert sorted(stuck) == [["bo", "vectorize"], ["cy", "parallel"]]
        assert dash.locator(".mlc-latency-dot").count() == 1  # ada's: the only one passing every task
        # a real axis from zero, with the name, the value and its spread, and the load it was timed under
        assert dash.locator(".mlc-latency-tick").first.inner_text() == "0"
        assert dash.locator(".mlc-sec-latency .mlc-latency-name").all_inner_texts() == ["ada"]
        assert re.match(r"[\d.]+ (ms|µs)", dash.locator(".mlc-sec-latency .mlc-latency-value").inner_text())
        assert "load" in dash.locator(".mlc-sec-latency .mlc-latency-load").inner_text()
        failures = dash.locator(".mlc-failures tbody tr").all_inner_texts()
        assert any("vectoriz" in f for f in failures) and any("parallel" in f for f in failures)
        assert dash.locator(".mlc-board-row").count() == 3
        lab.shot("dashboard", dash)

        # The teacher restarts the server: the widgets say it is gone, then carry on with everything.
        stop_class_server(server)
        dash.locator(".mlc-class-error").wait_for(timeout=30_000)
        board.locator(".mlc-class-error").wait_for(timeout=30_000)
        server, token_again = start_class_server(class_folder, port)
        assert token_again is None, "a restart keeps the teacher's token (as its hash: the dashboard's still works)"
        dash.locator(".mlc-class-updated").wait_for(timeout=30_000)
        board.locator(".mlc-class-updated").wait_for(timeout=30_000)
        assert dash.locator(".mlc-class-counts").inner_text().startswith("3 students · 3 submissions")
        assert board.locator(".mlc-board-row").count() == 3

        # bo finishes the lab after the restart: a fourth submission, ranked with the three before.
        lab.kernel("bo.session.apply('split', 'Y/j', [None, 4])\nbo.session.apply('vectorize', 'Y/j_1')")
        page.wait_for_function(
            "() => document.querySelectorAll('.mlc-explorer')[1].innerText.includes('j_1')", timeout=30_000
        )
        bars.nth(1).locator(".mlc-class-submit").click()
        page.wait_for_function(
            "() => { const v = document.querySelectorAll('.mlc-explorer .mlc-class-verdict')[1];"
            " return v.dataset.state === 'graded' && v.textContent.includes('10/10'); }",
            timeout=120_000,
        )
        page.wait_for_function(
            "() => (document.querySelector('.mlc-class-dashboard .mlc-class-counts') || {})"
            ".textContent === '3 students · 4 submissions'",
            timeout=30_000,
        )
        rows = board.locator(".mlc-board-row")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.mlc-leaderboard .mlc-board-row')]"
            ".slice(0, 2).every(r => r.querySelector('.mlc-board-score').textContent.startsWith('10'))",
            timeout=30_000,
        )
        assert sorted(rows.evaluate_all("rs => rs.slice(0, 2).map(r => r.dataset.name)")) == ["ada", "bo"]
        stuck = dash.locator(".mlc-stuck-row").evaluate_all("rs => rs.map(r => [r.dataset.name, r.dataset.task])")
        assert stuck == [["cy", "parallel"]]
        lab.shot("after-restart", dash)

        # A hostile hand-in (a trace calling __import__('os').system) is refused and flagged for the
        # teacher, apart from the ordinary failures.
        lab.kernel(
            "from mlc_lab.classroom import client as _c\n"
            "_c.submit(SERVER, \"sch.annotate('Y/i', 'x', __import__('os').system('true'))\\n\", name='eve')"
        )
        dash.locator(".mlc-sec-refused .mlc-refused-row").wait_for(timeout=30_000)
        assert "__import__" in dash.locator(".mlc-sec-refused").inner_text()
        assert dash.locator('.mlc-board-row[data-name="eve"]').count() == 0  # never ranked
        assert not any("__import__" in f for f in dash.locator(".mlc-failures tbody tr").all_inner_texts())
        lab.shot("refused", dash)
        assert not [e for e in errors if "mlc" in e.lower()], errors
    finally:
        stop_class_server(server)
        page.goto("about:blank")
