"""A wheel built where the JS bundles exist needs no npm.

The wheel's build hook (hatch-jupyter-builder, pyproject.toml) runs `npm install` and `npm run build`
when any file under js/ is newer than the newest bundle in mlc_lab/static. `js/build.mjs` writes an
intermediate bundle under js/ (js/labextension/lib); it must come before the widget bundles, or
every wheel build would need node. The test copies the checkout (tracked files and the built
bundles, times kept), puts an `npm` that fails and leaves a mark first on PATH, and builds the wheel.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILT = ["mlc_lab/static", "mlc_lab/labextension", "js/labextension/lib"]


def _newest(folder: Path) -> tuple[float, Path]:
    return max((p.stat().st_mtime, p) for p in folder.rglob("*") if p.is_file())


def _copy_checkout(dest: Path) -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        src = REPO / name
        if name and src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for name in BUILT:
        shutil.copytree(REPO / name, dest / name, copy_function=shutil.copy2)


def test_the_bundles_are_newer_than_everything_under_js():
    js_time, js_file = _newest(REPO / "js")
    static_time, _ = _newest(REPO / "mlc_lab" / "static")
    assert static_time >= js_time, (
        f"{js_file.relative_to(REPO)} is newer than the bundles in mlc_lab/static: a wheel build would run npm "
        "(after editing js/, rebuild with `npm run build`; js/build.mjs must write mlc_lab/static last)"
    )


def test_a_wheel_builds_without_npm_when_the_bundles_exist(tmp_path):
    src = tmp_path / "src"
    _copy_checkout(src)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "npm_called"
    fake = bin_dir / "npm"
    fake.write_text(f'#!/bin/sh\necho "npm $*" >> "{called}"\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("HATCH_JUPYTER_BUILDER_SKIP_NPM", None)
    out = tmp_path / "dist"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not called.exists(), f"the wheel build ran {called.read_text().strip()!r}"
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = out.glob("mlc_lab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"mlc_lab/static/mlc_lab.js", "mlc_lab/static/loader.js", "mlc_lab/static/saved_page.js"} <= names
    assert any(n.endswith("share/jupyter/labextensions/mlc-lab-jupyterlab/package.json") for n in names)
