"""No path from a hand-in to a run of its kernel skips the sandbox, read from the code (`kernel_paths`):
the grader (grading/, the batch, Gradescope), the class server (classroom/, `class serve`) and the
trace-file paths of `bench` and `check --numeric` never reach the persistent worker's operations
that run generated code, nor `time_evaluator`, nor the OpenCL engine in their own process. A planted
violation shows the reading finds one. The tests whose hand-ins' kernels run (test_grade's timing and
numeric check, `bench --trace`, `check --numeric --trace`) also run under the fixture
`kernels_only_in_the_sandbox` (tests/conftest.py), which fails them at run time on the same doors."""

from __future__ import annotations

import pytest

from tests.unit.kernel_paths import ENTRIES, GUARDED, Graph, load, unguarded

# A path the reading finds, allowed only while its guard holds (`unguarded` is empty), and why. Each must
# still be found (else it is stale).
ALLOWED = {
    "tvm/measure/rpc.py:measure_remote": (
        "`class serve --tracker`: the kernel runs on the class's measuring machines, in a session of theirs "
        "that runs in the sandbox (mlc_lab.core.server_sandbox): the class server passes sandboxed_only, and "
        "mlc_lab.tvm.measure.pool asks each session what confines it before it uploads anything, leaving out "
        "servers that cannot say they sandbox (TVM's own; mlc_lab's with --unsafe-same-user)"
    ),
}
assert set(ALLOWED) == set(GUARDED)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph(load())


def _unallowed(paths: list[str]) -> list[str]:
    return [p for p in paths if not any(f" -> {where} ->" in p for where in ALLOWED)]


def test_no_path_from_a_hand_in_to_its_kernel_skips_the_sandbox(graph):
    assert _unallowed(graph.paths()) == []
    assert unguarded(graph.modules) == []  # the allowed path requires the measuring server's sandbox
    found = graph.paths()
    for where in ALLOWED:
        assert any(f" -> {where} ->" in p for p in found), f"allowed but no longer found (drop it): {where}"


def test_the_reading_sees_the_sandboxed_paths_it_judges(graph):
    """Not a vacuous pass: the entries resolve to the sandboxed runs, and the worker's doors are sinks."""
    timed = "mlc_lab.grading.grade:measure_in_sandbox"  # the grade's timing, the class's, and its again
    assert "mlc_lab.core.kernel_sandbox:measure" in graph.edges[timed]
    assert timed in graph.edges["mlc_lab.grading.grade:_time"]
    assert "mlc_lab.core.checks.numeric_gpu:numeric_check_sandboxed" in graph.edges["mlc_lab.grading.grade:_numeric"]
    assert timed in graph.edges["mlc_lab.grading.judge:time_submission"]
    assert timed in graph.edges["mlc_lab.classroom.timing:retime"]
    assert "mlc_lab.core.kernel_sandbox:run_folder" in graph.edges["mlc_lab.core.kernel_sandbox:measure"]
    for sink in (
        "mlc_lab.core.measure:measure",
        "mlc_lab.core.checks.numeric_gpu:numeric_check",
        "mlc_lab.exercises.numeric:run_function",
        "mlc_lab.tvm.measure:time_function",
        "mlc_lab.tvm.measure.opencl_run:run_in_child",
    ):
        assert sink in graph.sinks
    # the explorer's own checks keep the worker: a student's kernels on the student's machine
    assert graph._chain("mlc_lab.core.session:Session.measure") is not None
    assert set(ENTRIES) >= {"grading/", "classroom/", "_cli/grade.py", "_cli/bench.py", "_cli/check.py"}


PLANTED = [
    (  # the grader times the session as the explorer does
        "grading/grade.py",
        "\n\ndef _planted(session):\n    return session.measure('cpu', roofline=False)\n",
        "grading/grade.py:_planted -> core/session.py:Session.measure -> core/measure.py:measure: "
        "asks the persistent worker to 'measure'",
    ),
    (  # the class server's child builds and times in its own process
        "classroom/graders.py",
        "\n\ndef _planted(req):\n    from mlc_lab.tvm.measure import build\n\n    return build.measure_request(req)\n",
        "classroom/graders.py:_planted -> tvm/measure/build.py:measure_request -> tvm/measure/__init__.py:timed"
        " -> tvm/measure/__init__.py:time_function: calls time_evaluator",
    ),
    (  # the numeric check's worker request, called in the grader's process (its kernel in a plain child)
        "grading/handin.py",
        "\n\ndef _planted(req):\n    from mlc_lab.tvm.checks.opencl import numeric_gpu_request as check\n\n"
        "    return check(req)\n",
        "grading/handin.py:_planted -> tvm/checks/opencl.py:numeric_gpu_request -> "
        "tvm/measure/opencl_run.py:run_in_child: the OpenCL engine, in a plain child",
    ),
    (  # bench --trace taking the worker's path
        "_cli/bench.py",
        None,
        "_cli/bench.py:_measure_trace -> _cli/bench.py:_measure_own -> core/measure.py:measure: "
        "asks the persistent worker to 'measure'",
    ),
]


@pytest.mark.parametrize(("module", "added", "path"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_violation_is_found_with_its_path(graph, module, added, path):
    from tests.unit.kernel_paths import PACKAGE

    text = (PACKAGE / module).read_text()
    if added is None:
        anchor = "    refuse_unless_sandboxed(args)\n    box = kernel_sandbox.KernelSandbox("
        assert anchor in text
        text = text.replace(anchor, "    return _measure_own(session, args)\n" + anchor)
    else:
        text += added
    found = _unallowed(graph.replaced(module, text).paths())
    assert any(p.startswith(path) for p in found), found


@pytest.mark.parametrize(
    ("module", "old", "new", "problem"),
    [
        (
            "grading/judge.py",
            "sandboxed_only=not unsafe_same_user,",
            "",
            "grading/judge.py:",
        ),
        (
            "grading/judge.py",
            "sandboxed_only=not unsafe_same_user,",
            "sandboxed_only=False,",
            "calls measure_remote without sandboxed_only",
        ),
        ("tvm/measure/rpc.py", "sandboxed_only=sandboxed_only", "sandboxed_only=False", "does not hand"),
        ("tvm/measure/pool.py", "        require_sandbox(session)\n", "        pass\n", "does not ask require_sandbox"),
    ],
)
def test_a_path_to_the_measuring_machines_without_the_guard_is_found(graph, module, old, new, problem):
    from tests.unit.kernel_paths import PACKAGE

    text = (PACKAGE / module).read_text()
    assert old in text
    found = unguarded(graph.replaced(module, text.replace(old, new, 1)).modules)
    assert any(problem in p for p in found), found
