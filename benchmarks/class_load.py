"""Load test of the class server: a class of students handing in over real HTTP; prints JSON and a table.

    .venv/bin/python benchmarks/class_load.py [--students 300] [--per-student 5] [--minutes 10]
        [--hostile 0.333] [--workers N] [--drain-minutes M] [--seed 1] [--out FILE.json]

Starts ``mlc-lab class serve`` on 127.0.0.1 (the class lab, tests/labs/classroom: mm_relu at 64x64
on the CPU) with a generated roster, its default graders (one per core) unless ``--workers``, and
its own empty ``TMPDIR``. Each student is a thread handing in ``per-student`` times at random
moments of the window (1,500 hand-ins over 10 minutes by default), waiting for each verdict as the
client does (one long poll of 300 s, then asking every 10 s); a third of the students keep a leaderboard open
(asked every 3 s). A share ``hostile`` of the students hand in what a class server must survive,
in three equal parts:

- slow: schedules that take the grader half a minute or more (a fully unrolled row: a kernel whose
  build runs past the timing's limit, and long chains of splits);
- attacks in traces: the exploits of tests/exploits (a fork bomb, a daemon, ctypes calls into the
  kernel, a TVM build) and tests/labs/grading/submissions/hostile_trace.py written as
  ``apply_trace`` functions, an annotation that would add C code, brackets nested past the
  parser's limit, bytes that are no text: stored, and refused by the grader, never run;
- hostile HTTP: the same exploits as schedule files (refused at the door), bodies over the limit,
  JSON nested past any parser, chunked bodies, ids past any submission, a connection that sends
  half a request and waits, and a client that hangs up before its verdict (its hand-in is graded
  all the same).

When the window closes it waits until every stored hand-in is graded (or ``--drain-minutes``
pass), stops the server and checks what must hold: every request answered (only the deliberate
hang-ups excepted), every stored hand-in graded, nothing left in the server's temporary folder or
its grading folder, no grading process left. Figures: requests by answer, verdict times of normal
hand-ins (p50, p95, max: from hand-in to verdict, on the server's clock), the queue over time, each
kind's grading time, throughput, the server's memory, the load average, and how many graders the
class needs to keep up (the grader-seconds the hand-ins need over the window's seconds).
"""

from __future__ import annotations

import argparse
import ast
import csv
import http.client
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LAB = ROOT / "tests" / "labs" / "classroom"
ASSIGNMENT = LAB / "assignment.toml"
EXPLOITS = ROOT / "tests" / "exploits"
HOSTILE_TRACE = ROOT / "tests" / "labs" / "grading" / "submissions" / "hostile_trace.py"
BOARD_EVERY_S = 3.0  # an open leaderboard widget's refresh
POLL_S = 10.0  # how often a student whose long poll ran out asks for the verdict again
LONG_POLL_S = 300.0  # what the client waits for a verdict in one request (mlc_lab.classroom.client.submit's)


# ----------------------------------------------------------------------------------------- hand-ins


def _trace(*steps: tuple) -> str:
    import mlc_lab
    from mlc_lab.core.session import Session

    s = Session(mlc_lab.load(str(LAB / "mm_relu.py")))
    for primitive, *args in steps:
        s.apply(primitive, *args)
    return s.submission()


def _splits(n: int) -> str:
    lines = ["from tvm import s_tir", "", "def apply_trace(sch: s_tir.Schedule) -> None:"]
    lines += ["    b0 = sch.get_sblock(name='Y', func_name='main')", "    l1, l2, l3 = sch.get_loops(block=b0)"]
    loop = "l3"
    for i in range(n):
        lines.append(f"    o{i}, i{i} = sch.split(loop={loop}, factors=[1, None])")
        loop = f"i{i}"
    return "\n".join(lines) + "\n"


def _exploits() -> dict[str, str]:
    """The code of tests/exploits (module constants that hold code), read from the syntax tree, never run."""
    out = {}
    for path in sorted(EXPLOITS.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(value, str) and "\n" in value and "import" in value:
                    out[f"{path.stem[5:]}.{node.targets[0].id}"] = value
    return out


def hand_ins(quick: bool = False) -> dict[str, list[tuple[str, str]]]:
    """Per kind, ``(name, text)`` of what its students hand in (``quick``: no build of minutes among the slow)."""
    par, split, vec = ("parallel", "Y/i"), ("split", "Y/j", [None, 8]), ("vectorize", "Y/j_1")
    normal = [
        ("parallel.py", _trace(par)),
        ("vectorized.py", _trace(split, vec)),
        ("both.py", _trace(par, split, vec)),
        ("both_16.py", _trace(par, ("split", "Y/j", [None, 16]), vec)),
        ("both_4.py", _trace(par, ("split", "Y/j", [None, 4]), vec)),
    ]
    slow = [("splits.py", _splits(120 if quick else 450))]  # 450: about 25 s of replay and checks
    if not quick:
        slow += [
            ("unrolled.py", _trace(par, ("unroll", "Y/j"), ("unroll", "Y/k"))),
            ("unrolled_all.py", _trace(("unroll", "Y/i"), ("unroll", "Y/j"))),
        ]
    codes = _exploits()
    attack_traces = [
        (f"{name}.py", "from tvm import s_tir\n\ndef apply_trace(sch: s_tir.Schedule) -> None:\n"
         + "".join(f"    {line}\n" for line in code.splitlines()))
        for name, code in codes.items()
    ]  # fmt: skip
    attack_traces += [
        ("hostile_trace.py", HOSTILE_TRACE.read_text().replace('"gemm"', '"Y"')),
        ("annotate.py", "b0 = sch.get_sblock('Y')\nsch.annotate(b0, 'pragma_import_c', 'int x;')\n"),
        ("nested.py", "b0 = sch.get_sblock(" + "(" * 400 + "'Y'" + ")" * 400 + ")\n"),
        ("bytes.txt", "\x00\x01\x02 \ufffd\x7f" * 100),
    ]
    schedule_files = [
        (f"{name}_schedule.py", "def schedule(sch):\n" + "".join(f"    {line}\n" for line in code.splitlines()))
        for name, code in codes.items()
    ]
    return {"normal": normal, "slow": slow, "attack": attack_traces, "schedule": schedule_files}


# ----------------------------------------------------------------------------------------- HTTP


class Log:
    """Every request's outcome, from every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: Counter = Counter()  # (what, status or "no answer: ...")
        self.unanswered: list[str] = []
        self.submissions: list[dict] = []  # {"sid", "kind", "student", "t_sent", "t_verdict"}
        self.slowloris_closed_s: list[float] = []

    def note(self, what: str, status: object, expected_answer: bool = True) -> None:
        with self.lock:
            self.requests[(what, str(status))] += 1
            if expected_answer and not isinstance(status, int):
                self.unanswered.append(f"{what}: {status}")


def request(host: str, port: int, method: str, path: str, token: str | None, body: bytes | None = None,
            headers: dict | None = None, timeout: float = 60.0) -> tuple[int, dict]:  # fmt: skip
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, {"raw": data[:200].decode("latin-1")}
    finally:
        conn.close()


class Class:
    """The server under test and its students' identities."""

    def __init__(self, host: str, port: int, tokens: dict[str, str], log: Log) -> None:
        self.host, self.port, self.tokens, self.log = host, port, tokens, log

    def call(self, what: str, method: str, path: str, token: str | None, body: bytes | None = None, **kw):
        try:
            status, answer = request(self.host, self.port, method, path, token, body, **kw)
        except (OSError, http.client.HTTPException) as exc:
            self.log.note(what, f"no answer: {type(exc).__name__}")
            return None, {}
        self.log.note(what, status)
        return status, answer

    def hand_in(self, student: str, kind: str, name: str, text: str) -> None:
        """Hand in and wait for the verdict as the client does; three of one's own waiting: wait, hand in again."""
        token = self.tokens[student]
        body = json.dumps({"trace": text, "file": name, "wait": LONG_POLL_S}).encode()
        sent = time.time()
        while True:
            status, v = self.call("submit", "POST", "/api/submit", token, body, timeout=LONG_POLL_S + 60)
            if status == 400 and "waiting to be graded" in v.get("error", ""):
                time.sleep(5.0)  # three of one's own waiting: a student submits again once one is in
                continue
            break
        if status != 200:
            return
        entry = {"sid": v["id"], "kind": kind, "student": student, "t_sent": sent, "t_verdict": None}
        with self.log.lock:
            self.log.submissions.append(entry)
        while v.get("status") != "graded":
            time.sleep(POLL_S)
            status, got = self.call("verdict", "GET", f"/api/submissions/{entry['sid']}", token)
            v = got if status == 200 else v
        entry["t_verdict"] = time.time()

    def junk(self, student: str, how: int, schedule_files: list[tuple[str, str]], normal_text: str) -> None:
        """One hostile HTTP interaction (``how``: which of eight): each must be answered (or closed)."""
        token = self.tokens[student]
        i = how
        if how == 0:
            name, text = schedule_files[i % len(schedule_files)]
            body = json.dumps({"trace": text, "file": name}).encode()
            self.call("junk: schedule file", "POST", "/api/submit", token, body)
        elif how == 1:
            self.call("junk: 1 MB body", "POST", "/api/submit", token, json.dumps({"trace": "x" * 1_000_000}).encode())
        elif how == 2:
            self.call(
                "junk: nested body", "POST", "/api/submit", token, b'{"trace": ' + b"[" * 60_000 + b"]" * 60_000 + b"}"
            )
        elif how == 3:
            self.call("junk: huge id", "GET", "/api/submissions/" + "9" * 40, token)
        elif how == 4:
            self._raw(
                "junk: chunked",
                b"POST /api/submit HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            )
        elif how == 5:
            self._slowloris()
        elif how == 6:
            self._hang_up(token, normal_text)
        else:
            self.call("junk: no token", "GET", "/api/leaderboard", None)

    def _raw(self, what: str, data: bytes) -> None:
        try:
            with socket.create_connection((self.host, self.port), timeout=60) as s:
                s.sendall(data)
                answer = s.recv(65536)
            self.log.note(
                what, int(answer.split()[1]) if answer.startswith(b"HTTP/") else f"no answer: {answer[:30]!r}"
            )
        except OSError as exc:
            self.log.note(what, f"no answer: {type(exc).__name__}")

    def _slowloris(self) -> None:
        """Half a request, then nothing: the server must let the connection go (its timeout)."""
        started = time.monotonic()
        try:
            with socket.create_connection((self.host, self.port), timeout=120) as s:
                s.sendall(b"GET /api/leaderboard HTTP/1.1\r\nHost: x\r\n")
                s.recv(65536)  # the server closes it (b"") or answers 408
            with self.log.lock:
                self.log.slowloris_closed_s.append(time.monotonic() - started)
            self.log.note("junk: half a request", "closed by the server", expected_answer=False)
        except OSError as exc:
            self.log.note("junk: half a request", f"no answer: {type(exc).__name__}")

    def _hang_up(self, token: str, text: str) -> None:
        """A real hand-in whose client goes before its verdict: stored, and graded all the same."""
        body = json.dumps({"trace": text, "file": "hung_up.py", "wait": 60}).encode()
        head = (
            f"POST /api/submit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        try:
            with socket.create_connection((self.host, self.port), timeout=10) as s:
                s.sendall(head + body)
                time.sleep(0.5)
            self.log.note("junk: hung up before the verdict", "hung up", expected_answer=False)
        except OSError as exc:
            self.log.note("junk: hung up before the verdict", f"no answer: {type(exc).__name__}")


# ----------------------------------------------------------------------------------------- the run


def start_server(root: Path, students: int, workers: int | None, port: int) -> tuple[subprocess.Popen, dict, str]:
    roster = root / "roster.csv"
    with open(roster, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "name"])
        w.writerows((f"s{i:03d}", f"Student {i:03d}") for i in range(students))
    (root / "tmp").mkdir()
    cmd = [sys.executable, "-m", "mlc_lab.cli", "class", "serve", str(ASSIGNMENT), "--dir", str(root / "class")]
    cmd += ["--roster", str(roster), "--port", str(port)] + (["--workers", str(workers)] if workers else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(root / "tmp")}
    log = open(root / "server.log", "w")  # noqa: SIM115  (closed by the caller with the server)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=log, text=True, env=env, start_new_session=True)
    lines: list[str] = []
    while not any("teacher: mlc_lab.class_dashboard" in ln for ln in lines):
        line = proc.stderr.readline()  # type: ignore[union-attr]
        if not line:
            raise SystemExit("the class server did not start:\n" + "".join(lines))
        lines.append(line)
    threading.Thread(target=lambda: shutil.copyfileobj(proc.stderr, log), daemon=True).start()  # type: ignore[arg-type]
    made = next(ln for ln in lines if "tokens in" in ln).split("tokens in ", 1)[1].split(":")[0]
    with open(made, newline="") as fh:
        tokens = {r["student_id"]: r["token"] for r in csv.DictReader(fh)}
    teacher = next(ln for ln in lines if "teacher's token:" in ln).rsplit(":", 1)[1].strip()
    return proc, tokens, teacher


class Monitor(threading.Thread):
    """Every 2 s: the hand-ins waiting, the server's memory (its whole tree) and the load average."""

    def __init__(self, db: Path, pid: int) -> None:
        super().__init__(daemon=True)
        self.db, self.pid, self.samples, self.done = db, pid, [], threading.Event()
        self.started = time.time()

    def run(self) -> None:
        import psutil

        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        while not self.done.wait(2.0):
            try:
                (waiting,) = conn.execute("SELECT COUNT(*) FROM submissions WHERE status != 'graded'").fetchone()
                root = psutil.Process(self.pid)
                rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
                threads = root.num_threads()
            except (sqlite3.Error, psutil.Error):
                continue
            self.samples.append(
                {"t": time.time() - self.started, "waiting": waiting, "rss_mb": rss / 2**20, "threads": threads,
                 "load": os.getloadavg()[0]}
            )  # fmt: skip
        conn.close()


def student(cls: Class, sid: str, kind: str, moments: list[float], start: float, kinds: dict, rng: random.Random):
    """A student's hand-ins, each at its moment whatever became of the one before (the command line and
    ``Session.submit`` do not wait for a verdict to hand in again): each in a thread of its own."""
    normal = kinds["normal"]
    offset = rng.randrange(8)
    actions = []
    for i, at in enumerate(moments):
        time.sleep(max(0.0, start + at - time.time()))
        if kind == "normal":
            name, text = normal[min(i, len(normal) - 1)]
            act = threading.Thread(target=cls.hand_in, args=(sid, "normal", name, text), daemon=True)
        elif kind in ("slow", "attack"):
            name, text = rng.choice(kinds[kind])
            act = threading.Thread(target=cls.hand_in, args=(sid, kind, name, text), daemon=True)
        else:
            how = kinds["junk"][(i + offset) % len(kinds["junk"])]
            act = threading.Thread(target=cls.junk, args=(sid, how, kinds["schedule"], normal[2][1]), daemon=True)
        act.start()
        actions.append(act)
    for act in actions:
        act.join()


def watcher(cls: Class, token: str, until: float) -> None:
    while time.time() < until:
        cls.call("leaderboard", "GET", "/api/leaderboard", token)
        time.sleep(BOARD_EVERY_S)


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    kinds: dict = hand_ins(args.quick)
    # the eight hostile requests (quick: all but the half request, which waits out the server's 30 s)
    kinds["junk"] = [0, 1, 2, 3, 4, 6, 7] if args.quick else list(range(8))
    root = Path(tempfile.mkdtemp(prefix="mlc_lab_class_load_"))
    load_before = os.getloadavg()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc, tokens, teacher = start_server(root, args.students, args.workers, port)
    log = Log()
    cls = Class("127.0.0.1", port, tokens, log)
    ids = sorted(tokens)
    rng.shuffle(ids)
    hostile = round(args.students * args.hostile)
    roles = {}
    for i, sid in enumerate(ids):
        roles[sid] = ("slow", "attack", "http")[i % 3] if i < hostile else "normal"
    window = args.minutes * 60
    monitor = Monitor(root / "class" / "class.sqlite", proc.pid)
    monitor.start()
    start = time.time() + 1.0

    def moments(sid: str) -> list[float]:  # quick: each hostile-HTTP student tries every kind of request
        n = max(args.per_student, len(kinds["junk"])) if args.quick and roles[sid] == "http" else args.per_student
        return sorted(rng.uniform(0, window) for _ in range(n))

    threads = [
        threading.Thread(
            target=student,
            args=(cls, sid, roles[sid], moments(sid), start, kinds, random.Random(rng.random())),
            daemon=True,
        )
        for sid in ids
    ]
    normal_ids = [s for s in ids if roles[s] == "normal"]
    threads += [
        threading.Thread(target=watcher, args=(cls, tokens[s], start + window), daemon=True)
        for s in normal_ids[: len(ids) // 3]
    ]
    for th in threads:
        th.start()
    deadline = start + window + (args.drain_minutes * 60 if args.drain_minutes else 10 * 24 * 3600)
    for th in threads:
        th.join(timeout=max(0.0, deadline - time.time()))
    window_end_waiting = next((s["waiting"] for s in reversed(monitor.samples) if s["t"] <= window + 1), None)
    finished = time.time()
    summary = cls.call("summary", "GET", "/api/summary", teacher)[1]
    monitor.done.set()
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=120)
    return figures(args, root, log, monitor, roles, start, finished, window, window_end_waiting, summary, load_before)


# ----------------------------------------------------------------------------------------- figures


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _left_behind(root: Path) -> dict:
    import psutil

    from mlc_lab.classroom import reaper

    marked = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get(reaper.MARK, "").startswith(str((root / "class").resolve())):
                marked.append(p.pid)
        except psutil.Error:
            continue
    grading = root / "class" / "grading"
    return {
        "temporary_folder": sorted(p.name for p in (root / "tmp").iterdir()),
        "grading_folder": sorted(p.name for p in grading.iterdir()) if grading.exists() else [],
        "grading_processes": marked,
    }


def figures(args, root, log, monitor, roles, start, finished, window, window_end_waiting, summary, load_before) -> dict:
    db = sqlite3.connect(root / "class" / "class.sqlite")
    rows = db.execute("SELECT id, status, submitted_at, graded_at, result FROM submissions").fetchall()
    db.close()
    kind_of = {e["sid"]: e["kind"] for e in log.submissions}
    by_kind: dict[str, dict] = {}
    verdict_s, grading = {}, {}
    for sid, status, at, graded_at, result in rows:
        kind = kind_of.get(sid, "hung up")
        k = by_kind.setdefault(kind, Counter())
        k["stored"] += 1
        k["graded"] += status == "graded"
        if status == "graded":
            r = json.loads(result or "{}")
            verdict_s.setdefault(kind, []).append(graded_at - at)
            if r.get("grading_s") is not None:
                grading.setdefault(kind, []).append(float(r["grading_s"]))
            k[f"status {r.get('status', 'graded')}"] += 1
    normal = verdict_s.get("normal", [])
    need = sum(sum(v) for v in grading.values())
    graded = sum(k["graded"] for k in by_kind.values())
    left = _left_behind(root)
    shutil.rmtree(root, ignore_errors=True)
    from mlc_lab._threads import cpu_name, usable_cores

    return {
        "config": {
            k: getattr(args, k) for k in ("students", "per_student", "minutes", "hostile", "workers", "seed", "quick")
        },
        "machine": {
            "cpu": cpu_name(),
            "cores": usable_cores(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "roles": dict(Counter(roles.values())),
        "requests": {
            "total": sum(log.requests.values()),
            "by_answer": {f"{w} -> {s}": n for (w, s), n in sorted(log.requests.items())},
            "unanswered": log.unanswered[:20],
            "unanswered_count": len(log.unanswered),
            "half_requests_closed_after_s": _pct(log.slowloris_closed_s, 1.0),
        },
        "submissions": {"stored": len(rows), "graded": graded, "by_kind": {k: dict(v) for k, v in by_kind.items()}},
        "verdict_s": {
            kind: {"n": len(v), "p50": _pct(v, 0.5), "p95": _pct(v, 0.95), "max": max(v)}
            for kind, v in verdict_s.items()
        },
        "normal_p95_s": _pct(normal, 0.95),
        "grading_s": {k: {"n": len(v), "mean": statistics.fmean(v), "max": max(v)} for k, v in grading.items() if v},
        "queue": {
            "max_waiting": max((s["waiting"] for s in monitor.samples), default=0),
            "waiting_when_the_window_closed": window_end_waiting,
            "drained_after_window_s": round(finished - start - window, 1),
        },
        "throughput_per_min": round(graded / max(1e-9, (finished - start) / 60), 1),
        "graders_needed": round(need / window, 2),
        "server": {
            "max_rss_mb": round(max((s["rss_mb"] for s in monitor.samples), default=0)),
            "max_threads": max((s["threads"] for s in monitor.samples), default=0),
        },
        "max_load": max((s["load"] for s in monitor.samples), default=None),
        "left_behind": left,
        "summary_students": summary.get("students"),
        "queue_over_time": [
            (round(s["t"]), s["waiting"]) for s in monitor.samples[:: max(1, len(monitor.samples) // 60)]
        ],
    }


def holds(fig: dict) -> list[str]:
    """What must hold, as sentences of what did not."""
    bad = []
    if fig["requests"]["unanswered_count"]:
        bad.append(f"{fig['requests']['unanswered_count']} requests got no answer: {fig['requests']['unanswered'][:3]}")
    if fig["submissions"]["graded"] != fig["submissions"]["stored"]:
        bad.append(f"{fig['submissions']['stored'] - fig['submissions']['graded']} stored hand-ins were not graded")
    for where, what in fig["left_behind"].items():
        if what:
            bad.append(f"left behind in the {where.replace('_', ' ')}: {what[:5]}")
    return bad


def table(fig: dict) -> str:
    v = fig["verdict_s"]
    lines = [
        f"class load: {fig['config']['students']} students x {fig['config']['per_student']} hand-ins in "
        f"{fig['config']['minutes']} min ({fig['roles']}), {fig['machine']['cores']} cores ({fig['machine']['cpu']}), "
        f"load {fig['machine']['load_before'][0]:.1f} before, {fig['max_load']} at most",
        f"requests {fig['requests']['total']}, unanswered {fig['requests']['unanswered_count']}; hand-ins stored "
        f"{fig['submissions']['stored']}, graded {fig['submissions']['graded']}",
        f"{'kind':<10}{'n':>6}{'p50 s':>9}{'p95 s':>9}{'max s':>9}{'grading s':>11}",
    ]
    for kind, s in v.items():
        g = fig["grading_s"].get(kind, {})
        lines.append(f"{kind:<10}{s['n']:>6}{s['p50']:>9.1f}{s['p95']:>9.1f}{s['max']:>9.1f}{g.get('mean', 0):>11.2f}")
    q = fig["queue"]
    lines.append(
        f"queue: at most {q['max_waiting']} waiting, {q['waiting_when_the_window_closed']} when the window closed, "
        f"drained {q['drained_after_window_s']} s after; {fig['throughput_per_min']} graded/min; graders needed "
        f"{fig['graders_needed']} ({fig['graders_needed'] / fig['machine']['cores']:.2f} per core of this machine); "
        f"server at most {fig['server']['max_rss_mb']} MB, {fig['server']['max_threads']} threads"
    )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=300)
    p.add_argument("--per-student", type=int, default=5)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--hostile", type=float, default=1 / 3, help="the share of students handing in slow or hostile work")
    p.add_argument("--workers", type=int, default=None, help="the server's graders (default: its own, one per core)")
    p.add_argument("--drain-minutes", type=float, default=None, help="stop waiting for the queue after this long")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: no kernel whose build runs past the timing's limit among the slow hand-ins, "
        "no half request (it waits out the server's 30 s); the default suite's version",
    )
    p.add_argument("--out", help="also write the JSON here")
    args = p.parse_args()
    fig = run(args)
    fig["holds"] = holds(fig)
    text = json.dumps(fig, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    print(table(fig), file=sys.stderr)
    print("holds" if not fig["holds"] else "DOES NOT HOLD: " + "; ".join(fig["holds"]), file=sys.stderr)
    return 0 if not fig["holds"] else 1


if __name__ == "__main__":
    sys.exit(main())
