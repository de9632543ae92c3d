"""A script that opened an explorer exits with status 0, every time.

The explorer's checks run TVM in a helper thread; one still inside TVM's C++ code when the
interpreter finalizes used to abort the process after its last line (``terminate called without an
active exception``, status 134; 3 of 20 runs installed, 7 of 20 from the checkout, before the fix).
``mlc_lab._threads`` stops and joins those threads at exit. The script runs here from the package as
``pip install`` puts it (``--target``, over the test environment's dependencies), not the checkout.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The 9 lines of the report (issue 26): a Session on the course's mm_relu, an explorer, three steps.
SCRIPT = """\
import mlc_lab
from mlc_lab.tvm.course_programs import MM_RELU

s = mlc_lab.Session(MM_RELU)
ex = mlc_lab.explore(s)
i, j, k = s.apply("get_loops", s.apply("get_sblock", "Y"))
s.apply("split", j, [None, 4])
s.apply("parallel", i)
print(s.trace)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The worktree installed by pip into a folder of its own (what a user's site-packages holds)."""
    target = tmp_path_factory.mktemp("site")
    env = {**os.environ, "HATCH_JUPYTER_BUILDER_SKIP_NPM": "1"}  # the bundles are built; no npm here
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(REPO)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (target / "mlc_lab" / "__init__.py").is_file()
    return target


def _run(code: str, path: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLC_LAB_")}
    env["PYTHONPATH"] = str(path)  # before the test environment's editable mlc_lab
    script = cwd / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _exits_cleanly(times: int, installed: Path, cwd: Path) -> None:
    first = _run(SCRIPT + "import mlc_lab; print(mlc_lab.__file__)\n", installed, cwd)
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.strip().splitlines()[-1].startswith(str(installed)), "the script ran the checkout's mlc_lab"
    assert "sch.parallel(loop=" in first.stdout
    # The other runs two at a time (each in a folder of its own): a run is one process that waits on
    # nothing of the others, and the suite's machine has two cores.
    folders = [cwd / f"run{n + 2}" for n in range(times - 1)]
    for folder in folders:
        folder.mkdir()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda folder: _run(SCRIPT, installed, folder), folders))
    bad = [
        f"run {n + 2}: exit status {run.returncode}: {run.stderr.strip()[-300:]}"
        for n, run in enumerate(runs)
        if run.returncode != 0 or "sch.parallel(loop=" not in run.stdout
    ]
    assert not bad, f"{len(bad)} of {times} runs did not exit cleanly:\n" + "\n".join(bad)


def test_a_script_with_an_explorer_exits_cleanly_10_times(installed, tmp_path):
    _exits_cleanly(10, installed, tmp_path)


@pytest.mark.full
def test_a_script_with_an_explorer_exits_cleanly_50_times(installed, tmp_path):
    _exits_cleanly(50, installed, tmp_path)


HELPER = """\
import sys, threading, time
from mlc_lab._threads import helper_thread

stop = threading.Event()

def work():
    while not stop.is_set():
        time.sleep(0.01)
    time.sleep(0.3)  # the piece of work in hand is finished before the interpreter goes
    print("finished", flush=True)

helper_thread(work, name="mlc-lab-test-helper", stop=stop.set)
print("main done", flush=True)
"""


def test_exit_stops_a_helper_thread_and_waits_for_it(tmp_path):
    """A daemon thread alone would be cut off at exit: this one is told to stop, then joined."""
    run = _run(HELPER, REPO, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["main", "done", "finished"]


def test_exit_names_a_helper_thread_that_does_not_stop(tmp_path):
    code = textwrap.dedent("""\
        import threading
        from mlc_lab import _threads

        never = threading.Event()
        _threads.helper_thread(never.wait, name="mlc-lab-stuck")
        left = _threads.stop_helpers(timeout=0.2)
        print([t.name for t in left])
        never.set()
    """)
    run = _run(code, REPO, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['mlc-lab-stuck']"
    assert "helper threads still running after 0.2 s: mlc-lab-stuck" in run.stderr
