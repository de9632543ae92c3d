"""The explorer's Checks panel, Python side: the checks of each step and the hazards of the step that
creates them reach the front end as a message after the step's own state (a real Session, TVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlc_lab.core.session import Session  # TVM is a hard dependency: a broken install fails here
from mlc_lab.errors import MlcLabError
from mlc_lab.widgets.explorer import Explorer
from mlc_lab.model.checks import StepChecks
from mlc_lab.model.conform import problems
from tests.widgets.test_explorer_measure import ask
from tests.labs import cpu_mm_relu, gpu_matmul

ASSIGNMENT = Path(__file__).resolve().parents[1] / "labs" / "grading" / "assignment.toml"


def _lines(report: dict) -> dict:
    return {c["name"]: c for c in report["checks"]}


def test_a_click_sends_its_state_first_and_the_checks_after(comms):
    w = Explorer(Session(cpu_mm_relu.MM_RELU), checks=["parallel", "vectorize"])
    try:
        assert w.wait(60)
        first = w.checks
        assert first["step"] == 0 and first["target"] == "cpu"
        assert not _lines(first)["parallel"]["ok"]
        assert w.checks_setup == {
            "available": True,
            "title": None,
            "target": "cpu",
            "names": ["parallel", "vectorize"],
            "tasks": [],
        }
        c = w.comm
        start = len(c.sent)
        reply = c.request("apply", {"primitive": "parallel", "args": ["Y/i"]})
        assert reply["ok"], reply
        assert w.wait(60)
        updates = c.updates(start)
        with_step = [i for i, u in enumerate(updates) if "step" in u]
        with_checks = [i for i, u in enumerate(updates) if "checks" in u]
        assert with_step and with_checks
        # the click's own state message does not wait for the checks; they follow it
        assert "checks" not in updates[with_step[0]]
        assert with_checks[-1] > with_step[0]
        report = updates[with_checks[-1]]["checks"]
        assert report["step"] == 1
        line = _lines(report)["parallel"]
        assert line["ok"] and line["title"] == "parallel loops" and line["where"]
        assert isinstance(line["evidence"], dict) and isinstance(report["ms"], float)
        # recorded for a saved notebook, under the key js/lib/offline.ts looks up
        assert 'checks {"step":1}' in w._mlc_recorded
    finally:
        w.close()


def test_back_at_a_step_the_page_was_sent_the_report_of_nothing_is_sent(comms):
    """The page keeps each step's report (js/explorer/view.ts): a move back to a checked step (the
    page's undo, which the Session follows) costs no state message and no new record."""
    w = Explorer(Session(cpu_mm_relu.MM_RELU), checks=["parallel", "vectorize"])
    try:
        c = w.comm
        c.request("apply", {"primitive": "parallel", "args": ["Y/i"]})
        assert w.wait(60)
        opened, start = len(comms), len(c.sent)
        c.deliver({"method": "custom", "content": {"kind": "mlc-follow", "step": 0}})
        assert w.wait(60)
        assert c.sent[start:] == [] and len(comms) == opened
        assert w.checks["step"] == 0 and w.check_report()["step"] == 0  # Python sees it all the same
    finally:
        w.close()


def test_a_step_made_from_python_is_checked_too(comms):
    session = Session(cpu_mm_relu.MM_RELU)
    w = Explorer(session)  # nothing named: every check for the step's target
    try:
        session.apply("parallel", "Y/i")
        assert w.wait(60)
        assert w.checks["step"] == 1
        assert set(_lines(w.checks)) == {"loop_order", "vectorize", "parallel", "unroll", "reduction_init", "packing"}
        assert _lines(w.checks)["parallel"]["ok"]
        assert w.hazards == {}  # a CPU program has none
    finally:
        w.close()


def test_hazards_mark_the_step_that_creates_them(comms):
    program, steps = gpu_matmul.SUBMISSIONS["copy_8x32_threads"]
    session = Session(program)
    gpu_matmul.apply(session, steps)
    w = Explorer(session, assignment=ASSIGNMENT)
    try:
        assert w.wait(240)
        setup = w.checks_setup
        assert setup["target"] == "cuda" and setup["title"].startswith("Lab 3")
        assert [t["title"] for t in setup["tasks"]][0] == "Tile the output over thread blocks"
        kinds = {h["kind"] for h in w.checks["hazards"]}
        assert {"thread_extent", "out_of_bounds"} <= kinds
        # the first step that has the thread-extent hazard is marked as creating it; later ones keep it
        # without the mark
        # only the steps that create or resolve a hazard are sent, with the hazards they create and resolve
        sent = {int(k): v for k, v in w.hazards.items()}
        assert all(v["new"] or v["resolved"] for v in sent.values())
        marked = {sid: v for sid, v in sent.items() if v["new"]}
        kinds_of = {sid: {h["kind"] for h in v["new"]} for sid, v in marked.items()}
        first = min(sid for sid, k in kinds_of.items() if "thread_extent" in k)
        assert session.steps[first].label.startswith("bind(A_shared/ax0_ax1_fused_1")
        # binding the copy's threadIdx.x (32 where the compute has 16) creates the out-of-bounds accesses
        oob = min(sid for sid, k in kinds_of.items() if "out_of_bounds" in k)
        assert session.steps[oob].label.startswith("bind(A_shared/ax0_ax1_fused_2")
        # later steps keep them (the block gemm renamed gemm_update by decompose_reduction too) unmarked;
        # only binds (a second copy bound wrong) and the compute_at of B's copy add any (a copy not placed
        # in the kernel yet is advice, not a hazard: placed, the wide thread axis reads past its tile)
        later = {session.steps[sid].primitive for sid in marked if sid > oob}
        assert later <= {"bind", "compute_at"}, later
        assert marked[oob]["count"] >= len(marked[oob]["new"])
        # the state the front end opens with carries them too
        assert w.comm.opened()["checks_setup"]["target"] == "cuda"
    finally:
        w.close()


def test_tasks_and_their_errors(comms):
    session = Session(cpu_mm_relu.MM_RELU)
    w = Explorer(session, tasks=[{"title": "Use the cores", "checks": ["parallel"]}])
    try:
        assert w.checks_setup["tasks"] == [{"title": "Use the cores", "checks": ["parallel"], "points": None}]
        assert w.wait(60) and [c["name"] for c in w.checks["checks"]] == ["parallel"]
    finally:
        w.close()
    with pytest.raises(MlcLabError, match="no check named 'paralel'"):
        Explorer(session, checks=["paralel"])
    with pytest.raises(MlcLabError, match="mix cpu and cuda"):
        Explorer(session, checks=["parallel", "write_cache"])
    with pytest.raises(MlcLabError, match="task 1 of tasks needs 'checks'"):
        Explorer(session, tasks=[{"title": "nothing"}])


def test_session_view_takes_the_checks(comms):
    import mlc_lab  # noqa: F401  (registers the explorer as the session's view)

    session = Session(cpu_mm_relu.MM_RELU)
    w = session.view(checks=["unroll"])
    try:
        assert w.checks_setup["names"] == ["unroll"]
    finally:
        w.close()


def test_a_session_without_checks_shows_none(explorer):
    assert explorer.checks_setup == {"available": False}
    explorer.session.apply("split", "Y/j", factors=[None, 4])
    assert explorer.wait(5) and explorer.checks == {}


def test_new_hazards_match_kind_and_place_not_the_wording():
    from mlc_lab.widgets.checks import new_hazards

    te = lambda where, text: {"kind": "thread_extent", "where": where, "message": text}  # noqa: E731
    oob = lambda where, text: {"kind": "out_of_bounds", "where": where, "message": text}  # noqa: E731
    before = [te("i_1", "loops i_1 (16), ax0 (8)"), oob("gemm", "block gemm reads B")]
    # the same hazards reworded (a loop renamed, a block renamed): nothing new
    assert (
        new_hazards(
            before, [te("i_1", "loops i_1 (16), A_shared/ax0 (8)"), oob("gemm_update", "block gemm_update reads B")]
        )
        == []
    )
    # a second thread-extent hazard: that one is new
    assert new_hazards(
        before, [te("j_1", "loops j_1 (16), ax1 (32)"), te("i_1", "x"), oob("gemm", "block gemm reads B")]
    ) == [0]
    assert new_hazards([], before) == [0, 1]


def test_the_checks_request_answers_a_steps_report_as_the_trait_carries_it(comms):
    """The report's type is the contract's (mlc_lab.model.checks.StepChecks, generated for the page); the
    ``checks`` request answers any step's, and is what a saved notebook records for the panel."""
    session = Session(cpu_mm_relu.MM_RELU)
    w = Explorer(session, checks=["parallel"])
    try:
        session.apply("parallel", "Y/i")
        assert w.wait(60) and w.checks["step"] == 1
        assert problems(w.checks, StepChecks) == [] and w.checks["checks"][0]["title"]
        reply = ask(w, "checks", {"step": 1})  # answered from a thread: the report was computed once
        assert reply["ok"] and reply["result"] == w.checks
        root = ask(w, "checks", {"step": 0}, req_id="m2")["result"]
        assert root["step"] == 0 and not root["checks"][0]["ok"] and problems(root, StepChecks) == []
        assert ask(w, "checks", {"step": 7}, req_id="m3")["error"]["type"] == "unknown_step"
    finally:
        w.close()


def test_the_worker_thread_ends_when_idle_and_comes_back(comms, monkeypatch):
    from mlc_lab.widgets.checks import ChecksWorker

    monkeypatch.setattr(ChecksWorker, "IDLE_EXIT_S", 0.05)
    session = Session(cpu_mm_relu.MM_RELU)
    w = Explorer(session, checks=["parallel"])
    try:
        assert w.wait(60)
        thread = w._checks._thread
        if thread is not None:
            thread.join(5)
        assert w._checks._thread is None
        session.apply("parallel", "Y/i")
        assert w.wait(60) and w.checks["step"] == 1 and w.checks["checks"][0]["ok"]
    finally:
        w.close()


def test_a_cpu_history_is_not_analysed_for_hazards(comms, monkeypatch):
    session = Session(cpu_mm_relu.MM_RELU)
    gpu_matmul.apply(session, cpu_mm_relu.SUBMISSIONS["reference"][1][:4])  # (primitive, args, kwargs) steps
    asked = []
    real_check = session.check
    monkeypatch.setattr(session, "check", lambda names=None, **kw: asked.append(names) or real_check(names, **kw))
    w = Explorer(session)
    try:
        assert w.wait(60)
        assert asked == [None]  # the current step's report only: no step binds a thread
        assert w.hazards == {}
    finally:
        w.close()


def test_set_checks_lists_others_and_judges_again(comms):
    session = Session(cpu_mm_relu.MM_RELU)
    session.apply("parallel", "Y/i")
    w = Explorer(session, checks=["parallel"])
    try:
        assert w.wait(60) and [c["name"] for c in w.checks["checks"]] == ["parallel"]
        w.set_checks(tasks=[{"title": "Unroll", "checks": ["unroll"]}])
        assert w.checks_setup["tasks"][0]["title"] == "Unroll"
        assert w.wait(60) and [c["name"] for c in w.checks["checks"]] == ["unroll"]
        with pytest.raises(MlcLabError, match="no check named"):
            w.set_checks(["nope"])
        assert w.checks_setup["names"] == ["unroll"]  # a refused list changes nothing
    finally:
        w.close()


@pytest.mark.parametrize("hand_in", ["racing.json", "variant_ji.json"])
def test_with_an_assignment_each_task_shows_what_the_grader_gives_the_step(comms, hand_in):
    """One function scores both: the Checks tab's task verdicts and points for the hand-in's last step
    are the ones `mlc-lab grade` gives the same hand-in (a hazard fails a task whose checks pass)."""
    from mlc_lab.grading import grade, load_assignment

    assignment = load_assignment(ASSIGNMENT)
    path = ASSIGNMENT.parent / "submissions" / hand_in
    graded = grade(assignment, path)
    assert graded.error is None, graded.error
    session = Session.from_trace(str(assignment.program), path.read_text(encoding="utf-8"))
    w = Explorer(session, assignment=ASSIGNMENT)
    try:
        assert w.wait(240)
        shown = w.checks["tasks"]
        assert [(t["title"], t["passed"], t["points"], t["max_points"]) for t in shown] == [
            (t.title, t.passed, t.points, t.max_points) for t in graded.tasks
        ]
        assert not problems(w.checks, StepChecks)
    finally:
        w.close()


GPU_CHECKS = [
    "thread_block_tiling",
    "shared_memory_tiling",
    "register_tiling",
    "cooperative_fetching",
    "write_cache",
    "epilogue_fusion",
]


def _notebook_cells(name: str) -> list[str]:
    import nbformat

    nb = nbformat.read(str(Path(__file__).resolve().parents[2] / "notebooks" / name), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def test_notebook_04_recipes_get_gpu_checks_at_every_step(comms):
    # Before: explore(MATMUL) in the GPU chapter read "CPU checks of step 0" and advised parallelising,
    # vectorizing and packing through steps 1-6, until the first bind. Now the chapter's explorers are
    # made with target="cuda", and that target chooses the checks from step 0 on.
    cells = [c for c in _notebook_cells("04_gpu.ipynb") if "mlc_lab.explore(MATMUL" in c]
    assert len(cells) == 2, "notebook 04 has its two matmul recipes, each in an explorer"
    ns: dict = {}
    exec("import mlc_lab\n" + cells[0], ns)  # noqa: S102 - the course's own notebook
    exec(cells[1], ns)  # noqa: S102
    local, shared = ns["local"], ns["shared_mm"]
    try:
        for ex in (local, shared):
            assert ex.target == "cuda" and ex.checks_setup["target"] == "cuda"
            assert ex.wait(120)
            assert ex.checks["target"] == "cuda"  # what the page shows first
        # every step of the first recipe, from the original program through the first binds
        steps = [s.id for s in local.session.steps]
        assert [s.primitive for s in local.session.steps][1:8] == [
            "cache_write",
            "split",
            "split",
            "split",
            "unroll",
            "reorder",
            "reverse_compute_at",
        ]
        for sid in steps:
            report = local.check_report(sid)
            assert report["target"] == "cuda", (sid, report)
            assert [c["name"] for c in report["checks"]] == GPU_CHECKS, sid
    finally:
        local.close()
        shared.close()


def test_the_toolbars_target_chooses_the_checks_of_every_step(comms):
    from tests.fixtures.programs import matmul

    w = Explorer(Session(matmul(256)))
    try:
        assert w.wait(60)
        assert w.target == "" and w.checks["target"] == "cpu"  # no target: the step's own (cpu here)
        w.set_state({"target": "cuda"})  # what the toolbar's menu sends
        assert w.wait(60)
        assert w.checks_setup["target"] == "cuda" and w.checks["target"] == "cuda" and w.checks["step"] == 0
        assert [c["name"] for c in w.checks["checks"]] == GPU_CHECKS
        w.set_state({"target": "cpu"})
        assert w.wait(60)
        assert w.checks["target"] == "cpu" and "vectorize" in [c["name"] for c in w.checks["checks"]]
        w.set_state({"target": "tpu"})  # not a target of the menu: dropped, the checks stay
        assert w.target == "cpu" and w.checks_setup["target"] == "cpu"
        # named checks fix their own target, whatever the toolbar says
        w.set_checks(["vectorize"])
        w.set_state({"target": "cuda"})
        assert w.wait(60)
        assert w.checks_setup["target"] == "cpu" and w.checks["target"] == "cpu"
    finally:
        w.close()
    # neither a device nor a program: one sentence naming both forms (tests/widgets/test_explorer_path.py)
    with pytest.raises(MlcLabError, match=r"target must be a device \('cpu' or 'cuda'\) or a target program"):
        Explorer(Session(matmul(64)), target="gpu")
