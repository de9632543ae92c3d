"""The tuning dashboard: a live view of one meta_schedule job (``mlc_lab.core.tuning.TuneJob``).

A background thread polls the job's work directory (a few stat calls; the records are read only
when a file changed) and pushes what it found in one comm message at most every
``poll_s`` seconds (``hold_sync``). Latencies travel as float64 bytes. The front end asks for
the things a person clicks: Cancel and "open in explorer" arrive as requests (custom messages), the
selected trial is the synced ``selected`` trait and its trace, script and diff against the best come
back as the ``detail`` trait. The kernel's main thread stays free, so Cancel works while it is idle.

Everything lives in the work directory, so a dashboard shows a job again
after a cancel, a crash or a kernel restart (``TuningDashboard.from_work_dir`` or
``dashboard(work_dir)``). This module reads plain data from the job; it never
imports TVM (a trial's script is made by replaying its trace with the Session class).
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import sys
import threading
import time
from array import array
from typing import Any

import anywidget
import traitlets as t

from mlc_lab._threads import helper_thread
from mlc_lab.core.protocol import Retraceable
from mlc_lab.model.tuning import (
    BEST_FILE,
    JOB_FILE,
    LIVE_FILE,
    RECORDS_FILE,
    STATUS_FILE,
    TRIALS_FILE,
    BestTrial,
    FailureItem,
    MachineLine,
    Machines,
    Roof,
    TrialDetail,
)
from mlc_lab.model.traits import TuningTraits
from mlc_lab.widgets._base import RequestError, RpcWidget, bundle

log = logging.getLogger(__name__)

MAX_FAILURES = 500  # failed candidates listed (the plot marks every one)
WATCHED = (RECORDS_FILE, TRIALS_FILE, STATUS_FILE, JOB_FILE, LIVE_FILE, BEST_FILE)  # the job's files that change
PHASE_TEXT = {
    "starting": "starting (loading TVM, generating the search space)",
    "searching": "searching: the cost model picks the next candidates",
    "building": "building {n} candidates",
    "measuring": "measuring candidate {k} of {n}",
    "confirming": "re-timing the best candidates with measure()'s method",
}


# --- plain data ----------------------------------------------------------------------------------


def float64_bytes(values: list[float]) -> bytes:
    """Little-endian float64 bytes (what a JS ``Float64Array`` reads on every platform we run on)."""
    arr = array("d", values)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def float64_list(data: bytes | memoryview) -> list[float]:
    arr = array("d")
    arr.frombytes(bytes(data))
    if sys.byteorder != "little":
        arr.byteswap()
    return list(arr)


_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Failure)|InternalError|TVMError)\b.*:.*\S")


def error_summary(text: str | None, limit: int = 240) -> str:
    """One line out of a meta_schedule error (often a long traceback): the last ``XxxError: ...``
    line, else the first non-empty one."""
    if not text:
        return ""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    picked = next((ln for ln in reversed(lines) if _ERROR_LINE.match(ln)), lines[0])
    return picked if len(picked) <= limit else picked[: limit - 1] + "…"


def job_snapshot(job: Any) -> dict[str, Any]:
    """What the dashboard shows of a job, read once (no traces: those are read on a click)."""
    records = job.records(with_traces=False)
    flops = getattr(job, "flops", None) or 0.0
    latency = [r.latency_s if r.ok else math.nan for r in records]
    elapsed = [r.elapsed_s if r.elapsed_s is not None else math.nan for r in records]
    ok = [r for r in records if r.ok]
    best: BestTrial = {}
    if ok:
        b = min(ok, key=lambda r: r.latency_s)
        best = {"trial": b.trial, "latency_s": b.latency_s, "gflops": flops / b.latency_s / 1e9 if flops else None}
    failed = [r for r in records if not r.ok]
    status = job.status
    spec = getattr(job, "spec", {}) or {}
    target = spec.get("target") or {}
    job_best = getattr(job, "best", None) if ok else None
    if job_best is not None and getattr(job_best, "confirmed", False):
        from mlc_lab._contention import describe, spread

        others = getattr(job_best, "others_cores", None)
        speed = getattr(job_best, "parallel_speed", None)
        spread_now = spread(getattr(job_best, "iqr_s", None), job_best.latency_s)
        method = (job_best.method or "") + (f"; {describe(others, speed, spread_now)}" if others is not None else "")
        best.update({"confirmed_latency_s": job_best.latency_s, "confirmed_trial": job_best.trial, "method": method})
    live = job.live() if hasattr(job, "live") else None
    pending = list(live.pending) if live is not None else []
    phase = ""
    if live is not None and status == "running":
        template = PHASE_TEXT.get(live.phase, live.phase)
        phase = template.format(n=live.batch, k=min(len(pending) + 1, max(live.batch, 1)))
    stopped = getattr(job, "stopped_early", None) if status == "done" else None
    return {
        "status": status,
        "job_error": (job.error or "") if status in ("failed", "interrupted") else "",
        "done": len(records),
        "total": int(getattr(job, "trials", 0) or 0),
        "latency": float64_bytes(latency),
        "elapsed": float64_bytes(elapsed),
        "pending": float64_bytes([math.nan if x is None else float(x) for x in pending]),
        "phase": phase,
        "stopped_early": _stopped_text(stopped, spec),
        "flops": float(flops),
        "roof": _roof(spec),
        "best": best,
        "failed_count": len(failed),
        "failures": [FailureItem(trial=r.trial, summary=error_summary(r.error)) for r in failed[:MAX_FAILURES]],
        "func": str(spec.get("func_name") or ""),
        "target": _target_label(target),
        "settings": _settings_label(spec),
        "machines": machines_view(spec, job.events() if hasattr(job, "events") else []),
    }


MAX_MACHINE_LINES = 40  # the latest rounds and server events the dashboard lists


def machines_view(spec: dict, events: list[dict]) -> Machines:
    """Where the job measures when not here, and what happened: each server lost or left out, each
    batch round with where it ran and how long it waited (or why it failed), from the job's events."""
    runner = str(spec.get("runner") or "local")
    if runner.startswith("rpc://"):
        servers = int(spec.get("servers") or 1)
        host, _, key = runner[len("rpc://") :].partition("/")
        via = f"on the servers of the RPC tracker {host} (key {key!r}), {servers} at once"
    elif runner.startswith("batch:"):
        rest = runner[len("batch:") :]
        via = (
            f"by Slurm{' (partition ' + rest[6:] + ')' if rest.startswith('slurm:') else ''}: each round a job"
            if rest == "slurm" or rest.startswith("slurm:")
            else f"by `{rest} FOLDER`: each round a folder"
        )
    else:
        return {}
    lines: list[MachineLine] = []
    rounds: dict[str, int] = {}  # a round's line, rewritten as it moves on
    for ev in events:
        kind, label = ev.get("event"), str(ev.get("round") or "")
        line = _machine_line(kind, ev)
        if line is None:
            continue
        if label and label in rounds:
            lines[rounds[label]] = line
        else:
            if label:
                rounds[label] = len(lines)
            lines.append(line)
    return {"via": via, "lines": lines[-MAX_MACHINE_LINES:]}


def _seconds(value: Any) -> str:
    return "?" if value is None else f"{float(value):.1f} s"


def _machine_line(kind: Any, ev: dict) -> MachineLine | None:
    """One event as the dashboard says it (None: an event that adds nothing to the round's line)."""
    label = ev.get("round")
    if kind == "hung":
        return {"text": f"{ev.get('server')} hung ({ev.get('reason')}): left out of this job", "problem": True}
    if kind == "lost" and ev.get("candidate") is None:
        return {"text": f"{ev.get('server')} could not be reached ({ev.get('reason')})", "problem": True}
    if kind == "lost":
        return {
            "text": f"{ev.get('server')} went away while measuring; its candidate was measured again elsewhere",
            "problem": True,
        }
    if kind == "round":
        return {"text": f"{label}: {ev.get('candidates')} candidates sent", "problem": False}
    if kind == "round_queued":
        return {"text": f"{label}: queued as Slurm job {ev.get('job')}", "problem": False}
    if kind == "round_running":
        return {"text": f"{label}: running as Slurm job {ev.get('job')} on {ev.get('node')}", "problem": False}
    if kind == "round_done":
        text = (
            f"{label}: {ev.get('where')}, waited {_seconds(ev.get('waited_s'))}, ran {_seconds(ev.get('ran_s'))}, "
            f"{ev.get('measured')} measured"
        )
        return {"text": text, "problem": False}
    if kind == "round_failed":
        return {"text": str(ev.get("error") or f"{label} failed"), "problem": True}
    return None


def _stopped_text(stopped: dict | None, spec: dict) -> str:
    """Why a finished run has fewer trials than asked, and what to do about it."""
    if not stopped:
        return ""
    text = (
        f"Stopped after {stopped['measured']} of {stopped['requested']} trials: "
        f"{stopped.get('reason', 'the search space had no new candidate')}."
    )
    kind = (spec.get("space") or {}).get("kind")
    if kind in ("session", "callable") and not (spec.get("space") or {}).get("widen"):
        text += (
            " To search more, widen it: tune(..., widen=True) adds meta_schedule's own choices "
            "(more tiling levels, parallel/vectorize/unroll), or split more loops in the session."
        )
    return text


def _roof(spec: dict) -> Roof:
    """The machine's roofline (when already measured) and the program's arithmetic intensity."""
    try:
        from mlc_lab.core.machine import cached_machine

        mach = cached_machine()
    except Exception:  # noqa: BLE001 - the roofline is optional
        mach = None
    flops, nbytes = spec.get("flops"), spec.get("bytes")
    if mach is None or not flops or not nbytes:
        return {}
    return {
        "peak_gflops": mach.peak_gflops,
        "bandwidth_gbs": mach.bandwidth_gbs,
        "intensity": float(flops) / float(nbytes),
    }


def _target_label(target: Any) -> str:
    if isinstance(target, dict):
        kind = target.get("kind", "")
        extra = target.get("mcpu") or target.get("arch") or ""
        cores = target.get("num-cores")
        parts = [str(kind)] + ([str(extra)] if extra else []) + ([f"{cores} cores"] if cores else [])
        return " ".join(parts)
    return str(target or "")


def _settings_label(spec: dict) -> str:
    if not spec:
        return ""
    parts = [spec.get("strategy"), spec.get("cost_model"), (spec.get("space") or {}).get("kind")]
    return " · ".join(str(p) for p in parts if p)


def _signature(work_dir: str) -> tuple:
    out: list[tuple[int, int] | None] = []
    for name in WATCHED:
        try:
            st = os.stat(os.path.join(work_dir, name))
            out.append((st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def retarget_trace(trace: str, func_name: str | None) -> str:
    """meta_schedule names the tuned function "main" in its traces (it tunes a normalised one-function
    module); a Session of the user's program calls it by its own name. Rename in the trace text."""
    if not func_name or func_name == "main":
        return trace
    return trace.replace('func_name="main"', f'func_name="{func_name}"')


_LOOKUPS = ("get_sblock", "get_loops", "get_child_blocks", "get_producers", "get_consumers", "get_output_blocks")


def without_postproc_marker(trace: str) -> tuple[str, int]:
    """A meta_schedule trace as a student's steps: `sch.enter_postproc()` (meta_schedule's internal
    marker, a no-op on a schedule) removed. Returns the text and how many real steps follow the
    marker (the postprocessing), so a view can show them apart."""
    lines = trace.splitlines()
    at = next((i for i, ln in enumerate(lines) if re.match(r"\s*sch\.enter_postproc\(\)\s*$", ln)), None)
    if at is None:
        return trace, 0
    post = 0
    for ln in lines[at + 1 :]:
        call = re.search(r"sch\.(\w+)\(", ln)
        if call and call.group(1) not in _LOOKUPS:
            post += 1
    return "\n".join(lines[:at] + lines[at + 1 :]), post


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name, n=3
        )
    )


# --- the widget ----------------------------------------------------------------------------------


class TuningDashboard(RpcWidget):
    """Live view of a tuning job: progress, latency per trial with the best so far, errors of the
    failed candidates, each trial's trace and its diff against the best, Cancel.

    >>> job = mlc_lab.core.tuning.tune(session, trials=64)
    >>> TuningDashboard(job, session=session)          # last expression of a cell
    >>> TuningDashboard.from_work_dir("/path/to/work_dir")   # after a restart: all of it is on disk
    """

    _esm = bundle("tuning_dashboard")
    # The requests of mlc_lab.model.requests.REQUESTS it answers, and the method answering each.
    handlers = {"cancel": "_rpc_cancel", "open_in_explorer": "_rpc_open", "refresh": "_rpc_refresh"}
    traits_type = TuningTraits

    # job facts
    work_dir = t.Unicode("").tag(sync=True)
    func = t.Unicode("").tag(sync=True)
    target = t.Unicode("").tag(sync=True)
    settings = t.Unicode("").tag(sync=True)
    status = t.Unicode("").tag(sync=True)
    job_error = t.Unicode("").tag(sync=True)
    done = t.Int(0).tag(sync=True)
    total = t.Int(0).tag(sync=True)
    # per trial, in trial order: float64 seconds; NaN = failed candidate / unknown time
    latency = t.Bytes(b"").tag(sync=True)
    elapsed = t.Bytes(b"").tag(sync=True)
    # live: what the job does now, and the current batch's candidates measured so far (float64)
    phase = t.Unicode("").tag(sync=True)
    pending = t.Bytes(b"").tag(sync=True)
    stopped_early = t.Unicode("").tag(sync=True)
    roof = t.Dict().tag(sync=True)  # {peak_gflops, bandwidth_gbs, intensity} or {}
    flops = t.Float(0.0).tag(sync=True)
    best = t.Dict().tag(sync=True)
    failed_count = t.Int(0).tag(sync=True)
    failures = t.List(t.Dict()).tag(sync=True)
    machines = t.Dict().tag(sync=True)  # {via, lines: [{text, problem}]} when it measures elsewhere, else {}
    # interaction
    selected = t.Int(-1).tag(sync=True)
    detail = t.Dict().tag(sync=True)
    notice = t.Unicode("").tag(sync=True)
    explorer = anywidget.WidgetTrait().tag(sync=True)
    updated_at = t.Float(0.0).tag(sync=True)
    height = t.Unicode("380px").tag(sync=True)

    def __init__(
        self,
        job: Any,
        session: Retraceable | None = None,
        *,
        poll_s: float = 0.25,
        height: str = "380px",
        **kwargs: Any,
    ) -> None:
        if isinstance(job, (str, os.PathLike)):
            job = _open_job(os.fspath(job))
        for name in ("records", "status", "cancel", "work_dir"):
            if not hasattr(job, name):
                raise TypeError(f"TuningDashboard needs a TuneJob (or its work directory); got {type(job).__name__}")
        self._job = job
        self._session = session
        self._scripts: dict[int, str] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._cancelling = False
        self.poll_s = float(poll_s)
        self._sig = _signature(job.work_dir)
        snap = job_snapshot(job)
        super().__init__(work_dir=str(job.work_dir), height=height, updated_at=time.time(), **snap, **kwargs)
        self.observe(self._on_selected, names=["selected"])
        self._thread: threading.Thread | None = None
        if snap["status"] == "running":
            self._start_polling()

    def mlc_what(self) -> str:
        return f"tuning dashboard of the run in {self.work_dir}" if self.work_dir else "tuning dashboard"

    # --- public API ------------------------------------------------------------------------------
    @classmethod
    def from_work_dir(
        cls, work_dir: str | os.PathLike, session: Retraceable | None = None, **kwargs: Any
    ) -> "TuningDashboard":
        """Show the job kept in ``work_dir`` (running or not): after a cancel, a crash or a restart.

        (Not called ``open``: ipywidgets' ``Widget.open`` opens the comm.)"""
        return cls(_open_job(os.fspath(work_dir)), session=session, **kwargs)

    @property
    def job(self) -> Any:
        return self._job

    @property
    def latencies(self) -> list[float | None]:
        """Seconds per trial, in trial order; None for a failed candidate."""
        return [None if math.isnan(x) else x for x in float64_list(self.latency)]

    @property
    def polling(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def refresh(self) -> bool:
        """Read the job again and push what changed (one comm message). True when something did."""
        with self._lock:
            cancelling = self._cancelling  # read once: the cancel thread may clear it while we read the job
            sig = _signature(self._job.work_dir)
            status = self._job.status
            if sig == self._sig and status == self.status and not cancelling:
                return False
            snap = job_snapshot(self._job)
            self._sig = sig
            if cancelling and snap["status"] in ("running", "interrupted"):
                snap["status"] = "cancelling"  # the process may be gone before "cancelled" is written
            with self.hold_sync():
                for name, value in snap.items():
                    if getattr(self, name) != value:
                        setattr(self, name, value)
                self.updated_at = time.time()
        if snap["status"] == "running" and not self.polling:  # e.g. tune() continued in this work_dir
            self._start_polling()
        return True

    def select(self, trial: int | None) -> dict:
        """Show one trial's trace, script and diff against the best (None clears); returns the detail."""
        self.selected = -1 if trial is None else int(trial)
        return dict(self.detail)

    def cancel(self, wait: bool = True) -> str:
        """Stop the job (its whole process group); records stay on disk. Returns the status."""
        if wait:
            status = self._job.cancel()
            self.refresh()
            return status
        self._cancel_in_background()
        return self.status

    def wait(self, timeout: float | None = None) -> str:
        """Block until the job ends and the dashboard shows its last trial."""
        status = self._job.wait(timeout=timeout)
        self.refresh()
        return status

    @property
    def session(self) -> Retraceable:
        """The Session that "open in explorer" adds branches to (made from the work directory if
        none was given)."""
        if self._session is None:
            self._session = _session_of_work_dir(self._job)
        return self._session

    def open_trial(self, trial: int | None = None) -> Any:
        """Make a trial (default: the best) a new branch of the session, replayed from the original
        program; returns the new step. An explorer of that session shows it at once."""
        if trial is None:
            if not self.best:
                raise RequestError("no trial has succeeded yet", type="usage")
            trial = int(self.best["trial"])
        rec = self._record(int(trial))
        if not rec.trace:
            raise RequestError(f"trial {trial} has no recorded trace")
        session = self.session
        steps, self._postproc_steps = without_postproc_marker(retarget_trace(rec.trace, session.func_name))
        return session.replay(steps)

    def show_explorer(self, trial: int | None = None) -> Any:
        """``open_trial`` and show the session's explorer under the dashboard; returns the explorer."""
        step = self.open_trial(trial)
        shown = trial if trial is not None else self.best.get("trial")
        with self._lock:
            if self.explorer is None:
                from mlc_lab.widgets.explorer import Explorer

                self.explorer = Explorer(self.session)
            note = f"trial {shown} is now step {step.id} of the session (shown in the explorer below)"
            post = getattr(self, "_postproc_steps", 0)
            if post:
                path = self.session.path()
                first = path[-post] if len(path) >= post else None
                note += (
                    f"; its last {post} steps (from step {first}) are meta_schedule's postprocessing, which "
                    "turns the meta_schedule.* annotations into parallel/vectorize/unroll loops"
                )
            self.notice = note
        return self.explorer

    def close(self) -> None:
        stop = getattr(self, "_stop", None)  # absent when __init__ failed before it
        if stop is not None:
            stop.set()
        if getattr(self, "explorer", None) is not None:  # the one this dashboard made
            self.explorer.close()
        super().close()

    # --- polling ---------------------------------------------------------------------------------
    def _start_polling(self) -> None:
        if self.polling:
            return
        self._stop.clear()
        self._thread = helper_thread(self._poll_loop, name="mlc-lab-tuning-dashboard", stop=self._stop.set)

    def _poll_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.refresh()
            except Exception:  # noqa: BLE001  (a half-written file: try again next tick)
                log.debug("mlc_lab: dashboard refresh failed", exc_info=True)
                continue
            if self.status not in ("running", "cancelling"):
                break

    # --- front-end requests -----------------------------------------------------------------------
    def _rpc_cancel(self) -> dict:
        self._cancel_in_background()
        return {"status": self.status}

    def _rpc_open(self, trial: int | None = None) -> dict:
        try:
            self.show_explorer(trial)
        except RequestError:
            raise
        except Exception as exc:  # noqa: BLE001  (say it in the dashboard, keep the kernel's loop alive)
            raise RequestError(
                f"could not open trial {trial} in the explorer: {_first_line(exc)}", detail=str(exc), type="tune"
            ) from None
        return {"notice": self.notice}

    def _rpc_refresh(self) -> dict:
        self.refresh()
        return {"status": self.status}

    def _cancel_in_background(self) -> None:
        if self.status != "running" or self._cancelling:
            return
        self._cancelling = True
        with self._lock:
            self.status = "cancelling"

        def run() -> None:
            try:
                self._job.cancel()
            finally:
                self._cancelling = False
                self.refresh()

        helper_thread(run, name="mlc-lab-tuning-cancel")

    # --- details of one trial ------------------------------------------------------------------
    def _record(self, trial: int) -> Any:
        records = self._job.records(with_traces=True)
        if not 0 <= trial < len(records):
            raise RequestError(f"there is no trial {trial}; trials are 0..{len(records) - 1}", type="usage")
        return records[trial]

    def _on_selected(self, change: dict) -> None:
        trial = change["new"]
        try:
            detail = {} if trial < 0 else self._detail(trial)
        except Exception as exc:  # noqa: BLE001  (observer errors would be swallowed: show them)
            log.exception("mlc_lab: trial detail failed")
            detail = {"trial": trial, "problem": _first_line(exc)}
        with self._lock:  # the polling thread may be inside hold_sync: never interleave with it
            self.detail = dict(detail)

    def _detail(self, trial: int) -> TrialDetail:
        records = self._job.records(with_traces=True)
        if not 0 <= trial < len(records):
            return {"trial": trial, "problem": f"there is no trial {trial}"}
        rec = records[trial]
        flops = self.flops
        out: TrialDetail = {
            "trial": trial,
            "ok": rec.ok,
            "latency_s": rec.latency_s,
            "gflops": flops / rec.latency_s / 1e9 if rec.ok and flops else None,
            "run_secs": list(rec.run_secs)[:32],
            "error": rec.error or "",
            "error_summary": error_summary(rec.error),
            "trace": rec.trace or "",
            "script": "",
            "script_problem": "",
            "diff": "",
            "best_trial": None,
        }
        if getattr(rec, "where", None):
            out["where"], out["waited_s"] = rec.where, rec.waited_s
        ok = [r for r in records if r.ok]
        best = min(ok, key=lambda r: r.latency_s) if ok else None
        if best is not None:
            out["best_trial"] = best.trial
            out["vs_best"] = rec.latency_s / best.latency_s if rec.ok else None
        try:
            script = self._script(rec)
        except Exception as exc:  # noqa: BLE001  (a trace this version cannot replay: say so, show the rest)
            out["script_problem"] = f"could not replay the trace: {_first_line(exc)}"
            return out
        out["script"] = script
        if best is not None and best.trial != trial:
            try:
                out["diff"] = unified_diff(self._script(best), script, f"trial {best.trial} (best)", f"trial {trial}")
            except Exception as exc:  # noqa: BLE001
                out["script_problem"] = f"could not replay the best trial: {_first_line(exc)}"
        return out

    def _script(self, rec: Any) -> str:
        """TVMScript of a trial: its trace replayed on the original program in a throwaway session."""
        if rec.trial in self._scripts:
            return self._scripts[rec.trial]
        if not rec.trace:
            raise RequestError("no trace was recorded for this trial")
        cls, module, func = self._scratch()
        scratch = cls.from_trace(module, retarget_trace(rec.trace, func), func)
        script = scratch.script
        self._scripts[rec.trial] = script
        return script

    def _scratch(self) -> tuple[Any, Any, str | None]:
        session = self.session
        return type(session), session.original, session.func_name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- helpers that reach the core (lazily: the widget module itself stays free of TVM) ----------------


def _open_job(work_dir: str) -> Any:
    from mlc_lab.core.tuning import TuneJob

    return TuneJob.open(work_dir)


def _session_of_work_dir(job: Any) -> Retraceable:
    """A Session of the job's original program (the job reads it back from its work directory)."""
    return job.session()


def dashboard(job_or_work_dir: Any, session: Retraceable | None = None, **kwargs: Any) -> TuningDashboard:
    """A dashboard of a TuneJob, or of the job kept in a work directory.

    >>> mlc_lab.widgets.tuning.dashboard("/tmp/mlc_lab_tune_x1y2")
    """
    return TuningDashboard(job_or_work_dir, session=session, **kwargs)
