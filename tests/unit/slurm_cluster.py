"""A one-node Slurm cluster on 127.0.0.1 for tests, from Debian's packages (`scripts/install_slurm.sh`,
which ``./run.sh test`` runs): munged with a fresh key, slurmctld and slurmd, all as root in their own
process groups, every file (configuration, key, state, spool, logs) in one temporary folder, on ports
nothing else uses, so that several test runs on one machine do not meet. ``SLURM_CONF`` points the
client commands (sbatch, scontrol, scancel) at it. Everything is killed at the end, and the test fails
if a daemon outlives it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.unit.processes import free_port, kill_groups

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel")


def _which(name: str) -> str | None:
    return shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)


def need_slurm() -> None:
    """Skip where a Slurm cluster cannot be started (not root); fail where it is only not installed."""
    if os.geteuid() != 0:
        pytest.skip("starting slurmd and munged needs root (CI runs as root)")
    missing = [d for d in DAEMONS if _which(d) is None]
    if missing:
        pytest.fail(f"Slurm is not installed ({', '.join(missing)} missing): run scripts/install_slurm.sh")


class SlurmCluster:
    def __init__(self, folder: Path, partition: str = "mlclab") -> None:
        need_slurm()
        self.folder, self.partition = Path(folder), partition
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.socket = self.folder / "munge.socket"
        self.conf = self.folder / "slurm.conf"
        self.conf.write_text(self._conf())
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self._start(
            [
                _which("munged"),
                "-F",
                "-f",
                f"--socket={self.socket}",
                f"--key-file={key}",
                f"--pid-file={self.folder / 'munged.pid'}",
                f"--seed-file={self.folder / 'munged.seed'}",
                f"--log-file={self.folder / 'munged.log'}",
                "--num-threads=2",
            ],
            "munged.out",
        )
        self._wait(lambda: self.socket.exists(), "munged did not create its socket")
        self._start([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
        self._start([_which("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)], "slurmd.out")
        self._wait(lambda: self.node_state().startswith("idle"), "the node did not come up idle", 60)

    def _conf(self) -> str:
        cpus = len(os.sched_getaffinity(0))
        d = self.folder
        return "\n".join(
            [
                "ClusterName=mlclab",
                "SlurmctldHost=localhost(127.0.0.1)",
                f"SlurmctldPort={free_port()}",
                f"SlurmdPort={free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={self.socket}",
                f"StateSaveLocation={d / 'state'}",
                f"SlurmdSpoolDir={d / 'spool'}",
                f"SlurmctldPidFile={d / 'slurmctld.pid'}",
                f"SlurmdPidFile={d / 'slurmd.pid'}",
                f"SlurmctldLogFile={d / 'slurmctld.log'}",
                f"SlurmdLogFile={d / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SchedulerType=sched/builtin",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none",
                "ReturnToService=2",
                "MinJobAge=300",
                f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
                f"PartitionName={self.partition} Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )

    def _start(self, argv: list, log: str) -> None:
        with open(self.folder / log, "wb") as fh:
            self.procs.append(
                subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=self.env)
            )

    def _wait(self, cond, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"{what} ({'exited: ' + ', '.join(dead) if dead else 'timed out'})\n{self.logs()}")
            time.sleep(0.2)

    def tool(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, timeout=30)

    def node_state(self) -> str:
        out = self.tool("sinfo", "-h", "-N", "-o", "%T")
        return out.stdout.strip() if out.returncode == 0 else ""

    def partition_state(self, up: bool) -> None:
        out = self.tool("scontrol", "update", f"PartitionName={self.partition}", f"State={'UP' if up else 'DOWN'}")
        assert out.returncode == 0, out.stderr

    def jobs(self) -> list[tuple[str, str]]:
        """(job id, state) of every job Slurm knows."""
        out = self.tool("squeue", "-h", "-o", "%i %T")
        return [tuple(line.split()[:2]) for line in out.stdout.splitlines() if line.strip()]

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
            for p in sorted(self.folder.glob("*.log")) + sorted(self.folder.glob("*.out"))
        )

    def close(self) -> None:
        kill_groups(self.procs)
        self.procs = []

    @contextlib.contextmanager
    def configured(self) -> Iterator[None]:
        """``SLURM_CONF`` set to this cluster's in this process (and so in the tuning jobs it starts)."""
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(self.conf)
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
