"""The plain-data model (mlc_lab.model.steps) and the layer rule around it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from mlc_lab.model.steps import Change, StepSummary, StepView, changed_lines

ROOT = Path(__file__).resolve().parents[2]


def test_changed_lines_marks_what_a_step_rewrote():
    assert changed_lines("a\nb\nc\n", "a\nB\nc\nd\n") == [2, 4]
    assert changed_lines("a\nb\n", "a\n") == []
    assert changed_lines("x\na\nb\nc\ny\n", "x\na\nB\nb\nc\ny\n") == [3]
    assert changed_lines("", "a\nb") == [1, 2]


def test_changed_lines_ignore_indentation_only_changes():
    before = "for i in range(4):\n    x = 1\n    y = 2\n"
    after = "for i_0 in range(2):\n    for i_1 in range(2):\n        x = 1\n        y = 2\n"
    assert changed_lines(before, after) == [1, 2]


def test_a_step_view_has_one_json_encoding():
    view = StepView(
        id=1,
        parent=0,
        kind="apply",
        primitive="split",
        label="split(j, factors=[None, 4])",
        script="s",
        loop_tree={"func": "f", "functions": []},
        trace="t",
        changed_lines=(3,),
        created=("j_0", "j_1"),
        decisions=({"index": 0, "value": [2, 2]},),
    )
    data = view.to_json()
    assert json.loads(view.json_bytes) == data
    assert data["created"] == ["j_0", "j_1"] and data["changed_lines"] == [3]
    assert "measurement" not in data  # a step never changes once made: its measurements travel on their own
    assert view.summary == StepSummary(1, 0, "apply", "split", "split(j, factors=[None, 4])")
    assert Change("apply", view, (view.summary,)).added[0].to_json()["label"] == view.label


def test_core_never_imports_widgets():
    """Layer rule: the session finds its views through mlc_lab.core.display, registered by the widgets."""
    imports = re.compile(r"^\s*(from|import)\s+mlc_lab\.widgets|import_module\(\s*[\"']mlc_lab\.widgets", re.M)
    for path in (ROOT / "mlc_lab" / "core").rglob("*.py"):
        assert not imports.search(path.read_text()), path
    code = (
        "import sys, mlc_lab.core.session; "
        "bad = [m for m in sys.modules if m.startswith('mlc_lab.widgets')]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_package_registers_the_views_for_users():
    code = (
        "import mlc_lab; from mlc_lab.core import display; mlc_lab.Session; "
        "assert display.has_view('explorer') and display.has_view('access')"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_one_name_rule_answers_the_shared_cases():
    """tests/fixtures/name_rule.json: the same cases run against js/lib/names.ts (vitest)."""
    from mlc_lab.model.steps import LoopTree, ref_of

    vectors = json.loads((ROOT / "tests" / "fixtures" / "name_rule.json").read_text())
    assert len(vectors["cases"]) >= 20
    for case in vectors["cases"]:
        tree = LoopTree(vectors["trees"][case["tree"]])
        assert [ref_of(n) for n in tree.match(case["text"], case["kind"])] == case["expect"], case


def test_a_session_resolves_names_by_the_same_rule():
    from mlc_lab import NameResolutionError, Session
    from tests.fixtures.programs import MM_RELU

    s = Session(MM_RELU)
    tree = s.loop_tree()
    for text in ("Y/i", "C/j", "k", "mm_relu:Y/j", "Y/k"):
        (node,) = tree.match(text, "loop")
        assert s.footprint(text) is not None or node  # resolves (the analysis finds the same loop)
    import pytest

    with pytest.raises(NameResolutionError, match="ambiguous") as info:
        s.apply("parallel", "i")
    assert sorted(info.value.candidates) == sorted(n["qualified"] for n in tree.match("i", "loop"))


def test_the_typescript_model_is_generated_from_the_python_one():
    from mlc_lab.core import model_ts

    assert model_ts.TARGET.read_text() == model_ts.render(), "stale: run `python -m mlc_lab.core.model_ts`"
    text = model_ts.render()
    for name in ("LoopNode", "BlockNode", "StepView", "StepSummary", "Decision"):
        assert f"export interface {name} {{" in text
    assert "  qualified: string;" in text and "  changed_lines: number[];" in text


def test_plain_makes_view_data_json_safe():
    import numpy as np

    from mlc_lab.model.steps import plain

    class Sampled:
        value = [4, 8]

    data = {1: (np.int64(3), np.float32(0.5), np.bool_(True)), "s": Sampled(), "o": object, "n": None}
    out = plain(data)
    assert out == {"1": [3, 0.5, True], "s": [4, 8], "o": str(object), "n": None}
    assert type(out["1"][0]) is int and json.dumps(out)


def test_the_step_model_has_one_address():
    """The step model is imported from mlc_lab.model.steps only: no module re-exports it (or
    anything) with ``import *``, and the old address is gone."""
    assert not (ROOT / "mlc_lab" / "core" / "model.py").exists()
    starred = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "mlc_lab").rglob("*.py")
        if any(
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
            for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        )
    ]
    assert starred == []
    code = "import sys, mlc_lab.model.steps; assert 'numpy' not in sys.modules and 'tvm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_loops_without_a_block_inside_get_unique_names_the_rule_resolves():
    """read_at / write_at put their copy loops inside a block (no block below them): both blocks'
    loops are called ax0, ax1. Each gets the block it runs in as qualifier (tree "C" of
    name_rule.json is this program's tree), and the analysis finds them by that name."""
    import tvm

    from mlc_lab import Session
    from mlc_lab.model.steps import ref_of
    from tests.conformance import primitive_schedules as PS

    sch = tvm.s_tir.Schedule(PS.MATMUL)
    PS.read_write_at(sch)
    s = Session.from_trace(PS.MATMUL, sch.trace)
    tree = s.loop_tree()
    vectors = json.loads((ROOT / "tests" / "fixtures" / "name_rule.json").read_text())
    assert json.loads(json.dumps(tree)) == vectors["trees"]["C"]
    refs = [ref_of(n) for n in tree.loops()]
    assert sorted(refs) == sorted(["i", "j", "k", "A_shared/ax0", "A_shared/ax1", "C_local/ax0", "C_local/ax1"])
    for ref in refs:
        (node,) = tree.match(ref, "loop")
        assert ref_of(node) == ref
    fp = s.footprint("A_shared/ax1", at={"i": 5, "A_shared/ax0": 0})
    assert fp["A"].distinct == 64 and fp["A"].bounds == [[5, 5], [0, 63]]
    assert fp["A_shared"].distinct == 64 and bool(fp["A_shared"].writes[5].all())


def test_importing_the_whole_model_loads_no_numpy_or_tvm():
    names = sorted(
        "mlc_lab." + ".".join(p.relative_to(ROOT / "mlc_lab").with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "mlc_lab" / "model").rglob("*.py")
    )
    assert "mlc_lab.model.wire" in names and "mlc_lab.model.access.program" in names
    code = f"import importlib, sys\nfor n in {names!r}: importlib.import_module(n)\n"
    code += "assert 'numpy' not in sys.modules and 'tvm' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
