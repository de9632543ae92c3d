"""The course catalog (mlc_lab/tvm/course_programs.py): each program parses, computes what its numpy
reference says, reads without TVM, and is the text the lecture notebooks show."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from mlc_lab.tvm import course_programs as C
from mlc_lab.tvm.program import course_program, parse_text

REPO = Path(__file__).resolve().parents[2]

# Run as they stand on this CPU (unscheduled): the 1024^3 GPU matmul is left to its 128^3 twin.
RUN = [p.name for p in C.CATALOG if p.reference is not None and p.name != "gpu_matmul"]


def _inputs(source: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Random arrays for the function's parameters, read off its signature (the Python PrimFunc of
    TVM 0.27 does not expose its buffer map)."""
    params = re.findall(r'\w+: T\.Buffer\(\(([\d, ]+?),?\), "(\w+)"\)', source.split("T.func_attr")[0])
    shapes = [([int(d) for d in dims.split(",")], dtype) for dims, dtype in params]
    return [
        rng.integers(-50, 50, shape).astype(dtype) if "int" in dtype else rng.random(shape).astype(dtype)
        for shape, dtype in shapes
    ]


@pytest.mark.parametrize("name", RUN)
def test_each_program_computes_its_numpy_reference(name):
    entry = C.program(name)
    mod = course_program(name)
    (gv,) = [gv for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    arrays = _inputs(entry.source, np.random.default_rng(0))
    *ins, out = arrays
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    tvm.compile(mod, target="llvm")[gv.name_hint](*tensors)
    np.testing.assert_allclose(tensors[-1].numpy(), entry.reference(*ins), rtol=1e-4, atol=1e-4)


def test_the_relax_program_holds_its_tensorir_function():
    mod = course_program("mlp_mixture")
    assert isinstance(mod["linear0"], tvm.tirx.PrimFunc) and "main" in {gv.name_hint for gv in mod.functions}


def test_matmul_at_any_size_and_name():
    mod = parse_text(C.matmul(48, "mm"))
    assert [gv.name_hint for gv in mod.functions] == ["mm"]
    assert "T.Buffer((48, 48)" in mod.script() and "128" not in mod.script()
    assert mod["mm"].attrs["global_symbol"] == "mm"
    assert C.matmul() == C.MATMUL == C.PROGRAMS["matmul"].text


def test_entries_are_described_and_named_once():
    assert len({p.name for p in C.CATALOG}) == len(C.CATALOG)
    for p in C.CATALOG:
        assert p.title and p.chapter and p.what
        assert p.source.startswith("@I.ir_module\nclass ") and p.text.endswith(p.source)
    assert set(C.COURSE_PROGRAMS) == {p.name for p in C.CATALOG if p.launcher}


def test_an_unknown_name_says_which_there_are():
    with pytest.raises(KeyError, match="no course program called 'mmrelu'; there are: mm_relu, "):
        C.program("mmrelu")


def test_the_catalog_reads_without_tvm():
    code = "import sys, mlc_lab.tvm.course_programs as c; c.matmul(64); print('tvm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_the_notebooks_show_the_catalogs_text():
    """Every course program a notebook shows is the catalog's text, and no notebook holds another
    copy of a catalog program (a class of the same name defined in a cell of its own)."""
    cells = []
    for part in sorted((REPO / "notebooks").glob("_0[1-9]_*.py")):  # the builder's parts (no nbformat to load)
        spec = importlib.util.spec_from_file_location(f"nb_cells_{part.stem}", part)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cells += [src for _kind, src in module.CELLS]
    assert len(cells) > 100
    shown = {p.name for p in C.CATALOG if any(p.source in src for src in cells)}
    # all but the Launcher's vector_add and exercise 3's target (the explorer is handed it by name)
    assert shown == {p.name for p in C.CATALOG} - {"vector_add", "bmm_relu_target"}
    for p in C.CATALOG:
        cls = re.search(r"class (\w+):", p.source).group(1)
        defined = [
            src
            for src in cells
            if re.search(rf"^class {cls}:", src, re.M) and not any(q.source in src for q in C.CATALOG)
        ]
        # notebook 5 shows the legacy MyAdd on purpose (what convert rewrites)
        assert all("tvm.script.ir_module" in src for src in defined), (p.name, defined)


def test_mlc_lab_hands_out_every_program_by_name():
    from mlc_lab import course_program
    from mlc_lab.errors import UsageError

    assert all(course_program(p.name) == p.text for p in C.CATALOG)
    with pytest.raises(UsageError, match="no course program called 'mm'; there are: mm_relu, add, "):
        course_program("mm")
