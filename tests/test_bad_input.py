"""Bad input: every case of tests/make_bad_corpus.py, odd but valid traces, a folder mixing both,
a locked database, a database that is not DuckDB, and SQL that tries to write.

Each bad input gets one line, `Error: <path>: <problem>`, exit status 1, no traceback, and leaves
the database as it was (the same row counts and the same trace_files rows).
"""

import gzip
import json
import shutil
import subprocess
import sys
import zlib

import pytest

import make_bad_corpus as corpus
from conftest import SAMPLE_TRACES, db_rows, invoke_cli
from tracekit.ingest import event_read

BAD = {case.name: case for case, _ in corpus.bad_cases()}
LENIENT_LOADS = sorted(name for name, case in BAD.items() if case.lenient)
LENIENT_FAILS = sorted(name for name, case in BAD.items() if not case.lenient)
SOURCE_EVENTS = len(corpus.source_trace()["traceEvents"])  # 242


invoke = invoke_cli
rows = db_rows


def assert_one_line_error(result, path, problem):
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: {path}: "), lines[0]
    assert problem in lines[0], lines[0]


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    """A database holding the naive sample, copied fresh for each test by `db`."""
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    assert invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", path).exit_code == 0
    return path


@pytest.fixture
def db(base_db, tmp_path):
    path = tmp_path / "t.duckdb"
    shutil.copy(base_db, path)
    return path


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_exit_1_and_leaves_the_database_as_it_was(corpus_dir, db, name):
    before = corpus.database_state(db)
    result = invoke("load", corpus_dir / name, "--db", db)
    assert_one_line_error(result, corpus_dir / name, BAD[name].problem)
    assert corpus.database_state(db) == before
    assert before[0]["event_rows"] == 517  # the naive trace is still all there


@pytest.mark.parametrize("name", LENIENT_FAILS)
def test_lenient_fails_the_same_way_on_what_it_cannot_read(corpus_dir, db, name):
    before = corpus.database_state(db)
    result = invoke("load", corpus_dir / name, "--db", db, "--lenient")
    assert_one_line_error(result, corpus_dir / name, BAD[name].problem)
    assert corpus.database_state(db) == before


def _complete_events_before(raw, cut):
    """(events of the source text that end before byte `cut`, the byte after the last of them),
    decoding the events one by one, independently of the loader's own search for the cut."""
    text = raw.decode()
    decoder = json.JSONDecoder()
    pos = text.index("[", text.index('"traceEvents"')) + 1
    complete, last_end = 0, pos
    while True:
        pos = text.index("{", pos)
        _, end = decoder.raw_decode(text, pos)
        if len(text[:end].encode()) > cut:
            return complete, len(text[:last_end].encode())
        complete, last_end, pos = complete + 1, end, end


@pytest.mark.parametrize("name", LENIENT_LOADS)
def test_lenient_loads_what_can_be_read_and_says_what_it_dropped(corpus_dir, db, name):
    case = BAD[name]
    result = invoke("load", corpus_dir / name, "--db", db, "--lenient")
    assert result.exit_code == 0, result.output
    assert case.lenient in result.output
    trace = name.split(".")[0]
    raw = corpus.source_bytes()
    if name.startswith("truncated_after"):
        expected, dropped = _complete_events_before(raw, len(corpus.cut_after_event()))[0], 0
    elif name.startswith("truncated") or name == "cut_gzip.json.gz":
        # What a gzip cut short holds is what zlib can decompress of it.
        cut = len(corpus.cut_mid_event()) if name.startswith("truncated") else \
            len(zlib.decompressobj(wbits=31).decompress(corpus.cut_gzip()))
        expected, kept_bytes = _complete_events_before(raw, cut)
        dropped = 1
        assert f"dropped 1 event: 1 cut off by truncation (the last {cut - kept_bytes} bytes)" in result.output
    elif name in ("broken_tail.json", "junk_after_trace.json", "junk_after_array.json"):
        expected, dropped = SOURCE_EVENTS, 0
    else:
        expected, dropped = SOURCE_EVENTS - 1, 1  # the one bad event
        assert "dropped 1 event: " in result.output
    assert f"loaded {trace}: {expected} events" in result.output
    assert rows(db, f"SELECT events, dropped_events FROM traces WHERE trace = '{trace}'") == [(expected, dropped)]
    assert rows(db, f"SELECT count(*) FROM events WHERE trace = '{trace}'") == [(expected,)]


def test_lenient_cuts_of_the_truncated_trace_keep_exactly_the_complete_events(corpus_dir, db):
    # 110 of the 242 events end before the cut two thirds of the way through the file's bytes.
    invoke("load", corpus_dir / "truncated.json.gz", "--db", db, "--lenient")
    assert rows(db, "SELECT events FROM traces WHERE trace = 'truncated'") == [(110,)]
    assert rows(db, "SELECT dropped_reasons FROM trace_files WHERE trace = 'truncated'") == [
        ('{"cut off by truncation": 1}',)]
    anomalies = json.loads(invoke("query", "anomalies", "--db", db, "-p", "trace", "truncated", "-f", "json").output)
    assert [(a["oddity"], a["events"]) for a in anomalies] == [("dropped on load", 1)]


def test_a_syntax_error_in_the_event_array_names_the_event(corpus_dir, db):
    # The corpus breaks event 3 (index 2); DuckDB's own count is one off (it counts the array).
    result = invoke("load", corpus_dir / "bad_json_in_events.json", "--db", db)
    assert "at character 52 of event 3; --lenient drops it)" in result.output, result.output
    assert "tracekit-" not in result.output  # never the FIFO's temporary path


def test_a_path_that_does_not_exist_leaves_the_database_as_it_was(db, tmp_path):
    before = corpus.database_state(db)
    result = invoke("load", tmp_path / "missing.json.gz", "--db", db)
    assert_one_line_error(result, tmp_path / "missing.json.gz", "no such file")
    assert corpus.database_state(db) == before


def test_a_failed_load_creates_no_database(corpus_dir, tmp_path):
    new_db = tmp_path / "new.duckdb"
    result = invoke("load", corpus_dir / "empty.json", "--db", new_db)
    assert result.exit_code == 1
    assert not new_db.exists() and not (tmp_path / "new.duckdb.wal").exists()


def test_an_empty_folder_is_an_error(db, tmp_path):
    folder = tmp_path / "nothing_here"
    folder.mkdir()
    (folder / "notes.txt").write_text("no traces")
    before = corpus.database_state(db)
    result = invoke("load", folder, "--db", db)
    assert_one_line_error(result, folder, "a folder with no .json or .json.gz trace files in it")
    assert corpus.database_state(db) == before


@pytest.mark.parametrize("content", [b"hello, not a database\n", None])
def test_a_database_file_that_is_not_duckdb(corpus_dir, tmp_path, content):
    not_db = tmp_path / "not.duckdb"
    if content is None:
        shutil.copy(SAMPLE_TRACES / "naive.json.gz", not_db)  # a gzip trace given as --db by mistake
    else:
        not_db.write_bytes(content)
    original = not_db.read_bytes()
    for args in (["load", SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", not_db],
                 ["query", "summary", "--db", not_db]):
        result = invoke(*args)
        assert_one_line_error(result, not_db, "not a DuckDB database file")
    assert not_db.read_bytes() == original


def test_a_database_in_a_folder_that_does_not_exist(tmp_path):
    result = invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", tmp_path / "no" / "t.duckdb")
    assert_one_line_error(result, tmp_path / "no" / "t.duckdb", "does not exist")


def test_a_folder_mixing_good_and_bad_files_loads_the_good_and_lists_the_bad(corpus_dir, db, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for good in ("sdpa_flash.json.gz", "sdpa_cudnn.json.gz"):
        shutil.copy(SAMPLE_TRACES / good, folder / good)
    for bad in ("empty.json", "no_ph.json", "truncated.json.gz"):
        shutil.copy(corpus_dir / bad, folder / bad)
    result = invoke("load", folder, "--db", db)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    errors = [line for line in lines if line.startswith("Error: ")]
    assert [line.split(": ")[1] for line in errors[:3]] == [
        str(folder / "empty.json"), str(folder / "no_ph.json"), str(folder / "truncated.json.gz")]
    assert errors[3] == (f"Error: 3 of 5 files failed to load (empty.json, no_ph.json, truncated.json.gz); "
                         f"the other 2 are in {db}")
    assert sorted(line.split(":")[0] for line in lines if line.startswith("loaded ")) == [
        "loaded sdpa_cudnn", "loaded sdpa_flash"]
    assert rows(db, "SELECT trace, events FROM traces ORDER BY trace") == [
        ("naive", 517), ("sdpa_cudnn", 352), ("sdpa_flash", 242)]


def _anomalies(db, trace):
    result = invoke("query", "anomalies", "--db", db, "-p", "trace", trace, "-f", "json")
    assert result.exit_code == 0, result.output
    return [(a["oddity"], a["cat"], a["events"], a["example_dur_us"]) for a in json.loads(result.output)]


def test_negative_and_zero_durations_load_as_written_and_are_flagged(corpus_dir, db):
    result = invoke("load", corpus_dir / "odd_durations.json", "--db", db)
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT count(*), min(dur_us) FROM kernels WHERE trace = 'odd_durations'") == [(6, -2.5)]
    assert _anomalies(db, "odd_durations") == [
        ("negative duration", "kernel", 1, -2.5), ("zero duration", "cpu_op", 1, 0.0),
        ("zero duration", "kernel", 1, 0.0)]
    assert _anomalies(db, "naive") == []  # a real trace has none


def test_a_1_mb_kernel_name_loads(corpus_dir, db):
    result = invoke("load", corpus_dir / "huge_kernel_name.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT count(*), max(length(name)) FROM kernels WHERE trace = 'huge_kernel_name'") == [
        (6, 1 << 20)]


def test_unknown_categories_load_and_are_flagged(corpus_dir, db):
    result = invoke("load", corpus_dir / "unknown_category.json", "--db", db)
    assert result.exit_code == 0, result.output
    overhead = sum(e.get("cat") == "overhead" for e in corpus.source_trace()["traceEvents"])
    assert overhead == 3
    assert rows(db, "SELECT count(*) FROM events WHERE trace = 'unknown_category' AND cat = 'mystery_category'") == [
        (overhead,)]
    assert [a[:3] for a in _anomalies(db, "unknown_category")] == [("unknown category", "mystery_category", 3)]


def test_events_of_a_device_tracekit_does_not_read_are_counted(corpus_dir, db):
    """MTIA's, HPU's, XPU's... categories are Kineto's, so not unknown, but no view reads them: their
    work is in no GPU figure, and anomalies says how much was left aside (issue [16] item 10)."""
    result = invoke("load", corpus_dir / "other_device.json", "--db", db)
    assert result.exit_code == 0, result.output
    assert [a[:3] for a in _anomalies(db, "other_device")] == [("a device tracekit does not read", "mtia_ccp_events", 3)]


def test_string_pids_and_tids_give_the_same_tables_as_numbers(corpus_dir, db):
    result = invoke("load", corpus_dir / "string_pids.json", SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    ops = rows(db, "SELECT trace, count(*), sum(dur_us), sum(depth), count(step), count(parent_id) FROM cpu_ops"
                   " WHERE trace IN ('string_pids', 'sdpa_flash') GROUP BY trace ORDER BY trace")
    assert ops[0][1:] == ops[1][1:] and ops[0][1] == 114  # 102 cpu_op + 12 user_annotation, nested alike
    kernels = rows(db, "SELECT trace, count(*), sum(dur_us), count(cpu_op_id), count(step) FROM kernels"
                       " WHERE trace IN ('string_pids', 'sdpa_flash') GROUP BY trace ORDER BY trace")
    assert kernels[0][1:] == kernels[1][1:] and kernels[0][1] == 6


def test_a_number_written_as_a_string_is_read_as_that_number(corpus_dir, db):
    # The first kernel's ts (or dur) is quoted; the load matches the one of the unchanged trace.
    result = invoke("load", corpus_dir / "numeric_string_ts.json", corpus_dir / "numeric_string_dur.json",
                    SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    kernels = "SELECT ts_ns, dur_ns FROM events WHERE trace = '{}' AND cat = 'kernel' ORDER BY ALL"
    source = rows(db, kernels.format("sdpa_flash"))
    assert rows(db, kernels.format("numeric_string_ts")) == source
    changed = set(rows(db, kernels.format("numeric_string_dur"))) - set(source)
    assert len(changed) == 1 and changed.pop()[1] == 3500


HOLDER = """
import sys
import zlib
from tracekit.store.database import connect
con = connect(sys.argv[1])
con.execute("BEGIN")
con.execute("INSERT INTO event_rows SELECT * FROM event_rows")  # a load half done
print("ready", flush=True)
sys.stdin.readline()
"""


def test_a_locked_database_is_a_clear_error_and_a_killed_load_corrupts_nothing(db, tmp_path):
    before = corpus.database_state(db)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        for args in (["load", str(SAMPLE_TRACES / "sdpa_flash.json.gz")], ["query", "summary"]):
            second = subprocess.run([sys.executable, "-m", "tracekit", *args, "--db", str(db), "--wait", "0"],
                                    capture_output=True, text=True, timeout=60)
            assert second.returncode == 1
            assert second.stdout == "" and "Traceback" not in second.stderr
            assert second.stderr.count("\n") == 1, second.stderr
            assert second.stderr.startswith(f"Error: {db}: database is locked by python"), second.stderr
            assert f"(PID {holder.pid})" in second.stderr
    finally:
        holder.kill()  # mid-transaction, as a killed `tracekit load` would be
        holder.wait()
    assert corpus.database_state(db) == before
    result = invoke("load", SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", db)
    assert result.exit_code == 0, result.output
    assert rows(db, "SELECT trace, events FROM traces ORDER BY trace") == [("naive", 517), ("sdpa_flash", 242)]


@pytest.mark.parametrize("sql, refusal", [
    ("CREATE TABLE mine AS SELECT * FROM kernels", "CREATE is not allowed: a query is read-only"),
    ("DROP VIEW kernels", "DROP is not allowed: a query is read-only"),
    ("UPDATE trace_files SET trace = 'renamed'", "UPDATE is not allowed: a query is read-only"),
    ("SELECT count(*) FROM kernels; INSERT INTO trace_files SELECT * FROM trace_files",
     "the SQL holds 2 statements: a query runs one SELECT"),
    # A SELECT that would write gets as far as DuckDB, which refuses it on the read-only database.
    ("SELECT nextval('trace_id_seq')", "the database is opened read-only: `tracekit query` never changes it"),
])
def test_query_sql_cannot_change_the_database_and_says_so(db, sql, refusal):
    before = corpus.database_state(db)
    result = invoke("query", "--db", db, "--sql", sql)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith(f"Error: {refusal}"), result.output
    assert corpus.database_state(db) == before
    assert rows(db, "SELECT count(*) FROM kernels") == [(30,)]


def test_a_second_writable_attach_of_the_database_is_refused(db):
    before = corpus.database_state(db)
    result = invoke("query", "--db", db, "--sql", f"ATTACH '{db}' AS w (READ_ONLY false)")
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "ATTACH is not allowed" in result.output
    assert corpus.database_state(db) == before


def test_an_sql_syntax_error_shows_duckdbs_message_and_the_query(db):
    result = invoke("query", "--db", db, "--sql", "SELECT trace\nFROM traces\nWHERE")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert 'Parser Error: syntax error at or near "WHERE"' in result.output
    assert result.output.rstrip().endswith("in SQL: SELECT trace FROM traces WHERE")


def test_the_corpus_script_writes_every_case(tmp_path):
    out = subprocess.run([sys.executable, str(corpus.__file__), str(tmp_path)], capture_output=True, text=True,
                         check=True)
    names = sorted(list(BAD) + [case.name for case, _ in corpus.odd_cases()])
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert len(out.stdout.splitlines()) == len(names) == 52
    with gzip.open(tmp_path / "truncated.json.gz") as f:
        assert f.read() == (tmp_path / "truncated.json").read_bytes()


def test_an_event_past_duckdbs_buffer_is_named_too_big_without_a_temp_path(db, tmp_path, monkeypatch):
    # A name holding 33 MB of spaces (whitespace inside a string is the string's, and stays): DuckDB
    # reads an event in a buffer of twice maximum_object_size (16 MB at least), and its own error
    # names the FIFO it read. The exact read's limit lowered to 4 MB makes 33 MB enough; at its
    # real 64 MB the same takes an event of 128 MB.
    monkeypatch.setattr(event_read, "MAX_EVENT_BYTES", 4 << 20)
    raw = corpus.source_bytes()
    at = raw.index(b'"name": "', raw.index(b'"cat": "kernel"')) + len(b'"name": "')
    path = tmp_path / "wide_event.json"
    path.write_bytes(raw[:at] + b" " * (33 << 20) + raw[at:])
    before = corpus.database_state(db)
    result = invoke("load", path, "--db", db)
    assert_one_line_error(result, path, "an event too big to read: tracekit reads events of up to 4 MB, and this one"
                                        " runs past 31 MB")
    assert "tracekit-" not in result.output and "maximum_object_size" not in result.output
    assert corpus.database_state(db) == before
