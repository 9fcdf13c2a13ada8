"""No surprises: a trace name that is not loaded, a parameter of the wrong type, two alternatives at
once, `hta --trace a b`, a query while another process holds the database, what a load wrote to,
`open` on a file that is not a trace, and `schema` listing every table a query can read."""

import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import SAMPLE_TRACES, db_rows, invoke_cli as invoke
from tracekit.analysis.named_queries import named_queries

LOADED = "flex, naive, naive_inplace, sdpa_cudnn, sdpa_default, sdpa_efficient, sdpa_flash, sdpa_math"
TRACE_QUERIES = sorted(name for name, query in named_queries().items() if "trace" in query.params)


def assert_error(result, message, exit_code=1):
    assert result.exit_code == exit_code, result.output
    assert result.output.strip().splitlines() == [f"Error: {message}"], result.output


def described(schema_output):
    """The tables and views `tracekit schema` describes: `name: ...` or `name (a table): ...` lines."""
    return {line.split(":")[0].split(" ")[0] for line in schema_output.splitlines()
            if line and not line.startswith((" ", "#"))}


@pytest.fixture
def own_db(sample_db, tmp_path):
    """A copy of the sample database this test may write to (hta) or lock."""
    db = tmp_path / "t.duckdb"
    shutil.copyfile(sample_db, db)
    return db


def test_every_named_query_takes_a_trace(sample_db):
    assert TRACE_QUERIES == sorted(named_queries())


@pytest.mark.parametrize("name", TRACE_QUERIES)
def test_a_trace_that_is_not_loaded_is_an_error_in_every_named_query(sample_db, name):
    assert_error(invoke("query", name, "--db", sample_db, "-p", "trace", "nave"),
                 f"no trace named 'nave' (loaded: {LOADED})")


@pytest.mark.parametrize("args", [
    ["export", "--trace", "nave", "-o", "{tmp}/x.json"],
    ["open", "--trace", "nave", "--no-browser"],
    ["hta", "--trace", "nave"],
    ["hta", "diff", "naive", "nave"],
    ["hta", "--trace", "naive", "nave"],
])
def test_a_trace_that_is_not_loaded_is_an_error_in_every_command(own_db, tmp_path, args):
    result = invoke(*[a.format(tmp=tmp_path) for a in args], "--db", own_db)
    assert_error(result, f"no trace named 'nave' (loaded: {LOADED})")
    assert db_rows(own_db, "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'hta_%'") == [(0,)]


@pytest.mark.parametrize("command, name, value, says", [
    (["query", "top_kernels"], "limit", "ten", "takes a number"),
    (["query", "top_kernels"], "limit", "", "takes a number"),
    (["query", "top_kernels"], "limit", "2.5", "counts something: a whole number"),
    (["query", "top_kernels"], "limit", "-1", "must be 1 or more"),
    (["query", "top_kernels"], "limit", "nan", "takes a finite number"),
    (["query", "top_kernels"], "limit", "3000000000", "must be at most 2147483647"),  # DuckDB's cast failed
    (["query", "top_kernels"], "limit", "١٢", "takes a number"),  # Arabic-Indic digits: float() reads them
    (["query", "top_kernels"], "limit", "1_0", "takes a number"),
    (["query", "rank_steps"], "step", "-2", "must be 0 or more"),
    (["findings", "--rule", "gpu_idle"], "min_gap_us", "abc", "takes a number"),
    (["findings", "--rule", "gpu_idle"], "min_gap_us", "-5", "must be 0 or more"),
    (["findings", "--rule", "low_occupancy"], "max_pct", "150", "is a percent: from 0 to 100"),
    (["findings"], "max_evidence", "1.5", "counts something: a whole number"),
])
def test_a_parameter_that_is_not_a_value_of_its_kind_is_one_line(sample_db, command, name, value, says):
    """Queries and rules check -p alike, before any SQL runs (not DuckDB's cast error and the SQL)."""
    assert_error(invoke(*command, "--db", sample_db, "-p", name, value), f"-p {name} {says} (got {value!r})")


@pytest.mark.parametrize("command, name, value", [
    (["query", "collective_skew"], "min_wait_us", "1e3"),
    (["findings", "--rule", "gpu_idle"], "min_gap_us", "1e3"),
    (["findings", "--rule", "gpu_idle"], "min_gap_us", "12.5"),
    (["query", "top_kernels"], "limit", "2e0"),
])
def test_a_number_may_be_written_as_numbers_are(sample_db, command, name, value):
    result = invoke(*command, "--db", sample_db, "-p", name, value, "-f", "csv")
    assert result.exit_code == 0, result.output


def test_an_integer_parameter_is_bound_as_one(sample_db):
    result = invoke("query", "top_kernels", "--db", sample_db, "-p", "limit", "2", "-p", "trace", "sdpa_math",
                    "-f", "csv")
    assert result.exit_code == 0, result.output
    assert [line.split(",")[1] for line in result.output.splitlines()[1:]] == ["1", "2"]


@pytest.mark.parametrize("args, message", [
    (["query", "memcpy", "--sql", "SELECT 1"], "give a query NAME or --sql SQL, not both"),
    (["export", "--trace", "naive", "--sql", "SELECT * FROM events", "-o", "x.json"],
     "give --trace NAME or --sql SQL, not both"),
    (["open", "trace.json", "--trace", "naive"], "give a TRACE_FILE or --trace NAME, not both"),
    (["query", "memcpy", "-p", "trace", "naive", "-p", "trace", "flex"], "-p trace is given twice"),
    (["query", "memcpy", "--list"], "give --list or a query, not both"),
])
def test_two_alternatives_at_once_say_give_one_not_both(sample_db, args, message):
    assert_error(invoke(*args, "--db", sample_db), message, exit_code=2)


def test_hta_takes_several_traces_after_one_trace_option(own_db):
    pytest.importorskip("hta", reason="needs HTA: pip install 'tracekit[hta]'")
    assert "--trace a b, or --trace a --trace b" in " ".join(invoke("hta", "--help").output.split())
    result = invoke("hta", "--db", own_db, "--trace", "naive", "sdpa_flash")
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in result.output.splitlines()] == ["naive", "sdpa_flash"]
    assert db_rows(own_db, "SELECT DISTINCT trace FROM hta_runs ORDER BY 1") == [("naive",), ("sdpa_flash",)]
    # The tables HTA stored are there for `tracekit schema`, with what they hold.
    schema = invoke("schema", "--db", own_db)
    assert schema.exit_code == 0, schema.output
    stored = {row[0] for row in db_rows(own_db, "SELECT table_name FROM information_schema.tables")}
    assert {"hta_kernel_breakdown", "hta_runs", "hta_idle_time"} <= stored
    assert {name for name in stored if not name.startswith("_")} == described(schema.output)  # _private helpers aside
    assert "\nhta_runs: each HTA analysis of the latest run: ok or failed, and why\n  trace VARCHAR," in schema.output


def test_schema_without_hta_lists_the_views_and_the_storage_tables(sample_db):
    result = invoke("schema", "--db", sample_db)
    assert result.exit_code == 0, result.output
    relations = {row[0] for row in db_rows(sample_db, "SELECT table_name FROM information_schema.tables")}
    assert {name for name in relations if not name.startswith("_")} == described(result.output)  # _private helpers aside
    assert "hta_" not in result.output


# Holds the database's write lock as a load does, until a line comes on stdin.
HOLDER = """
import sys
from tracekit.store.database import connect
con = connect(sys.argv[1])
con.execute("BEGIN")
con.execute("INSERT INTO event_rows SELECT * FROM event_rows")
print("holding", flush=True)
sys.stdin.readline()
con.execute("ROLLBACK")
con.close()
"""


def tracekit_process(*args):
    return subprocess.Popen([sys.executable, "-m", "tracekit", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_query_waits_for_a_database_another_process_holds(own_db):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(own_db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        query = tracekit_process("query", "--db", own_db, "--sql", "SELECT count(*) AS traces FROM traces", "-f", "csv")
        waiting = query.stderr.readline()  # printed once it has found the lock and waits
        assert waiting.startswith(f"{own_db}: database is locked by python") and f"(PID {holder.pid})" in waiting
        assert "waiting up to 30 s for it (--wait SECONDS)" in waiting
        time.sleep(0.5)
        assert query.poll() is None  # still waiting
        holder.stdin.write("done\n")
        holder.stdin.flush()
        out, err = query.communicate(timeout=60)
        assert query.returncode == 0, err
        assert out == "traces\n8\n" and err == ""
    finally:
        holder.kill()
        holder.wait()


def test_a_wait_that_runs_out_is_one_error_line(own_db):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(own_db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        query = subprocess.run([sys.executable, "-m", "tracekit", "query", "summary", "--db", str(own_db),
                                "--wait", "1"], capture_output=True, text=True, timeout=60)
        assert time.monotonic() - started >= 1
    finally:
        holder.kill()
        holder.wait()
    assert query.returncode == 1 and query.stdout == ""
    waiting, error = query.stderr.splitlines()
    assert "waiting up to 1 s for it" in waiting
    assert error.startswith(f"Error: {own_db}: database is locked by python")
    assert error.endswith("still locked after waiting 1 s (--wait SECONDS waits longer)")


def test_a_query_during_a_real_load_waits_for_it_and_sees_what_it_loaded(tmp_path):
    db = tmp_path / "new.duckdb"
    load = tracekit_process("load", SAMPLE_TRACES, "--db", db)
    while not db.exists() and load.poll() is None:
        time.sleep(0.01)
    query = tracekit_process("query", "--db", db, "--sql", "SELECT count(*) AS traces FROM traces", "-f", "csv")
    out, err = query.communicate(timeout=120)
    load_out, load_err = load.communicate(timeout=120)
    assert load.returncode == 0, load_err
    assert query.returncode == 0, err
    # The load holds the database from its first file to its last commit: a query that came while
    # it ran waited it out (as it does here, unless the load was done before the query started).
    assert out == "traces\n8\n"
    assert err == "" or ("database is locked by python" in err and "waiting up to 30 s" in err), err
    assert load_out.splitlines()[-1] == f"into {db.resolve()}: 8 loaded; it holds 8 traces"


def test_a_load_says_which_database_it_wrote_to(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = invoke("load", SAMPLE_TRACES / "naive.json.gz", SAMPLE_TRACES / "flex.json.gz")
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[-1] == f"into {tmp_path / 'tracekit.duckdb'}: 2 loaded; it holds 2 traces"
    again = invoke("load", SAMPLE_TRACES / "naive.json.gz", SAMPLE_TRACES / "sdpa_flash.json.gz", "--db", "other.duckdb")
    assert again.output.splitlines()[-1] == f"into {tmp_path / 'other.duckdb'}: 2 loaded; it holds 2 traces"
    same = invoke("load", SAMPLE_TRACES / "naive.json.gz")
    assert same.output.splitlines()[-1] == f"nothing new for {tmp_path / 'tracekit.duckdb'}: 1 skipped; it holds 2 traces"


@pytest.mark.parametrize("text", ["[]", '{"traceEvents": []}', '{"traceEvents": [], "deviceProperties": []}'])
def test_a_trace_of_no_events_loads_and_says_it_holds_none(tmp_path, text):
    trace = tmp_path / "nothing.json"
    trace.write_text(text)
    result = invoke("load", trace, "--db", tmp_path / "t.duckdb")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"loaded nothing: 0 events, 0 kernels from {trace} in ")
    assert first.endswith(" s; it holds no events: every query of it returns no rows"), first
    full = invoke("load", SAMPLE_TRACES / "naive.json.gz", "--db", tmp_path / "t.duckdb")
    assert "holds no events" not in full.output


@pytest.mark.parametrize("name, problem", [
    ("README.md", "not JSON: a trace starts with { or ["),
    ("pyproject.toml", "not a trace: a JSON array of events holds objects, [{...}, ...]"),
])
def test_open_refuses_a_file_that_is_not_a_trace(name, problem):
    from conftest import ROOT
    assert_error(invoke("open", ROOT / name, "--no-browser"), f"{ROOT / name}: {problem}")


def test_open_refuses_a_trace_cut_short_with_the_error_load_gives(tmp_path):
    """A truncated trace (its array never closed, or its gzip ended early) is refused before the
    UI is sent to it, in the line `load` says for the same file."""
    import gzip

    text = gzip.decompress((SAMPLE_TRACES / "naive.json.gz").read_bytes())
    cut_json, cut_gz = tmp_path / "cut.json", tmp_path / "cut.json.gz"
    cut_json.write_bytes(text[: len(text) // 2])
    cut_gz.write_bytes((SAMPLE_TRACES / "naive.json.gz").read_bytes()[:-100])
    for cut in (cut_json, cut_gz):
        loaded = invoke("load", cut, "--db", tmp_path / "t.duckdb")
        opened = invoke("open", cut, "--no-browser")
        assert loaded.exit_code == opened.exit_code == 1 and "Serving" not in opened.output
        [load_line] = [line for line in loaded.output.splitlines() if line.startswith("Error:")]
        # the same problem; its advice load's --lenient, which open has not, and open --trace after it
        assert opened.output.split(" (")[0] == load_line.split(" (")[0] and len(opened.output.splitlines()) == 1
        assert "tracekit load --lenient" in opened.output and "then tracekit open --trace NAME" in opened.output


def test_open_refuses_a_database_and_a_json_that_is_not_a_trace(sample_db, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"name": "not a trace", "steps": [1, 2]}')
    assert_error(invoke("open", config, "--no-browser"),
                 f"{config}: a JSON object without a traceEvents array: not a Chrome/Kineto trace")
    result = invoke("open", sample_db, "--no-browser")
    assert result.exit_code == 1 and result.output.startswith(f"Error: {sample_db}: not ")


def test_open_trace_without_a_database_uses_the_samples_and_says_what_it_served(isolated_cwd):
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "open", "--trace", "naive", "--no-browser",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip().split("url=")[1]
        request = urllib.request.Request(url, headers={"Origin": "https://ui.perfetto.dev"})
        refused = urllib.request.Request(url)
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(refused, timeout=10)
        with urllib.request.urlopen(request, timeout=10) as response:
            served = response.read()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert err == "(no --db and no tracekit.duckdb here: opening from the bundled sample traces)\n"
    naive = SAMPLE_TRACES / "naive.json.gz"
    assert served == naive.read_bytes()
    assert out.splitlines()[-1] == (f"Served {naive.resolve()} (11.1 KiB) to ui.perfetto.dev and stopped; "
                                    "refused 1 request that was not the UI's.")


def test_open_refuses_the_rows_a_query_wrote_as_json(sample_db, tmp_path):
    """`query -f json` writes a JSON array of objects, as a bare-array Chrome trace is: its first
    object has no phase (ph), so it is no trace (issue [16] item 7)."""
    rows = tmp_path / "rows.json"
    assert invoke("query", "memcpy", "--db", sample_db, "-o", rows).exit_code == 0
    assert_error(invoke("open", rows, "--no-browser"),
                 f"{rows}: not a trace: its array's first object has no ph (every Chrome trace event has a phase), "
                 "keys trace, kind, caused_by, source, memcpy_count")


def test_an_event_error_shows_the_event_as_written(tmp_path):
    """The keys the event has, not its parsed columns with a null for each it lacks (issue [16]
    item 9: `an event has no ph: {"ph":null,"ts":null,...}`)."""
    trace = tmp_path / "no_ph.json"
    trace.write_text('{"traceEvents": [{"name": "k", "ts": 5, "dur": 1, "pid": 1, "tid": 1, "cat": "kernel"}]}')
    assert_error(invoke("load", trace, "--db", tmp_path / "t.duckdb"),
                 f'{trace}: an event has no ph: {{"ts":5,"dur":1,"cat":"kernel","pid":"1","tid":"1","name":"k"}}')


@pytest.mark.parametrize("seconds, says", [("nan", ""), ("inf", ""), ("1_0", ""), ("٣", ""),
                                           ("99999999999", " from 0 to 86400 (a day)")])
def test_a_wait_that_is_no_number_of_seconds_is_a_usage_error(own_db, seconds, says):
    """click's FloatRange took what float() takes: nan, inf, 1_0, other scripts' digits."""
    result = invoke("query", "summary", "--wait", seconds, "--db", own_db)
    assert result.exit_code == 2 and result.output.strip() == \
        f"Error: Invalid value for '--wait': {seconds} is not a number of seconds{says}"


@pytest.mark.parametrize("args, says", [
    (["query", "summary", "-p", "trace", "x\udcff"], "-p trace is not UTF-8 text (byte 0xff at character 2)"),
    (["query", "--sql", "SELECT $v AS v", "-p", "v", "\udcff"], "-p v is not UTF-8 text (byte 0xff at character 1)"),
    (["diff", "naive", "x\udcff"], "the trace name 'x\\udcff' is not UTF-8 text (byte 0xff at character 2)"),
    (["whatif", "x\udcff"], "the trace name 'x\\udcff' is not UTF-8 text (byte 0xff at character 2)"),
])
def test_a_name_or_value_that_is_not_utf8_is_one_line(own_db, args, says):
    """Bytes that are not UTF-8 on the command line come in as lone surrogates, which DuckDB cannot
    take: its Python Conversion Failure came up under a traceback."""
    result = invoke(*args, "--db", own_db)
    assert result.exit_code == 1 and result.output.strip() == f"Error: {says}", result.output
