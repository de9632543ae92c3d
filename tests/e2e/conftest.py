"""Real JupyterLab + Debian chromium (Playwright, Python) for the e2e tests (marked ``e2e``).

One JupyterLab server per test session: 127.0.0.1, a free port, no token, a temporary root dir,
news and update checks off through user settings, ``--allow-root``. The browser is Debian's
``/usr/bin/chromium`` (scripts/install_browser.sh), never a Playwright download.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tests.unit.processes import free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "e2e"
CHROMIUM = os.environ.get("MLC_LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

SERVER_CONFIG = """
c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = {port}
c.ServerApp.port_retries = 0
c.ServerApp.open_browser = False
c.ServerApp.allow_root = True
c.ServerApp.root_dir = {root!r}
c.IdentityProvider.token = ""
c.ServerApp.password = ""
c.ServerApp.disable_check_xsrf = True
c.LabApp.expose_app_in_browser = True
c.LabServerApp.user_settings_dir = {settings!r}
c.LabServerApp.workspaces_dir = {workspaces!r}
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.ServerApp.jpserver_extensions = {{"mlc_lab._server": True}}  # as jupyter-config/ enables it for users
"""

USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"adaptive-theme": False},
}


def pytest_collection_modifyitems(config, items):
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        skip = pytest.mark.skip(reason=f"{CHROMIUM} missing: run scripts/install_browser.sh")
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


# The kernels of every lab started here write what departs from mlc_lab.model to a file (the strict wire,
# tests/conftest.py); a test after which one grew fails, naming it. Path -> bytes already read.
_WIRE_LOGS: dict[Path, int] = {}


@pytest.fixture(autouse=True)
def _kernels_keep_the_wire():
    yield
    found = []
    for path, seen in _WIRE_LOGS.items():
        if path.exists() and path.stat().st_size > seen:
            data = path.read_bytes()
            _WIRE_LOGS[path] = len(data)
            found += data[seen:].decode("utf-8", "replace").splitlines()
    if found:
        pytest.fail("a kernel's wire departs from mlc_lab.model:\n  " + "\n  ".join(found[:20]), pytrace=False)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """(base_url, root_dir) of a running JupyterLab."""
    with running_lab(tmp_path_factory.mktemp("lab")) as server:
        yield server


def wait_until_up(url: str, proc: subprocess.Popen, timeout_s: float, log_path: Path, what: str) -> None:
    """Until ``url`` answers 200; when the server exits or takes longer, its log's tail is raised (the
    caller stops it)."""
    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{what} did not start; see {log_path}:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.3)


@contextlib.contextmanager
def serving(cmd: list[str], log_path: Path, probe_url: str, timeout_s: float, what: str, *, cwd, env, append=False):
    """Run the server ``cmd`` in a process group of its own, its output to ``log_path``, until
    ``probe_url`` answers (see wait_until_up); afterwards stop the group (SIGTERM, then SIGKILL)."""
    log = open(log_path, "a" if append else "w")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(probe_url, proc, timeout_s, log_path, what)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@contextlib.contextmanager
def running_lab(base: Path, extra_config: str = "", user_settings: dict | None = None):
    """Start JupyterLab under ``base`` (``extra_config``: Python appended to its config file, e.g.
    instrumentation; ``user_settings``: more user settings files, as USER_SETTINGS); yield
    (base_url, root_dir); stop it."""
    root, settings, workspaces, cfgdir, runtime = (
        base / n for n in ("root", "settings", "workspaces", "config", "runtime")
    )
    for d in (root, settings, workspaces, cfgdir, runtime):
        d.mkdir()
    for rel, data in {**USER_SETTINGS, **(user_settings or {})}.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    port = free_port()
    cfg = cfgdir / "jupyter_server_config.py"
    cfg.write_text(
        SERVER_CONFIG.format(port=port, root=str(root), settings=str(settings), workspaces=str(workspaces))
        + extra_config
    )
    # This checkout's prebuilt labextension (Launcher, documents, saved widgets), not the venv's.
    data = base / "data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "mlc-lab-jupyterlab").symlink_to(REPO / "mlc_lab" / "labextension")
    env = dict(os.environ)
    env.update(
        JUPYTER_PATH=os.pathsep.join([str(data), env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep),
        JUPYTER_CONFIG_DIR=str(cfgdir),
        JUPYTER_RUNTIME_DIR=str(runtime),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        TVM_NUM_THREADS=env.get("TVM_NUM_THREADS", "2"),
        ANYWIDGET_HMR="0",
    )
    if env.get("MLC_LAB_STRICT_WIRE", "0") != "0":
        env["MLC_LAB_STRICT_WIRE"] = str(base / "wire.log")
        _WIRE_LOGS[base / "wire.log"] = 0
    cmd = [sys.executable, "-m", "jupyter", "lab", "--config", str(cfg), "--allow-root", "--no-browser"]
    url = f"http://127.0.0.1:{port}"
    with serving(cmd, base / "server.log", f"{url}/api/status", 90, "JupyterLab", cwd=root, env=env):
        yield url, root
    shutil.copy(base / "server.log", ARTIFACTS / "server.log") if ARTIFACTS.exists() else None


@pytest.fixture(scope="session")
def browser():
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser, artifacts):
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    console: list[str] = []
    pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    yield pg
    (artifacts / "console.log").write_text("\n".join(console))
    context.close()


@pytest.fixture()
def lab_page(browser):
    """(page, its console errors) in a fresh context wide enough for JupyterLab's right split."""
    from tests.e2e.lab import console_errors

    context = browser.new_context(viewport={"width": 1600, "height": 950})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors = console_errors(pg)
    yield pg, errors
    context.close()
