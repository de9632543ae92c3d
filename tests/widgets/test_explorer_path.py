"""The explorer's way to a target program, Python side (mlc_lab/widgets/path.py): which target,
the way from each step sent after the step's own state, a stale answer never sent, the way back after
a wrong step, and the hints applied through the explorer's own ``apply`` request reach the target (a
real Session, TVM)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mlc_lab.core.session import Session  # TVM is a hard dependency: a broken install fails here
from mlc_lab.errors import MlcLabError
from mlc_lab.exercises import BMM_RELU, BMM_RELU_TARGET
from mlc_lab.grading.assignment import AssignmentError, load_assignment
from mlc_lab.model.conform import problems
from mlc_lab.model.path import PathStep, StepPath
from mlc_lab.tvm import program as tprogram
from mlc_lab.widgets.explorer import Explorer, explore
from tests.widgets.test_explorer_measure import ask

LAB = Path(__file__).resolve().parents[1] / "labs" / "classroom"

# The course's way, as the engine reads it off TargetModule (mlc_lab/tvm/path): its first steps.
FIRST = "split(Y/j, factors=[16, 8])"


def _steps_sent(c, since: int = 0) -> list[dict]:
    return [u["path"] for u in c.updates(since) if "path" in u]


def _apply_hint(w: Explorer, req_id: str) -> dict:
    """What the filled-in form sends when the student presses Apply: the hint's call, as a click's."""
    step = w.path["hint"]["step"]
    args, kwargs = PathStep(step["primitive"], step["arguments"], "", "").call()
    return w.comm.request("apply", {"primitive": step["primitive"], "args": args, "kwargs": kwargs}, req_id=req_id)


def test_the_way_follows_each_click_after_its_state_and_is_recorded(comms):
    w = explore(BMM_RELU, target=BMM_RELU_TARGET)
    try:
        assert w.path_setup == {"available": True, "name": "TargetModule", "source": "program", "gpu": False}
        assert w.target == ""  # a CPU target program leaves the checks' target to each step
        assert w.wait(120)
        first = w.path
        assert first["step"] == 0 and not problems(first, StepPath, "path")
        assert first["answer"]["status"] == "reached" and len(first["answer"]["steps"]) == 9
        assert first["hint"]["step"]["label"] == FIRST and first["hint"]["remaining"] == 9
        c = w.comm
        start = len(c.sent)
        reply = _apply_hint(w, "a1")
        assert reply["ok"], reply
        assert w.wait(120)
        updates = c.updates(start)
        with_step = [i for i, u in enumerate(updates) if "step" in u]
        with_path = [i for i, u in enumerate(updates) if "path" in u]
        # the click's own state message does not wait for the way; it follows
        assert with_step and with_path and "path" not in updates[with_step[0]]
        assert with_path[-1] > with_step[0]
        assert w.path["step"] == 1 and w.path["hint"]["remaining"] == 8
        assert 'path {"step":1}' in w._mlc_recorded  # for a saved notebook, under the key the page looks up
        # the request answers the way from any step, in the declared shape
        reply = ask(w, "path", {"step": 0}, req_id="p0")
        assert reply["ok"] and reply["result"]["answer"]["steps"][0]["label"] == FIRST
    finally:
        w.close()


def test_hints_applied_as_clicks_reach_the_target_and_it_is_structurally_equal(comms):
    """The exercise by hints alone: each hint's call sent as the filled-in form sends it, until the
    explorer says the program is the target; TVM's assert_structural_equal agrees."""
    import tvm

    w = explore(BMM_RELU, target=BMM_RELU_TARGET)
    try:
        for n in range(12):
            assert w.wait(120)
            if not w.path["answer"]["steps"]:
                break
            assert w.path["answer"]["undo_to"] is None
            assert _apply_hint(w, f"h{n}")["ok"]
        assert w.path["answer"]["status"] == "reached" and w.path["answer"]["steps"] == []
        assert w.path["hint"]["step"] is None and w.path["hint"]["sentence"] == "the program is the target"
        assert len(w.session.steps) == 10  # the original and the way's nine steps, no detour
        tvm.ir.assert_structural_equal(w.session.module, tprogram.load(BMM_RELU_TARGET))
    finally:
        w.close()


def test_after_a_wrong_step_the_way_goes_back_and_going_there_costs_no_search(comms):
    session = Session(BMM_RELU)
    w = Explorer(session, target=BMM_RELU_TARGET)
    try:
        session.apply("split", "Y/j", factors=[16, 8])
        session.apply("split", "k", factors=[32, 4])
        session.apply("reorder", "k_0", "k_1", "j_1")
        session.apply("decompose_reduction", "Y", "k_0")  # before parallel: TVM refuses parallel after it
        assert w.wait(120)
        way = w.path["answer"]
        assert w.path["step"] == 4 and way["undo_to"] == 3 and way["status"] == "reached"
        assert w.path["hint"]["sentence"].startswith("the target cannot be reached from step 4: go back to step 3")
        assert way["steps"][0]["primitive"] == "parallel"
        # going there (the page's button moves and the Session follows): its way is known already
        calls: list = []
        real = session.path_to
        session.path_to = lambda *a, **k: calls.append(k.get("step")) or real(*a, **k)  # type: ignore[method-assign]
        start = len(w.comm.sent)
        w.comm.deliver({"method": "custom", "content": {"kind": "mlc-follow", "step": 3}})
        assert w.wait(60)
        assert calls == []
        assert w.path["step"] == 3 and w.path["answer"]["undo_to"] is None
        assert [s["label"] for s in w.path["answer"]["steps"]] == [s["label"] for s in way["steps"]]
        assert _steps_sent(w.comm, start)[-1]["step"] == 3
    finally:
        w.close()


def test_a_way_found_after_the_session_moved_on_is_not_sent(comms):
    """The answer for step 1 comes while step 2 is current: it is kept (back at step 1, shown at once)
    but never sent; step 2's is."""
    session = Session(BMM_RELU)
    w = Explorer(session, target=BMM_RELU_TARGET)
    try:
        assert w.wait(120)
        entered, release = threading.Event(), threading.Event()
        real = session.path_to

        def slow(target, *, step=None):
            if step == 1:
                entered.set()
                assert release.wait(60)
            return real(target, step=step)

        session.path_to = slow  # type: ignore[method-assign]
        start = len(w.comm.sent)
        session.apply("split", "Y/j", factors=[16, 8])
        assert entered.wait(60)
        session.apply("split", "k", factors=[32, 4])  # step 2 while step 1's way is being found
        release.set()
        assert w.wait(120)
        sent = [p["step"] for p in _steps_sent(w.comm, start)]
        assert sent == [2]
        assert w.path["step"] == 2
        assert w.path_report(1)["step"] == 1  # kept all the same
    finally:
        w.close()


def test_python_api_and_a_step_made_in_a_cell(comms):
    session = Session(BMM_RELU)
    w = explore(session, target=BMM_RELU_TARGET)
    try:
        session.apply("parallel", "Y/n")
        assert w.wait(120)
        assert w.path["step"] == 1
        assert w.hint().step is not None and w.path_to().reached
        zero = w.path_to(step=0)
        assert zero.steps and zero.steps[0].label == FIRST, zero
    finally:
        w.close()


def test_target_is_a_device_or_a_program_and_anything_else_is_one_sentence(comms, tmp_path):
    for device in ("cpu", "cuda"):
        w = explore(BMM_RELU, target=device)
        try:
            assert w.target == device and w.path_setup == {} and w.path == {}
        finally:
            w.close()
    target_file = tmp_path / "bmm_target.py"
    target_file.write_text(BMM_RELU_TARGET)
    for given, name in ((str(target_file), "bmm_target.py"), (tprogram.load(BMM_RELU_TARGET), "the target")):
        w = explore(BMM_RELU, target=given)
        try:
            assert w.path_setup["name"] == name
            assert w.wait(120) and len(w.path["answer"]["steps"]) == 9
        finally:
            w.close()
    for bad in ("gpu", 42, str(tmp_path / "missing.py")):
        with pytest.raises(MlcLabError) as err:
            explore(BMM_RELU, target=bad)
        text = str(err.value)
        assert "\n" not in text
        assert text.startswith("target must be a device ('cpu' or 'cuda') or a target program (an IRModule")
        assert "is neither" in text


def test_a_target_that_binds_gpu_threads_makes_the_checks_cuda_from_step_0(comms):
    gpu = Session(BMM_RELU)
    fused = gpu.apply("fuse", "C/n", "C/i")
    gpu.apply("bind", fused, "blockIdx.x")
    gpu.apply("bind", "C/j", "threadIdx.x")
    w = explore(BMM_RELU, target=gpu.script)
    try:
        assert w.path_setup["gpu"] is True
        assert w.target == "cuda" and w.checks_setup["target"] == "cuda"
        assert w.wait(120) and w.path["answer"]["status"] == "reached"
        w.target = "cpu"  # the toolbar still picks either
        assert w.checks_setup["target"] == "cpu"
    finally:
        w.close()


def test_an_assignment_with_a_reference_gives_the_way(comms, tmp_path):
    (tmp_path / "bmm.py").write_text(BMM_RELU)
    (tmp_path / "bmm_target.py").write_text(BMM_RELU_TARGET)
    toml = (LAB / "assignment.toml").read_text().replace('program = "mm_relu.py"', 'program = "bmm.py"')
    (tmp_path / "lab.toml").write_text(toml.replace('target = "cpu"', 'target = "cpu"\nreference = "bmm_target.py"'))
    (tmp_path / "plain.toml").write_text(toml)
    (tmp_path / "missing.toml").write_text(toml.replace('target = "cpu"', 'target = "cpu"\nreference = "nope.py"'))
    assert load_assignment(tmp_path / "lab.toml").reference == (tmp_path / "bmm_target.py").resolve()
    w = explore(BMM_RELU, assignment=tmp_path / "lab.toml")
    try:
        assert w.path_setup == {
            "available": True,
            "name": "the reference of Lab 1: mm_relu on the CPU",
            "source": "assignment",
            "gpu": False,
        }
        assert w.wait(120) and w.path["answer"]["steps"][0]["label"] == FIRST
        assert [t["title"] for t in w.checks_setup["tasks"]] == ["Run the rows in parallel", "Vectorize the inner loop"]
    finally:
        w.close()
    plain = explore(BMM_RELU, assignment=tmp_path / "plain.toml")
    try:
        assert plain.path_setup == {} and load_assignment(tmp_path / "plain.toml").reference is None
    finally:
        plain.close()
    with pytest.raises(AssignmentError, match="reference 'nope.py' is not next to the assignment"):
        load_assignment(tmp_path / "missing.toml")
    # a reference that is a scheduling function (the grader's --check-ref runs it in its sandbox):
    # the explorer opens with the assignment's checks, without a way
    (tmp_path / "schedule.py").write_text("def schedule(sch):\n    pass\n")
    (tmp_path / "by_function.toml").write_text(
        toml.replace('target = "cpu"', 'target = "cpu"\nreference = "schedule.py"')
    )
    by_function = explore(BMM_RELU, assignment=tmp_path / "by_function.toml")
    try:
        assert by_function.path_setup == {} and len(by_function.checks_setup["tasks"]) == 2
    finally:
        by_function.close()


def test_a_target_that_computes_something_else_is_said_not_reachable(comms):
    w = explore(BMM_RELU, target=LAB / "mm_relu.py")
    try:
        assert w.path_setup["name"] == "mm_relu.py"
        assert w.wait(120)
        answer, hint = w.path["answer"], w.path["hint"]
        assert answer["status"] == "unreached" and answer["steps"] == [] and answer["why"]
        assert "\n" not in answer["why"]
        assert hint["step"] is None and hint["sentence"] == answer["why"]
    finally:
        w.close()
