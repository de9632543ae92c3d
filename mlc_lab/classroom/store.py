"""A class's submissions in SQLite (``DIR/class.sqlite``): every hand-in, its verdict, and the figures
the leaderboard and the teacher's summary are made of. Plain data in and out; no TVM, no HTTP.

A submission is written before it is graded (status ``queued``), so a server stopped while grading
finds it again on restart and grades it then: a restart loses nothing. A submission's ``name`` is
who handed it in: the student id (from the roster or JupyterHub), or the pseudonym typed in a
demo (``--open``) server; ``client_id`` makes a retried hand-in the same submission. The roster
(``students``: tokens kept as SHA-256 hashes), the teacher's token (its hash too) and the grading
children alive (``children``: what a restarted server must kill and remove) are kept here too.

The folder is the class's alone: made (or set) 0700, the database and its WAL files 0600, since they
hold the roster and every hand-in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import statistics
import threading
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    task TEXT,
    trace TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'queued',
    score REAL,
    max_score REAL,
    passed_tasks TEXT,
    passing INTEGER,
    latency_ms REAL,
    error TEXT,
    result TEXT,
    graded_at REAL
);
CREATE INDEX IF NOT EXISTS submissions_by_name ON submissions (name);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS students (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    pseudonym TEXT,
    token_hash TEXT UNIQUE,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS children (
    pid INTEGER PRIMARY KEY,
    started REAL NOT NULL,
    folder TEXT NOT NULL,
    submission INTEGER
);
"""
# columns added since the first class server (a class folder of an older server gains them on open)
ADDED_COLUMNS = {"client_id": "TEXT", "file": "TEXT"}

STUCK_AFTER = 3  # failed submissions at one task before the teacher's view calls a student stuck
# a timing taken on a busy machine is trusted to within this share of itself (the band of a tie)
BUSY_BAND = 0.2


def new_token(nbytes: int) -> str:
    """A fresh random token that never begins with ``-`` (typed after ``--token`` on a command
    line, argparse would take it for an option: one token in 64 would not work)."""
    while True:
        value = secrets.token_urlsafe(nbytes)
        if not value.startswith("-"):
            return value


def token_hash(token: str) -> str:
    """What is kept of a student's token: its SHA-256 (a token is 32 random bytes; no salt needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Store:
    """The class database. Thread-safe (one connection, one lock): the HTTP handlers and the grading
    thread share it."""

    def __init__(self, directory: str | Path, tasks: list[dict]) -> None:
        # absolute: the grading children run in folders of their own, and a relative path would name
        # another file there (a relative --dir failed every submission)
        self.dir = Path(directory).resolve()
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)  # the roster and every hand-in: the teacher's alone
        self.path = self.dir / "class.sqlite"
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # SQLite gives its WAL files this mode too
        self.tasks = list(tasks)  # [{"name", "title", "points"}] in the assignment's order
        self._lock = threading.Lock()
        self._version = 0  # bumped by every verdict and timing stored: the key of the cached figures
        self._cache: tuple[int, list[dict]] | None = None
        self._boards: dict[tuple, list[dict]] = {}  # (version, labels) -> ranked rows
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(submissions)")}
        for column, kind in ADDED_COLUMNS.items():
            if column not in columns:  # a class folder of an older server
                self._db.execute(f"ALTER TABLE submissions ADD COLUMN {column} {kind}")
        self._db.execute("CREATE UNIQUE INDEX IF NOT EXISTS submissions_by_client ON submissions (name, client_id)")
        self.private()

    def private(self) -> None:
        """The database and its WAL files readable by the server's user only (an older folder's too)."""
        for suffix in ("", "-wal", "-shm", "-journal"):
            path = self.path.with_name(self.path.name + suffix)
            if path.exists():
                os.chmod(path, 0o600)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- the teacher's token ----------------------------------------------------------------------

    def teacher_token(self, renew: bool = False) -> str | None:
        """A new teacher's token when there is none yet (or ``renew``), else None: only its hash is
        kept (as the students' are), so a restart keeps the dashboard working with the token printed
        when it was made, and nobody reads it from the folder. A folder of an older server, which kept
        the token itself, keeps it working: its hash replaces it, and it is returned this once."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key='token'").fetchone()
            if row and not renew:
                self._db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('teacher_hash', ?)", (token_hash(row[0]),)
                )
                self._db.execute("DELETE FROM meta WHERE key='token'")
                return str(row[0])
            if not renew and self._db.execute("SELECT 1 FROM meta WHERE key='teacher_hash'").fetchone():
                return None
            value = new_token(18)
            self._db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('teacher_hash', ?)", (token_hash(value),)
            )
            self._db.execute("DELETE FROM meta WHERE key='token'")
            return value

    def is_teacher(self, token: str) -> bool:
        """Whether ``token`` is the teacher's (compared by hash, in constant time)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key='teacher_hash'").fetchone()
        return bool(row and token) and hmac.compare_digest(token_hash(token), row[0])

    # --- the roster -------------------------------------------------------------------------------

    def sync_roster(self, students: list) -> None:
        """Take a roster (``roster.Student``s): new students are added (numbered in the roster's
        order), names and approved pseudonyms follow the file, students no longer listed are
        turned away (their submissions stay)."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("UPDATE students SET active=0")
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('roster', '1')")
            for st in students:
                self._db.execute(
                    "INSERT INTO students (id, name, pseudonym) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE "
                    "SET name=excluded.name, pseudonym=excluded.pseudonym, active=1",
                    (st.id, st.name, st.pseudonym),
                )

    def add_student(self, sid: str, name: str) -> None:
        """One student known from elsewhere (a JupyterHub user, without a roster): no pseudonym yet."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO students (id, name) VALUES (?, ?)", (sid, name))

    def has_roster(self) -> bool:
        """Whether a roster was given (once is enough: it is kept here)."""
        with self._lock:
            return self._db.execute("SELECT 1 FROM meta WHERE key='roster'").fetchone() is not None

    def names(self) -> list[str]:
        """Everyone who handed anything in (student ids; typed names on a demo server)."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT DISTINCT name FROM submissions")]

    def issue_tokens(self, ids: list[str] | None = None) -> list[tuple[str, str, str]]:
        """New tokens ``(student id, name, token)``: for the students given (a lost token is
        replaced), or else for every active student who has none. Only their hashes are kept."""
        out = []
        with self._lock, self._db:
            self._db.execute("BEGIN")
            if ids is None:
                rows = self._db.execute(
                    "SELECT id, name FROM students WHERE active=1 AND token_hash IS NULL ORDER BY seq"
                ).fetchall()
            else:
                rows = []
                for sid in ids:
                    row = self._db.execute("SELECT id, name FROM students WHERE id=? AND active=1", (sid,)).fetchone()
                    if row is None:
                        raise KeyError(sid)
                    rows.append(row)
            for sid, name in rows:
                token = new_token(24)
                self._db.execute("UPDATE students SET token_hash=? WHERE id=?", (token_hash(token), sid))
                out.append((sid, name, token))
        return out

    def student_for_token(self, token: str) -> str | None:
        """The active student whose token this is, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id FROM students WHERE token_hash=? AND active=1", (token_hash(token),)
            ).fetchone()
        return row[0] if row else None

    def student_known(self, sid: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM students WHERE id=? AND active=1", (sid,)).fetchone() is not None

    def labels(self, teacher: bool = False) -> dict[str, str]:
        """How each student is named: on the leaderboard their approved pseudonym or "student N";
        for the teacher, their name and id."""
        with self._lock:
            rows = self._db.execute("SELECT seq, id, name, pseudonym FROM students").fetchall()
        if teacher:
            return {sid: f"{name} ({sid})" for _seq, sid, name, _p in rows}
        return {sid: pseudonym or f"student {seq}" for seq, sid, _name, pseudonym in rows}

    # --- the grading children ---------------------------------------------------------------------

    def child_started(self, pid: int, started: float, folder: str, submission: int) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO children (pid, started, folder, submission) VALUES (?, ?, ?, ?)",
                (pid, started, folder, submission),
            )

    def child_ended(self, pid: int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM children WHERE pid=?", (pid,))

    def children(self) -> list[tuple[int, float, str]]:
        """``(pid, start time, folder)`` of each grading child recorded and not seen to end."""
        with self._lock:
            return [tuple(r) for r in self._db.execute("SELECT pid, started, folder FROM children")]

    # --- submissions ------------------------------------------------------------------------------

    def add(
        self, name: str, task: str | None, trace: str, client_id: str | None = None, file: str | None = None
    ) -> int:
        """Store a hand-in (``file``: what the student called it); with a ``client_id`` already used by
        ``name``, the id stored then."""
        with self._lock:
            try:
                cur = self._db.execute(
                    "INSERT INTO submissions (name, task, trace, submitted_at, client_id, file) VALUES (?, ?, ?, ?, ?, ?)",
                    (name, task, trace, time.time(), client_id, file),
                )
                return int(cur.lastrowid)
            except sqlite3.IntegrityError:  # the same intent sent twice at once: the one stored
                row = self._db.execute(
                    "SELECT id FROM submissions WHERE name=? AND client_id=?", (name, client_id)
                ).fetchone()
                return int(row[0])

    def find(self, name: str, client_id: str) -> tuple[int, str, str | None] | None:
        """``(id, trace, task)`` of the submission ``name`` sent under ``client_id``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, trace, task FROM submissions WHERE name=? AND client_id=?", (name, client_id)
            ).fetchone()
        return (int(row[0]), row[1], row[2]) if row else None

    def status(self, sid: int) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT status FROM submissions WHERE id=?", (sid,)).fetchone()
        return row[0] if row else None

    def owner(self, sid: int) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT name FROM submissions WHERE id=?", (sid,)).fetchone()
        return row[0] if row else None

    def submitted_since(self, name: str, since: float) -> int:
        with self._lock:
            return int(
                self._db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE name=? AND submitted_at >= ?", (name, since)
                ).fetchone()[0]
            )

    def history(self, name: str, labels: dict[str, str] | None = None) -> list[dict]:
        """Every submission of one student, oldest first, as ``verdict`` gives each."""
        with self._lock:
            ids = [r[0] for r in self._db.execute("SELECT id FROM submissions WHERE name=? ORDER BY id", (name,))]
        board = self._board(labels)
        return [v for v in (self.verdict(i, labels, board) for i in ids) if v is not None]

    def waiting(self, name: str) -> int:
        """How many of this student's submissions wait to be graded."""
        with self._lock:
            return int(
                self._db.execute(
                    "SELECT COUNT(*) FROM submissions WHERE name=? AND status != 'graded'", (name,)
                ).fetchone()[0]
            )

    def pending(self) -> list[int]:
        """Submissions not graded yet (also those whose grading a stopped server left unfinished)."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM submissions WHERE status != 'graded' ORDER BY id")]

    def trace_of(self, sid: int) -> tuple[str, str | None]:
        trace, task, _file = self.hand_in(sid)
        return trace, task

    def hand_in(self, sid: int) -> tuple[str, str | None, str | None]:
        """``(trace, task, file)`` of a submission: what the student sent, and what they called it."""
        with self._lock:
            row = self._db.execute("SELECT trace, task, file FROM submissions WHERE id=?", (sid,)).fetchone()
        if row is None:
            raise KeyError(sid)
        return row[0], row[1], row[2]

    def waiting_list(self) -> list[tuple[int, str]]:
        """``(id, student)`` of every submission not graded yet, oldest first (what a restart grades)."""
        with self._lock:
            return [
                (int(r[0]), str(r[1]))
                for r in self._db.execute("SELECT id, name FROM submissions WHERE status != 'graded' ORDER BY id")
            ]

    def record(self, sid: int, result: dict) -> None:
        """Store a verdict: ``result`` is ``GradeResult.to_json()`` (plus ``latency_ms`` from the
        class's timing), or ``{"error": ...}`` when the grader could not grade it at all. A refused
        hand-in is told apart here: an attack or a mistake (``result["refusal"]``, for the teacher)."""
        trace, task, _file = self.hand_in(sid)
        tasks = result.get("tasks") or []
        passed = [t["name"] for t in tasks if t.get("passed")]
        wanted = [task] if task else [t["name"] for t in self.tasks]
        passing = (
            bool(tasks)
            and not result.get("error")
            and all(n in passed for n in wanted)
            and result.get("correct") is not False
        )
        if result.get("status") == "refused" and "refusal" not in result:
            from mlc_lab.classroom.refusals import refusal_kind

            kind, why = refusal_kind(trace, str(result.get("error") or ""))
            result = {**result, "refusal": {"kind": kind, "why": why}}
        with self._lock:
            self._db.execute(
                "UPDATE submissions SET status='graded', score=?, max_score=?, passed_tasks=?, passing=?, "
                "latency_ms=?, error=?, result=?, graded_at=? WHERE id=?",
                (
                    float(result.get("score") or 0.0),
                    float(result.get("max_score") or self.max_score),
                    json.dumps(passed),
                    int(passing),
                    result.get("latency_ms"),
                    result.get("error"),
                    json.dumps(result),
                    time.time(),
                    sid,
                ),
            )
            self._changed()

    def retimed(self, sid: int, latency_ms: float, timing: dict) -> None:
        """A passing submission timed again (interleaved with the one it was tied with, on an idle
        server): its latency and timing replace those of its first timing, which ``timing["first"]`` keeps."""
        with self._lock:
            row = self._db.execute("SELECT result, latency_ms FROM submissions WHERE id=?", (sid,)).fetchone()
            if row is None:
                return
            data = json.loads(row[0] or "{}")
            before = data.get("timing") or {}
            first = before.get("first") or {"latency_ms": row[1], **{k: before.get(k) for k in _TIMING_KEYS[:3]}}
            data["timing"] = {**before, **timing, "first": first}
            data["latency_ms"] = latency_ms
            self._db.execute(
                "UPDATE submissions SET latency_ms=?, result=? WHERE id=?", (latency_ms, json.dumps(data), sid)
            )
            self._changed()

    def _changed(self) -> None:
        """A verdict or a timing changed: the figures made of them are made again (caller holds the lock)."""
        self._version += 1

    @property
    def max_score(self) -> float:
        return float(sum(t.get("points", 0) for t in self.tasks))

    def verdict(self, sid: int, labels: dict[str, str] | None = None, board: list[dict] | None = None) -> dict | None:
        """One submission as its student sees it (no trace): status, score, per-task verdicts, rank.
        ``name`` is the student's leaderboard name (``labels``), ``student`` who handed it in."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, name, task, status, score, max_score, passing, latency_ms, error, result, submitted_at, "
                "client_id, file FROM submissions WHERE id=?",
                (sid,),
            ).fetchone()
        if row is None:
            return None
        sid, key, task, status, score, max_score, passing, latency, error, result, at, client_id, file = row
        out: dict[str, Any] = {
            "id": sid,
            "name": (labels or {}).get(key, key),
            "student": key,
            "task": task,
            "status": status,
            "submitted_at": at,
            "client_id": client_id,
            "file": file,
        }
        if status == "graded":
            data = json.loads(result or "{}")
            out.update(
                score=score,
                max_score=max_score,
                passing=bool(passing),
                latency_ms=latency,
                error=error,
                tasks=[
                    {k: t.get(k) for k in ("name", "title", "points", "max_points", "passed", "messages")}
                    for t in data.get("tasks") or []
                ],
                hazards=data.get("hazards") or [],
                notes=data.get("notes") or [],
                correct=data.get("correct"),
                timing=data.get("timing"),
                timing_error=data.get("timing_error"),
            )
            rows = self._board(labels) if board is None else board
            row = next((r for r in rows if r["key"] == key), None)
            out["rank"] = row["rank"] if row else None
            out["tie"] = bool(row and row.get("tie"))
            out["students"] = len(rows)
        return out

    def _graded(self) -> list[dict]:
        """Every graded submission as plain data, oldest first; read again only after a change (the
        leaderboard is asked for by every student's widget every few seconds). Callers copy before
        changing a row."""
        with self._lock:
            if self._cache is not None and self._cache[0] == self._version:
                return self._cache[1]
            version = self._version
            rows = self._db.execute(
                "SELECT id, name, task, score, passed_tasks, passing, latency_ms, error, result, submitted_at, file "
                "FROM submissions WHERE status='graded' ORDER BY id"
            ).fetchall()
        out = []
        for sid, name, task, score, passed, passing, latency, error, result, at, file in rows:
            out.append(
                {
                    "id": sid,
                    "name": name,
                    "task": task,
                    "score": score or 0.0,
                    "passed": json.loads(passed or "[]"),
                    "passing": bool(passing),
                    "latency_ms": latency,
                    "error": error,
                    "result": json.loads(result or "{}"),
                    "at": at,
                    "file": file,
                }
            )
        with self._lock:
            if self._version == version:
                self._cache = (version, out)
        return out

    def refused(self, labels: dict[str, str] | None = None, pseudonyms: dict[str, str] | None = None) -> list[dict]:
        """The hand-ins the grader refused, newest first: the teacher's to look at, not a failure.
        Each says whether it was an attack (a trace reaching for what no schedule does) or a
        mistake (``kind``, ``why``), who sent it (``name``: ``labels``, the teacher's) and how the
        class knows them (``pseudonym``: what students see of them)."""
        out = []
        for s in reversed(self._graded()):
            if _refused(s):
                refusal = s["result"].get("refusal") or {}
                out.append(
                    {
                        "id": s["id"],
                        "name": (labels or {}).get(s["name"], s["name"]),
                        "pseudonym": (pseudonyms or {}).get(s["name"], s["name"]),
                        "kind": refusal.get("kind") if refusal.get("kind") in ("attack", "mistake") else "mistake",
                        "why": str(refusal.get("why") or ""),
                        "file": s["file"],
                        "message": str(s["error"] or s["result"].get("error") or "refused")[:300],
                        "at": s["at"],
                    }
                )
        return out

    def counts(self) -> dict:
        with self._lock:
            total, queued = self._db.execute("SELECT COUNT(*), SUM(status != 'graded') FROM submissions").fetchone()
        return {"submissions": int(total or 0), "queued": int(queued or 0)}

    # --- what students see --------------------------------------------------------------------------

    def leaderboard(self, labels: dict[str, str] | None = None, you: str | None = None) -> dict:
        """One row per student: best score, tasks passed, best latency of a passing submission,
        ranked by score (high first), then latency (fast first), then who got there first. A row is
        named by ``labels`` (approved pseudonyms); ``you``: the student whose row is marked."""
        rows = []
        for r in self._board(labels):
            key = r.pop("key")
            r.pop("best"), r.pop("retimed")
            if you is not None and key == you:
                r["you"] = True
            rows.append(r)
        return {"max_score": self.max_score, "tasks": self.tasks, "rows": rows, **self.counts()}

    def _board(self, labels: dict[str, str] | None = None) -> list[dict]:
        """The ranked rows (copies: callers may change them), made again only after a change."""
        key = (self._version, tuple(sorted((labels or {}).items())))
        cached = self._boards.get(key)
        if cached is None:
            cached = self._rank_board(labels)
            if len(self._boards) > 8:
                self._boards.clear()
            self._boards[key] = cached
        return [dict(r) for r in cached]

    def _rank_board(self, labels: dict[str, str] | None) -> list[dict]:
        students: dict[str, dict] = {}
        for s in self._graded():
            if _refused(s):
                continue  # a refused hand-in is no schedule: flagged for the teacher (refused()), never ranked
            st = students.setdefault(
                s["name"],
                {
                    "key": s["name"],
                    "name": (labels or {}).get(s["name"], s["name"]),
                    "score": 0.0,
                    "tasks_passed": set(),
                    "best_latency_ms": None,
                    "spread_ms": None,
                    "load": None,
                    "quiet": None,
                    "submissions": 0,
                    "reached_at": s["at"],
                    "best": None,  # the id of the submission timed best (what an idle server times again)
                    "retimed": False,
                },
            )
            st["submissions"] += 1
            st["tasks_passed"].update(s["passed"])
            if s["score"] > st["score"]:
                st["score"], st["reached_at"] = s["score"], s["at"]
            if (
                s["passing"]
                and s["latency_ms"] is not None
                and (st["best_latency_ms"] is None or s["latency_ms"] < st["best_latency_ms"])
            ):
                timing = s["result"].get("timing") or {}
                st["best_latency_ms"], st["best"] = s["latency_ms"], s["id"]
                st["spread_ms"], st["load"], st["quiet"] = (
                    timing.get("spread_ms"),
                    timing.get("load"),
                    timing.get("quiet"),
                )
                st["retimed"] = bool(timing.get("retimed"))
        order = [t["name"] for t in self.tasks]
        rows = sorted(
            students.values(),
            key=lambda r: (-r["score"], r["best_latency_ms"] is None, r["best_latency_ms"] or 0.0, r["reached_at"]),
        )
        rank(rows)
        for r in rows:
            r["tasks_passed"] = [n for n in order if n in r["tasks_passed"]]
            del r["reached_at"]
        return rows

    def leaderboard_rows(self) -> list[dict]:
        """The ranked rows with their internal keys (``key``, ``best``, ``retimed``): the server's."""
        return self._board()

    def retime_due(self, tried: set[frozenset[int]] | None = None) -> tuple[int, int] | None:
        """Two neighbours on the leaderboard that tie, not both timed again yet (and not in
        ``tried``): the submissions an idle server times again, interleaved, or None."""
        rows = self._board()
        for a, b in zip(rows, rows[1:]):
            if not b["tie"] or a["best"] is None or b["best"] is None or a["rank"] != b["rank"]:
                continue
            pair = frozenset((a["best"], b["best"]))
            if (a["retimed"] and b["retimed"]) or (tried is not None and pair in tried):
                continue
            return a["best"], b["best"]
        return None

    # --- what the teacher sees ------------------------------------------------------------------

    def summary(self, labels: dict[str, str] | None = None) -> dict:
        """Per-task pass rates (of the students who handed anything in), the distribution of each
        student's best passing latency, the most common failures, who is stuck at which task
        (students named by ``labels``: the teacher's), and the refused hand-ins. A student whose
        hand-ins were all refused handed in all the same: counted, and at the first task."""
        every = [{**g, "name": (labels or {}).get(g["name"], g["name"])} for g in self._graded()]
        graded = [g for g in every if not _refused(g)]
        names = sorted({s["name"] for s in every})
        passed_by: dict[str, set] = {}
        for s in graded:
            for n in s["passed"]:
                passed_by.setdefault(n, set()).add(s["name"])
        return {
            "students": len(names),
            "tasks": self._pass_rates(passed_by, len(names)),
            "latency": self._latency_distribution(labels),
            "common_failures": _common_failures(graded),
            "stuck": self._stuck(every, names, passed_by),
            "refused": self.refused(labels, self.labels()),
            **self.counts(),
        }

    def _pass_rates(self, passed_by: dict[str, set], students: int) -> list[dict]:
        """Per task of the assignment: how many of the ``students`` passed it, and what share."""
        out = []
        for t in self.tasks:
            n = len(passed_by.get(t["name"], ()))
            out.append(
                {
                    "name": t["name"],
                    "title": t.get("title", t["name"]),
                    "passed": n,
                    "students": students,
                    "pass_rate": n / students if students else 0.0,
                }
            )
        return out

    def _latency_distribution(self, labels: dict[str, str] | None) -> dict:
        """Each student's best passing latency (with its spread, load and rank), fastest first, and
        their min, median and max."""
        board = [r for r in self.leaderboard(labels)["rows"] if r["best_latency_ms"] is not None]
        board.sort(key=lambda r: (r["best_latency_ms"], r["name"]))
        out: dict = {
            "students": [
                {"name": r["name"], "latency_ms": r["best_latency_ms"], **{k: r[k] for k in _TIMING_KEYS}}
                for r in board
            ]
        }
        values = [r["best_latency_ms"] for r in board]
        if values:
            out.update(min=values[0], median=statistics.median(values), max=values[-1])
        return out

    def _stuck(self, graded: list[dict], names: list[str], passed_by: dict[str, set]) -> list[dict]:
        """Per student who has not passed every task: the first task of the assignment not passed,
        the hand-ins that failed it (refused ones and ones not graded at all too) and the last
        message; most failed attempts first."""
        mine: dict[str, list[dict]] = {}
        for s in graded:
            mine.setdefault(s["name"], []).append(s)
        out = []
        for name in names:
            at = next((t["name"] for t in self.tasks if name not in passed_by.get(t["name"], ())), None)
            if at is None:
                continue
            failed = [s for s in mine.get(name, []) if at not in s["passed"]]
            last = failed[-1] if failed else None
            out.append(
                {
                    "name": name,
                    "task": at,
                    "failed_attempts": len(failed),
                    "stuck": len(failed) >= STUCK_AFTER,
                    "last_message": None if last is None else (last["error"] or _message_of(last, at))[:200],
                }
            )
        return sorted(out, key=lambda r: (-r["failed_attempts"], r["name"]))


def band_ms(latency_ms: float, spread_ms: float | None, quiet: bool | None) -> float:
    """How far a latency may lie from the truth: half its repeats' interquartile range, and on a busy
    machine (``quiet`` False) at least ``BUSY_BAND`` of the latency itself."""
    half = max(0.0, spread_ms or 0.0) / 2
    return max(half, BUSY_BAND * latency_ms) if quiet is False else half


def tied(a: dict, b: dict) -> bool:
    """Whether two leaderboard rows of the same score are a tie: their latencies lie within the
    spread of the two timings (the bands of ``band_ms`` meet). A busy machine widens a band, but
    never so far as to erase a gap of 2x: the slower at twice the faster or more is never a tie."""
    if a["score"] != b["score"] or a["best_latency_ms"] is None or b["best_latency_ms"] is None:
        return False
    fast, slow = sorted((float(a["best_latency_ms"]), float(b["best_latency_ms"])))
    if slow >= 2 * fast:
        return False
    reach = band_ms(a["best_latency_ms"], a.get("spread_ms"), a.get("quiet")) + band_ms(
        b["best_latency_ms"], b.get("spread_ms"), b.get("quiet")
    )
    return slow - fast <= reach


def rank(rows: list[dict]) -> None:
    """Ranks in the order given (best first): a row tied with the one above it shares its rank
    (``tie`` True on every row of a tie); otherwise its rank is its place."""
    for i, r in enumerate(rows):
        r["tie"] = False
        if i and tied(rows[i - 1], r):
            r["rank"] = rows[i - 1]["rank"]
            r["tie"] = rows[i - 1]["tie"] = True
        else:
            r["rank"] = i + 1


def _refused(s: dict) -> bool:
    """A hand-in the grader refused to run (``GradeResult.status``), as ``Store._graded`` lists it."""
    return s["result"].get("status") == "refused"


_TIMING_KEYS = ("spread_ms", "load", "quiet", "rank", "tie")  # of a leaderboard row, in the latency distribution


def _first_message(task: dict) -> str:
    """What a failed task of a result says first (``failed`` when it says nothing)."""
    return (task.get("messages") or ["failed"])[0]


def _message_of(s: dict, task: str) -> str:
    """What a graded hand-in (``Store._graded``'s) says first about one task."""
    found = next((t for t in s["result"].get("tasks") or [] if t.get("name") == task), None)
    return _first_message(found) if found else "failed"


def _common_failures(graded: list[dict]) -> list[dict]:
    """The ten failures met by the most students (then the most often): a task and its first message,
    or a hand-in not graded at all (task None: one failure, whatever the tasks)."""
    failures: dict[tuple[str | None, str], dict] = {}
    for s in graded:
        if s["error"]:
            seen = [(None, s["error"])]
        else:
            seen = [(t["name"], _first_message(t)) for t in s["result"].get("tasks") or [] if not t.get("passed")]
        for task, text in seen:
            key = (task, text[:200])
            f = failures.setdefault(key, {"task": task, "message": key[1], "count": 0, "students": set()})
            f["count"] += 1
            f["students"].add(s["name"])
    common = sorted(failures.values(), key=lambda f: (-len(f["students"]), -f["count"], f["task"] or ""))[:10]
    return [{**f, "students": len(f["students"])} for f in common]
