"""Input that must not change an answer: timestamps to the nanosecond at every magnitude, by every
read (fast, exact and --lenient), and the file's top-level keys (two traceEvents, big keys after
the event array)."""

import gzip
import json
import shutil
import sys
import time
from decimal import Decimal

import pytest

import make_bad_corpus as corpus
from conftest import SAMPLE_TRACES, db_rows, invoke_cli
import trace_builder as tb
from tracekit.ingest import array_end, loader, tracefile
from tracekit.store.classify import MAX_CLASSIFIED_CHARS, classify
from tracekit.store.database import connect
from tracekit.errors import LoadInterrupted
from tracekit.ingest.load_stop import LoadStop
from tracekit.ingest.loader import load_file


def _times_ns(raw):
    """Every event's (ts, dur) in nanoseconds, from the file's digits (no float on the way)."""
    events = json.loads(raw, parse_float=Decimal)["traceEvents"]
    as_ns = lambda value: None if value is None else int(Decimal(value) * 1000)  # noqa: E731
    return sorted(((as_ns(e.get("ts")), as_ns(e.get("dur"))) for e in events), key=repr)


def _refuse_fast_read(*_args, **_kw):
    raise loader.FastReadRefused("refused by the test, so the exact read loads the file")


@pytest.mark.parametrize("magnitude", ["uptime", "epoch"])
@pytest.mark.parametrize("read", ["fast", "exact", "lenient"])
def test_timestamps_keep_their_nanoseconds_at_every_magnitude_by_every_read(tmp_path, monkeypatch, magnitude,
                                                                           read):
    # uptime: Kineto's ~5.4e12 us; epoch: Chrome's ~1.7e15 us, past what a DOUBLE holds to the ns.
    raw = corpus.source_bytes() if magnitude == "uptime" else corpus.epoch_timestamps()
    path = tmp_path / f"{magnitude}.json"
    path.write_bytes(raw)
    if read == "exact":
        monkeypatch.setattr(loader, "read_fast", _refuse_fast_read)
    con = connect(tmp_path / "t.duckdb")
    try:
        result = load_file(con, path, lenient=read == "lenient")
        assert result.status == "loaded" and not result.dropped
        stored = sorted(con.execute("SELECT ts_ns, dur_ns FROM event_rows").fetchall(), key=repr)
    finally:
        con.close()
    expected = _times_ns(raw)
    assert stored == expected
    assert any(ts is not None and ts % 1000 for ts, _ in expected)  # there are nanoseconds to keep
    if magnitude == "epoch":
        assert min(ts for ts, _ in expected if ts is not None) > 1_700_000_000_000_000_000


ODD = [case.name for case, _ in corpus.odd_cases()]


def _events_in(path):
    """How many events a trace file holds, read the plain way: every gzip layer undone, a byte
    order mark dropped, json.loads (independent of the loader's own reading)."""
    data = path.read_bytes()
    while data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 2 * corpus.DEEP_LEVELS)  # deep_args.json nests deeper than the default
    try:
        trace = json.loads(data.decode("utf-8-sig"))
    finally:
        sys.setrecursionlimit(limit)
    return len(trace["traceEvents"] if isinstance(trace, dict) else trace)


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
@pytest.mark.parametrize("name", ODD)
def test_every_odd_but_valid_trace_loads_whole(corpus_dir, tmp_path, name, lenient):
    db = tmp_path / "t.duckdb"
    result = invoke_cli("load", corpus_dir / name, "--db", db, *(["--lenient"] if lenient else []))
    assert result.exit_code == 0, result.output
    trace = loader.trace_name_for(name)
    events = _events_in(corpus_dir / name)
    assert result.output.startswith(f"loaded {trace}: {events} events, 6 kernels from {corpus_dir / name} in ")
    assert "dropped" not in result.output and "left out" not in result.output
    assert db_rows(db, "SELECT trace, events, dropped_events FROM traces") == [(trace, events, 0)]


def test_an_end_event_without_a_name_loads_as_written(corpus_dir, tmp_path):
    db = tmp_path / "t.duckdb"
    assert invoke_cli("load", corpus_dir / "begin_end_pairs.json", "--db", db).exit_code == 0
    first_op = next(e for e in corpus.source_trace()["traceEvents"] if e.get("cat") == "cpu_op")
    begin, end = db_rows(db, "SELECT name, ph, ts_ns FROM events WHERE ph IN ('B', 'E') ORDER BY ts_ns")
    assert begin[:2] == (first_op["name"], "B") and end[:2] == (None, "E")
    assert end[2] - begin[2] == round(first_op["dur"] * 1000)


def _with_small_windows(monkeypatch, held=16 << 10, tail=1 << 20):
    """Holds back `held` bytes while streaming and reads up to `tail` bytes after the array, so a
    small file goes through what a big one does."""
    monkeypatch.setattr(tracefile, "TAIL_BYTES", held)
    monkeypatch.setattr(tracefile, "CHUNK_BYTES", 4 << 10)
    monkeypatch.setattr(array_end, "MAX_TAIL_BYTES", tail)


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_keys_after_the_array_bigger_than_the_held_back_tail_are_read(tmp_path, monkeypatch, lenient):
    _with_small_windows(monkeypatch)
    raw = corpus._after_array(corpus.source_bytes(), b'"blob": "' + b"x" * (200 << 10) + b'"')
    path = tmp_path / "blob.json"
    path.write_bytes(raw)
    con = connect(tmp_path / "t.duckdb")
    try:
        result = load_file(con, path, lenient=lenient)
        assert (result.status, result.events, result.dropped, result.truncated) == ("loaded", 242, {}, False)
        header = json.loads(con.execute("SELECT header FROM trace_files").fetchone()[0])
    finally:
        con.close()
    assert len(header["blob"]) == 200 << 10 and header["traceName"] == json.loads(raw)["traceName"]


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_an_empty_array_whose_bracket_ends_a_block_loads_with_big_keys_after_it(tmp_path, monkeypatch, lenient):
    # The `[` the last byte of the first block read: its `]` is in the next block, and more than
    # the held-back bytes of keys follow it.
    _with_small_windows(monkeypatch)
    before = b'", "traceEvents": ['
    raw = b'{"pad": "' + b"x" * (tracefile.CHUNK_BYTES - len(b'{"pad": "') - len(before)) + before
    assert len(raw) == tracefile.CHUNK_BYTES and raw.endswith(b"[")
    path = tmp_path / "empty_at_block_end.json"
    path.write_bytes(raw + b'], "blob": "' + b"y" * (64 << 10) + b'"}')
    con = connect(tmp_path / "t.duckdb")
    try:
        result = load_file(con, path, lenient=lenient)
        assert (result.status, result.events) == ("loaded", 0)
        header = json.loads(con.execute("SELECT header FROM trace_files").fetchone()[0])
    finally:
        con.close()
    assert len(header["blob"]) == 64 << 10


def test_lenient_keeps_the_events_before_a_cut_inside_an_event_bigger_than_a_strict_reads_held_back_bytes(tmp_path):
    # The cut 3.4 MB into an event of 3.5 MB: the events before it end further back than a strict
    # read holds back (tracefile.TAIL_BYTES); --lenient holds back more, and keeps them.
    events = [tb.op(f"op{i}", 10 * i, 5) for i in range(50)]
    events[-1]["args"]["blob"] = "b" * (3584 << 10)
    text = tb.dumps(tb.trace(events), "kineto").encode()
    cut = text.index(b'"op49"') + (3400 << 10)
    assert cut - text.index(b'"op49"') > tracefile.TAIL_BYTES + tracefile.CHUNK_BYTES
    path = tmp_path / "cut_inside_a_big_event.json"
    path.write_bytes(text[:cut])
    con = connect(tmp_path / "t.duckdb")
    try:
        result = load_file(con, path, lenient=True)
        assert (result.status, result.events, result.truncated) == ("loaded", 49, True)
    finally:
        con.close()


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_keys_after_the_array_past_the_limit_are_one_clear_error(tmp_path, monkeypatch, lenient):
    _with_small_windows(monkeypatch)
    path = tmp_path / "huge_blob.json"
    path.write_bytes(corpus._after_array(corpus.source_bytes(), b'"blob": "' + b"x" * (2 << 20) + b'"'))
    result = invoke_cli("load", path, "--db", tmp_path / "t.duckdb", *(["--lenient"] if lenient else []))
    assert result.exit_code == 1
    assert result.output == (f"Error: {path}: the traceEvents array does not end properly: over 1 MB follow its last"
                             " event without ending the trace (tracekit reads keys after the array up to that size)\n")


@pytest.mark.parametrize("layout", ["kineto", "minified"])
def test_lists_of_objects_in_args_are_not_taken_for_the_end_of_the_array(tmp_path, monkeypatch, layout):
    # Each event holds `}], "n": 2}`, which looks like the end of the array until the next event.
    _with_small_windows(monkeypatch, held=2 << 10)
    events = [tb.op(f"op{i}", 10 * i, 5) for i in range(300)]
    for event in events:
        event["args"]["parts"], event["args"]["n"] = [{"a": 1}, {"b": 2}], 2
    path = tb.write(tmp_path, "lists", tb.trace(events), layout)
    con = connect(tmp_path / "t.duckdb")
    try:
        assert load_file(con, path).events == 300
    finally:
        con.close()


def test_a_kernel_name_built_to_hurt_a_regex_loads_in_linear_time(corpus_dir, tmp_path):
    # 4 MB of `gemm`: Python's backtracking `re` took minutes over it; RE2 in DuckDB takes no time.
    started = time.monotonic()
    result = invoke_cli("load", corpus_dir / "gemm_repeated_kernel_name.json.gz", "--db", tmp_path / "t.duckdb")
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 20
    assert db_rows(tmp_path / "t.duckdb", "SELECT length(name), kernel_class FROM kernels WHERE length(name) > 1000"
                   ) == [(4 << 20, None)]


def test_classify_reads_only_a_names_first_characters():
    simt = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute"
    started = time.monotonic()
    assert classify(simt + "k" * (100 << 20))[:2] == ("gemm", "simt")
    assert classify("k" * MAX_CLASSIFIED_CHARS + simt) == (None, None, None)
    assert time.monotonic() - started < 5


def _no_parse(*_args, **_kw):
    raise AssertionError("the file was parsed")


@pytest.mark.parametrize("name", ["sdpa_flash.json.gz", "sdpa_flash.json"])
def test_a_file_already_loaded_is_skipped_before_any_parse(tmp_path, monkeypatch, name):
    data = (SAMPLE_TRACES / "sdpa_flash.json.gz").read_bytes()
    (tmp_path / name).write_bytes(data if name.endswith(".gz") else gzip.decompress(data))
    db = tmp_path / "t.duckdb"
    assert invoke_cli("load", tmp_path / name, "--db", db).exit_code == 0
    copy = tmp_path / "elsewhere" / name
    copy.parent.mkdir()
    shutil.copy(tmp_path / name, copy)
    monkeypatch.setattr(loader, "read_fast", _no_parse)
    monkeypatch.setattr(loader, "read_lenient", _no_parse)
    for path in (tmp_path / name, copy):
        for lenient in ([], ["--lenient"]):
            result = invoke_cli("load", path, "--db", db, *lenient)
            assert result.exit_code == 0, result.output
            assert result.output.splitlines()[0] == (f"skipped {path}: same content as trace 'sdpa_flash' "
                                                     "(--replace reloads it)")
    assert db_rows(db, "SELECT count(*) FROM traces") == [(1,)]


def test_a_stop_during_the_hash_of_a_file_already_loaded_ends_its_load(tmp_path):
    # The hash before the parse is work of its own: a Ctrl-C there stops the load, not a skip later.
    path = tmp_path / "sdpa_flash.json.gz"
    shutil.copy(SAMPLE_TRACES / path.name, path)
    con = connect(tmp_path / "t.duckdb")
    try:
        assert load_file(con, path).status == "loaded"
        assert load_file(con, path).status == "skipped"
        stop = LoadStop()
        stop.request("SIGINT")
        try:
            with pytest.raises(LoadInterrupted):
                load_file(con, path, stop=stop)
        finally:
            stop.finish()
    finally:
        con.close()


def test_a_changed_file_of_the_same_size_is_read_again(tmp_path):
    raw = corpus.source_bytes()
    path = tmp_path / "trace.json"
    path.write_bytes(raw)
    db = tmp_path / "t.duckdb"
    assert invoke_cli("load", path, "--db", db).exit_code == 0
    path.write_bytes(raw.replace(b'"name": "aten::', b'"name": "aten:;', 1))  # one byte changed
    result = invoke_cli("load", path, "--db", db)
    assert result.exit_code == 0 and result.output.startswith("loaded trace-2: 242 events"), result.output
    assert db_rows(db, "SELECT count(DISTINCT file_sha256), count(DISTINCT file_bytes) FROM trace_files") == [(2, 1)]


@pytest.mark.parametrize("held", [1 << 10, 3 << 10, 5 << 10])
def test_a_list_of_objects_split_between_two_reads_is_not_held_back(tmp_path, monkeypatch, held):
    # Reads of 4 KB: some end right after a `}` whose `]` starts the next read, inside an event.
    _with_small_windows(monkeypatch, held=held)
    sizes = []
    real = array_end.EndWatch.may_flush
    monkeypatch.setattr(array_end.EndWatch, "may_flush",
                        lambda self, blocks, held_bytes: sizes.append(held_bytes) or real(self, blocks, held_bytes))
    events = [tb.op(f"op{i}", 10 * i, 5) for i in range(600)]
    for i, event in enumerate(events):
        event["args"]["parts"] = [{"a": "x" * (i % 97)}]
    path = tb.write(tmp_path, "lists", tb.trace(events), "kineto")
    con = connect(tmp_path / "t.duckdb")
    try:
        assert load_file(con, path).events == 600
    finally:
        con.close()
    assert max(sizes) < held + (12 << 10)  # nothing held back beyond the window and a few reads


def test_bytes_that_are_not_utf8_in_an_event_are_one_line_and_lenient_drops_the_event(tmp_path):
    # DuckDB quotes the bad bytes in its error, which its Python client cannot decode: found by
    # tests/test_loader_properties.py's mutations.
    data = gzip.decompress((SAMPLE_TRACES / "sdpa_flash.json.gz").read_bytes())
    at = data.index(b'"name": "aten::empty"')
    bad = tmp_path / "bad.json"
    bad.write_bytes(data[:at] + b'"name": "aten::\xc2A"' + data[at + len(b'"name": "aten::empty"'):])
    db = tmp_path / "t.duckdb"
    result = invoke_cli("load", bad, "--db", db)
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}") and "UTF-8" in lines[0]
    lenient = invoke_cli("load", bad, "--db", db, "--lenient")
    assert lenient.exit_code == 0, lenient.output
    assert "dropped 1 event" in lenient.output


def test_an_event_of_70_mb_is_named_too_big_in_one_line(tmp_path):
    trace = json.loads(gzip.decompress((SAMPLE_TRACES / "sdpa_flash.json.gz").read_bytes()))
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["blob"] = "x" * (70 << 20)
    big = tmp_path / "big_event.json"
    big.write_text(json.dumps(trace))
    result = invoke_cli("load", big, "--db", tmp_path / "t.duckdb")
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {big}: an event too big to read: tracekit reads events of up to 64 MB")
    assert not (tmp_path / "t.duckdb").exists()
