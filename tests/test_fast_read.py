"""The fast read: every layout a trace comes in gives the same rows as the exact read, to the
nanosecond, however the event array is cut into pieces; a piece cut inside an event is caught."""

import json

import pytest

import trace_builder as tb
from conftest import SAMPLE_TRACES, read_trace
from tracekit.ingest import event_chunks, loader
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
