"""A new database starts as a copy of a cached empty one (tracekit.store.schema_template)."""

import os
import stat

import duckdb

from conftest import TEST_DATA
from tracekit.store.database import SCHEMA_VERSION, connect, ensure_schema, schema_digest
from tracekit.ingest.loader import load_file
from tracekit.store.schema_template import start_from_template


def test_a_new_database_is_a_copy_of_the_cached_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "new.duckdb"
    con = connect(db)
    try:
        assert load_file(con, TEST_DATA / "h200" / "loops" / "infer_inplace.json.gz").status == "loaded"
        assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 42
    finally:
        con.close()
    assert (tmp_path / "cache" / f"schema-{SCHEMA_VERSION}-{schema_digest()}-duckdb{duckdb.__version__}.duckdb").is_file()
    # made as DuckDB makes a file (0666 less the umask), no scratch copy left beside it
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(db.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "new.duckdb"]


def test_an_existing_file_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "mine.duckdb"
    duckdb.connect(str(db)).execute("CREATE TABLE mine AS SELECT 42 AS answer").close()
    before = db.read_bytes()
    start_from_template(str(db), "any-schema", ensure_schema)
    assert db.read_bytes() == before


def test_an_unusable_cache_makes_the_database_the_usual_way(tmp_path, monkeypatch):
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    con = connect(tmp_path / "t.duckdb")
    try:
        assert con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()[0] == SCHEMA_VERSION
    finally:
        con.close()


def test_an_open_does_nothing_where_the_schema_digest_is_current_and_syncs_where_not(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "t.duckdb"
    connect(db).close()

    def tamper(digest):
        con = duckdb.connect(str(db))
        con.execute("UPDATE gpu_specs SET gpu = 'tampered'")
        con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_digest'", [digest])
        con.close()

    def tampered():
        con = connect(db)
        try:
            return con.execute("SELECT count(*) FROM gpu_specs WHERE gpu = 'tampered'").fetchone()[0]
        finally:
            con.close()

    tamper(schema_digest())
    assert tampered() > 0  # the digest says nothing needs doing: nothing is read or written
    tamper("older")
    assert tampered() == 0  # another digest: the knowledge rows are this tracekit's again
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value FROM schema_info WHERE key = 'schema_digest'").fetchone()[0] == schema_digest()
    con.close()
