"""Headless tests of the TuningDashboard: a recording comm stands in for the front end.

The jobs are work directories written here in meta_schedule's own JSON format (database records
plus mlc_lab's side files), read back through the real `TuneJob`; a "running" job is a sleeping
process whose command line looks like the tuning subprocess, so polling, Cancel (its process group is
stopped) and reopening are exercised without TVM.
"""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mlc_lab.core.tuning import TuneJob
from mlc_lab.errors import MlcLabError
from mlc_lab.widgets._base import RESPONSE
from mlc_lab.widgets.tuning import (
    TuningDashboard,
    dashboard,
    error_summary,
    float64_bytes,
    float64_list,
    retarget_trace,
)
from tests.widgets.fakes import FakeSession, wait_until

FLOPS = 2.0 * 64**3
TARGET = {"kind": "llvm", "mcpu": "cascadelake", "num-cores": 2}
RUN_ERROR = (
    "LocalRunner: An exception occurred\nTraceback (most recent call last):\n"
    '  File "runner.py", line 12, in run\n    f()\n'
    "RuntimeError: Check failed: (allocation) is false: out of memory in the kernel"
)


def trace_text(i: int) -> str:
    return (
        "# from tvm import s_tir\n"
        "def apply_trace(sch: s_tir.Schedule) -> None:\n"
        '  b0 = sch.get_sblock(name="Y", func_name="main")\n'
        "  l1, l2, l3 = sch.get_loops(block=b0)\n"
        f"  v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=64, decision=[{64 // 2 ** (i % 4)}, {2 ** (i % 4)}])\n"
        "  l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True, disable_predication=False)\n"
    )


class WorkDir:
    """A tuning work directory in meta_schedule's format, appended to as a job would."""

    def __init__(self, path: Path, total: int = 8, func: str = "mm_relu"):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.n = 0
        self.t0 = time.time()
        (path / "database_workload.json").write_text(json.dumps(["123", "AAAA"]) + "\n")
        (path / "mlc_lab_job.json").write_text(
            json.dumps(
                {
                    "version": 1,
                    "func_name": func,
                    "target": TARGET,
                    "trials": total,
                    "space": {"kind": "auto"},
                    "strategy": "evolutionary",
                    "cost_model": "xgb",
                    "flops": FLOPS,
                    "num_trials_per_iter": 4,
                }
            )
        )
        (path / "database_tuning_record.json").touch()
        self.status("done")

    def status(self, state: str, pid: int | None = None, **extra) -> None:
        st = {"state": state, "workload_index": 0, "started_at": self.t0, **extra}
        if pid is not None:
            st["pid"] = pid
        (self.path / "mlc_lab_status.json").write_text(json.dumps(st))

    def add(self, latency: float | None, error: str | None = None) -> int:
        i = self.n
        secs = [latency] if latency is not None else [1e10]
        trace_json = [[["GetSBlock", [], ["Y", "main"], ["b0"]]], []]
        line = [0, [trace_json, secs, TARGET, [["TENSOR", "float32", [64, 64]]]]]
        with open(self.path / "database_tuning_record.json", "a") as fh:
            fh.write(json.dumps(line) + "\n")
        side = {
            "line": i,
            "latency_s": latency,
            "run_secs": secs if latency is not None else [],
            "error": error if latency is None else None,
            "trace": trace_text(i),
            "t": round(0.5 * (i + 1), 3),
        }
        with open(self.path / "mlc_lab_trials.jsonl", "a") as fh:
            fh.write(json.dumps(side) + "\n")
        self.n += 1
        return i


LATENCIES = [4e-4, 2e-4, None, 1e-4, 3e-4, None]


def filled(tmp_path: Path, total: int = 8) -> WorkDir:
    wd = WorkDir(tmp_path / "wd", total=total)
    for lat in LATENCIES:
        wd.add(lat, RUN_ERROR if lat is None else None)
    return wd


class TunedSession(FakeSession):
    """The fake Session, plus what the dashboard uses: ``original``, ``from_trace`` and replays of
    meta_schedule's printed traces (the comment and ``def apply_trace`` lines are skipped)."""

    replays: list[str] = []

    @property
    def original(self):
        return "the original program"

    @classmethod
    def from_trace(cls, module, trace, func=None):
        assert module == "the original program"
        s = cls()
        s.replay(trace)
        return s

    def replay(self, trace):
        TunedSession.replays.append(trace)
        calls = [ln for ln in trace.splitlines() if ln.strip().startswith(("sch.", "l", "v", "b"))]
        calls = [ln.split("=", 1)[1].strip() if "=" in ln.split("(")[0] else ln.strip() for ln in calls]
        return super().replay("\n".join(c for c in calls if c.startswith("sch.")))


def running_process() -> subprocess.Popen:
    """A stand-in for the tuning job: its command line names the worker's entry and the tune job."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "mlc_lab.core.worker_main", "tune"],
        start_new_session=True,
    )
    threading.Thread(target=proc.wait, daemon=True).start()  # reap it once stopped (no zombie)
    return proc


@contextlib.contextmanager
def running_job(wd: WorkDir):
    """A stand-in job process (running_process), recorded in ``wd`` as running; killed afterwards."""
    proc = running_process()
    wd.status("running", pid=proc.pid)
    try:
        yield proc
    finally:
        proc.kill()


@pytest.fixture()
def work_dir(tmp_path) -> WorkDir:
    return filled(tmp_path)


@pytest.fixture()
def dash(comms, work_dir):
    w = TuningDashboard.from_work_dir(work_dir.path, session=TunedSession())
    yield w
    w.close()


# --- opening ----------------------------------------------------------------------------------------


def test_opening_sends_the_whole_job_at_once(dash, work_dir):
    opened = dash.comm.open_data
    state = opened["state"]
    assert state["status"] == "done"
    assert (state["done"], state["total"]) == (6, 8)
    assert state["func"] == "mm_relu" and state["target"] == "llvm cascadelake 2 cores"
    assert state["settings"] == "evolutionary · xgb · auto"
    assert state["best"] == {"trial": 3, "latency_s": 1e-4, "gflops": pytest.approx(FLOPS / 1e-4 / 1e9)}
    assert state["flops"] == FLOPS
    assert state["failed_count"] == 2
    assert state["selected"] == -1 and state["detail"] == {}
    # per-trial numbers travel as binary buffers (float64), NaN for failed candidates
    assert ["latency"] in opened["buffer_paths"] and ["elapsed"] in opened["buffer_paths"]
    assert dash.latencies == LATENCIES
    assert float64_list(dash.elapsed) == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert not dash.polling  # a finished job is read once


def test_failed_candidates_are_listed_with_the_line_that_says_why(dash):
    assert dash.failures == [
        {"trial": 2, "summary": "RuntimeError: Check failed: (allocation) is false: out of memory in the kernel"},
        {"trial": 5, "summary": "RuntimeError: Check failed: (allocation) is false: out of memory in the kernel"},
    ]


def test_error_summary():
    assert error_summary(RUN_ERROR).startswith("RuntimeError: Check failed")
    assert error_summary("just one line") == "just one line"
    assert error_summary("  \n first \n second") == "first"
    assert error_summary(None) == "" and error_summary("") == ""
    assert len(error_summary("x" * 1000)) == 240


def test_float64_roundtrip():
    values = [1.5, math.nan, 2e-6, 0.0]
    data = float64_bytes(values)
    assert len(data) == 32
    back = float64_list(data)
    assert back[0] == 1.5 and math.isnan(back[1]) and back[2:] == [2e-6, 0.0]


def test_a_work_dir_path_or_a_job_or_the_helper(comms, work_dir):
    for w in (
        TuningDashboard(str(work_dir.path)),
        TuningDashboard(TuneJob.open(str(work_dir.path))),
        dashboard(work_dir.path),
    ):
        assert w.done == 6 and w.work_dir == str(work_dir.path)
        w.close()


def test_bad_inputs_say_what_is_wrong(comms, tmp_path):
    with pytest.raises(MlcLabError, match="no tuning work directory"):
        TuningDashboard.from_work_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MlcLabError, match="holds no tuning job"):
        TuningDashboard.from_work_dir(tmp_path / "empty")
    with pytest.raises(TypeError, match="needs a TuneJob"):
        TuningDashboard(object())


def test_the_widget_module_does_not_import_tvm():
    code = "import sys, mlc_lab.widgets.tuning; print('tvm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --- a trial's detail ---------------------------------------------------------------------------------


def test_selecting_a_trial_from_the_front_end_sends_its_trace_script_and_diff(dash):
    c = dash.comm
    mark = len(c.sent)
    c.deliver({"method": "update", "state": {"selected": 1}, "buffer_paths": []})
    detail = {k: v for u in c.updates(mark) for k, v in u.items()}["detail"]
    assert detail["trial"] == 1 and detail["ok"] is True
    assert detail["latency_s"] == 2e-4 and detail["gflops"] == pytest.approx(FLOPS / 2e-4 / 1e9)
    assert detail["best_trial"] == 3 and detail["vs_best"] == pytest.approx(2.0)
    assert "def apply_trace" in detail["trace"]
    # the trace was replayed with the session's own function name, not meta_schedule's "main"
    assert 'func_name="mm_relu"' in TunedSession.replays[-1] or 'func_name="mm_relu"' in TunedSession.replays[-2]
    assert "sch.sample_perfect_tile" in detail["script"]
    assert detail["diff"].startswith("--- trial 3 (best)\n+++ trial 1\n")
    assert "-# sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=64, decision=[8, 8])" in detail["diff"]
    assert "+# sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=64, decision=[32, 2])" in detail["diff"]


def test_the_best_trial_has_no_diff_and_a_failed_one_shows_its_error(dash):
    best = dash.select(3)
    assert best["best_trial"] == 3 and best["diff"] == "" and best["script"]
    failed = dash.select(2)
    assert failed["ok"] is False and failed["latency_s"] is None
    assert failed["error"] == RUN_ERROR
    assert failed["error_summary"].startswith("RuntimeError")
    assert failed["trace"]  # what was tried is still shown
    assert dash.select(None) == {} and dash.selected == -1


def test_a_trace_that_cannot_be_replayed_still_shows_the_rest(comms, work_dir):
    class Broken(TunedSession):
        @classmethod
        def from_trace(cls, module, trace, func=None):
            raise MlcLabError("line 3: get_sblock failed\nno block Y")

    w = TuningDashboard.from_work_dir(work_dir.path, session=Broken())
    d = w.select(0)
    assert d["script_problem"] == "could not replay the trace: line 3: get_sblock failed"
    assert d["trace"] and d["script"] == ""
    assert w.select(99) == {"trial": 99, "problem": "there is no trial 99"}
    w.close()


def test_retarget_trace():
    t = 'b0 = sch.get_sblock(name="Y", func_name="main")'
    assert retarget_trace(t, "mm_relu") == 'b0 = sch.get_sblock(name="Y", func_name="mm_relu")'
    assert retarget_trace(t, "main") == t and retarget_trace(t, None) == t


# --- open in explorer -------------------------------------------------------------------------------


def test_open_in_explorer_replays_the_trial_as_a_branch_and_shows_the_explorer(dash):
    session = dash.session
    reply = dash.comm.request("open_in_explorer", {"trial": 1})
    assert reply["kind"] == RESPONSE and reply["ok"] is True
    assert session.current.kind == "replay" and session.current.parent == 0
    assert "decision=[32, 2]" in session.script
    assert 'func_name="mm_relu"' in session.script
    assert dash.explorer is not None and dash.explorer.session is session
    assert reply["result"]["notice"] == dash.notice
    assert dash.notice.startswith("trial 1 is now step 1 of the session")
    # the explorer is sent to the front end as a child widget reference
    state = {k: v for u in dash.comm.updates() for k, v in u.items()}
    assert state["explorer"] == f"anywidget:{dash.explorer.model_id}"
    # a second trial (the best: no argument) is one more branch, in the same explorer
    explorer = dash.explorer
    reply = dash.comm.request("open_in_explorer", {}, req_id="r2")
    assert reply["ok"] is True and dash.explorer is explorer
    assert len([s for s in session.steps if s.parent == 0]) == 2
    assert "decision=[8, 8]" in session.script


def test_open_in_explorer_errors_are_answered_not_raised(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd")
    wd.add(None, RUN_ERROR)
    w = TuningDashboard.from_work_dir(wd.path, session=TunedSession())
    reply = w.comm.request("open_in_explorer", {})
    assert reply["ok"] is False and reply["error"]["summary"] == "no trial has succeeded yet"
    reply = w.comm.request("open_in_explorer", {"trial": 7}, req_id="r2")
    assert reply["ok"] is False and reply["error"]["summary"] == "there is no trial 7; trials are 0..0"
    w.close()


# --- a running job: live updates, cancel, reopen ----------------------------------------------------------


def test_live_updates_are_batched_and_throttled(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd", total=40)
    with running_job(wd) as proc:
        w = TuningDashboard.from_work_dir(wd.path, poll_s=0.1)
        assert w.status == "running" and w.polling and w.done == 0
        c = w.comm
        mark = len(c.sent)
        t0 = time.monotonic()
        for i in range(40):  # 40 trials in ~0.8 s: far more often than the dashboard may send
            wd.add(None if i % 10 == 9 else 1e-4 * (1 + i % 5), RUN_ERROR)
            time.sleep(0.02)
        wd.status("done", pid=proc.pid)
        wait_until(lambda: w.status == "done" and w.done == 40)
        wait_until(lambda: not w.polling)
        spent = time.monotonic() - t0
        with_data = [
            m["data"] for m in c.sent[mark:] if m["data"]["method"] == "update" and "done" in m["data"]["state"]
        ]
        assert 2 <= len(with_data) <= spent / 0.1 + 2  # at most one message per poll period
        for msg in with_data:  # one message per tick, the numbers in binary buffers
            assert {"done", "updated_at"} <= msg["state"].keys() and ["latency"] in msg["buffer_paths"]
        assert len(w.latencies) == 40 and w.failed_count == 4
        assert [f["trial"] for f in w.failures] == [9, 19, 29, 39]
        assert w.best["latency_s"] == pytest.approx(1e-4)
        assert c.sent[-1]["data"]["state"].get("status") == "done" or w.status == "done"
        w.close()


def test_cancel_from_the_front_end_stops_the_job_while_the_kernel_is_idle(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd", total=100)
    for lat in (3e-4, 2e-4, 1e-4):
        wd.add(lat)
    with running_job(wd) as proc:
        w = TuningDashboard.from_work_dir(wd.path, poll_s=0.05)
        assert w.status == "running"
        reply = w.comm.request("cancel")
        assert reply["ok"] is True
        assert reply["result"]["status"] == "cancelling"  # answered at once; the stop runs in a thread
        wait_until(lambda: w.status == "cancelled")
        wait_until(lambda: proc.poll() is not None)  # the job's process group is gone
        assert (w.done, w.total, w.best["trial"]) == (3, 100, 2)  # nothing measured is lost
        wait_until(lambda: not w.polling)
        states = [u["status"] for u in w.comm.updates() if "status" in u]
        assert states[-2:] == ["cancelling", "cancelled"]
        # a second click is harmless
        assert w.comm.request("cancel", req_id="r2")["result"]["status"] == "cancelled"
        w.close()
        # reopened later (a new kernel): the same job, still cancelled
        again = TuningDashboard.from_work_dir(wd.path)
        assert (again.status, again.done, again.best["trial"]) == ("cancelled", 3, 2)
        again.close()


def test_cancel_from_python(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd", total=100)
    wd.add(2e-4)
    with running_job(wd):
        w = TuningDashboard.from_work_dir(wd.path, poll_s=0.05)
        assert w.cancel() == "cancelled" and w.status == "cancelled"
        w.close()


def test_a_crashed_job_reopens_as_interrupted_and_says_why(comms, tmp_path):
    wd = filled(tmp_path)
    proc = running_process()
    wd.status("running", pid=proc.pid)
    proc.kill()
    wait_until(lambda: proc.poll() is not None)
    (wd.path / "mlc_lab.log").write_text("Segmentation fault (core dumped)\n")
    w = TuningDashboard.from_work_dir(wd.path)
    assert w.status == "interrupted" and not w.polling
    assert "Segmentation fault" in w.job_error
    assert w.done == 6 and w.best["trial"] == 3  # every record survived
    w.close()


def test_a_failed_job_shows_its_error(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd")
    wd.status("failed", error="ValueError: the space function raised")
    w = TuningDashboard.from_work_dir(wd.path)
    assert w.status == "failed" and w.job_error.startswith("ValueError: the space function raised")
    assert w.done == 0 and w.best == {} and w.latencies == []
    w.close()


def test_unknown_requests_and_refresh(dash):
    reply = dash.comm.request("bogus")
    assert reply["ok"] is False and reply["error"]["type"] == "unknown"
    assert dash.comm.request("refresh", req_id="r2")["result"] == {"status": "done"}


def test_close_stops_polling(comms, tmp_path):
    wd = WorkDir(tmp_path / "wd", total=10)
    with running_job(wd):
        w = TuningDashboard.from_work_dir(wd.path, poll_s=0.05)
        assert w.polling
        w.close()
        wait_until(lambda: not w.polling)


# --- the sweep plot (mlc_lab/widgets/measure.py) -------------------------------------------------------


def sweep_results():
    from mlc_lab.core.measure import Measurement

    out = []
    for j in (1, 2, 4, 8, 16, 32, 64, 128):
        lat = 1e-3 / min(j, 16) * (1 + (j > 16))
        out.append((j, Measurement(latency_s=lat, min_s=lat * 0.9, max_s=lat * 1.2, gflops=4.2e6 / lat / 1e9)))
    out.append((256, Measurement(error="the schedule failed for 256: factor 256 does not divide 128")))
    return out


def test_sweep_figure_plots_latency_against_the_parameter():
    from mlc_lab.widgets.measure import sweep_figure, sweep_points

    rows = sweep_points(sweep_results())
    assert [r["value"] for r in rows][:3] == [1, 2, 4] and rows[-1]["latency_s"] is None
    fig = sweep_figure(sweep_results(), param="jfactor")
    names = [t.name for t in fig.data]
    assert names == ["latency", "best", "failed (1)"]
    latency, best, failed = fig.data
    assert list(latency.x) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert latency.y[0] == pytest.approx(1000.0)  # µs
    assert latency.error_y.array[0] == pytest.approx(200.0) and latency.error_y.arrayminus[0] == pytest.approx(100.0)
    assert list(best.x) == [16] and best.marker.symbol == "star"
    assert list(failed.x) == [256] and "factor 256 does not divide 128" in failed.text[0]
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.ticktext)[:3] == ["1", "2", "4"]
    assert fig.layout.yaxis.title.text == "latency (µs, lower is better)"
    assert "best: jfactor = 16" in fig.layout.annotations[0].text


def test_sweep_html_is_self_contained(tmp_path):
    from mlc_lab.widgets.measure import sweep_figure, sweep_html

    path = tmp_path / "sweep.html"
    html = sweep_html(sweep_results(), path, param="jfactor")
    assert path.read_text(encoding="utf-8") == html
    assert len(html) > 1_000_000 and "<script src=" not in html  # plotly.js inlined: opens offline
    # plain dicts and categorical values work too
    fig = sweep_figure([("a", {"latency_s": 2e-3}), ("b", {"latency_s": 1e-3})], param="layout")
    assert list(fig.data[0].x) == ["a", "b"] and fig.layout.xaxis.type is None


def test_sweep_figure_places_the_best_label_and_the_failures_where_they_are_read():
    import math

    from mlc_lab.widgets.measure import sweep_figure

    fig = sweep_figure(sweep_results(), param="jfactor")
    latency, best, failed = fig.data
    note = fig.layout.annotations[0]
    # on a log x axis plotly places an annotation in log10 units: at 16, not at 10**16
    assert note.x == pytest.approx(math.log10(16)) and note.y == pytest.approx(math.log10(1000.0 / 16))
    assert "GFLOPS" in note.text and "GFLOPS" in latency.text[0] and latency.text[0].startswith("jfactor = 1<br>")
    assert list(failed.y) == [pytest.approx(0.8 * 1000.0 / 16)]  # below the fastest latency
    assert list(fig.layout.yaxis.ticktext)[:2] == ["50", "100"]  # written out, not plotly's bare digits
    # a value with no min/max: no error bars at all; 3 close numbers: a linear axis, label placed as is
    mixed = [(3, {"latency_s": 2.0, "min_s": 1.5, "max_s": 2.5}), (1, {"latency_s": 3.0}), (2, {"error": "x\ny"})]
    fig = sweep_figure(mixed, title="T")
    assert fig.data[0].error_y.array is None and list(fig.data[0].x) == [1, 3]
    assert fig.layout.xaxis.type is None and fig.layout.annotations[0].x == 3
    assert fig.data[1].y[0] == pytest.approx(2.0) and fig.layout.yaxis.title.text == "latency (s, lower is better)"
    assert fig.data[2].text == ("value = 2 failed<br>x",) and fig.layout.title.text == "T"


def test_refresh_notices_a_continued_run_and_polls_again(comms, tmp_path):
    wd = filled(tmp_path)
    w = TuningDashboard.from_work_dir(wd.path, poll_s=0.05)
    assert w.status == "done" and not w.polling
    proc = running_process()
    try:
        wd.status("running", pid=proc.pid)  # tune() continued in the same work directory
        assert w.refresh() is True and w.status == "running" and w.polling
        wd.add(5e-5)
        wait_until(lambda: w.done == 7 and w.best["trial"] == 6)
        wd.status("done")
        wait_until(lambda: not w.polling and w.status == "done")
        assert w.refresh() is False  # nothing changed since
    finally:
        proc.kill()
        w.close()


def test_sweep_result_plots_itself_and_knows_its_best():
    from mlc_lab.widgets.measure import SweepResult

    class M:
        def __init__(self, lat, err=None):
            self.latency_s, self.error, self.min_s, self.max_s, self.gflops = lat, err, lat, lat, 1.0

    r = SweepResult([(1, M(3e-3)), (2, M(1e-3)), (4, M(None, "build failed"))], param="jfactor")
    assert r.best()[0] == 2
    bundle = r._repr_mimebundle_()
    assert "application/vnd.plotly.v1+json" in bundle
    assert "jfactor=2 at 1.000 ms" in bundle["text/plain"]


def test_a_sweep_ends_on_the_roofline():
    from mlc_lab.core.measure import Measurement
    from mlc_lab.widgets.measure import SweepResult

    def m(lat: float) -> Measurement:
        flops, nbytes = 4.2e6, 196608.0
        g = flops / lat / 1e9
        return Measurement(
            latency_s=lat,
            gflops=g,
            flops=flops,
            bytes=nbytes,
            intensity=flops / nbytes,
            machine_peak_gflops=200.0,
            machine_bandwidth_gbs=10.0,
            fraction_of_peak=g / 200.0,
        )

    r = SweepResult([(4, m(1e-3)), (16, m(2e-4)), (64, Measurement(error="failed"))], param="jfactor")
    fig = r.roofline()
    roof, points = fig.data
    assert list(roof.x)[1] == pytest.approx(20.0) and list(roof.y)[1:] == [200.0, 200.0]  # ridge, then the peak
    assert list(points.text) == ["4", "16"]  # the failed value has no point
    assert list(points.y) == pytest.approx([4.2, 21.0])
    assert points.marker.color[1] == "#ff7f0e"  # the best value stands out
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"


# --- machines elsewhere ---------------------------------------------------------------------------


def _measured_elsewhere(tmp_path: Path, runner: str, events: list[dict], where: str) -> WorkDir:
    wd = filled(tmp_path)
    job = json.loads((wd.path / "mlc_lab_job.json").read_text())
    (wd.path / "mlc_lab_job.json").write_text(json.dumps({**job, "runner": runner, "servers": 3}))
    lines = [{"phase": "starting", "n": 0, "t": 0.1}, *events]
    (wd.path / "mlc_lab_live.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    side = [json.loads(x) for x in (wd.path / "mlc_lab_trials.jsonl").read_text().splitlines()]
    (wd.path / "mlc_lab_trials.jsonl").write_text(
        "".join(json.dumps({**e, "where": where, "waited_s": 1.5}) + "\n" for e in side)
    )
    return wd


def test_the_dashboard_says_where_each_round_ran_and_how_long_it_waited(comms, tmp_path):
    events = [
        {"event": "round", "round": "round 1", "candidates": 4, "via": "Slurm", "t": 1.0},
        {"event": "round_queued", "round": "round 1", "job": "7", "t": 1.1},
        {
            "event": "round_failed",
            "round": "round 1",
            "where": "Slurm job 7",
            "waited_s": 2.0,
            "ran_s": 0.0,
            "error": "round 1: the Slurm job 7 ended CANCELLED (reason PartitionDown)",
            "measured": 0,
            "t": 3.0,
        },
        {"event": "round", "round": "round 2", "candidates": 4, "via": "Slurm", "t": 4.0},
        {"event": "round_queued", "round": "round 2", "job": "8", "t": 4.1},
        {"event": "round_running", "round": "round 2", "job": "8", "node": "node3", "t": 5.0},
        {
            "event": "round_done",
            "round": "round 2",
            "where": "Slurm job 8 on node3",
            "waited_s": 0.9,
            "ran_s": 4.2,
            "measured": 4,
            "t": 9.0,
        },
        {"event": "round", "round": "round 3", "candidates": 4, "via": "Slurm", "t": 10.0},
        {"event": "round_queued", "round": "round 3", "job": "9", "t": 10.1},
    ]
    wd = _measured_elsewhere(tmp_path, "batch:slurm:gpu", events, "Slurm job 8 on node3")
    w = TuningDashboard.from_work_dir(wd.path, session=TunedSession())
    try:
        assert w.machines == {
            "via": "by Slurm (partition gpu): each round a job",
            "lines": [
                {"text": "round 1: the Slurm job 7 ended CANCELLED (reason PartitionDown)", "problem": True},
                {"text": "round 2: Slurm job 8 on node3, waited 0.9 s, ran 4.2 s, 4 measured", "problem": False},
                {"text": "round 3: queued as Slurm job 9", "problem": False},
            ],
        }
        detail = w._detail(1)
        assert detail["where"] == "Slurm job 8 on node3" and detail["waited_s"] == 1.5
    finally:
        w.close()


def test_the_dashboard_says_which_server_was_lost_and_which_hung(comms, tmp_path):
    events = [
        {
            "event": "lost",
            "server": "10.0.0.5:9090",
            "candidate": "c3",
            "reason": "its session's connection closed",
            "t": 2,
        },
        {"event": "retry", "candidate": "c3", "server": "10.0.0.5:9090", "t": 2},
        {"event": "hung", "server": "10.0.0.6:9090", "reason": "it did not answer for 75 s", "t": 80},
    ]
    wd = _measured_elsewhere(tmp_path, "rpc://10.0.0.1:9190/class-gpu", events, "10.0.0.7:9090")
    w = TuningDashboard.from_work_dir(wd.path, session=TunedSession())
    try:
        assert w.machines["via"] == "on the servers of the RPC tracker 10.0.0.1:9190 (key 'class-gpu'), 3 at once"
        assert w.machines["lines"] == [
            {
                "text": "10.0.0.5:9090 went away while measuring; its candidate was measured again elsewhere",
                "problem": True,
            },
            {"text": "10.0.0.6:9090 hung (it did not answer for 75 s): left out of this job", "problem": True},
        ]
    finally:
        w.close()


def test_a_local_run_says_nothing_of_machines(dash):
    assert dash.machines == {}
