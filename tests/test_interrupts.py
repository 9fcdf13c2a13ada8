"""Ctrl-C and SIGTERM at several points of a real `tracekit load`, and kill -9: exit 130 within a
second, one line that tells the truth about what was loaded, the database intact, and no temp FIFO
or folder left behind (a killed load's is removed by the next)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_TRACES, db_rows
from load_runs import INTERRUPT_LOAD, INTERRUPT_READING, TRACEKIT, a_second, build_traces, environment, leftovers, load, traces_in

SAMPLE = SAMPLE_TRACES / "sdpa_flash.json.gz"
# The stop lines a signal may end a load with.
NOTHING_OF = re.compile(r"interrupted: nothing of (?P<file>\S+) was loaded"
                        r"(, nor of (?:(?P<some>\d+) of )?the (?P<after>\d+) files? after it)?")
LOADED_THEN_STOPPED = re.compile(r"(?P<file>\S+) was loaded; stopped before the rest \((?P<rest>\d+) files?\)")
ALL_DONE = "interrupted: every file was done, as listed above"


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Three distinct traces of 4 MB (a third of a second's load each), in a folder of their own."""
    return [path.resolve() for path in build_traces(tmp_path_factory.mktemp("traces"), 3, 4)]


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    """A database that holds one sample trace: each test loads into a copy."""
    folder = tmp_path_factory.mktemp("base")
    db = folder / "base.duckdb"
    assert load([SAMPLE, "--db", db], folder).returncode == 0
    return db


def interrupted_at(point, name, signal_name, paths, db, tmp_path):
    """Runs `tracekit load PATHS` and signals it when the load of `name` reaches `point` (see
    interrupt_load.py); returns the ended process and the seconds it ran after the signal."""
    log = tmp_path / "signalled"
    run = subprocess.run([*INTERRUPT_LOAD, point, name, signal_name, "load", *map(str, paths), "--db", str(db)],
                         capture_output=True, text=True, env=environment(tmp_path, INTERRUPT_LOG=log), timeout=60)
    return run, time.time() - float(log.read_text())


def assert_told_the_truth(run, files, db, before):
    """Exit 130 with one line, and the database holds exactly what it held before plus what the
    load's lines say was loaded; the files the last line says were not loaded are not in it."""
    assert run.returncode == 130, run.stdout + run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    loaded = dict(re.findall(r"^loaded (\S+): .* from (\S+) in ", run.stdout, re.M))
    held = traces_in(db)
    assert held == {**before, **loaded}
    if held:
        db_rows(db, "SELECT count(*) FROM kernels")  # the views work: the database is whole
    order, held_paths = [str(f) for f in files], set(held.values())
    line = lines[0]
    if line == ALL_DONE:
        return line
    stopped = NOTHING_OF.fullmatch(line) or LOADED_THEN_STOPPED.fullmatch(line)
    assert stopped, line
    later = order[order.index(stopped["file"]) + 1:]
    kept_out = [path for path in later if path not in held_paths]
    if stopped.re is NOTHING_OF:
        assert stopped["file"] not in held_paths
        assert len(kept_out) == int(stopped["some"] or stopped["after"] or 0)
        assert stopped["some"] is not None or len(kept_out) == len(later)
    else:
        assert stopped["file"] in held_paths and len(kept_out) == len(later) == int(stopped["rest"])
    return line


@pytest.mark.parametrize("point, name, signal_name, what", [
    ("read", "t_00.json", "SIGINT", "one file"),
    ("read", "t_00.json", "SIGINT", "folder"),
    ("derive", "t_01.json", "SIGTERM", "folder"),
    ("commit", "t_00.json", "SIGINT", "folder"),
    ("committing", "t_00.json", "SIGINT", "folder"),
    ("committed", "t_00.json", "SIGTERM", "folder"),
    ("committed", "t_02.json", "SIGINT", "folder"),
])
def test_a_signal_stops_the_load_and_says_what_was_loaded(traces, base_db, tmp_path, point, name, signal_name, what):
    db = tmp_path / "t.duckdb"
    if what == "folder":
        shutil.copy(base_db, db)
    before = traces_in(db)
    paths = [traces[0]] if what == "one file" else [traces[0].parent]
    run, seconds = interrupted_at(point, name, signal_name, paths, db, tmp_path)
    line = assert_told_the_truth(run, paths if what == "one file" else traces, db, before)
    assert seconds < a_second()
    assert leftovers(tmp_path) == []
    first = str(traces[0])
    if point in ("read", "commit") and name == "t_00.json":
        # Nothing can be committed before the first file: neither it nor those after it are loaded.
        assert line == f"interrupted: nothing of {first} was loaded" + (", nor of the 2 files after it"
                                                                         if what == "folder" else "")
    if what == "one file":  # into a new database, which got nothing: none is left behind
        assert not db.exists() and not Path(f"{db}.wal").exists()
    if point == "committed":
        assert str(traces[0].parent / name) in traces_in(db).values()
    if name == "t_02.json" and point == "committed":
        assert line == ALL_DONE


def _wait_for_the_read(proc, tmp_path):
    """Waits until the load's FIFO folder exists: its events are being read. Not for any entry of
    the temp folder: Python's first `gettempdir()` writes a file of 8 random letters there to see
    that it can, and a kill -9 that lands before it is removed leaves it behind (not ours)."""
    deadline = time.monotonic() + 30
    ours = f"tracekit-pid{proc.pid}-"
    while not any(name.startswith(ours) for name in leftovers(tmp_path)):
        assert proc.poll() is None and time.monotonic() < deadline, "the load ended before its read was seen"
        time.sleep(0.005)


def test_ctrl_c_from_outside_ends_the_load_within_a_second(traces, base_db, tmp_path):
    db = tmp_path / "t.duckdb"
    shutil.copy(base_db, db)
    before = traces_in(db)
    proc = subprocess.Popen([*TRACEKIT, "load", str(traces[0].parent), "--db", str(db)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment(tmp_path))
    _wait_for_the_read(proc, tmp_path)
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert time.time() - sent < a_second()
    assert_told_the_truth(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), traces, db, before)
    assert leftovers(tmp_path) == []


def test_kill_9_leaves_the_database_intact_and_the_next_load_removes_its_fifos(traces, base_db, tmp_path):
    db = tmp_path / "t.duckdb"
    shutil.copy(base_db, db)
    before = traces_in(db)
    proc = subprocess.Popen([*TRACEKIT, "load", str(traces[0]), "--db", str(db)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=environment(tmp_path))
    _wait_for_the_read(proc, tmp_path)
    proc.kill()
    proc.wait()
    left = leftovers(tmp_path)
    assert left and all(name.startswith(f"tracekit-pid{proc.pid}-") for name in left)
    assert traces_in(db) == before
    run = load([SAMPLE_TRACES / "naive.json.gz", "--db", db], tmp_path)
    assert run.returncode == 0, run.stderr
    assert leftovers(tmp_path) == []
    assert set(traces_in(db)) == set(before) | {"naive"}


def test_only_the_temp_folders_of_processes_that_ended_are_removed(tmp_path):
    from tracekit.ingest.scratch import remove_stale_scratch

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    for pid in (os.getpid(), os.getppid(), ended.pid):
        (tmp_path / f"tracekit-pid{pid}-x").mkdir()
    (tmp_path / "tracekit-hta-x").mkdir()  # not named after a process: not ours to judge
    removed = remove_stale_scratch(tmp_path)
    assert [Path(path).name for path in removed] == [f"tracekit-pid{ended.pid}-x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"tracekit-pid{os.getpid()}-x", f"tracekit-pid{os.getppid()}-x", "tracekit-hta-x"])


def test_the_spill_files_of_a_killed_duckdb_are_removed_by_the_next_load(tmp_path):
    # DuckDB spills beside the database, in files named after its process (as it writes them);
    # a killed load's stay until DuckDB spills again, so the next load removes them.
    from tracekit.store.database import connect
    from tracekit.ingest.loader import load_files

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    db = tmp_path / "t.duckdb"
    spill = tmp_path / "t.duckdb.tmp"
    spill.mkdir()
    stale = [spill / f"duckdb_temp_{ended.pid}_0_owner", spill / f"duckdb_temp_{ended.pid}_0_storage_S96K-0.tmp"]
    for path in stale:
        path.write_bytes(b"x" * 1024)
    con = connect(db)
    try:
        outcomes = list(load_files(con, [SAMPLE]))
    finally:
        con.close()
    assert outcomes[0][1].status == "loaded"
    assert not spill.exists()
    # A running process's spill files stay, and so does their folder.
    spill.mkdir()
    running = spill / f"duckdb_temp_{os.getppid()}_0_owner"
    running.touch()
    (spill / f"duckdb_temp_{ended.pid}_0_owner").touch()
    con = connect(db)
    try:
        list(load_files(con, [SAMPLE_TRACES / "naive.json.gz"]))
    finally:
        con.close()
    assert list(spill.iterdir()) == [running]


# A statement that runs for minutes: Ctrl-C is what ends it.
ENDLESS = "SELECT count(*) AS n FROM range(20000000000) t(i) WHERE i % 7 = 3"


@pytest.mark.parametrize("command", [[*TRACEKIT, "query", "--sql", ENDLESS], [*INTERRUPT_READING, "findings"],
                                     [*INTERRUPT_READING, "report", "-o", "page.html"]],
                         ids=["query", "findings", "report"])
def test_ctrl_c_ends_a_reading_command_with_one_line(sample_db, tmp_path, command):
    """Not DuckDB's `RuntimeError: Query interrupted` under a traceback, with status 1."""
    db = tmp_path / "t.duckdb"
    shutil.copy(sample_db, db)
    started = subprocess.Popen([*command, "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path, env=environment(tmp_path),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    if "query" in command:
        # past the imports (0.3 s on a quiet 2-core machine) into a statement of minutes; a slower
        # machine signals in the imports: one line too. `findings` and `report` end too soon to time a
        # signal from here: they signal themselves while the finding rules run (interrupt_reading.py).
        time.sleep(0.5)
        started.send_signal(signal.SIGINT)
    out, err = started.communicate(timeout=60)
    assert started.returncode == 130 and err.strip() == "interrupted", err
    assert not (tmp_path / "page.html").exists()
