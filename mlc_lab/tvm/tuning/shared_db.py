"""A class's shared tuning database: a folder, or one reachable over TVM RPC.

The teacher's machine keeps one meta_schedule JSON database in a folder and serves it with
``mlc-lab database serve DIR --port 9190`` (a TVM RPC server, optionally registered with the class's
tracker under a key). A student's tuning job asks it for the folder's two files before searching
and sends back its own records at the end; the server merges them under a lock, so thirty students
finishing at once never interleave half-written lines. The files travel as text: the job then
reads and writes them exactly as it does a shared folder (`import_shared_records` /
`export_to_shared`), under the same lock when the folder is on a shared drive.

A tuning job calls `import_shared` before its search and `share` at the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import tempfile
from typing import Any, Iterator

from mlc_lab.model.tuning import RECORDS_FILE, WORKLOADS_FILE  # meta_schedule's database, as a job's folder holds it

LOCK_FILE = ".mlc_lab_database.lock"
FETCH = "mlc_lab.class_db.fetch"
COMMIT = "mlc_lab.class_db.commit"
DEFAULT_KEY = "mlc-lab-database"


class ClassDatabaseError(RuntimeError):
    """The class database could not be reached or refused a request (the message says which)."""


@contextlib.contextmanager
def locked(directory: str) -> Iterator[None]:
    """An exclusive lock on a database folder, for as long as the block runs."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, LOCK_FILE), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_files(directory: str) -> dict[str, str]:
    """The database folder's two files as text ("" for a file that does not exist yet)."""
    out = {}
    with locked(directory):
        for name in (WORKLOADS_FILE, RECORDS_FILE):
            try:
                with open(os.path.join(directory, name)) as fh:
                    out[name] = fh.read()
            except FileNotFoundError:
                out[name] = ""
    return out


def write_files(directory: str, files: dict[str, str]) -> None:
    os.makedirs(directory, exist_ok=True)
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        with open(os.path.join(directory, name), "w") as fh:
            fh.write(files.get(name, ""))


def merge(source: str, directory: str) -> int:
    """Add every record of the database folder ``source`` to the one in ``directory`` (under its
    lock); workloads are matched structurally. Returns the number of records added."""
    from tvm.s_tir import meta_schedule as ms

    with open(os.path.join(source, WORKLOADS_FILE)) as fh:
        workloads = [ms.database.Workload.from_json(json.loads(x)) for x in fh if x.strip()]
    with open(os.path.join(source, RECORDS_FILE)) as fh:
        lines = [x for x in fh if x.strip()]
    with locked(directory):
        shared = ms.database.JSONDatabase(work_dir=directory, module_equality="structural")
        mapped: dict[int, Any] = {}
        for raw in lines:
            index, rec_json = json.loads(raw)
            if index not in mapped:
                mapped[index] = shared.commit_workload(workloads[index].mod)
            rec = ms.database.TuningRecord.from_json(rec_json, workloads[index])
            shared.commit_tuning_record(
                ms.database.TuningRecord(rec.trace, mapped[index], rec.run_secs, rec.target, rec.args_info)
            )
        del shared
    return len(lines)


# --- the server --------------------------------------------------------------------------------------
def _fetch(directory: str) -> str:
    return json.dumps(read_files(directory))


def _commit(directory: str, payload: str) -> int:
    files = json.loads(payload)
    if not isinstance(files, dict) or not all(
        isinstance(files.get(n, ""), str) for n in (WORKLOADS_FILE, RECORDS_FILE)
    ):
        raise ValueError("a class database commit is a JSON object with the two database files as text")
    with tempfile.TemporaryDirectory(prefix="mlc_lab_commit_") as tmp:
        write_files(tmp, files)
        return merge(tmp, directory)


def register(directory: str) -> None:
    """Register the database's functions in this process (the RPC server's start-up hook)."""
    import tvm

    directory = os.path.abspath(directory)
    tvm.register_global_func(FETCH, functools.partial(_fetch, directory), override=True)
    tvm.register_global_func(COMMIT, functools.partial(_commit, directory), override=True)


def serve(
    directory: str, host: str = "0.0.0.0", port: int = 9190, tracker: str | None = None, key: str = DEFAULT_KEY
) -> Any:
    """Start serving ``directory`` and return the TVM RPC server (``.terminate()`` stops it).
    ``tracker``: "HOST:PORT" of the class's tracker, to register the server there under ``key``."""
    from tvm import rpc

    os.makedirs(directory, exist_ok=True)
    tracker_addr = None
    if tracker:
        thost, _, tport = tracker.rpartition(":")
        tracker_addr = (thost, int(tport))
    return rpc.Server(
        host=host,
        port=port,
        port_end=port + 1,
        key=key,
        tracker_addr=tracker_addr,
        server_init_callback=functools.partial(register, os.path.abspath(directory)),
    )


# --- the client (inside a tuning job) ------------------------------------------------------------------
def parse(spec: str) -> dict:
    """``rpc://HOST:PORT`` (the server itself) or ``rpc://HOST:PORT/KEY`` (through a tracker)."""
    text = spec[len("rpc://") :]
    hostport, _, key = text.partition("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"a class database is 'rpc://HOST:PORT' or 'rpc://HOST:PORT/KEY', not {spec!r}")
    return {"host": host, "port": int(port), "key": key or None}


def _session(spec: str, timeout_s: float) -> Any:
    from tvm import rpc

    where = parse(spec)
    try:
        if where["key"]:
            return rpc.connect_tracker(where["host"], where["port"]).request(
                where["key"], session_timeout=int(timeout_s)
            )
        return rpc.connect(where["host"], where["port"], key=DEFAULT_KEY, session_timeout=int(timeout_s))
    except Exception as exc:  # noqa: BLE001 - TVM says "connection refused" in many ways
        raise ClassDatabaseError(f"cannot reach the class database at {spec}: {str(exc).splitlines()[0]}") from None


def _remote(sess: Any, name: str, spec: str) -> Any:
    try:
        return sess.get_function(name)
    except Exception:  # noqa: BLE001
        raise ClassDatabaseError(
            f"{spec} is a TVM RPC server but not a class database (start one with `mlc-lab database serve DIR`)"
        ) from None


def check(spec: str, timeout_s: float = 10.0) -> None:
    """Raise ClassDatabaseError unless ``spec`` answers as a class database."""
    _remote(_session(spec, timeout_s), FETCH, spec)


def fetch(spec: str, into: str, timeout_s: float = 60.0) -> None:
    """Copy the class database's files into the folder ``into``."""
    sess = _session(spec, timeout_s)
    files = json.loads(_remote(sess, FETCH, spec)())
    write_files(into, files)


def commit(spec: str, source: str, timeout_s: float = 60.0) -> int:
    """Send the database folder ``source`` to the class database; returns the records it added."""
    files = {}
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        with open(os.path.join(source, name)) as fh:
            files[name] = fh.read()
    sess = _session(spec, timeout_s)
    return int(_remote(sess, COMMIT, spec)(json.dumps(files)))


# --- inside a tuning job --------------------------------------------------------------------------------
def count_lines(path: str) -> int:
    """Records (non-empty lines) in a database file; 0 when it does not exist."""
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _shared_name(shared: str) -> str:
    return shared if shared.startswith("rpc://") else os.path.abspath(shared)


def import_shared(shared: str, work_dir: str, db: Any, task_mod: Any, target: Any, imported: dict) -> dict:
    """Records of this workload and target from the class's database (a folder, or "rpc://..." served
    by `mlc-lab database serve`) into the job's database; see `import_shared_records`."""
    if imported.get("from") == _shared_name(shared):
        return imported
    if not shared.startswith("rpc://"):
        return import_shared_records(shared, work_dir, db, task_mod, target)
    with tempfile.TemporaryDirectory(prefix="mlc_lab_classdb_") as tmp:
        fetch(shared, tmp)
        return {**import_shared_records(tmp, work_dir, db, task_mod, target), "from": shared}


def share(shared: str, work_dir: str, index: int, imported: dict) -> dict:
    """This job's own records into the class's database (folder or "rpc://..."): {"to", "count"}."""
    if not shared.startswith("rpc://"):
        return {"to": _shared_name(shared), "count": export_to_shared(shared, work_dir, index, imported)}
    with tempfile.TemporaryDirectory(prefix="mlc_lab_classdb_") as tmp:
        n = export_to_shared(tmp, work_dir, index, imported)
        commit(shared, tmp)
    return {"to": shared, "count": n}


def import_shared_records(shared_dir: str, work_dir: str, db: Any, task_mod: Any, target: Any) -> dict:
    """Copy the shared database's records of this workload and target into the job's database
    (once per work directory): they seed the evolutionary search's population and train the cost
    model, and are not counted as this job's trials."""
    from tvm.s_tir import meta_schedule as ms

    empty = {"from": os.path.abspath(shared_dir), "count": 0, "lines": [0, 0]}
    if not os.path.exists(os.path.join(shared_dir, WORKLOADS_FILE)):
        return empty
    with locked(shared_dir):  # another student may be adding records right now
        shared = ms.database.JSONDatabase(work_dir=shared_dir, module_equality="structural")
    if not shared.has_workload(task_mod):
        return empty
    wl = shared.commit_workload(task_mod)
    mine = db.commit_workload(task_mod)
    target_text = str(target.export())
    first = count_lines(os.path.join(work_dir, RECORDS_FILE))
    n = 0
    for rec in shared.get_top_k(wl, 100000):
        if str(rec.target.export()) != target_text:
            continue
        db.commit_tuning_record(ms.database.TuningRecord(rec.trace, mine, rec.run_secs, rec.target, rec.args_info))
        n += 1
    return {"from": os.path.abspath(shared_dir), "count": n, "lines": [first, first + n]}


def export_to_shared(shared_dir: str, work_dir: str, index: int, imported: dict) -> int:
    """Append this job's own records to the shared database (the next student starts from them);
    returns how many."""
    os.makedirs(shared_dir, exist_ok=True)
    with locked(shared_dir):
        return _export_locked(shared_dir, work_dir, index, imported)


def _export_locked(shared_dir: str, work_dir: str, index: int, imported: dict) -> int:
    from tvm.s_tir import meta_schedule as ms

    shared = ms.database.JSONDatabase(work_dir=shared_dir, module_equality="structural")
    skip = range(*(imported.get("lines") or [0, 0]))
    n = 0
    with open(os.path.join(work_dir, WORKLOADS_FILE)) as fh:
        workloads = [ms.database.Workload.from_json(json.loads(x)) for x in fh if x.strip()]
    wl_shared = shared.commit_workload(workloads[index].mod)
    with open(os.path.join(work_dir, RECORDS_FILE)) as fh:
        lines = [x for x in fh if x.strip()]
    for line_no, raw in enumerate(lines):
        if line_no in skip:
            continue
        wl_index, rec_json = json.loads(raw)
        if wl_index != index:
            continue
        rec = ms.database.TuningRecord.from_json(rec_json, workloads[wl_index])
        shared.commit_tuning_record(
            ms.database.TuningRecord(rec.trace, wl_shared, rec.run_secs, rec.target, rec.args_info)
        )
        n += 1
    del shared
    return n
