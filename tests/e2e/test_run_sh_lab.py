"""`./run.sh lab` opens notebooks/00_start.ipynb on its first start and the workspace after:
run.sh itself is started (in a copy of the checkout whose setup is already done), it starts the
real JupyterLab, and the server's `/` is asked where it sends a browser."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import serving
from tests.unit.processes import free_port

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv"

pytestmark = pytest.mark.slow


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture()
def checkout(tmp_path) -> Path:
    """run.sh beside what its setup steps check for; `python`, `npm` and the build are stand-ins
    that do nothing (setup is not what is tested), `jupyter` is the real one."""
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(REPO / "run.sh", root / "run.sh")
    for name in ("pyproject.toml", "package.json", "package-lock.json"):
        shutil.copy(REPO / name, root / name)
    (root / "js").mkdir()
    (root / "js" / "x.ts").write_text("export {};\n")
    (root / "node_modules").mkdir()
    (root / "mlc_lab" / "static").mkdir(parents=True)
    (root / "mlc_lab" / "labextension").symlink_to(REPO / "mlc_lab" / "labextension")
    (root / "notebooks").mkdir()
    for nb in ("00_start.ipynb", "01_tensorir.ipynb"):
        shutil.copy(REPO / "notebooks" / nb, root / "notebooks" / nb)
    _executable(root / ".venv" / "bin" / "python", "#!/bin/sh\nexit 0\n")
    _executable(root / ".venv" / "bin" / "jupyter", f'#!/bin/sh\nexec "{VENV / "bin" / "jupyter"}" "$@"\n')
    _executable(tmp_path / "bin" / "npm", "#!/bin/sh\nexit 0\n")
    return root


@contextlib.contextmanager
def run_lab(root: Path, tmp: Path):
    port = free_port()
    env = dict(os.environ)
    env.update(
        PATH=f"{tmp / 'bin'}{os.pathsep}{env['PATH']}",
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
    )
    cmd = [
        "bash",
        str(root / "run.sh"),
        "lab",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        "--LabApp.news_url=None",
    ]
    probe = f"http://127.0.0.1:{port}/api/status"
    with serving(cmd, tmp / "run_sh.log", probe, 90, "run.sh lab", cwd=root, env=env, append=True):
        yield port


def _redirect(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/")
    resp = conn.getresponse()
    assert resp.status in (301, 302, 303, 307), resp.status
    return (resp.getheader("Location") or "").split("?")[0]


def test_first_start_opens_the_start_notebook(checkout, tmp_path):
    with run_lab(checkout, tmp_path) as port:
        loc = _redirect(port)
        assert loc.endswith("/lab/tree/00_start.ipynb"), loc
    assert (checkout / ".work" / "notebooks" / ".mlc_lab_opened").exists()
    # later starts restore the workspace (JupyterLab's own default)
    with run_lab(checkout, tmp_path) as port:
        assert _redirect(port).endswith("/lab")
