"""`tracekit shell`: statements and dot commands from piped input, the sandbox, and readline's
history and Tab completion at a real terminal (a pty)."""

import json
import os
import re
import select
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from conftest import db_rows
from tracekit.cli import cli


def shell(db, script, *args):
    return CliRunner().invoke(cli, ["shell", "--db", str(db), *args], input=script)


def test_statements_run_in_order_as_query_renders_them(sample_db):
    script = ("SELECT trace, count(*) AS kernels\n"
              "FROM kernels\n"
              "GROUP BY ALL ORDER BY kernels DESC, trace LIMIT 2;\n"
              "SELECT 1 AS one; SELECT 'two' AS two;\n"
              "SELECT count(*) AS memcpys FROM memcpy\n")  # the last one may lack its ;
    result = shell(sample_db, script)
    assert result.exit_code == 0, result.output
    top = CliRunner().invoke(cli, ["query", "--db", str(sample_db), "--sql",
                                   "SELECT trace, count(*) AS kernels FROM kernels "
                                   "GROUP BY ALL ORDER BY kernels DESC, trace LIMIT 2"])
    assert result.output.startswith(top.output)  # the same renderer, the same table
    memcpys = db_rows(sample_db, "SELECT count(*) FROM memcpy")[0][0]
    tail = result.output[len(top.output):].split("\n(1 row)\n")
    assert [part.split()[-1] for part in tail if part.strip()] == ["1", "two", str(memcpys)]


def test_dot_commands(sample_db):
    result = shell(sample_db, ".help\n.tables\n.schema kernels\n.schema trace_files\n.mode json\n"
                              "SELECT 42 AS answer;\n.mode\n.quit\nSELECT 'never run' AS x;\n")
    assert result.exit_code == 0, result.output
    out = result.output
    assert ".schema [NAME]" in out and ".quit" in out
    listed = set(out.split(".quit")[1].split())
    assert {"kernels", "traces", "memcpy", "cpu_ops", "trace_files", "event_rows"} <= listed
    assert not any(name.startswith("_") for name in listed)
    assert "kernels: one row per GPU kernel execution." in out and "  est_occupancy_pct:" in out
    assert "trace_files:\n  trace_id INTEGER, trace VARCHAR" in out
    assert '[\n{"answer": 42}\n]' in out and "output format: json" in out and "never run" not in out


def test_errors_are_reported_and_the_shell_goes_on(sample_db):
    script = ("DELETE FROM trace_files;\n"
              "SELECT * FROM read_text('/etc/passwd');\n"
              "SELECT no_such_column FROM kernels;\n"
              ".schema nope\n.nope\n.mode xml\n"
              "SELECT count(*) AS traces FROM traces;\n")
    result = shell(sample_db, script)
    assert result.exit_code == 1  # piped input: a failed statement makes the exit status 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert [e.split(":")[1].strip() for e in errors] == [
        "DELETE is not allowed", "the query reaches outside the trace database (/etc/passwd)",
        "Binder Error", "no table or view named 'nope' (.tables lists them)",
        "unknown command .nope (.help lists the commands)", "unknown format 'xml' (choose from table, box, line, csv, tsv, json, ndjson, markdown, html)"]
    assert "traces\n------\n     8\n(1 row)" in result.output
    assert db_rows(sample_db, "SELECT count(*) FROM trace_files") == [(8,)]


def test_allow_files_lets_the_shell_read_a_csv(sample_db, tmp_path):
    budgets = tmp_path / "budgets.csv"
    budgets.write_text("trace,budget_us\nnaive,100\n")
    script = f"SELECT t.trace, b.budget_us FROM traces t JOIN '{budgets}' b USING (trace);\n"
    assert "reaches outside the trace database" in shell(sample_db, script).output
    allowed = shell(sample_db, script, "--allow-files", "-f", "json")
    assert allowed.exit_code == 0 and json.loads(allowed.output) == [{"trace": "naive", "budget_us": 100}]


def test_a_database_that_cannot_be_read_fails_before_any_prompt(tmp_path):
    result = shell(tmp_path / "none.duckdb", "SELECT 1;\n")
    assert result.exit_code == 1 and result.output.startswith(f"Error: {tmp_path / 'none.duckdb'}: no such database")


def test_harlequin_when_it_is_not_installed(sample_db, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = shell(sample_db, "", "--harlequin")
    assert result.exit_code == 1
    assert "harlequin is not installed (pip install harlequin)" in result.output


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_at_a_terminal_it_prompts_and_keeps_a_readline_history(sample_db, tmp_path):
    proc, main = _shell_at_a_terminal(sample_db, tmp_path)
    try:
        seen = _read_until(main, b"tracekit> ")
        assert b"read-only" in seen
        os.write(main, b"SELECT 6 * 7 AS answer;\n")
        assert b"42" in _read_until(main, b"tracekit> ")
        os.write(main, b".quit\n")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(main)
    assert "SELECT 6 * 7 AS answer;" in (tmp_path / ".tracekit_history").read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_tab_completes_at_a_terminal(sample_db, tmp_path):
    proc, main = _shell_at_a_terminal(sample_db, tmp_path, COLUMNS="100")
    try:
        _read_until(main, b"tracekit> ")
        os.write(main, b".ti\t on\n")
        _read_until(main, b"tracekit> ")
        os.write(main, b"SELECT count(*) AS n FROM unclass\t;\n")
        seen = _read_until(main, b"tracekit> ").decode()
        assert re.search(r"\n\s*0\r?\n\(1 row\)\r?\nRun Time \(s\): real \d+\.\d{3}", seen), seen
        os.write(main, b".quit\n")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(main)
    history = (tmp_path / ".tracekit_history").read_text()
    assert ".timer on" in history and "SELECT count(*) AS n FROM unclassified;" in history


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_mode_box_fits_the_terminals_own_width_and_once_writes_it_whole(sample_db, tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}  # the pty's size, not COLUMNS
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "shell", "--db", str(sample_db)],
                            stdin=secondary, stdout=secondary, stderr=secondary, env=dict(env, HOME=str(tmp_path)),
                            close_fds=True)
    os.close(secondary)
    sql = b"SELECT trace, name, dur_us FROM kernels ORDER BY dur_us DESC LIMIT 2;\n"
    try:
        _read_until(main, b"tracekit> ")
        os.write(main, b".mode box\n")
        _read_until(main, b"tracekit> ")
        os.write(main, sql)
        shown = _read_until(main, b"tracekit> ").decode().replace("\r\n", "\n").splitlines()
        os.write(main, f".once {tmp_path / 'box.txt'}\n".encode())
        _read_until(main, b"tracekit> ")
        os.write(main, sql)
        after = _read_until(main, b"tracekit> ").decode()
        os.write(main, b".quit\n")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(main)
    frame = [line for line in shown if line[:1] in ("┌", "│", "├", "└")]
    assert len(frame) == 6 and all(len(line) == 50 for line in frame), shown
    assert "(2 rows; to fit 50 columns: long values cut with …; .mode line shows all)" in shown
    assert "│" not in after  # the result went to the file, not the screen
    written = (tmp_path / "box.txt").read_text(encoding="utf-8").splitlines()
    assert len(written) == 7 and written[-1] == "(2 rows)" and len(written[0]) > 50  # every value whole
    assert [line.split("│")[3].strip() for line in written[3:5]] == [line.split("│")[3].strip() for line in frame[3:5]]


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
def test_ctrl_c_stops_the_running_statement_and_the_shell_goes_on(sample_db, tmp_path):
    """As DuckDB's shell does: the statement ends, the prompt comes back (it was a traceback, and the
    session was lost)."""
    import signal

    proc, main = _shell_at_a_terminal(sample_db, tmp_path)
    try:
        _read_until(main, b"tracekit> ")
        os.write(main, b"SELECT count(*) AS n FROM range(20000000000) t(i) WHERE i % 7 = 3;\n")
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        seen = _read_until(main, b"tracekit> ")
        assert b"Error: interrupted" in seen and b"Traceback" not in seen, seen
        os.write(main, b"SELECT 6 * 7 AS answer;\n")
        assert b"42" in _read_until(main, b"tracekit> ")
        os.write(main, b".quit\n")
        proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(main)


def _shell_at_a_terminal(db, tmp_path, **env):
    """`tracekit shell` on a pseudo-terminal (its history in tmp_path): (the process, the pty's fd)."""
    import pty

    main, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "shell", "--db", str(db)], stdin=secondary,
                            stdout=secondary, stderr=secondary, env=dict(os.environ, HOME=str(tmp_path), **env),
                            close_fds=True)
    os.close(secondary)
    return proc, main


def _read_until(fd, marker, timeout=30):
    seen, deadline = b"", time.monotonic() + timeout
    while marker not in seen.split(b"\n")[-1] and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            seen += os.read(fd, 4096)
    assert marker in seen, seen
    return seen
