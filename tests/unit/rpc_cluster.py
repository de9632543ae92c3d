"""A class's measuring machines on 127.0.0.1, for tests: TVM's own RPC tracker and N servers, each its
own process in its own process group, all running TVM's runtime alone (``TVM_USE_RUNTIME_LIB=1``; the
servers with nothing on their PATH: no compiler, no nvcc), one TVM thread each. A server can be
killed (``kill -9`` of its group: the machine goes away mid-measurement) or stopped (SIGSTOP: it
hangs). Everything is killed at the end, and the test fails if a process outlives it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.processes import free_port, kill_groups

KEY = "mlc-lab-test"
SANDBOXED = "mlc_lab.core.server_sandbox"  # mlc_lab's server: each session in the sandbox


class Cluster:
    def __init__(
        self,
        folder: Path,
        servers: int = 3,
        runtime_only: bool = True,
        key: str = KEY,
        more: dict | None = None,
        ours: tuple[str, ...] = (),
        env: dict | None = None,
    ) -> None:
        """`servers` under `key`, and `more` = {other key: count, or the list of each server's module and
        its own flags} beside them; the servers of the keys in `ours` run mlc_lab's server, each session
        in the sandbox (`mlc_lab.core.server_sandbox`), instead of TVM's; `env` is added to every server's."""
        self.folder, self.key, self.runtime_only = Path(folder), key, runtime_only
        self.ours, self.extra_env = set(ours), dict(env or {})
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.procs: list[subprocess.Popen] = []
        self.killed: set[int] = set()  # the servers a test killed on purpose
        self.servers: list[subprocess.Popen] = []
        self.addrs: list[str] = []
        self.keys: list[str] = []
        try:  # a cluster that does not come up leaves nothing running behind it
            self._start_tracker()
            wanted = {key: servers, **(more or {})}
            for k, what in wanted.items():
                for module in what if isinstance(what, list) else [None] * what:
                    self.add_server(len(self.servers), k, *(module if isinstance(module, tuple) else (module,)))
            for k, what in wanted.items():
                self.wait_free(len(what) if isinstance(what, list) else what, key=k)
        except BaseException:
            self.close()
            raise

    @property
    def runner(self) -> str:
        return f"rpc://127.0.0.1:{self.port}/{self.key}"

    def _start(self, args: list[str], log: str, env: dict[str, str], prefix: list[str] = ()) -> subprocess.Popen:
        with open(self.folder / log, "wb") as fh:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self.folder,
            )
        self.procs.append(proc)
        return proc

    def _start_tracker(self) -> None:
        port, end = str(self.port), str(self.port + 1)  # --port-end is exclusive
        self._start(
            ["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", port, "--port-end", end],
            "tracker.log",
            dict(os.environ, TVM_USE_RUNTIME_LIB="1"),  # a tracker needs no compiler either (and starts 2x faster)
        )
        deadline = time.monotonic() + 30
        while True:  # servers that find no tracker retry only every 5 s: start them after it listens
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.procs[0].poll() is None and time.monotonic() < deadline, "the tracker did not start"
                time.sleep(0.2)

    def add_server(self, n: int, key: str | None = None, module: str | None = None, *flags: str) -> subprocess.Popen:
        port = free_port()
        env = dict(os.environ, TVM_NUM_THREADS="1", **self.extra_env)
        prefix: list[str] = []
        if self.runtime_only:
            empty = self.folder / "empty_path"
            empty.mkdir(exist_ok=True)
            env.update(TVM_USE_RUNTIME_LIB="1", PATH=str(empty))
        cores = sorted(os.sched_getaffinity(0))
        if shutil.which("taskset"):  # one core each, as docs/measuring.md sets a class up
            prefix = [shutil.which("taskset"), "-c", str(cores[n % len(cores)])]
        module = module or (SANDBOXED if (key or self.key) in self.ours else "tvm.exec.rpc_server")
        if module != "tvm.exec.rpc_server":  # this checkout's mlc_lab, from a PATH without anything on it
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")) if p
            )
        proc = self._start(
            [
                module,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--port-end",
                str(port + 1),
                "--tracker",
                f"127.0.0.1:{self.port}",
                "--key",
                key or self.key,
                *flags,
            ],
            f"server{n}.log",
            env,
            prefix,
        )
        self.servers.append(proc)
        self.addrs.append(f"127.0.0.1:{port}")
        self.keys.append(key or self.key)
        return proc

    def summary(self) -> dict:
        from mlc_lab.tvm.measure.pool import tracker_summary

        return tracker_summary("127.0.0.1", self.port)

    def free(self, key: str | None = None) -> int:
        try:
            return int(self.summary().get("queue_info", {}).get(key or self.key, {}).get("free", 0))
        except Exception:  # noqa: BLE001 - not up yet
            return 0

    def wait_free(self, n: int, timeout: float = 60.0, key: str | None = None) -> None:
        deadline = time.monotonic() + timeout
        while self.free(key) < n:
            dead = [p.args for p in self.procs if p.poll() is not None and p.pid not in self.killed]
            assert not dead, f"a tracker or server exited: {dead}\n{self.logs()}"
            assert time.monotonic() < deadline, f"the RPC servers did not register with the tracker\n{self.logs()}"
            time.sleep(0.3)

    def in_session(self, key: str | None = None, started_within: float | None = None) -> list[int]:
        """The servers serving a session now (TVM's server runs its loop in a child process, which forks
        a child of its own per session); with `started_within`, only sessions that began that many
        seconds ago or less (a kill then surely lands while the client waits on it)."""
        import psutil

        busy = []
        now = time.time()
        for n, p in enumerate(self.servers):
            try:
                if key not in (None, self.keys[n]) or p.poll() is not None:
                    continue
                sessions = [g for c in psutil.Process(p.pid).children() for g in c.children()]
                if started_within is not None:
                    sessions = [g for g in sessions if now - g.create_time() <= started_within]
                if sessions:
                    busy.append(n)
            except psutil.Error:
                continue
        return busy

    def kill(self, n: int) -> None:
        self.killed.add(self.servers[n].pid)
        os.killpg(self.servers[n].pid, signal.SIGKILL)

    def stop(self, n: int) -> None:
        os.killpg(self.servers[n].pid, signal.SIGSTOP)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.folder.glob("*.log")))

    def close(self) -> None:
        kill_groups(self.procs)
