"""The lecture notebooks run top to bottom in a fresh kernel, headless, with small budgets.

Each notebook runs in a temporary copy of ``notebooks/`` (the kernel's working directory), with
``MLC_LAB_QUICK=1`` (short sweeps) and ``MLC_LAB_TRIALS=8`` (small tuning runs). A test fails on
any error output, then checks a few outputs that show the notebook did its job (reports, numbers).
The cheap tests at the end check that the committed notebooks carry no outputs and match their
generator (``notebooks/_build.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT_S = 600
NUMBER = r"\d+(?:\.\d+)?"


def _texts(nb) -> list[str]:
    """Every output of every code cell as text (stream text, text/plain and text/html data)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                out.append(o.text)
            elif o.output_type in ("execute_result", "display_data"):
                data = o.get("data", {})
                for key in ("text/plain", "text/html"):
                    if key in data:
                        out.append(data[key] if isinstance(data[key], str) else "".join(data[key]))
                if "application/vnd.plotly.v1+json" in data:
                    out.append("<<plotly figure>>")
                if "application/vnd.jupyter.widget-view+json" in data:
                    out.append("<<widget>>")
    return out


def run_notebook(name: str, tmp_path: Path, monkeypatch, after: dict[str, str] | None = None) -> tuple[object, str]:
    """``after``: code to run right after the first cell whose source contains the key (what a
    student's clicks in a widget do, through the same Python API, between two cells)."""
    from nbclient import NotebookClient

    work = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "mlc_tune_*"))
    monkeypatch.setenv("MLC_LAB_QUICK", "1")
    monkeypatch.setenv("MLC_LAB_TRIALS", "8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("TVM_NUM_THREADS", os.environ.get("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0)))))
    nb = nbformat.read(str(work / name), as_version=4)
    for marker, code in (after or {}).items():
        at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and marker in c.source)
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(code))
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    )
    t0 = time.monotonic()
    try:
        client.execute()
    finally:
        elapsed = time.monotonic() - t0
        out_dir = REPO / "test-artifacts" / "notebooks"
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(out_dir / name))  # the executed notebook, for a look after a failure
        print(f"{name}: {elapsed:.1f} s")
    errors = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if o.output_type == "error":
                errors.append(f"{o.ename}: {o.evalue}")
            elif o.output_type == "stream" and o.name == "stderr" and "Traceback" in o.text:
                errors.append(o.text[-2000:])
    assert not errors, "\n".join(errors)
    assert not list(work.glob("mlc_tune_*")), "tuning records were left next to the notebooks"
    return nb, "\n".join(_texts(nb))


slow = pytest.mark.slow


def _marked_instruction_class(text: str) -> str | None:
    """The class (codefacts' reading of the instruction) of the one line an excerpt marks ``=>``."""
    from mlc_lab.core.lowering import codefacts

    marked = re.findall(r"^=> (.+)$", text, re.MULTILINE)
    assert len(marked) == 1, f"expected one marked instruction, found {marked}"
    (insn,) = codefacts.parse_asm("\t" + marked[0] + "\n")
    return insn.klass


@slow
def test_00_start(tmp_path, monkeypatch):
    nb, text = run_notebook("00_start.ipynb", tmp_path, monkeypatch)
    assert "<<widget>>" in text or "Explorer" in text


@slow
def test_01_tensorir(tmp_path, monkeypatch):
    nb, text = run_notebook("01_tensorir.ipynb", tmp_path, monkeypatch)
    assert "the loop version agrees with numpy" in text
    assert "replays to the same program: True" in text
    assert 'T.sblock("Y_init")' in text and "for k, j_1 in T.grid(128, 4):" in text
    assert re.search(rf"B:\s+{NUMBER} elements in\s+{NUMBER} cache lines", text)
    assert re.search(rf"speed-up of step 4 \(the schedule above\) over the original: {NUMBER}x", text)
    assert re.search(rf"jfactor\s+16:\s+{NUMBER} ms", text)
    assert re.search(rf"best jfactor here: \d+ \({NUMBER} ms", text)
    assert re.search(rf"best jfactor: {NUMBER} GFLOP/s, {NUMBER}% of the roof at {NUMBER} FLOPs/byte", text)
    assert text.count("<<plotly figure>>") >= 4  # two footprints, the sweep, and the sweep on the roofline
    # the compiler's view: per-loop facts before/after the reorder, and what vectorize did
    assert re.search(r"original\s+innermost k\s+\(serial\): ", text)
    assert re.search(r"after vectorize:\s+j_1 vectorized: \d+-wide FMAs on [xyz]mm registers", text)
    assert "+++ after" in text and "T.Ramp" in text  # the diff of tirx.VectorizeLoop
    # the excerpt of j_1's assembly shows its first packed FMA, wherever this CPU's LLVM placed it
    assert _marked_instruction_class(text) == "vector_fma"
    assert text.count("<<widget>>") >= 1  # the explorer (and the access view when present)


@slow
def test_01_after_clicks_in_the_explorer(tmp_path, monkeypatch):
    """A student clicks split and parallel in the explorer before running the walk-through: it still
    runs (it starts from the original program) and shows the chapter's program."""
    clicks = (
        'session.apply("split", "Y/j", factors=[None, 8])\n'
        'session.apply("parallel", "Y/i")\n'
        'print("clicked to step", session.current.id)'
    )
    nb, text = run_notebook(
        "01_tensorir.ipynb", tmp_path, monkeypatch, after={"explorer = mlc_lab.explore(MyModule)": clicks}
    )
    assert "clicked to step 2" in text
    assert 'T.sblock("Y_init")' in text and "for k, j_1 in T.grid(128, 4):" in text
    assert "replays to the same program: True" in text


@slow
def test_01_after_clicks_between_the_cells(tmp_path, monkeypatch):
    """A student goes back to the start in the explorer and clicks parallel right after the
    walk-through: the trace, footprint, measure and compiler cells still read the chapter's step
    (step 4) and say so, not the student's (which has no j_1)."""
    clicks = 'session.goto(0)\nsession.apply("parallel", "Y/i")\nprint("clicked to step", session.current.id)'
    nb, text = run_notebook(
        "01_tensorir.ipynb", tmp_path, monkeypatch, after={'session.apply("decompose_reduction", "Y", "k")': clicks}
    )
    assert "clicked to step 5" in text
    assert "replays to the same program: True" in text
    assert "after (step 4): loops k, j_1 of Y_update" in text
    assert re.search(rf"step 4\s+{NUMBER} ms .* correct=True", text)
    assert re.search(rf"speed-up of step 4 \(the schedule above\) over the original: {NUMBER}x", text)
    assert re.search(r"step 4\s+innermost j_1\s+\(", text)


@slow
def test_02_exercises(tmp_path, monkeypatch):
    nb, text = run_notebook("02_exercises.ipynb", tmp_path, monkeypatch)
    assert "Example: element-wise add: PASSED" in text
    assert "Exercise 1: broadcast add: not yet (signature)" in text
    assert "B is declared (4, 4) int64 but the exercise passes (4,) int64" in text
    assert "Exercise 2: 2-D convolution: not yet (matches numpy)" in text
    assert re.search(rf"max abs error {NUMBER}; \d+ of 72 elements differ", text)
    assert "Exercise 3: batched matmul + relu: not yet (structure)" in text
    assert "decompose_reduction" in text and "sch.vectorize(ax0)" in text
    assert re.search(r"differences: \d+ +share of the structure that agrees: \d+%", text)
    assert "next: parallel(n): the target's loop i0 is parallel" in text  # the hint, from the engine
    assert "5 step(s) to the target" in text
    # the collapsed solutions pass
    for title in ("Exercise 1: broadcast add", "Exercise 2: 2-D convolution", "Exercise 3: batched matmul + relu"):
        assert f"{title}: PASSED" in text, title
    assert re.search(rf"{NUMBER}x faster than the original", text)


@slow
def test_02_after_clicks_in_the_explorer(tmp_path, monkeypatch):
    """A student goes back to the start in exercise 3's explorer and clicks parallel: the grader, the
    measurement and the solutions below still run, and the grader judges the student's step."""
    clicks = 's3.goto(0)\ns3.apply("parallel", "Y/n")\nprint("clicked to step", s3.current.id)'
    nb, text = run_notebook(
        "02_exercises.ipynb", tmp_path, monkeypatch, after={"bmm = mlc_lab.explore(MyBmmRelu": clicks}
    )
    assert "clicked to step 5" in text
    assert "Exercise 3: batched matmul + relu: not yet" in text
    assert re.search(r"original [0-9.]+ ms, yours [0-9.]+ ms: [0-9.]+x, correct=True", text)
    for title in ("Exercise 1: broadcast add", "Exercise 2: 2-D convolution", "Exercise 3: batched matmul + relu"):
        assert f"{title}: PASSED" in text, title


@slow
def test_03_auto_opt(tmp_path, monkeypatch):
    nb, text = run_notebook("03_auto_opt.ipynb", tmp_path, monkeypatch)
    assert "8 trials per tuning run" in text  # the budget came from MLC_LAB_TRIALS
    assert re.search(r"sampled: \[\d+, \d+\]", text)
    assert re.search(rf"trial\s+0: decision \[\d+, \d+\], {NUMBER} ms", text)
    assert text.count("status: done") == 3
    assert re.search(rf"tuned \(default\)\s+{NUMBER} ms", text)
    assert re.search(rf"MLP end to end: {NUMBER} ms -> {NUMBER} ms \({NUMBER}x\)", text)
    assert re.search(
        rf"tuned \(default space\)\s+{NUMBER} GFLOP/s =\s+{NUMBER}% of the roof", text
    )  # ends on the roofline
    assert text.count("<<widget>>") >= 4  # explorer + three dashboards
    assert "<<plotly figure>>" in text


@slow
def test_03_after_cancelling_the_tuning_runs(tmp_path, monkeypatch):
    """The notebook says a tuning run may be cancelled: cancel each one at once (the dashboard's
    Cancel) and the notebook still runs to the end, saying what happened."""
    cancel = 'print("dashboard:", {board}.cancel())'
    nb, text = run_notebook(
        "03_auto_opt.ipynb",
        tmp_path,
        monkeypatch,
        after={
            "board = dashboard(job_session, student)": cancel.format(board="board"),
            "job_auto = tune(": "print('job:', job_auto.cancel())",
            "job_linear = tune(": "print('job:', job_linear.cancel())",
        },
    )
    assert "dashboard: cancelled" in text
    assert "status: cancelled" in text
    assert "The tuning run was cancelled before any candidate was measured" in text
    # nothing was tuned, and no line says it was
    assert re.search(rf"not tuned \(session\)\s+{NUMBER} ms", text)
    assert re.search(rf"not tuned \(default\)\s+{NUMBER} ms", text)
    assert re.search(rf"linear0 alone: {NUMBER} ms, not tuned \(the run was cancelled\)", text)
    assert re.search(rf"MLP end to end: {NUMBER} ms with the naive linear0", text)
    assert "after tuning" not in text and not re.search(r"MLP end to end: .* -> ", text)
    assert re.search(rf"not tuned \(default space\)\s+{NUMBER} GFLOP/s", text)


@slow
def test_04_gpu(tmp_path, monkeypatch):
    nb, text = run_notebook("04_gpu.ipynb", tmp_path, monkeypatch)
    assert 'extern "C" __global__' in text and "main_kernel" in text
    assert "__shared__" in text
    assert "100% of the bytes moved are used" in text  # the coalesced vector add
    assert "bank conflicts" in text
    if shutil.which("nvcc") and shutil.which("ptxas"):  # registers from ptxas -v
        assert re.search(r"main_kernel: \d+ registers per thread", text)
    assert "<<plotly figure>>" in text  # thread / block ownership
    if "CUDA GPU found" in text:
        assert re.search(r"GFLOPS", text)
    else:
        assert "timing needs a GPU" in text
        assert "no CUDA GPU found" in text  # the tuner's refusal, printed


@slow
def test_04_after_clicks_in_the_explorer(tmp_path, monkeypatch):
    """The original program clicked in the local-blocking explorer's History: the analyses below
    still read the blocked step."""
    nb, text = run_notebook(
        "04_gpu.ipynb",
        tmp_path,
        monkeypatch,
        after={
            "blocked = local.session.current.id": "local.session.goto(0)\n"
            'print("clicked back to step", local.session.current.id, "of", blocked)',
        },
    )
    back = re.search(r"clicked back to step (\d+) of (\d+)", text)
    assert back and int(back.group(1)) < int(back.group(2))
    assert "<<plotly figure>>" in text and 'extern "C" __global__' in text


@slow
def test_05_after_clicks_in_the_playground(tmp_path, monkeypatch):
    nb, text = run_notebook(
        "05_playground.ipynb",
        tmp_path,
        monkeypatch,
        after={
            "playground = mlc_lab.explore(PROGRAM)": 'session.apply("split", "i", factors=[None, 2])\n'
            'session.apply("parallel", "i_0")',
        },
    )
    assert "for j in T.vectorized(4):" in text
    assert re.search(rf"step \d+: {NUMBER} us, correct=True", text)


@slow
def test_05_playground(tmp_path, monkeypatch):
    nb, text = run_notebook("05_playground.ipynb", tmp_path, monkeypatch)
    assert "tvm.s_tir.Schedule(MyAdd)" in text and "T.sblock" in text  # converted
    assert "for j in T.vectorized(4):" in text
    assert re.search(rf"step \d+: {NUMBER} us, correct=True", text)


# ----------------------------------------------------------------------------------------- cheap checks


def _lecture_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("0[0-9]_*.ipynb"))


@pytest.mark.parametrize("path", _lecture_notebooks(), ids=lambda p: p.name)
def test_committed_notebooks_have_no_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name


def test_notebooks_match_their_generator():
    spec = importlib.util.spec_from_file_location("nb_build", NOTEBOOKS / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert set(mod.NOTEBOOKS) == {p.name for p in _lecture_notebooks()} - {"00_start.ipynb"}
    for name, cells in mod.NOTEBOOKS.items():
        built = mod.build(name, cells)
        saved = nbformat.read(str(NOTEBOOKS / name), as_version=4)
        assert [(c.cell_type, c.source) for c in built.cells] == [(c.cell_type, c.source) for c in saved.cells], (
            f"{name} differs from notebooks/_build.py: run `python notebooks/_build.py`"
        )
