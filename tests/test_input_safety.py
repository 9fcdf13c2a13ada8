"""Input that must not change an answer: timestamps to the nanosecond at every magnitude, by every
read (fast, exact and --lenient), and the file's top-level keys (two traceEvents, big keys after
the event array)."""

import json
from decimal import Decimal

import pytest

import make_bad_corpus as corpus
from conftest import db_rows, invoke_cli
from tracekit import loader
from tracekit.database import connect
from tracekit.loader import load_file


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
