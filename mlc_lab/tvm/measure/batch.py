"""Measuring in batches: a round of candidates built here into a folder, measured wherever a command
or a batch scheduler runs the measuring side on it, and its ``results.json`` read back.

    batch:COMMAND               ``COMMAND FOLDER`` runs the round (split like a shell's words): an ssh
                                wrapper, a Kubernetes Job, anything a teacher writes. It must leave
                                ``FOLDER/results.json`` when it exits 0 (copying the folder to the
                                far machine and back when it does not share the file system).
    batch:slurm[:PARTITION]     ``sbatch`` a job that runs the measuring side on FOLDER (which must be
                                on a file system the nodes share), wait for it, collect.

The folder is the measuring side's (`runside`): ``manifest.json`` and the artifacts and argument
files it names in, ``results.json`` (`RunResults`) out. A round that fails (the command exits
non-zero or leaves no results; the Slurm job fails, is cancelled, times out or vanishes; it runs past
the round's time limit) is one `RoundReport` whose ``error`` says so in one sentence: every candidate
of the round fails with it, and whoever sent the round goes on. A Slurm job runs with the node to
itself (``--exclusive``): no other job times anything there meanwhile.

The Slurm job's Python is ``$MLC_LAB_BATCH_PYTHON`` (a Python on the nodes that has TVM's runtime
and mlc_lab), else this one with this copy of mlc_lab on its path (a shared installation);
``$MLC_LAB_SLURM_ARGS`` adds sbatch options (an account, a QOS; ``--gres=gpu:1`` is added for CUDA).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from mlc_lab.model.measure import RunFormatError, RunResults
from mlc_lab.model.tuning import PENDING_FILE  # a tuning job's Slurm jobs still queued or running

RESULTS = "results.json"
JOB_SCRIPT = "job.sh"
POLL_S = 0.5
SLURM_DONE = {"COMPLETED"}
SLURM_FAILED = {
    "VANISHED",  # ours: Slurm no longer knows the job, and it left no results
    "BOOT_FAIL",
    "CANCELLED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "REVOKED",
    "SPECIAL_EXIT",
    "TIMEOUT",
}


@dataclass(frozen=True)
class BatchSpec:
    """How rounds travel: ``kind`` "command" (``command`` + FOLDER) or "slurm" (``partition`` or the default)."""

    kind: str
    command: tuple[str, ...] = ()
    partition: str | None = None

    def describe(self) -> str:
        if self.kind == "slurm":
            return f"Slurm (partition {self.partition})" if self.partition else "Slurm"
        return f"`{shlex.join(self.command)} FOLDER`"


def parse_batch(spec: str) -> BatchSpec:
    """``batch:slurm``, ``batch:slurm:PARTITION`` or ``batch:COMMAND``; a ValueError (one sentence) else."""
    if not spec.startswith("batch:"):
        raise ValueError(f"a batch runner is 'batch:slurm[:PARTITION]' or 'batch:COMMAND', not {spec!r}")
    rest = spec[len("batch:") :].strip()
    if rest == "slurm" or rest.startswith("slurm:"):
        partition = rest[len("slurm:") :].strip() if rest.startswith("slurm:") else None
        if partition is not None and (not partition or any(c.isspace() for c in partition)):
            raise ValueError(f"a Slurm partition is one word: 'batch:slurm:PARTITION', not {spec!r}")
        return BatchSpec("slurm", partition=partition)
    try:
        words = tuple(shlex.split(rest))
    except ValueError as exc:
        raise ValueError(f"the batch command {rest!r} cannot be split into words ({exc})") from None
    if not words:
        raise ValueError("'batch:' needs a command (batch:COMMAND, run as COMMAND FOLDER) or 'batch:slurm'")
    return BatchSpec("command", command=words)


@dataclass
class RoundReport:
    """What became of one round: its results, or the sentence that says why it failed (with the results
    of the candidates measured before it did, when the measuring side wrote any); where it ran, how long
    it waited for a machine and how long it ran (seconds; None when not known)."""

    results: RunResults | None
    where: str
    waited_s: float | None = None
    ran_s: float | None = None
    job_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.results is not None


def run_round(
    spec: BatchSpec,
    folder: str,
    *,
    limit_s: float,
    label: str = "the round",
    device: str = "cpu",
    on_event: Callable[..., None] | None = None,
    pending_file: str | None = None,
) -> RoundReport:
    """Run the measuring side on `folder` by `spec`, at most `limit_s` seconds in all (queue included);
    never raises for what the transport or the far side did."""
    say = on_event or (lambda kind, **facts: None)
    if spec.kind == "slurm":
        return _slurm_round(spec, folder, limit_s, label, device, say, pending_file)
    return _command_round(spec, folder, limit_s, label)


def _read_results(folder: str, label: str) -> RunResults | str:
    """The folder's results, or the sentence that says why there are none."""
    path = os.path.join(folder, RESULTS)
    try:
        with open(path, encoding="utf-8") as fh:
            return RunResults.from_json(json.load(fh))
    except FileNotFoundError:
        return f"{label} left no {RESULTS} in {folder}"
    except (OSError, ValueError, RunFormatError) as exc:
        return f"{label}'s {RESULTS} cannot be read ({exc})"


def _partial(folder: str) -> RunResults | None:
    """The results a measuring side that died wrote before it did (it rewrites them after each candidate)."""
    found = _read_results(folder, "")
    return None if isinstance(found, str) else found


def _tail(path: str, limit: int = 300) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4000))
            lines = [x.strip() for x in fh.read().decode("utf-8", errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


# ----------------------------------------------------------------------------------------- COMMAND FOLDER


def _command_round(spec: BatchSpec, folder: str, limit_s: float, label: str) -> RoundReport:
    where = shlex.join([os.path.basename(spec.command[0]), *spec.command[1:]])
    log = os.path.join(folder, "command.log")
    t0 = time.monotonic()
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*spec.command, folder],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its whole tree is stopped at the time limit
            )
    except OSError as exc:
        return RoundReport(
            None, where, error=f"the batch command `{where}` could not be started ({exc.strerror or exc})"
        )
    try:
        code = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return RoundReport(
            None,
            where,
            ran_s=time.monotonic() - t0,
            error=f"{label}: the batch command `{where}` did not finish in {limit_s:g} s and was stopped",
        )
    ran = time.monotonic() - t0
    if code != 0:
        said = _tail(log)
        return RoundReport(
            _partial(folder),
            where,
            ran_s=ran,
            error=f"{label}: the batch command `{where}` exited {code}" + (f" ({said})" if said else ""),
        )
    results = _read_results(folder, f"{label}: the batch command `{where}`")
    if isinstance(results, str):
        return RoundReport(None, where, ran_s=ran, error=results)
    where = f"{where} on {results.host}" if results.host else where
    waited = _waited(t0, results)
    return RoundReport(results, where, waited_s=waited, ran_s=ran if waited is None else max(0.0, ran - waited))


def _waited(t0_monotonic: float, results: RunResults) -> float | None:
    """Seconds from handing the round off until the measuring side started (its clock; None if unknown)."""
    if results.started_at is None:
        return None
    handed = time.time() - (time.monotonic() - t0_monotonic)
    return round(max(0.0, results.started_at - handed), 3)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


# ----------------------------------------------------------------------------------------- Slurm


def runside_command(folder: str) -> list[str]:
    """The measuring side on `folder`, as the job runs it."""
    python = os.environ.get("MLC_LAB_BATCH_PYTHON") or sys.executable
    return [python, "-m", "mlc_lab.tvm.measure.runside", folder]


def job_script(folder: str) -> str:
    """The Slurm job: the measuring side on the folder, with TVM's runtime alone."""
    lines = ["#!/bin/sh", "# mlc_lab's measuring side on one round of candidates (mlc_lab.tvm.measure.batch)"]
    lines.append("export TVM_USE_RUNTIME_LIB=1")
    if not os.environ.get("MLC_LAB_BATCH_PYTHON"):  # this copy of mlc_lab, on a shared installation
        root = str(Path(__file__).resolve().parents[3])
        lines.append(f"export PYTHONPATH={shlex.quote(root)}${{PYTHONPATH:+:$PYTHONPATH}}")
    lines.append("exec " + shlex.join(runside_command(folder)))
    return "\n".join(lines) + "\n"


def _slurm_tool(args: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def slurm_job(job_id: str) -> dict[str, str] | None:
    """``scontrol show job -o ID`` as key=value pairs; None once Slurm no longer knows the job."""
    try:
        out = _slurm_tool(["scontrol", "show", "job", "-o", job_id])
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or "JobId=" not in out.stdout:
        return None
    facts: dict[str, str] = {}
    for word in out.stdout.strip().split(" "):
        key, sep, value = word.partition("=")
        if sep and key and key not in facts:
            facts[key] = value
    return facts


def _seconds_between(facts: dict[str, str], start: str, end: str) -> float | None:
    try:
        return (datetime.fromisoformat(facts[end]) - datetime.fromisoformat(facts[start])).total_seconds()
    except (KeyError, ValueError):
        return None


def _sbatch(spec: BatchSpec, folder: str, limit_s: float, label: str, device: str) -> str:
    """Submit the round's job; its id, or a ValueError with the sentence."""
    script = os.path.join(folder, JOB_SCRIPT)
    with open(script, "w") as fh:
        fh.write(job_script(folder))
    os.chmod(script, 0o755)
    args = ["sbatch", "--parsable", f"--job-name=mlc-lab-{label.replace(' ', '-')}", f"--chdir={folder}"]
    args += [f"--output={folder}/slurm-%j.out", "--exclusive", "--nodes=1", "--ntasks=1"]
    args += [f"--time={max(1, int(limit_s // 60) + 1)}"]
    if spec.partition:
        args.append(f"--partition={spec.partition}")
    if device == "cuda":
        args.append("--gres=gpu:1")
    args += shlex.split(os.environ.get("MLC_LAB_SLURM_ARGS", ""))
    try:
        out = _slurm_tool([*args, script])
    except FileNotFoundError:
        raise ValueError("sbatch was not found on PATH: is this a Slurm login node?") from None
    except subprocess.TimeoutExpired:
        raise ValueError("sbatch did not answer in 30 s") from None
    job_id = out.stdout.strip().split(";")[0]
    if out.returncode != 0 or not job_id.isdigit():
        said = (out.stderr or out.stdout).strip().splitlines()
        raise ValueError(f"sbatch refused {label}'s job: {said[-1] if said else f'exit {out.returncode}'}")
    return job_id


def _slurm_round(
    spec: BatchSpec,
    folder: str,
    limit_s: float,
    label: str,
    device: str,
    say: Callable[..., None],
    pending_file: str | None,
) -> RoundReport:
    t0 = time.monotonic()
    try:
        job_id = _sbatch(spec, folder, limit_s, label, device)
    except ValueError as exc:
        return RoundReport(None, spec.describe(), error=f"{label}: {exc}")
    _pending(pending_file, job_id, add=True)
    try:
        return _follow_slurm(job_id, spec, folder, limit_s, label, say, t0)
    finally:
        _pending(pending_file, job_id, add=False)


def _follow_slurm(
    job_id: str, spec: BatchSpec, folder: str, limit_s: float, label: str, say: Callable[..., None], t0: float
) -> RoundReport:
    where = f"Slurm job {job_id}"
    state, facts, started = "PENDING", None, None
    say("round_queued", round=label, job=job_id)
    while True:
        current = slurm_job(job_id)
        if current is None and facts is not None:  # Slurm forgot the job: it ended a while ago
            state = "COMPLETED" if os.path.exists(os.path.join(folder, RESULTS)) else "VANISHED"
            break
        facts = current or facts
        now = slurm_job_state(facts) if facts is not None else state
        if now != state:
            state = now
            if state == "RUNNING" and started is None:
                started = time.monotonic()
                say("round_running", round=label, job=job_id, node=(facts or {}).get("NodeList"))
        if state in SLURM_DONE or state in SLURM_FAILED:
            break
        if time.monotonic() - t0 > limit_s:
            _slurm_tool(["scancel", job_id])
            return RoundReport(
                None,
                where,
                job_id=job_id,
                error=f"{label}: the Slurm job {job_id} did not finish in {limit_s:g} s ({state.lower()}); cancelled",
            )
        time.sleep(POLL_S)
    facts = facts or {}
    node = facts.get("NodeList") or facts.get("BatchHost")
    where = f"Slurm job {job_id} on {node}" if node and node != "(null)" else where
    waited = _seconds_between(facts, "SubmitTime", "StartTime")
    if waited is None and started is not None:
        waited = started - t0
    ran = _seconds_between(facts, "StartTime", "EndTime")
    if state in SLURM_FAILED:
        reason = facts.get("Reason", "")
        said = _tail(os.path.join(folder, f"slurm-{job_id}.out"))
        detail = "; ".join(x for x in (f"reason {reason}" if reason and reason != "None" else "", said) if x)
        return RoundReport(
            _partial(folder),
            where,
            waited_s=waited,
            ran_s=ran,
            job_id=job_id,
            error=f"{label}: the Slurm job {job_id} ended {state}" + (f" ({detail})" if detail else ""),
        )
    results = _read_results(folder, f"{label}: the Slurm job {job_id}")
    if isinstance(results, str):
        said = _tail(os.path.join(folder, f"slurm-{job_id}.out"))
        return RoundReport(None, where, waited, ran, job_id, error=results + (f" ({said})" if said else ""))
    return RoundReport(results, where, waited_s=waited, ran_s=ran, job_id=job_id)


def slurm_job_state(facts: dict[str, str]) -> str:
    """The job's state word (``CANCELLED by 0`` -> ``CANCELLED``)."""
    return facts.get("JobState", "UNKNOWN").split()[0].upper()


_pending_lock = threading.Lock()


def _pending(path: str | None, job_id: str, add: bool) -> None:
    """Keep the ids of the Slurm jobs in flight in `path`, so that a cancelled tuning job cancels them."""
    if path is None:
        return
    with _pending_lock:
        try:
            with open(path) as fh:
                ids = set(json.load(fh))
        except (OSError, ValueError):
            ids = set()
        (ids.add if add else ids.discard)(job_id)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(sorted(ids), fh)
        os.replace(tmp, path)


def cancel_pending(work_dir: str) -> list[str]:
    """Cancel the Slurm jobs a stopped tuning job left queued or running (``scancel``); their ids."""
    path = os.path.join(work_dir, PENDING_FILE)
    try:
        with open(path) as fh:
            ids = [str(x) for x in json.load(fh)]
    except (OSError, ValueError):
        return []
    for job_id in ids:
        try:
            _slurm_tool(["scancel", job_id])
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        os.remove(path)
    except OSError:
        pass
    return ids
