"""Requests that once ended in a traceback or a hang, each now one `Error: ...` line and exit 1:
empty SQL, SQL ending in a comment, exports of metadata only, args nested 1,000 deep, an unusable
cache folder, a FIFO or a device given as a trace; and an event too big to read, whose error once
named the load's FIFO instead of the user's file."""

import json
import os
import shutil
import subprocess
import sys

import duckdb
import pytest

import make_bad_corpus as corpus
import trace_builder as tb
from conftest import SAMPLE_TRACES, invoke_cli


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """The flash sample and the deep-args corpus case, loaded once."""
    folder = tmp_path_factory.mktemp("errors")
    (folder / "deep_args.json").write_bytes(corpus.deep_args())
    path = folder / "t.duckdb"
    result = invoke_cli("load", SAMPLE_TRACES / "sdpa_flash.json.gz", folder / "deep_args.json", "--db", path)
    assert result.exit_code == 0, result.output
    return path


def assert_one_error_line(result, *fragments):
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert "tracekit-" not in lines[0] and ".samples-" not in lines[0]  # never an internal temp path


@pytest.mark.parametrize("sql", ["", "   \n", "-- only a comment", "/* a comment */ ;"])
def test_empty_sql_is_one_line(db, tmp_path, sql):
    assert_one_error_line(invoke_cli("query", "--db", db, "--sql", sql), "the SQL is empty")
    assert_one_error_line(invoke_cli("query", "--db", db, "--sql", sql, "-o", tmp_path / "x.parquet"),
                          "the SQL is empty")
    assert_one_error_line(invoke_cli("export", "--db", db, "--sql", sql, "-o", tmp_path / "x.json"),
                          "the SQL is empty")
    assert not (tmp_path / "x.json").exists()


KERNELS = "SELECT * FROM events WHERE trace = 'sdpa_flash' AND cat = 'kernel'"


@pytest.mark.parametrize("ending", ["", " -- the kernels", ";", "; -- the kernels", "\n-- the kernels\n",
                                    "\n-- µs, not ms\n;"])
def test_sql_ending_in_a_comment_or_semicolon_runs(db, tmp_path, ending):
    result = invoke_cli("query", "--db", db, "--sql", KERNELS.replace("*", "count(*) AS n") + ending, "-f", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{"n": 6}]
    # -o FILE.parquet nests the SQL in a projection of its columns: the ending must not break it.
    result = invoke_cli("query", "--db", db, "--sql", KERNELS.replace("*", "count(*) AS n, 1 AS m") + ending,
                        "--columns", "n", "-o", tmp_path / "n.parquet")
    assert result.exit_code == 0, result.output
    assert duckdb.sql(f"SELECT * FROM '{tmp_path / 'n.parquet'}'").fetchall() == [(6,)]
    result = invoke_cli("export", "--db", db, "--sql", KERNELS + ending, "-o", tmp_path / "k.json")
    assert result.exit_code == 0, result.output
    events = json.loads((tmp_path / "k.json").read_text())["traceEvents"]
    assert sum(e.get("cat") == "kernel" for e in events) == 6


@pytest.mark.parametrize("trace", ["sdpa_flash", "deep_args"])
def test_an_export_of_metadata_events_only_is_one_line(db, tmp_path, trace, monkeypatch):
    result = invoke_cli("export", "--db", db, "--sql", f"SELECT * FROM events WHERE trace = '{trace}' AND ph = 'M'",
                        "-o", tmp_path / "m.json")
    assert_one_error_line(result, "only metadata events")


def test_an_export_of_metadata_events_without_timestamps_is_one_line(tmp_path):
    # Chrome's M events often have no ts; the export once took the earliest ts of none.
    trace = corpus.source_trace()
    for event in trace["traceEvents"]:
        if event["ph"] == "M":
            event.pop("ts", None)
    (tmp_path / "no_ts.json").write_text(json.dumps(trace))
    db = tmp_path / "t.duckdb"
    assert invoke_cli("load", tmp_path / "no_ts.json", "--db", db).exit_code == 0
    result = invoke_cli("export", "--db", db, "--sql", "SELECT * FROM events WHERE ph = 'M'", "-o", tmp_path / "m.json")
    assert_one_error_line(result, "only metadata events")
    result = invoke_cli("export", "--db", db, "--trace", "no_ts", "-o", tmp_path / "all.json")
    assert result.exit_code == 0, result.output
    assert len(json.loads((tmp_path / "all.json").read_text())["traceEvents"]) == len(trace["traceEvents"])


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_queries_over_args_nested_1000_deep_answer(db, fmt):
    for sql in ("SELECT args FROM events WHERE trace = 'deep_args' AND cat = 'kernel'",
                "SELECT json_extract(args, '$.deep') AS deep FROM events"
                " WHERE trace = 'deep_args' AND json_extract(args, '$.deep') IS NOT NULL"):
        result = invoke_cli("query", "--db", db, "--sql", sql, "-f", fmt)
        assert result.exit_code == 0, result.output
        assert '"a":{"a":{"a"' in result.output.replace('""', '"').replace('\\"', '"')
    for name in ("summary", "occupancy", "anomalies", "top_kernels"):
        assert invoke_cli("query", name, "--db", db, "-p", "trace", "deep_args").exit_code == 0, name


def test_a_value_nested_1000_deep_comes_out_whole_as_its_json_text(db):
    sql = "SELECT json_extract(args, '$.deep') AS deep FROM events WHERE json_extract(args, '$.deep') IS NOT NULL"
    (row,) = json.loads(invoke_cli("query", "--db", db, "--sql", sql, "-f", "json").output)
    assert row["deep"] == corpus.nested(corpus.DEEP_LEVELS).decode().replace(" ", "")
    # Shallow JSON still comes out as objects.
    sql = "SELECT args FROM events WHERE trace = 'sdpa_flash' AND cat = 'kernel' LIMIT 1"
    (row,) = json.loads(invoke_cli("query", "--db", db, "--sql", sql, "-f", "json").output)
    assert isinstance(row["args"], dict) and row["args"]["grid"]


@pytest.mark.parametrize("cache", ["a_file", "a_file/below_it"])
def test_an_unusable_cache_folder_is_one_line(isolated_cwd, monkeypatch, cache):
    (isolated_cwd / "a_file").write_text("not a folder")
    monkeypatch.setenv("TRACEKIT_CACHE", str(isolated_cwd / cache))
    result = invoke_cli("query", "summary")  # no database here: the samples' database is built in the cache
    assert_one_error_line(result, f"{isolated_cwd / cache}: the cache folder cannot be used")


def _tracekit(*args, cwd):
    """Runs tracekit in a process of its own: a hang fails the test (timeout) instead of stalling it."""
    return subprocess.run([sys.executable, "-m", "tracekit", *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


@pytest.mark.parametrize("command", ["load", "open"])
def test_a_fifo_given_as_a_trace_is_refused_at_once(tmp_path, command):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    args = ["load", fifo, "--db", tmp_path / "t.duckdb"] if command == "load" else ["open", fifo, "--no-browser"]
    result = _tracekit(*args, cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"Error: {fifo}: is a FIFO (named pipe), not a trace file\n"
    assert not (tmp_path / "t.duckdb").exists()


def test_a_device_given_as_a_trace_is_refused_at_once(tmp_path):
    result = invoke_cli("load", "/dev/zero", "--db", tmp_path / "t.duckdb")
    assert_one_error_line(result, "/dev/zero: is a device, not a trace file")
    assert not (tmp_path / "t.duckdb").exists()


@pytest.fixture(scope="module")
def huge_name(tmp_path_factory):
    """A trace whose second event's name is 128 MB and a byte: over twice DuckDB's maximum_object_size
    (64 MB), where DuckDB stops with a message naming the file it reads: a load's FIFO, in a temp folder."""
    path = tmp_path_factory.mktemp("huge") / "huge_name.json"
    small = json.dumps(tb.kernel("small", 1, 2, 1))
    with open(path, "w") as out:
        out.write('{"traceEvents": [' + small + ', {"ph": "X", "cat": "kernel", "name": "')
        block = "k" * (1 << 20)
        for _ in range(128):
            out.write(block)
        out.write('k", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {}}]}')
    return path


def test_an_event_too_big_is_said_of_the_users_file(huge_name, tmp_path):
    result = invoke_cli("load", huge_name, "--db", tmp_path / "t.duckdb")
    assert_one_error_line(result, f"{huge_name}: an event too big to read: tracekit reads events of up to 64 MB, "
                                  "and this one runs past 127 MB")
    assert "events.json" not in result.output


def test_an_event_too_big_in_a_lake_load_of_two_files_is_said_of_its_file(huge_name, tmp_path):
    result = invoke_cli("load", huge_name, SAMPLE_TRACES / "naive.json.gz", "--lake", tmp_path / "lake", "-j", "2")
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error: /")]
    assert errors == [f"Error: {huge_name}: an event too big to read: tracekit reads events of up to 64 MB, "
                      "and this one runs past 127 MB"]
