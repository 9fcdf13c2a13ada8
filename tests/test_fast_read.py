"""The fast read: every layout a trace comes in gives the same rows as the exact read, to the
nanosecond, however the event array is cut into pieces; a piece cut inside an event is caught."""

import json
import subprocess
import sys

import pytest

import make_bad_corpus as corpus
import trace_builder as tb
from conftest import ROOT, SAMPLE_TRACES, read_trace
from tracekit.errors import LoadInterrupted
from tracekit.ingest import event_chunks, loader
from tracekit.ingest.load_stop import LoadStop
from tracekit.store.database import connect
from tracekit.ingest.event_read import read_exact
from tracekit.ingest.loader import load_file

TABLES = {
    "event_rows": "SELECT cat, name, ph, ts_ns, dur_ns, pid, tid, id, bp, s, args::VARCHAR FROM event_rows",
    "cpu_op_rows": "SELECT name, ts_ns, depth, parent, step, op_path, external_id FROM cpu_op_rows",
    "kernel_rows": "SELECT name, ts_ns, dur_ns, stream, correlation, grid, est_occupancy_pct, cpu_op_id IS NULL,"
                   " step FROM kernel_rows",
    "transfer_rows": "SELECT name, bytes, ts_ns, cpu_op_id IS NULL, step FROM transfer_rows",
    "gpu_busy_rows": "SELECT step, device, busy_ns, kernel_ns FROM gpu_busy_rows",
}


def table_rows(db):
    con = connect(db, read_only=True)
    try:
        return {table: sorted(con.execute(sql).fetchall(), key=repr) for table, sql in TABLES.items()}
    finally:
        con.close()


def load_one(db, path, *, exact_calls=None, monkeypatch=None):
    con = connect(db)
    try:
        if exact_calls is not None:
            monkeypatch.setattr(loader, "read_exact",
                                lambda *a, **k: exact_calls.append(a[1]) or read_exact(*a, **k))
        assert load_file(con, path).status == "loaded"
    finally:
        con.close()
    return table_rows(db)


@pytest.fixture(scope="module")
def naive():
    return read_trace(SAMPLE_TRACES / "naive.json.gz")


@pytest.fixture(scope="module")
def exact_naive(tmp_path_factory):
    """The rows of the naive sample as the exact (one array, JSON columns) read gives them."""
    folder = tmp_path_factory.mktemp("exact")
    patch = pytest.MonkeyPatch()
    patch.setattr(loader, "read_fast", _refuse)
    try:
        return load_one(folder / "exact.duckdb", SAMPLE_TRACES / "naive.json.gz")
    finally:
        patch.undo()


def _refuse(*_args, **_kw):
    raise loader.FastReadRefused("refused by the test")


@pytest.mark.parametrize("layout", tb.LAYOUTS)
def test_every_layout_loads_the_same_rows_in_many_pieces(tmp_path, monkeypatch, naive, exact_naive, layout):
    # 2 KB pieces and 4 FIFOs a batch: the 517 events go through many pieces and several batches.
    monkeypatch.setattr(event_chunks, "MIN_PIECE_BYTES", 1)
    monkeypatch.setattr(event_chunks, "MAX_PIECE_BYTES", 2048)
    monkeypatch.setattr(event_chunks, "MAX_FIFOS", 4)
    pieces = []
    real_emit = event_chunks.ChunkCutter._emit
    monkeypatch.setattr(event_chunks.ChunkCutter, "_emit",
                        lambda self, closing: pieces.append(1) or real_emit(self, closing))
    exact_calls = []
    path = tb.write(tmp_path, f"naive_{layout}", naive, layout)
    got = load_one(tmp_path / "t.duckdb", path, exact_calls=exact_calls, monkeypatch=monkeypatch)
    assert got == exact_naive
    assert len(got["event_rows"]) == 517 and len(got["kernel_rows"]) == 30
    # Only a single minified line has no separator that cannot occur inside an event; there, the
    # args' lists of objects hold `},{` too, so whether a cut lands in one decides the read.
    if layout != "minified":
        assert exact_calls == [] and len(pieces) > 20


def test_a_cut_inside_an_event_is_caught_and_the_file_read_exactly(tmp_path, monkeypatch):
    # In one minified line the separator `},{` also occurs inside args; a cut there breaks two
    # pieces, DuckDB refuses them, and the exact read loads the file whole.
    events = [tb.op("aten::op_with_list_args", 10 * i, 5) for i in range(200)]
    for event in events:
        event["args"]["parts"] = [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]
    path = tb.write(tmp_path, "lists", tb.trace(events), "minified")
    monkeypatch.setattr(event_chunks, "MIN_PIECE_BYTES", 1)
    monkeypatch.setattr(event_chunks, "MAX_PIECE_BYTES", 1500)
    exact_calls = []
    got = load_one(tmp_path / "t.duckdb", path, exact_calls=exact_calls, monkeypatch=monkeypatch)
    assert exact_calls == [path]
    assert len(got["event_rows"]) == 200
    assert {r[-1] for r in got["event_rows"]} == {json.dumps({"parts": [{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]},
                                                             separators=(",", ":"))}


@pytest.mark.parametrize("layout", ["kineto", "minified"])
def test_epoch_microsecond_timestamps_keep_their_nanoseconds(tmp_path, layout):
    # Chrome traces and older Kineto count microseconds since 1970: 16 digits before the point.
    ts = ["1733221234567890.123", "1733221234567891.999", "1733221234567893.001"]
    events = [tb.op("aten::a", 0, 1), tb.op("aten::b", 0, 1), tb.op("aten::c", 0, 1)]
    text = tb.dumps(tb.trace(events), layout)
    for value in ts:
        text = text.replace('"ts": 0' if layout == "kineto" else '"ts":0', f'"ts": {value}', 1)
    path = tmp_path / f"epoch_{layout}.json"
    path.write_text(text)
    got = load_one(tmp_path / "t.duckdb", path)
    assert sorted(r[3] for r in got["event_rows"]) == [1733221234567890123, 1733221234567891999, 1733221234567893001]


def test_the_cutter_hands_over_complete_arrays_at_event_boundaries():
    pieces = []
    cutter = event_chunks.ChunkCutter(pieces.append, chunk_bytes=40)
    text = tb.dumps(tb.trace([tb.op(f"op{i}", i, 1) for i in range(6)]), "kineto")
    array = text[text.index("[", text.index('"traceEvents"')):text.rindex("]") + 1].encode()
    for start in range(0, len(array), 25):  # writes of any size, boundaries split between them
        cutter.write(array[start:start + 25])
    cutter.finish()
    decoded = [json.loads(b"".join(piece)) for piece in pieces]
    assert len(pieces) > 2
    assert [e["name"] for piece in decoded for e in piece] == [f"op{i}" for i in range(6)]


@pytest.mark.parametrize("head, expected", [
    (b'[\n  {\n    "ph": "X", "args": {"a": [1, {"b": "}, {"}]}\n  },\n  {"ph": "i"}', b'},\n  {'),
    (b'[{"ph": "X"},\n{"ph": "i"}', b'},\n{'),
    (b'[{"ph":"X","args":{}},{"ph":"i"}', b'},{'),
    (b'[{"ph": "X"}]', None),  # one event: nothing to cut
    (b'[{"ph": "X", "name": "cut off', None),  # the first event not in view
])
def test_the_separator_is_what_follows_the_first_event(head, expected):
    assert event_chunks.event_separator(head) == expected


@pytest.fixture(scope="module")
def compact_source(tmp_path_factory):
    """The rows of the bad-input corpus's source trace written compactly, with no whitespace at all."""
    folder = tmp_path_factory.mktemp("compact")
    path = folder / "compact.json"
    path.write_text(json.dumps(corpus.source_trace(), separators=(",", ":")))
    return load_one(folder / "compact.duckdb", path)


def test_whitespace_anywhere_loads_the_same_rows_as_the_compact_file(corpus_dir, tmp_path, monkeypatch,
                                                                     compact_source):
    exact_calls = []
    got = load_one(tmp_path / "t.duckdb", corpus_dir / "whitespace_everywhere.json.gz", exact_calls=exact_calls,
                   monkeypatch=monkeypatch)
    assert got == compact_source and exact_calls == []


# Spaces at every place of make_bad_corpus.whitespace_places, each run past the limit that place
# had (MB): the 64 MB in which the header must hold the array's start (four places of 24 MB);
# DuckDB's buffer, twice maximum_object_size (32 MB for the fast read, 128 MB for the exact one),
# which a run after `[`, before `,` or `]` or inside an event overflowed; the 64 MB in which the
# end of the trace is looked for; and 512 MB after a comma, which loaded before, but only by holding
# the whole run in the piece of the array it fell in. 1.3 GB in all, 1.3 MB gzipped. Every limit is
# crossed, so more is only more time: runs are cut where the text is read (ingest/whitespace.py),
# and nothing after that sees a run longer than 64 KB (no 4 GiB limit of DuckDB's is approached).
GIANT_RUNS_MB = {
    "before the trace": 24, "after a comma between keys": 24, "before traceEvents' colon": 24,
    "after traceEvents' colon": 24, "after the array's [": 130, "before a comma between events": 130,
    "after a comma between events": 512, "between a key and its value": 130, "inside args": 130,
    "before the array's ]": 70, "after the array's ]": 70, "after the trace": 70,
}
# What the load in its own process may use: peak resident memory (its VmHWM; the address space is
# no measure, as DuckDB and glibc reserve it by threads and cores) and CPU seconds (RLIMIT_CPU,
# about 20 times what it takes), so a load that holds a run or reads it in quadratic time fails.
GIANT_MAX_RESIDENT_MB = 400
GIANT_CPU_SECONDS = 60
_LOAD_IN_BOUNDS = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
from tracekit.ingest import loader
from tracekit.store.database import connect
exact = []
real_exact = loader.read_exact
loader.read_exact = lambda *a, **k: exact.append(1) or real_exact(*a, **k)
con = connect(sys.argv[2])
result = loader.load_file(con, sys.argv[1])
con.close()
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"status": result.status, "exact_reads": len(exact), "peak_mb": peak_kb >> 10}}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak resident memory from /proc")
def test_gigabytes_of_whitespace_load_in_bounded_memory_and_cpu(tmp_path, compact_source):
    isal = pytest.importorskip("isal.igzip")  # deflates 1.3 GB of spaces in 0.1 s (zlib: 2 s)
    raw = corpus.source_bytes()
    runs = {offset: GIANT_RUNS_MB[place] << 20 for place, offset in corpus.whitespace_places(raw).items()}
    path = tmp_path / "giant_whitespace.json.gz"
    with isal.open(path, "wb", compresslevel=1) as out:
        for piece in corpus.padded(raw, runs, blanks=b" " * (1 << 20)):
            out.write(piece)
    db = tmp_path / "t.duckdb"
    done = subprocess.run([sys.executable, "-c", _LOAD_IN_BOUNDS.format(cpu=GIANT_CPU_SECONDS), path, db],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "loaded" and outcome["exact_reads"] == 0
    assert outcome["peak_mb"] < GIANT_MAX_RESIDENT_MB, outcome
    assert table_rows(db) == compact_source


@pytest.mark.parametrize("read", ["fast", "exact", "lenient"])
def test_a_stop_ends_a_read_of_whitespace_at_the_next_block(tmp_path, monkeypatch, read):
    # 512 MB of spaces after a comma give DuckDB nothing to read, so its interrupt cannot land: the
    # read itself stops, at the first block after the stop (tracefile.CHUNK_BYTES), not at the end of the run.
    isal = pytest.importorskip("isal.igzip")
    raw = corpus.source_bytes()
    path = tmp_path / "padded.json.gz"
    with isal.open(path, "wb", compresslevel=1) as out:
        runs = {corpus.whitespace_places(raw)["after a comma between events"]: 512 << 20}
        for piece in corpus.padded(raw, runs, blanks=b" " * (1 << 20)):
            out.write(piece)
    if read == "exact":
        monkeypatch.setattr(loader, "read_fast", _refuse)
    stop, blocks = LoadStop(), []

    def progress(done):
        blocks.append(stop.requested)
        if len(blocks) == 8:  # 8 blocks into the run
            stop.request("SIGINT")

    con = connect(tmp_path / "t.duckdb")
    try:
        with pytest.raises(LoadInterrupted):
            load_file(con, path, lenient=read == "lenient", progress=progress, stop=stop)
        assert con.execute("SELECT count(*) FROM event_rows").fetchone()[0] == 0
    finally:
        con.close()
    assert blocks.count(True) <= 1


@pytest.mark.parametrize("trace, threads", [(SAMPLE_TRACES / "naive.json.gz", 1), (SAMPLE_TRACES / "flex.json.gz", 2)])
def test_a_load_of_one_piece_runs_on_one_duckdb_thread_and_gives_the_setting_back(tmp_path, trace, threads):
    con = connect(tmp_path / "t.duckdb")
    try:
        before = con.execute("SELECT current_setting('threads')").fetchone()[0]
        seen = []
        real = loader._load_all

        def spying(con, *args):
            seen.append(con.execute("SELECT current_setting('threads')").fetchone()[0])
            yield from real(con, *args)

        loader._load_all = spying
        try:
            [(_, result)] = list(loader.load_files(con, [trace]))
        finally:
            loader._load_all = real
        assert result.status == "loaded"
        assert seen == [threads if before > 1 else 1]
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == before
    finally:
        con.close()


def test_one_trace_is_checkpointed_at_its_commit_and_a_folders_go_through_the_wal(tmp_path):
    # One trace: its rows are written to the database file at the commit, never to the WAL (which
    # the close would read back and write again). Several: the WAL gathers them, as before.
    wal = tmp_path / "t.duckdb.wal"
    con = connect(tmp_path / "t.duckdb")
    try:
        before = con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0]
        [(_, result)] = list(loader.load_files(con, [SAMPLE_TRACES / "naive.json.gz"]))
        assert result.status == "loaded"
        assert not wal.exists() or wal.stat().st_size == 0
        assert con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0] == before
        bad = tmp_path / "bad.json"
        bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1')
        [(_, error)] = list(loader.load_files(con, [bad]))
        assert "truncated" in str(error)
        assert con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0] == before
        results = list(loader.load_files(con, [SAMPLE_TRACES / "sdpa_flash.json.gz", SAMPLE_TRACES / "flex.json.gz"]))
        assert [result.status for _, result in results] == ["loaded", "loaded"]
        assert wal.stat().st_size > 1 << 20
    finally:
        con.close()
    con = connect(tmp_path / "t.duckdb", read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM trace_files").fetchone()[0] == 3
    finally:
        con.close()
