"""mlc_lab's errors as a student sees them in a notebook: run cells through a real IPython shell and
read what it would send to the page (the ``traceback`` lines of the error message)."""

from __future__ import annotations

import re

import pytest
from IPython.core.interactiveshell import InteractiveShell

ANSI = re.compile(r"\x1b\[[0-9;]*m")

PROGRAM_CELL = '''x = 1
y = 2
PROG = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi] + undefined_thing
"""
'''

GOOD_PROGRAM = '''PROG = """
from tvm.script import tirx as T

@T.prim_func(s_tir=True)
def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
"""
'''


@pytest.fixture()
def shell(monkeypatch):
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance()
    shown: list[list[str]] = []

    def capture(etype, evalue, stb):  # what ipykernel sends as the error's traceback
        shown.append([ANSI.sub("", line) for line in stb])

    monkeypatch.setattr(sh, "_showtraceback", capture)

    def run(cell: str) -> list[str] | None:
        before = len(shown)
        sh.run_cell(cell, store_history=True)
        return shown[-1] if len(shown) > before else None

    assert run("import mlc_lab") is None
    yield run
    InteractiveShell.clear_instance()


def _no_internal_frames(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert "Traceback" not in text
    assert "mlc_lab/" not in text and "site-packages" not in text, text
    assert "File " not in text, text


def test_a_syntax_error_names_its_line_as_a_parse_error_does(shell):
    assert (
        shell('BROKEN = """\nimport tvm\nfrom tvm.script import tirx as T\n\n@T.prim_func\ndef f(:\n    pass\n"""')
        is None
    )
    lines = shell("mlc_lab.Session(BROKEN)")
    assert lines is not None
    assert lines[0].startswith("LoadError: line 6 of the program text: Python syntax error"), lines[0]
    assert any(line.startswith("  line 6 of the program text is Cell In[2], line 6: def f(:") for line in lines), lines


def test_parse_error_names_the_line_in_the_cell(shell):
    assert shell(PROGRAM_CELL) is None
    lines = shell("s = mlc_lab.Session(PROG)")
    assert lines is not None
    assert lines[0].startswith(
        "LoadError: line 9 of the program text: TVMScript does not parse: Undefined variable: undefined_thing"
    ), lines[0]
    # the string starts on the cell's third line, so the program's line 9 is the cell's line 11
    assert "  line 9 of the program text is Cell In[2], line 11: B[vi] = A[vi] + undefined_thing" in lines
    assert "  in Cell In[3], line 1: s = mlc_lab.Session(PROG)" in lines
    # TVM's own caret rendering follows, counted in the same lines
    assert any("line 9, column" in line for line in lines)
    _no_internal_frames(lines)


def test_unknown_loop_after_clicks_says_how_to_get_back(shell):
    assert shell(GOOD_PROGRAM) is None
    assert shell("session = mlc_lab.Session(PROG)\nsession.apply('split', 'B/j', factors=[None, 4])") is None
    # the walk-through's next cell still names the loop split away
    lines = shell("a, b = session.apply('split', 'B/j', factors=[None, 2])")
    assert lines is not None
    assert lines[0].startswith("NameResolutionError: there is no loop named 'B/j'"), lines[0]
    assert "session.goto(0)" in lines[0] and "Undo" in lines[0] and "step 1" in lines[0]
    assert "  in Cell In[4], line 1: a, b = session.apply('split', 'B/j', factors=[None, 2])" in lines
    assert not any(line.startswith("  involved:") for line in lines)  # the sentence lists the loops already
    _no_internal_frames(lines)


def test_user_functions_stay_in_the_trace(shell):
    assert shell(GOOD_PROGRAM) is None
    assert shell("def schedule(s):\n    return s.apply('vectorize', 'nowhere')") is None
    lines = shell("schedule(mlc_lab.Session(PROG))")
    assert lines is not None
    assert lines[0].startswith("NameResolutionError: there is no loop named 'nowhere'")
    assert "goto(0)" not in lines[0]  # at the original program: nothing to go back to
    assert "  in Cell In[4], line 1: schedule(mlc_lab.Session(PROG))" in lines
    assert "  in Cell In[3], line 2: return s.apply('vectorize', 'nowhere')" in lines
    _no_internal_frames(lines)


def test_plain_python_errors_keep_ipythons_traceback(shell):
    lines = shell("1/0")
    assert lines is not None and any("ZeroDivisionError" in line for line in lines)


def test_trace_document_errors_name_the_file_line(shell, tmp_path):
    """What a double-clicked .trace runs in its kernel (mlc_lab.open_trace): the sentence first,
    naming the file and its line."""
    (tmp_path / "add.py").write_text(GOOD_PROGRAM.split('"""')[1])
    trace = tmp_path / "add.trace"
    trace.write_text(
        'b0 = sch.get_sblock(name="B", func_name="main")\nl1, l2 = sch.get_loops(block=b0)\nsch.vectorize(loop=l9)\n'
    )
    lines = shell(f"mlc_lab.open_trace({str(trace)!r})")
    assert lines is not None
    assert lines[0].startswith("TraceParseError: add.trace, line 3: "), lines[0]
    assert not any("in Cell In[" in line for line in lines)  # the file is where to look
    _no_internal_frames(lines)


def test_trace_without_program_says_what_to_do(shell, tmp_path):
    trace = tmp_path / "lonely.trace"
    trace.write_text('b0 = sch.get_sblock(name="B", func_name="main")\n')
    lines = shell(f"mlc_lab.open_trace({str(trace)!r})")
    assert lines is not None
    assert lines[0].startswith(
        "UsageError: lonely.trace needs its program: save the program as lonely.py "
        "in the same folder and open the trace again"
    ), lines[0]
    _no_internal_frames(lines)


def test_an_analysis_of_a_name_clicked_away_says_how_to_get_back():
    import mlc_lab
    from mlc_lab.errors import NameResolutionError

    s = mlc_lab.Session(mlc_lab.course_program("mm_relu"))
    s.apply("split", "Y/j", factors=[None, 4])
    with pytest.raises(NameResolutionError) as info:
        s.footprint("Y/j")
    assert "session.goto(0)" in str(info.value).splitlines()[0]
    assert s.footprint("Y/j", step=0)  # the original program still has it


def test_a_split_factor_too_large_for_tvm_or_for_the_loop_is_one_plain_sentence():
    # Before: 99999999999999999999 came back as TVM's FFI text ("Expected Array<Optional<ir.Expr>> but
    # got ... ffi.BigInt"), and 256 on a loop of 128 was applied without a word.
    import mlc_lab
    from mlc_lab.errors import ScheduleStepError
    from tests.fixtures.programs import MM_RELU

    s = mlc_lab.Session(MM_RELU)
    for factors, says in (
        (
            [None, 99999999999999999999],
            "split: the factor 99999999999999999999 is too large: a loop's extent is a 32-bit integer",
        ),
        ([2**31, None], "split: the factor 2147483648 is too large"),
        (
            [None, 256],
            "split: the factor 256 is larger than loop j, which has 128 iterations; use a factor of at most 128",
        ),
    ):
        with pytest.raises(ScheduleStepError) as info:
            s.apply("split", "Y/j", factors=factors)
        first = str(info.value).splitlines()[0]
        assert first.startswith(says), first
        assert "ffi" not in str(info.value) and info.value.involved == ["j"]
        assert s.current.id == 0 and len(s.failed) >= 1  # nothing changed; the attempt is kept
    assert s.apply("split", "Y/j", factors=[3, 50]) == ["j_0", "j_1"]  # 150 > 128 in all: a predicate, allowed
