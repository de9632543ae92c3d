"""The layout, counted from the tree: one stem per feature at every floor, `mlc_lab/tvm/` holds what
imports TVM, README's Layout table names every package and folder there is (and nothing else), and
every package and top-level module of mlc_lab stands on a floor of the layers contract (the floors
README states).

Read with ``ast`` and the file system only: nothing is imported.
"""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The floors a feature reaches, top to bottom (mlc_lab/text has no features: it is text work for tvm).
FLOORS = {
    "widgets": "mlc_lab/widgets",
    "core": "mlc_lab/core",
    "tvm": "mlc_lab/tvm",
    "model": "mlc_lab/model",
    "js": "js",
}

# feature stem -> (the names that belong to it, the floors where its stem must stand)
FEATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "checks": (r"checks?|check_\w+|hazards?|numeric\w*|opencl\w*|schedule_facts|codefacts", tuple(FLOORS)),
    "access": (r"access\w*", tuple(FLOORS)),
    "lowering": (r"lower\w*|compiler\w*|cuda\w*", tuple(FLOORS)),
    "tuning": (r"tun\w*|cpu_space|runner_process|timeline", tuple(FLOORS)),
    # the class server has no TVM side: its shared database is tuning's (tvm/tuning/shared_db.py)
    "classroom": (r"class\w*", ("widgets", "core", "model", "js")),
    "measure": (r"measure\w*|timing|rpc_timing|sweep", tuple(FLOORS)),
    "machine": (r"machine", ("core", "tvm", "model")),
    "exercises": (r"exercise\w*", ("tvm",)),
    "path": (r"path\w*", tuple(FLOORS)),
    # the package mlc_lab/grading stands above the floors; TVM's side of it (the hand-in's child) and its results
    "grading": (r"grad\w*|handin\w*|judg\w*", ("tvm", "model")),
}

# Each page's bundle is an entry at js/'s top (js/build.mjs): named after its page, not a feature's floor.
JS_BUNDLES = {"explorer", "access_view", "tuning_dashboard", "classroom", "loader", "saved_page", "mlc_lab", "css.d"}

# Modules of mlc_lab/tvm that import no TVM, each with why it stands there.
TVM_WITHOUT_TVM = {
    "mlc_lab/tvm/__init__.py": "the package's docstring",
    "mlc_lab/tvm/checks/__init__.py": "the package's docstring",
    "mlc_lab/tvm/tuning/__init__.py": "the package's docstring",
    "mlc_lab/tvm/measure/opencl_run.py": "runs tvm/checks/opencl.py's plain data in the measuring side, which may not hold the compiler",
    "mlc_lab/tvm/measure/opencl_fit.py": "fits opencl_run.py's run into a memory and time budget, in the measuring side too",
    "mlc_lab/tvm/measure/stage.py": "the trusted side of a run elsewhere: builds through measure/build.py, writes files",
    "mlc_lab/tvm/measure/rpc.py": "one program timed elsewhere: built through stage.py, sent through pool.py or batch.py",
    "mlc_lab/tvm/measure/batch.py": "sends a round built by measure/stage.py to the measuring side elsewhere (a command, Slurm)",
    "mlc_lab/tvm/tuning/live.py": "the tuning job's live log, written by the job's processes next to TVM's work",
    "mlc_lab/tvm/state_trace.py": "hands live TVM schedules about (a user's fn(sch), a State's handles) through schedule.py",
    "mlc_lab/tvm/course_programs.py": "TVMScript text in TVM's own spelling: it changes when TVM renames",
    "mlc_lab/tvm/exercises/programs.py": "TVMScript text in TVM's own spelling: it changes when TVM renames",
    "mlc_lab/tvm/path/__init__.py": "the package's docstring",
    "mlc_lab/tvm/path/dtypes.py": "reads buffer types off path/ir.py's views and sets them on a live schedule (path/work.py)",
    "mlc_lab/tvm/path/copyat.py": "reads read_at / write_at off path/ir.py's views and makes them on path/work.py's schedule",
    "mlc_lab/tvm/path/merge.py": "reads merged loops off path/ir.py's views and merges them on path/work.py's schedule",
    "mlc_lab/tvm/path/inplace.py": "reads cache_inplace off path/ir.py's views and makes it on path/work.py's schedule",
    "mlc_lab/tvm/path/hidden.py": "reads the regions a target hides off path/ir.py's views; hides them on path/work.py's",
    "mlc_lab/tvm/path/plan.py": "carries a way out on a live schedule (path/work.py); TVM's nodes pass through it",
    "mlc_lab/tvm/path/regions.py": "writes a region TVM's nodes state as the lambda text the trace's safe parser reads",
    "mlc_lab/tvm/path/tiling.py": "works a live schedule (path/work.py) over TVM's iter maps (path/ir.py)",
    "mlc_lab/tvm/path/through.py": "replays a way through schedule.State (path/way.py); its checks are TVM's structural equality",
    "mlc_lab/tvm/path/unitpad.py": "works a live schedule (path/work.py) over TVM's iter maps (path/ir.py)",
    "mlc_lab/tvm/path/rfchain.py": "the names of a reduction factored twice, read off the path engine's views (path/ir.py)",
    "mlc_lab/tvm/path/fusesplit.py": "fuses then splits a copy's loops on path/work.py's schedule, read off path/ir.py's views",
    "mlc_lab/tvm/path/way.py": "hands the engine's way to the Session through schedule.State (named steps out)",
}


def _entries(floor: str) -> list[str]:
    """The modules and packages directly in a floor, by name (``check_rules``, ``checks``)."""
    out = []
    for p in sorted((ROOT / floor).iterdir()):
        if p.name.startswith(("__", ".")) or p.name in ("node_modules", "static", "labextension"):
            continue
        if p.is_dir() and (floor == "js" or (p / "__init__.py").exists()):
            out.append(p.name)
        elif p.suffix in (".py", ".ts", ".css"):
            out.append(p.stem)
    return out


def test_each_feature_has_one_stem_at_every_floor():
    spread, missing = [], []
    for stem, (pattern, floors) in FEATURES.items():
        for name, floor in FLOORS.items():
            entries = _entries(floor)
            if name in floors and stem not in entries:
                missing.append(f"{floor}/{stem}")
            others = [e for e in entries if re.fullmatch(pattern, e) and e != stem]
            if name == "js":
                others = [e for e in others if e not in JS_BUNDLES]
            spread += [f"{floor}/{e} (belongs under {floor}/{stem})" for e in others]
    assert missing == [] and spread == []


def _imports_tvm(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        if any(n.split(".")[0] in ("tvm", "tvm_ffi") for n in names):
            return True
    return False


def test_the_tvm_package_holds_what_imports_tvm():
    without = sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "mlc_lab" / "tvm").rglob("*.py") if not _imports_tvm(p)
    )
    assert without == sorted(TVM_WITHOUT_TVM)


def _layout_table() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    listed = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            listed += [p.rstrip("/") for p in re.findall(r"`([^`]+/)`", first)]
    return listed


def _tracked_folders() -> set[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {f.split("/")[0] for f in files if "/" in f}
    for f in files:
        parts = f.split("/")
        if parts[0] in ("js", "tests") and len(parts) > 2:
            folders.add("/".join(parts[:2]))
    packages = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "mlc_lab").rglob("__init__.py")}
    return folders | packages


def test_the_readme_layout_names_every_package_and_folder():
    listed = _layout_table()
    assert len(listed) == len(set(listed)), "a folder listed twice"
    tree = _tracked_folders()
    assert sorted(tree - set(listed)) == [], "folders the README's Layout leaves out"
    assert sorted(set(listed) - tree) == [], "folders the README's Layout names that are not there"


def test_the_readme_names_every_benchmark():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `benchmarks/`"))
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert [s for s in scripts if f"`{s}`" not in row] == []


def layer_floors() -> list[list[str]]:
    """The floors of pyproject.toml's layers contract over mlc_lab, top down, each a list of names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers" and c.get("containers") == ["mlc_lab"])
    return [[name.strip() for name in re.split(r"[|:]", floor)] for floor in layers["layers"]]


def top_level_entries(package: Path) -> set[str]:
    """A package's packages and modules by name (``core``, ``cli``), its ``__init__`` aside."""
    return {
        p.stem if p.is_file() else p.name
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())
    }


def unplaced(entries: set[str], floors: list[list[str]]) -> tuple[list[str], list[str]]:
    """(entries on no floor, names on a floor that are no entry)."""
    named = [name for floor in floors for name in floor]
    return sorted(entries - set(named)), sorted(set(named) - entries)


def test_every_package_and_top_level_module_stands_on_a_floor():
    floors = layer_floors()
    named = [name for floor in floors for name in floor]
    assert len(named) == len(set(named)), "a name on two floors"
    assert {"widgets", "core", "tvm", "model", "cli"} <= set(named)  # the contract was read
    assert unplaced(top_level_entries(ROOT / "mlc_lab"), floors) == ([], [])


def test_a_new_package_on_no_floor_is_caught(tmp_path):
    for name in ("core", "fresh"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "helpers.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "static").mkdir()  # no package: built files
    assert top_level_entries(tmp_path) == {"core", "fresh", "helpers"}
    assert unplaced(top_level_entries(tmp_path), [["core"], ["helpers", "gone"]]) == (["fresh"], ["gone"])


def test_the_readme_states_the_floors_of_the_contract():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    stated = " -> ".join(" | ".join(f"`{name}`" for name in floor) for floor in layer_floors())
    assert stated in " ".join(section.split()), f"README's Layout should state the floors: {stated}"
