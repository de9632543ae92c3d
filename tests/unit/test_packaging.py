"""Facts the launch and the wheel depend on: node must not read the repo (and the venv inside it)
as ES modules; `./run.sh lab` opens the notebook the README names; the wheel installs the prebuilt
labextension; the Launcher offers the course programs mlc_lab knows."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from mlc_lab.documents import course_program, course_programs

REPO = Path(__file__).resolve().parents[2]


def test_package_json_is_not_an_es_module_scope():
    pkg = json.loads((REPO / "package.json").read_text())
    assert "type" not in pkg, "node would read .venv/**/*.js (JupyterLab's yarn.js) as ES modules"
    assert (REPO / "vitest.config.mts").exists() and (REPO / "js" / "build.mjs").exists()
    assert pkg["jupyterlab"]["outputDir"] == "mlc_lab/labextension"


def test_run_sh_opens_the_notebook_the_readme_names():
    first = re.search(r"^FIRST_NOTEBOOK=(\S+)", (REPO / "run.sh").read_text(), re.M).group(1)
    assert (REPO / "notebooks" / first).is_file()
    assert f"Open `notebooks/{first}` (the first command does" in (REPO / "README.md").read_text()


def test_wheel_ships_the_labextension():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    shared = cfg["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    name = json.loads((REPO / "package.json").read_text())["name"]
    assert shared["mlc_lab/labextension"] == f"share/jupyter/labextensions/{name}"
    assert shared["js/labextension/install.json"] == f"share/jupyter/labextensions/{name}/install.json"
    assert "notebook>=7.2" in cfg["project"]["optional-dependencies"]["lab"]
    built = json.loads((REPO / "mlc_lab" / "labextension" / "package.json").read_text())
    assert built["name"] == name and built["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")


def test_launcher_lists_the_course_programs():
    ts = (REPO / "js" / "labextension" / "src" / "programs.ts").read_text()
    listed = dict(re.findall(r'name: "(\w+)", title: "([^"]+)"', ts))
    assert listed == course_programs()
    for name in listed:
        assert "@T.prim_func(s_tir=True)" in course_program(name)
