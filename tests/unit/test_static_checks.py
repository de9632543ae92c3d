"""scripts/check.sh catches an undefined name, a type error in mlc_lab/model and mlc_lab/core, a
stale js/lib/model.ts, and a Session member renamed under the widgets that call it.

A scratch copy holds what those checks read (check.sh, pyproject.toml, mlc_lab/ without its built
bundles, js/lib/model.ts, and mypy's cache so that the copy is checked incrementally); the checks
pass on it as copied, then fail once each error is planted, each naming what it found.
"""

from __future__ import annotations

import os
import re
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


def _rename(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


def test_a_renamed_session_member_fails_the_types_at_its_widget_callers(tmp_path):
    """The widgets see a session only through mlc_lab.core.protocol's protocols: renaming
    ``step_view`` in the Session and in SessionLike fails every widget line that calls it, and a
    member the Session loses (``script_at``; ``lower``, which only the Compiler panel uses) fails
    where a widget makes a Session and holds it to them (``explore``, ``access_view``)."""
    root = tmp_path / "repo"
    _copy(root)
    _rename(root / "mlc_lab" / "core" / "session.py", "def step_view(", "def view_of_step(")
    _rename(root / "mlc_lab" / "core" / "protocol.py", "def step_view(", "def view_of_step(")
    _rename(root / "mlc_lab" / "core" / "session.py", "def script_at(", "def script_of_step(")
    _rename(root / "mlc_lab" / "core" / "session.py", "def lower(", "def lowered(")
    widgets = sorted((root / "mlc_lab" / "widgets").rglob("*.py"))
    lines = [
        (p.relative_to(root).as_posix(), n, text)
        for p in widgets
        for n, text in enumerate(p.read_text().splitlines(), 1)
    ]
    callers = [(path, n) for path, n, text in lines if ".step_view(" in text]
    handovers = [(path, n) for path, n, text in lines if re.search(r"\bSession\(x\b", text)]
    assert len(callers) >= 8 and len(handovers) == 2, (callers, handovers)

    run = _check(root, "types")
    out = run.stderr
    assert run.returncode == 1, out[-3000:]
    for path, n in callers:
        assert re.search(rf'^{re.escape(path)}:{n}: error: "\w+" has no attribute "step_view"', out, re.M), (
            f"{path}:{n} calls step_view, but mypy does not fail there:\n{out[-3000:]}"
        )
    for path, n in handovers:
        assert re.search(rf'^{re.escape(path)}:{n}: error: Incompatible .*"Session"', out, re.M), out[-3000:]
        missing = re.findall(rf"^{re.escape(path)}:{n}: note: +([\w, ]+)$", out, re.M)
        assert "script_at" in "".join(missing), out[-3000:]
    explore = next(n for path, n in handovers if path.endswith("explorer.py"))
    assert re.search(rf"^mlc_lab/widgets/explorer.py:{explore}: note: +lower, script_at$", out, re.M), out[-3000:]


def test_check_sh_names_its_checks_and_refuses_an_unknown_one(tmp_path):
    run = _check(REPO, "lint", "typos")
    assert run.returncode == 2
    assert "no check called typos; the checks are: tsc lint format types model-ts imports" in run.stderr
