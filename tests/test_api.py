"""The Python API covers every command: load (good files load, bad ones are reported, in the API's
words), query, report, export, schema, hta; each returns what its command prints or writes."""

import json
import re
import shutil
import subprocess
import sys

import pytest

import make_bad_corpus as corpus
import tracekit
from conftest import SAMPLE_TRACES, db_rows, invoke_cli as invoke
from tracekit.errors import DatabaseLocked, LoadError, QueryError, TraceFileError

BAD = {case.name: case for case, _ in corpus.bad_cases()}
# The cases whose command-line message names a flag (--lenient), and two whose message names none.
NAMES_LENIENT = ["bad_json_in_events.json", "bad_utf8_in_event.json", "broken_tail.json", "cut_gzip.json.gz",
                 "truncated.json", "truncated_after_event.json"]
WORDED = NAMES_LENIENT + ["no_ph.json", "empty.json"]
# A command-line flag or option in a message: --lenient, --db, -p NAME, -o.
CLI_WORDS = re.compile(r"(?<![\w-])(--[a-z][a-z-]*|-[po] )")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    corpus.build(folder)
    return folder


@pytest.fixture
def own_db(sample_db, tmp_path):
    db = tmp_path / "t.duckdb"
    shutil.copyfile(sample_db, db)
    return db


def test_load_loads_the_good_files_and_reports_the_bad_ones(corpus_dir, tmp_path):
    db = tmp_path / "mixed.duckdb"
    files = [SAMPLE_TRACES / "naive.json.gz", corpus_dir / "truncated.json", corpus_dir / "no_ph.json",
             SAMPLE_TRACES / "flex.json.gz"]
    with pytest.raises(LoadError) as raised:
        tracekit.load(files, db=db)
    error = raised.value
    assert [result.trace for result in error.results] == ["naive", "flex"]
    assert [path.name for path, _ in error.failures] == ["truncated.json", "no_ph.json"]
    assert all(isinstance(problem, TraceFileError) for _, problem in error.failures)
    message = str(error)
    assert message.startswith("2 of 4 files failed to load (")
    assert message.endswith(f"; the other 2 are in {db}")
    assert BAD["truncated.json"].problem in message and BAD["no_ph.json"].problem in message
    assert "lenient=True" in message and not CLI_WORDS.search(message), message
    assert db_rows(db, "SELECT trace FROM traces ORDER BY trace") == [("flex",), ("naive",)]
    # lenient= loads what can be read of both, as --lenient does
    results = tracekit.load(files[1:3], db=db, lenient=True)
    assert [(r.status, sum(r.dropped.values())) for r in results] == [("loaded", 1), ("loaded", 1)]


def test_a_load_that_loads_nothing_leaves_no_database(corpus_dir, tmp_path):
    db = tmp_path / "nothing.duckdb"
    with pytest.raises(LoadError, match="2 of 2 files failed to load .*; nothing was loaded"):
        tracekit.load([corpus_dir / "empty.json", corpus_dir / "no_ts.json"], db=db)
    assert not db.exists()


@pytest.mark.parametrize("name", WORDED)
def test_each_bad_file_is_the_clis_error_in_the_apis_words(corpus_dir, tmp_path, name):
    db = tmp_path / "t.duckdb"
    cli_error = invoke("load", corpus_dir / name, "--db", db).output.strip()
    assert cli_error.startswith("Error: ")
    with pytest.raises(TraceFileError) as raised:
        tracekit.load(corpus_dir / name, db=db)
    message = str(raised.value)
    assert BAD[name].problem in message
    assert not CLI_WORDS.search(message), message
    assert ("--lenient" in cli_error) == ("lenient=True" in message) == (name in NAMES_LENIENT)
    assert CLI_WORDS.sub("", cli_error[len("Error: "):]) == CLI_WORDS.sub("", message.replace("lenient=True", ""))


def test_query_errors_name_the_apis_arguments(sample_db):
    with pytest.raises(QueryError, match=r"^params\['limit'\] takes a number \(got 'ten'\)$"):
        tracekit.query("top_kernels", db=sample_db, params={"limit": "ten"})
    with pytest.raises(QueryError, match=r"the SQL uses \$n: give it a value with params=\{'n': VALUE\}"):
        tracekit.query(sql="SELECT * FROM kernels WHERE dur_us > $n", db=sample_db)
    with pytest.raises(QueryError, match="reaches outside the trace database .*allow_files=True lets"):
        tracekit.query(sql="SELECT * FROM read_text('/etc/passwd')", db=sample_db)
    with pytest.raises(ValueError, match=r"""^engine='sparc': it is "duckdb" or "spark"$"""):
        tracekit.query("summary", db=sample_db, engine="sparc")
    with pytest.raises(ValueError, match=r"""^master= is for engine="spark"$"""):
        tracekit.query("summary", db=sample_db, master="local[1]")
    with pytest.raises(Exception, match=r"no trace named 'nave' \(loaded: flex, naive,"):
        tracekit.query("memcpy", db=sample_db, params={"trace": "nave"})
    frame = tracekit.query(sql="SELECT count(*) AS n FROM kernels WHERE trace = $t AND dur_us > $us",
                           db=sample_db, params={"t": "naive", "us": 1000})
    assert frame["n"].tolist() == [db_rows(sample_db, "SELECT count(*) FROM kernels "
                                                      "WHERE trace = 'naive' AND dur_us > 1000")[0][0]]


def test_report_returns_what_the_command_prints_and_writes(sample_db, tmp_path):
    markdown = tracekit.report(sample_db, fmt="markdown")
    assert markdown == invoke("report", "--db", sample_db, "-f", "markdown").output
    html = tracekit.report(sample_db, output=tmp_path / "api.html")
    assert invoke("report", "--db", sample_db, "-o", tmp_path / "cli.html").exit_code == 0
    assert html == (tmp_path / "api.html").read_text() == (tmp_path / "cli.html").read_text()
    assert html.startswith("<!DOCTYPE html>")


def test_export_writes_what_the_command_writes(sample_db, tmp_path):
    exported = tracekit.export(tmp_path / "api.json", trace="flex", db=sample_db, findings=True)
    cli = invoke("export", "--trace", "flex", "--findings", "--db", sample_db, "-o", tmp_path / "cli.json")
    assert cli.output.strip() == (f"wrote {exported.events} events to {exported.path}; "
                                  f"{exported.moved_slices} partially overlapping slice(s) moved to extra tracks"
                                  ).replace("api.json", "cli.json")
    assert cli.stdout == "" and cli.stderr == cli.output  # what a command wrote to a file, on stderr
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert len(json.loads(exported.path.read_text())["traceEvents"]) == exported.events
    picked = tracekit.export(tmp_path / "k.json", sql="SELECT * FROM events WHERE trace = 'naive' AND cat = 'kernel'",
                             db=sample_db)
    assert picked.events > 30 and picked.moved_slices == 0


def test_schema_returns_what_the_command_prints(sample_db):
    text = tracekit.schema(sample_db)
    assert text == invoke("schema", "--db", sample_db).output
    assert "\nkernels: one row per GPU kernel execution." in text and "\ntrace_files:\n" in text


def test_hta_runs_the_analyses_and_returns_a_row_per_analysis(own_db):
    pytest.importorskip("hta", reason="needs HTA: pip install 'tracekit[hta]'")
    runs = tracekit.hta(["naive", "sdpa_math"], db=own_db)
    stored = db_rows(own_db, "SELECT trace, analysis, status FROM hta_runs WHERE analysis != 'parse' ORDER BY ALL")
    assert sorted(zip(runs["trace"], runs["analysis"], runs["status"])) == stored
    kernels = db_rows(own_db, "SELECT sum(calls) FROM hta_kernel_breakdown WHERE trace = 'sdpa_math'")[0][0]
    assert kernels == db_rows(own_db, "SELECT count(*) FROM kernels WHERE trace = 'sdpa_math'")[0][0]
    diff = tracekit.hta_diff("naive", "naive_inplace", db=own_db)
    memcpy = diff[diff["name"].str.startswith("Memcpy")]
    assert memcpy[["control_counts", "test_counts"]].values.tolist() == [[6, 0]]
    with pytest.raises(Exception, match=r"no trace named 'nave'"):
        tracekit.hta("nave", db=own_db)


HOLDER = """
import sys
from tracekit.store.database import connect
con = connect(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
"""


def test_the_api_waits_for_a_locked_database_and_says_so_in_its_own_words(own_db):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(own_db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(DatabaseLocked) as raised:
            tracekit.query("summary", db=own_db, wait=0)
        assert str(raised.value).endswith("wait for it to finish (or give wait=SECONDS)")
        with pytest.warns(UserWarning, match="database is locked .*waiting up to 0.3 s for it"):
            with pytest.raises(DatabaseLocked, match=r"still locked after waiting 0.3 s \(wait=SECONDS waits longer\)"):
                tracekit.schema(own_db, wait=0.3)
    finally:
        holder.kill()
        holder.wait()
    assert len(tracekit.query("summary", db=own_db)) == 8
