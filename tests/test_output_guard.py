"""`-o` never overwrites the database being read, nor (without --force) a file of another format."""

import gzip
import hashlib
import os
import shutil
import struct
import zlib

import duckdb
import pytest

from conftest import SAMPLE_TRACES, invoke_cli as invoke
from tracekit.store.file_kind import GZIPPED_TRACE, HTML, JSON, TEXT, TRACE, XML, sniff

NAIVE = SAMPLE_TRACES / "naive.json.gz"


def png_bytes():
    """A real 1x1 PNG, built the way the format says."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    assert invoke("load", NAIVE, "--db", path).exit_code == 0
    return path


@pytest.fixture
def place(base_db, tmp_path, monkeypatch):
    """The trace database, and one existing file of each kind an -o might hit by mistake."""
    shutil.copy(base_db, tmp_path / "t.duckdb")
    con = duckdb.connect(str(tmp_path / "someone.duckdb"))
    con.execute("CREATE TABLE results AS SELECT 42 AS answer")
    con.close()
    shutil.copy(NAIVE, tmp_path / "trace.json.gz")
    shutil.copy(NAIVE, tmp_path / "packed.json")  # gzip bytes under a plain .json name
    (tmp_path / "plot.png").write_bytes(png_bytes())
    (tmp_path / "trace.json").write_text('[{"trace": "naive", "kernels": 30}]\n')  # an earlier query's JSON
    shutil.copy(tmp_path / "trace.json", tmp_path / "plain.json.gz")  # and JSON text under a .gz one
    (tmp_path / "kineto.json").write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "k", "ts": 1}]}\n')
    with gzip.open(tmp_path / "rows.csv.gz", "wt") as rows:  # a gzip that is no trace
        rows.write("a,b\n1,2\n")
    (tmp_path / "old.csv").write_text("a,b\n1,2\n")
    (tmp_path / "page.html").write_text("<!DOCTYPE html>\n<html><body>old report</body></html>\n")
    duckdb.sql("COPY (SELECT 1 AS x) TO '" + str(tmp_path / "old.parquet") + "' (FORMAT parquet)")
    # The same contents under names whose extension says no format, so -f decides what is written
    # (a name like trace.json picks json itself: -f csv with it is refused as a mismatch first).
    for name, neutral in (("trace.json", "trace.out"), ("page.html", "page.out"), ("old.parquet", "old.bin"),
                          ("old.csv", "old.txt")):
        shutil.copy(tmp_path / name, tmp_path / neutral)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_refused(result, *parts):
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("Error: ") and "Traceback" not in result.output
    for part in parts:
        assert part in result.output, result.output


DATABASE_NAMES = {
    "its path": lambda p: "t.duckdb",
    "another spelling": lambda p: str(p / "." / "t.duckdb"),
    "a symlink to it": lambda p: os.symlink(p / "t.duckdb", p / "link.csv") or "link.csv",
    "a hard link to it": lambda p: os.link(p / "t.duckdb", p / "hard.csv") or "hard.csv",
}


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("name", sorted(DATABASE_NAMES))
def test_query_o_never_names_the_database_force_or_not(place, name, force):
    output = DATABASE_NAMES[name](place)
    before = digest(place / "t.duckdb")
    result = invoke("query", "summary", "--db", "t.duckdb", "-f", "csv", "-o", output, *force)
    assert_refused(result, "is the database this command reads", "give another -o")
    assert digest(place / "t.duckdb") == before


@pytest.mark.parametrize("command", [
    ["query", "summary", "--db", "t.duckdb", "-f", "csv", "--force"],
    ["export", "--trace", "naive", "--db", "t.duckdb", "--force"],
    ["report", "--db", "t.duckdb", "--force"],
], ids=["query", "export", "report"])
def test_no_command_writes_over_the_database_or_its_wal(place, command):
    before = digest(place / "t.duckdb")
    result = invoke(*command, "-o", "t.duckdb")
    assert_refused(result, "t.duckdb: is the database this command reads")
    result = invoke(*command, "-o", "t.duckdb.wal")
    assert_refused(result, "t.duckdb.wal: is the database's .wal file this command reads")
    assert digest(place / "t.duckdb") == before and not (place / "t.duckdb.wal").exists()


# (command, existing file, what the refusal says it holds)
REFUSED = [
    (["query", "summary", "-f", "csv"], "someone.duckdb", "holds a DuckDB database, not csv"),
    (["query", "summary", "-f", "csv"], "trace.json.gz", "holds a gzipped trace (Kineto's JSON), not csv"),
    (["query", "summary", "-f", "json"], "kineto.json", "holds a trace (Kineto's JSON), not json"),
    (["query", "summary", "-f", "csv"], "plot.png", "holds a PNG image, not csv"),
    (["query", "summary", "-f", "csv"], "trace.out", "holds JSON, not csv"),
    (["query", "summary", "-f", "markdown"], "page.out", "holds HTML, not markdown"),
    (["query", "summary", "-f", "json"], "old.bin", "holds a Parquet file, not json"),
    (["query", "summary", "-f", "parquet"], "old.txt", "holds text, not parquet"),
    (["query", "--list", "-f", "table"], "someone.duckdb", "holds a DuckDB database, not table"),
    (["export", "--trace", "naive"], "packed.json", "holds a gzipped trace (Kineto's JSON), not a JSON trace"),
    (["export", "--trace", "naive"], "kineto.json", "holds a trace (Kineto's JSON), not a JSON trace"),
    (["export", "--trace", "naive"], "trace.json.gz", "holds a gzipped trace (Kineto's JSON), not a .json.gz trace"),
    (["export", "--trace", "naive"], "someone.duckdb", "holds a DuckDB database, not a JSON trace"),
    (["export", "--trace", "naive"], "plot.png", "holds a PNG image, not a JSON trace"),
    (["export", "--trace", "naive"], "plain.json.gz", "holds JSON, not a .json.gz trace"),
    (["report"], "someone.duckdb", "holds a DuckDB database, not html"),
    (["report", "-f", "html"], "trace.out", "holds JSON, not html"),
    (["report", "-f", "markdown"], "plot.png", "holds a PNG image, not markdown"),
]


@pytest.mark.parametrize("command, existing, holds", REFUSED,
                         ids=[f"{c[0]}{'-' + c[-1] if '-f' in c else ''}-over-{e}" for c, e, _ in REFUSED])
def test_an_existing_file_of_another_format_is_refused_and_kept(place, command, existing, holds):
    before = digest(place / existing)
    db = [] if "--list" in command else ["--db", "t.duckdb"]
    result = invoke(*command, *db, "-o", existing)
    assert_refused(result, f"{existing}: exists and {holds}", "(give another -o, or --force)")
    assert digest(place / existing) == before


FORCED = [(["query", "summary", "-f", "csv"], name) for name in ("someone.duckdb", "trace.json.gz", "plot.png")] + [
    (["export", "--trace", "naive"], "packed.json"), (["export", "--trace", "naive"], "trace.json.gz"),
    (["query", "summary", "-f", "json"], "kineto.json"), (["report"], "someone.duckdb")]


@pytest.mark.parametrize("command, existing", FORCED, ids=[f"{c[0]}-over-{e}" for c, e in FORCED])
def test_force_overwrites_a_file_of_another_format(place, command, existing):
    before = digest(place / existing)
    result = invoke(*command, "--db", "t.duckdb", "-o", existing, "--force")
    assert result.exit_code == 0, result.output
    assert digest(place / existing) != before


# (command, existing file of the same format it writes)
SAME_FORMAT = [
    (["query", "summary", "-f", "csv"], "old.csv"),
    (["query", "summary", "-f", "table"], "old.txt"),         # plain text is anyone's
    (["query", "summary", "-f", "json"], "trace.json"),
    (["query", "summary", "-f", "json"], "old.txt"),
    (["query", "summary", "-f", "parquet"], "old.parquet"),
    (["export", "--trace", "naive"], "trace.json"),
    (["report"], "page.html"),
    (["report", "-f", "markdown"], "old.txt"),
]


@pytest.mark.parametrize("command, existing", SAME_FORMAT, ids=[f"{c[0]}-{c[-1]}-over-{e}" for c, e in SAME_FORMAT])
def test_a_file_of_the_same_format_is_rewritten(place, command, existing):
    result = invoke(*command, "--db", "t.duckdb", "-o", existing)
    assert result.exit_code == 0, result.output
    assert "Error" not in result.output


def test_export_gz_rewrites_a_gzip_that_holds_no_trace(place):
    """A trace is what a database was loaded from, maybe its only copy: only --force replaces one
    (REFUSED, FORCED); a gzip of something else is an earlier output's."""
    shutil.copy(place / "rows.csv.gz", place / "old.json.gz")
    before = digest(place / "old.json.gz")
    result = invoke("export", "--trace", "naive", "--db", "t.duckdb", "-o", "old.json.gz")
    assert result.exit_code == 0, result.output
    assert digest(place / "old.json.gz") != before and sniff(place / "old.json.gz") == GZIPPED_TRACE


def test_a_device_is_no_file_to_protect(place):
    result = invoke("query", "summary", "--db", "t.duckdb", "-f", "csv", "-o", os.devnull)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("content, kind", [
    (b"", None),
    ("kernel,µs\n".encode() * 1000, TEXT),                   # cut inside a multi-byte character
    (b'  \n{"traceEvents": []}', TRACE),
    (b'{"schemaVersion": 1, "deviceProperties": [], "traceEvents" : [', TRACE),
    (b'  \n[{"trace": "naive", "kernels": 30}]', JSON),
    (b"<!-- made by hand -->\n<!DOCTYPE html><html></html>", HTML),
    (b'<?xml version="1.0"?><a/>', XML),
    (b"<p>a fragment</p>", TEXT),
    (b"BZh91AY&SY", "bzip2 data"),
    (b"\xef\xbb\xbf[1, 2]", JSON),                            # a BOM first
    (b"<!doctype HTML><html></html>", HTML),
    (b"# a markdown report\n\n| a |\n", TEXT),
    (b"col\x00umn", "binary data"),
    (b"\xff\xfe\x00\x01 not utf-8", "binary data"),
])
def test_sniff(tmp_path, content, kind):
    path = tmp_path / "f"
    path.write_bytes(content)
    assert sniff(path) == kind


def test_sniff_knows_the_real_files(place):
    assert sniff(place / "t.duckdb") == "a DuckDB database"
    assert sniff(place / "trace.json.gz") == GZIPPED_TRACE and sniff(place / "rows.csv.gz") == "gzip data"
    assert sniff(place / "plot.png") == "a PNG image"
    assert sniff(place / "old.parquet") == "a Parquet file"
