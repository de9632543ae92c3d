"""scripts/check.sh catches an undefined name, a type error in mlc_lab/model and mlc_lab/core, and a
stale js/lib/model.ts.

A scratch copy holds what those checks read (check.sh, pyproject.toml, mlc_lab/ without its built
bundles, js/lib/model.ts, and mypy's cache so that the copy is checked incrementally); the checks
pass on it as copied, then fail once each error is planted, each naming what it found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKS = ["lint", "types", "model-ts"]  # the tsc, format and import checks do not read what is planted here


def _copy(dest: Path) -> None:
    (dest / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "check.sh", dest / "scripts" / "check.sh")
    shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
    skip = shutil.ignore_patterns("static", "labextension", "__pycache__")
    shutil.copytree(REPO / "mlc_lab", dest / "mlc_lab", ignore=skip, copy_function=shutil.copy2)
    (dest / "js" / "lib").mkdir(parents=True)
    shutil.copy2(REPO / "js" / "lib" / "model.ts", dest / "js" / "lib" / "model.ts")
    if (REPO / ".mypy_cache").is_dir():
        shutil.copytree(REPO / ".mypy_cache", dest / ".mypy_cache", copy_function=shutil.copy2)


def _check(root: Path, *names: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VENV": str(REPO / ".venv")}
    return subprocess.run(
        ["bash", str(root / "scripts" / "check.sh"), *names],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _append(path: Path, text: str) -> int:
    """Append ``text`` to ``path``; the number of the first line appended."""
    old = path.read_text()
    path.write_text(old + text)
    return old.count("\n") + 1


def test_check_sh_fails_on_an_undefined_name_a_type_error_and_a_stale_model_ts(tmp_path):
    root = tmp_path / "repo"
    _copy(root)
    clean = _check(root, *CHECKS)
    assert clean.returncode == 0, f"the checks fail on the copy as it is:\n{clean.stderr[-3000:]}"

    typo = _append(root / "mlc_lab" / "core" / "display.py", "\n\ndef _planted() -> int:\n    return lenght([])\n")
    model = _append(
        root / "mlc_lab" / "model" / "steps.py",
        '\n\ndef _planted_model() -> int:\n    return "1"\n\n\ndef _planted_untyped(x):\n    return x\n',
    )
    core = _append(root / "mlc_lab" / "core" / "session.py", '\n\n_PLANTED: int = "one"\n')
    _append(root / "js" / "lib" / "model.ts", "export const PLANTED = 1;\n")
    run = _check(root, *CHECKS)

    out = run.stderr
    assert run.returncode == 1, out[-3000:]
    assert f"mlc_lab/core/display.py:{typo + 3}:12: F821 Undefined name `lenght`" in out
    assert (
        f'mlc_lab/model/steps.py:{model + 3}: error: Incompatible return value type (got "str", expected "int")' in out
    )
    assert f"mlc_lab/model/steps.py:{model + 6}: error: Function is missing a type annotation" in out  # strict there
    assert f"mlc_lab/core/session.py:{core + 2}: error: Incompatible types in assignment" in out
    assert "js/lib/model.ts is not what mlc_lab/model generates" in out
    failed = out.strip().splitlines()[-1]
    for name in ("lint (ruff check)", "Python types (mypy)", "js/lib/model.ts is generated"):
        assert name in failed, failed


def test_check_sh_names_its_checks_and_refuses_an_unknown_one(tmp_path):
    run = _check(REPO, "lint", "typos")
    assert run.returncode == 2
    assert "no check called typos; the checks are: tsc lint format types model-ts imports" in run.stderr
