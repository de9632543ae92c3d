"""`mlc-lab class serve`: what it refuses before a server starts (one sentence, status 2), and what
its banner tells the teacher and the students in each mode (the roster mode is in test_classroom)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from mlc_lab._threads import usable_cores

from mlc_lab.classroom import client
from mlc_lab.cli import main
from mlc_lab.tvm.tuning import shared_db
from tests.unit.test_classroom import ASSIGNMENT, ROOT
from tests.unit.test_rpc import free_port


@pytest.fixture
def busy_port():
    """A port something listens on already."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_class_serve_refuses_what_it_cannot_run_with_one_sentence(tmp_path, capsys, busy_port):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    bad_roster = tmp_path / "roster.csv"
    bad_roster.write_text("id,who\nada,Ada\n")
    good_roster = tmp_path / "good.csv"
    good_roster.write_text("student_id,name\nada,Ada\n")
    folder = str(tmp_path / "class")
    serve = ["class", "serve", str(ASSIGNMENT), "--dir", folder]
    for argv, phrase in [
        (["class", "serve", str(ASSIGNMENT), "--dir", str(a_file)], f"{a_file} is a file;"),
        ([*serve, "--roster", str(bad_roster)], "line 1 must be the header 'student_id,name'"),
        (["class", "serve", "--dir", folder], "needs the assignment's TOML file"),
        ([*serve, "--open", "--roster", str(good_roster)], "--open is a server without identities"),
        ([*serve, "--open", "--jupyterhub"], "--open is a server without identities"),
        ([*serve, "--open", "--tracker", "127.0.0.1:9190"], "--tracker must be HOST:PORT/KEY"),
        ([*serve, "--open", "--tracker", "rpc://nowhere/key"], "not 'rpc://nowhere/key'"),
        ([*serve, "--open", "--port", str(busy_port)], f"cannot listen on 127.0.0.1:{busy_port}"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert phrase in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    # graders side by side need no warning (timings on this machine take turns); none at all is refused
    assert main([*serve, "--open", "--workers", "2", "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    assert "warning" not in err and f"cannot listen on 127.0.0.1:{busy_port}" in err
    assert main([*serve, "--open", "--workers", "0"]) == 2
    assert "--workers must be at least 1, not 0" in capsys.readouterr().err


def _banner(*args: str) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlc_lab.cli", "class", "serve", str(ASSIGNMENT), *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    lines: list[str] = []
    while not any("teacher: mlc_lab.class_dashboard" in ln for ln in lines):
        line = proc.stderr.readline()
        assert line, "the server exited: " + "".join(lines)
        lines.append(line)
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
    return proc, lines


def test_the_open_servers_banner_says_demo_where_it_times_and_the_tracker_of_its_database(tmp_path):
    port, db_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    # no tracker listens at 127.0.0.1:9: the database keeps trying to register there, the server runs
    where = ["--tracker", "127.0.0.1:9/k", "--tuning-db-port", str(db_port)]
    proc, lines = _banner("--dir", str(tmp_path / "class"), "--open", "--port", str(port), *where)
    try:
        text = "".join(lines)
        assert f"class server for 'Lab 1: mm_relu on the CPU' at {url}" in text
        assert "(0 so far, 0 waiting to be graded)" in text
        assert "timing on rpc://127.0.0.1:9/k" in text and "DEMO MODE (--open)" in text
        assert f"explore(program, classroom={url!r}), mlc_lab.leaderboard({url!r})" in text  # no token
        assert f"database='rpc://127.0.0.1:9/{shared_db.DEFAULT_KEY}'" in text and "tokens in" not in text
        socket.create_connection(("127.0.0.1", db_port), timeout=5).close()
        token = next(ln for ln in lines if "teacher's token:" in ln).rsplit(":", 1)[1].strip()
        assert f"class_dashboard({url!r}, {token!r})" in lines[-1]
        assert client.summary(url, token)["students"] == 0  # serving (and so stopping on SIGTERM) now
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0
    with pytest.raises(OSError):  # the tuning database stopped with it
        socket.create_connection(("127.0.0.1", db_port), timeout=5).close()
    # restarted: the teacher's token is kept as its hash only, so the banner cannot print it; it still works
    proc, lines = _banner("--dir", str(tmp_path / "class"), "--open", "--port", str(port))
    try:
        text = "".join(lines)
        assert "teacher's token: the one printed when it was made (only its hash is kept" in text
        assert token not in text and f"class_dashboard({url!r}, TOKEN)" in lines[-1]
        graders = usable_cores()
        assert f"{graders} grader{'s' if graders > 1 else ''}; timing on this machine, one timing at a time" in text
        assert client.summary(url, token)["students"] == 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
