"""Property: any mutation of a real trace either loads with consistent row counts or fails with a
clean one-line error naming the file, and a failed load leaves the database as it was.

Mutations: truncation at a random byte, byte flips (of the text or of the gzip stream), deleted
and duplicated events, and fields (ph, ts, dur, name, args, pid, tid, cat) given other JSON types,
in plain and gzip form, loaded strictly and with --lenient.

And whitespace: runs of any length between any two tokens leave the same JSON once the loader has
cut them short, and a real trace laid out so loads the same rows as the same trace written compactly.
"""

import gzip
import itertools
import json
import os
import random
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import SAMPLE_TRACES, TEST_DATA

# Examples per property in the suite's run; TRACEKIT_EXAMPLES_SCALE=10 digs deeper (each example
# loads a trace: 60 of them take about 15 s on two cores).
SCALE = int(os.environ.get("TRACEKIT_EXAMPLES_SCALE", "1"))
from make_bad_corpus import database_state
from tracekit.ingest import whitespace
from tracekit.ingest.whitespace import WhitespaceSqueezer
from tracekit.store.database import connect
from tracekit.errors import TracekitError
from tracekit.ingest.loader import load_file

SOURCES = [SAMPLE_TRACES / "sdpa_flash.json.gz", SAMPLE_TRACES / "sdpa_default.json.gz",
           SAMPLE_TRACES / "naive.json.gz", TEST_DATA / "cpu" / "naive_cpu.json.gz",
           TEST_DATA / "foreign" / "amd_mi300_gfx942_bf16_gemm.json.gz",
           TEST_DATA / "foreign" / "v100_dgxs_mlp_train_step.json.gz"]
RAW = {path.name: gzip.decompress(path.read_bytes()) for path in SOURCES}
FIELDS = ["ph", "ts", "dur", "name", "args", "pid", "tid", "cat"]
# Per-trace tables (each row has a trace_id); the others are shared by all traces.
TRACE_TABLES = ["event_rows", "step_rows", "cpu_op_rows", "runtime_rows", "kernel_rows", "transfer_rows",
                "trace_files"]

# Numbers at the edges: past 2^62 ns once in microseconds, past int64, NaN and infinities.
edge_numbers = st.sampled_from([2 ** 62, -2 ** 62, 2 ** 64, 10 ** 30, 1.5e17, 1e300, -0.0, 4.6e15])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | edge_numbers | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=4)


@st.composite
def event_edits(draw, count):
    """A function that edits a parsed trace's events: delete, duplicate, retype or drop a field."""
    index = draw(st.integers(0, count - 1))
    kind = draw(st.sampled_from(["delete", "duplicate", "retype", "drop field"]))
    field, value = draw(st.sampled_from(FIELDS)), draw(json_values)

    def edit(events):
        if kind == "delete":
            del events[index]
        elif kind == "duplicate":
            events.insert(index, dict(events[index]))
        elif kind == "retype":
            events[index][field] = value
        else:
            events[index].pop(field, None)
    return edit


@st.composite
def byte_edits(draw, size):
    """A function that edits the file's text: truncate it, or flip a few bytes."""
    if draw(st.booleans()):
        cut = draw(st.integers(0, size))
        return lambda raw: raw[:cut]
    flips = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)), min_size=1, max_size=3))

    def flip(raw):
        data = bytearray(raw)
        for at, mask in flips:
            data[at % len(data)] ^= mask
        return bytes(data)
    return flip


@st.composite
def mutated_traces(draw):
    """(file bytes, file suffix, events a strict load must find or None when the text is not JSON)."""
    name = draw(st.sampled_from(sorted(RAW)))
    raw = RAW[name]
    if draw(st.booleans()):
        trace = json.loads(raw)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        for edit in draw(st.lists(event_edits(len(events) - 2), min_size=1, max_size=3)):
            edit(events)
        raw = json.dumps(trace).encode()
    else:
        raw = draw(byte_edits(len(raw)))(raw)
    if not draw(st.booleans()):
        return raw, ".json"
    data = gzip.compress(raw, mtime=0)
    if draw(st.integers(0, 3)) == 0:  # now and then, damage the compressed stream itself
        data = draw(byte_edits(len(data)))(data)
    return data, ".json.gz"


def _event_count(data):
    """How many events Python's own JSON parser finds in `data` (None: not a JSON trace to it)."""
    try:
        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        trace = json.loads(raw)
    except (ValueError, OSError, EOFError):
        return None
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    return len(events) if isinstance(events, list) else None


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    path = tmp_path_factory.mktemp("props") / "props.duckdb"
    connection = connect(path)
    assert load_file(connection, SAMPLE_TRACES / "sdpa_cudnn.json.gz").status == "loaded"
    yield connection
    connection.close()


def _per_trace_counts(con, trace_id):
    """Row counts of each per-trace table for every trace but `trace_id`."""
    return {table: con.execute(f"SELECT count(*) FROM {table} WHERE trace_id <> ?", [trace_id]).fetchone()[0]
            for table in TRACE_TABLES}


def _check_loaded(con, result, before, lenient, expected):
    trace_id, events, dropped = con.execute(
        "SELECT trace_id, events, dropped_events FROM trace_files WHERE trace = ?", [result.trace]).fetchone()
    assert result.events == events == con.execute(
        "SELECT count(*) FROM event_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    assert result.kernels == con.execute("SELECT count(*) FROM kernel_rows WHERE trace_id = ?",
                                         [trace_id]).fetchone()[0]
    assert dropped == sum(result.dropped.values())
    # Nothing of the traces already there changed.
    counts, files = before
    assert _per_trace_counts(con, trace_id) == {table: counts[table] for table in TRACE_TABLES}
    assert [row for row in database_state(con)[1] if row[0] != trace_id] == files
    if expected is not None:
        assert events + (dropped if lenient else 0) == expected
        assert lenient or dropped == 0


@settings(max_examples=60 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(mutated=mutated_traces(), lenient=st.booleans())
def test_a_mutated_trace_loads_consistently_or_fails_cleanly(con, tmp_path_factory, mutated, lenient):
    data, suffix = mutated
    path = tmp_path_factory.mktemp("mutated") / f"mutated{suffix}"
    path.write_bytes(data)
    before = database_state(con)
    try:
        result = load_file(con, path, lenient=lenient)
    except TracekitError as exc:
        message = str(exc)
        event("failed: " + re.sub(r"\d+", "N", getattr(exc, "problem", message))[:45])
        assert message.startswith(f"{path}: ") and "\n" not in message and "tracekit-" not in message, message
        assert database_state(con) == before
        return
    event(f"{result.status} lenient={lenient} dropped={bool(result.dropped)}")
    if result.status == "skipped":  # content already loaded by an earlier example
        assert database_state(con) == before
        return
    _check_loaded(con, result, before, lenient, _event_count(data))


@st.composite
def damaged_event_arrays(draw):
    """(file bytes, events in the undamaged trace, bytes flipped): flips inside the event array only."""
    name = draw(st.sampled_from(sorted(RAW)))
    raw = RAW[name]
    start, end = raw.index(b"[", raw.index(b'"traceEvents"')) + 1, raw.rindex(b"]")
    data = bytearray(raw)
    flips = draw(st.lists(st.tuples(st.integers(start, end - 1), st.integers(1, 255)), min_size=1, max_size=3,
                          unique_by=lambda flip: flip[0]))
    for at, mask in flips:
        data[at] ^= mask
    return bytes(data), _event_count(raw), len(flips)


@settings(max_examples=20 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(damaged=damaged_event_arrays())
def test_lenient_reads_a_trace_damaged_inside_its_event_array(con, tmp_path_factory, damaged):
    # A flipped byte breaks at most the two events either side of it (a `}, {` between them lost).
    data, original, flipped = damaged
    path = tmp_path_factory.mktemp("damaged") / "damaged.json"
    path.write_bytes(data)
    before = database_state(con)
    result = load_file(con, path, lenient=True)
    if result.status == "skipped":
        assert database_state(con) == before
        return
    assert result.status == "loaded"
    assert original - 2 * flipped <= result.events <= original + flipped
    _check_loaded(con, result, before, True, None)


@pytest.mark.parametrize("damage, cut", [(b"|", 1), (b"}\x1c", 0)], ids=["its brace", "a byte after it"])
def test_lenient_cuts_the_damage_at_the_last_event(tmp_path, damage, cut):
    # the cases the property above found: the array's `]` and the object's `}` follow a last event
    # that never closes (its `}` flipped to `|`), or a byte that is no whitespace after it (the
    # newline before `]` flipped to 0x1c): damage, not an array of non-events
    raw = RAW["v100_dgxs_mlp_train_step.json.gz"]
    end = raw.rindex(b"]")
    brace = raw.rindex(b"}", 0, end)
    path = tmp_path / "damaged.json"
    path.write_bytes(raw[:brace] + damage + raw[brace + 1:])
    own = connect(tmp_path / "own.duckdb")  # a load of the same bytes elsewhere would be skipped here
    try:
        with pytest.raises(TracekitError, match="does not end properly"):
            load_file(own, path)
        before = database_state(own)
        result = load_file(own, path, lenient=True)
        assert result.status == "loaded" and result.events == _event_count(raw) - cut
        _check_loaded(own, result, before, True, None)
        # an array whose last element is no object is still refused, leniently too
        numbers = tmp_path / "numbers.json"
        numbers.write_bytes(raw[:end].rstrip() + b", 2\n]}")
        with pytest.raises(TracekitError, match="not an event"):
            load_file(own, numbers, lenient=True)
    finally:
        own.close()


def test_lenient_cuts_a_last_event_left_open_behind_a_damaged_first_one(tmp_path):
    # the case the property above found next: the last event's `}` flipped to `|` and the newline
    # after the array's `[` to a vertical tab, which begins no JSON value: damage at both ends of the
    # array, not an array whose elements are no events
    raw = RAW["v100_dgxs_mlp_train_step.json.gz"]
    start, end = raw.index(b"[", raw.index(b'"traceEvents"')) + 1, raw.rindex(b"]")
    brace = raw.rindex(b"}", 0, end)
    data = bytearray(raw)
    data[start] ^= 1  # "\n" -> "\x0b"
    data[brace] ^= 1  # "}" -> "|"
    path = tmp_path / "damaged.json"
    path.write_bytes(bytes(data))
    own = connect(tmp_path / "own.duckdb")
    try:
        before = database_state(own)
        result = load_file(own, path, lenient=True)
        assert result.status == "loaded" and _event_count(raw) - 4 <= result.events < _event_count(raw)
        _check_loaded(own, result, before, True, None)
    finally:
        own.close()


_EVENT = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {}}'
_NESTED = b'{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 0, "tid": 7, "ts": 3, "dur": 2, "args": {"l": [{"a": 1}, {"b": 2}]}}'


@pytest.mark.parametrize("array", [_EVENT + b", " + _NESTED + b", 2", _EVENT + b', [{"a": 1}, {"b": 2}]'],
                         ids=["a number after an event with objects in its args", "a list of objects"])
@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_an_element_that_is_no_event_is_refused_though_objects_are_in_it_or_before_it(tmp_path, array, lenient):
    # a `}, {` inside an event's args, or inside an element that is no event, is no event's start
    path = tmp_path / "odd.json"
    path.write_bytes(b'{"traceEvents": [' + array + b"]}")
    own = connect(tmp_path / "own.duckdb")
    try:
        with pytest.raises(TracekitError, match="holds something that is not an event"):
            load_file(own, path, lenient=lenient)
    finally:
        own.close()


_BLANKS = " \t\r\n" * 4096


def spaced(value, rng, longest):
    """`value` as JSON text with a run of whitespace (space, tab, CR, LF) of 0 to `longest` bytes
    before and after every token, strings' own spaces and escapes as json.dumps writes them."""
    def blank():
        size = rng.choice((0, 1, 2, longest, rng.randint(0, longest)))
        start = rng.randrange(4)
        return _BLANKS[start:start + size]

    def dump(item):
        if isinstance(item, dict):
            members = ",".join(blank() + json.dumps(key) + blank() + ":" + blank() + dump(value) + blank()
                               for key, value in item.items())
            return "{" + (members or blank()) + "}"
        if isinstance(item, list):
            return "[" + (",".join(blank() + dump(value) + blank() for value in item) or blank()) + "]"
        return json.dumps(item)

    return blank() + dump(value) + blank()


def longest_run_outside_strings(text):
    """The longest run of JSON whitespace outside strings in `text`, read a character at a time."""
    longest = run = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char in " \t\r\n":
            run += 1
            longest = max(longest, run)
        else:
            run, in_string = 0, char == '"'
    return longest


def squeezed(text, stride, block_sizes):
    """`text` through a WhitespaceSqueezer, in blocks of the given sizes in turn; (text, dropped)."""
    squeezer = WhitespaceSqueezer(stride)
    out, at = [], 0
    for size in itertools.cycle(block_sizes):
        if at >= len(text):
            return b"".join(out), squeezer.dropped
        out.append(squeezer.squeeze(text[at:at + size]))
        at += size


# Strings of runs of spaces, quotes, backslashes and newlines: json.dumps writes `\"`, `\\`, `\n`,
# so escapes of every parity end up next to runs of spaces inside strings, which must stay whole.
string_values = st.lists(st.sampled_from([" " * 3, " " * 13, " " * 40, '"', "\\", "\n", "\t", "a", "{", "]", ",", ":"]),
                         max_size=8).map("".join)
spaced_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | string_values,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(string_values, inner, max_size=4), max_leaves=16)


@settings(max_examples=300 * SCALE, deadline=None)
@given(value=spaced_values, rng=st.randoms(use_true_random=False), stride=st.integers(1, 6),
       block_sizes=st.lists(st.integers(1, 64), min_size=1, max_size=8))
def test_whitespace_cut_short_outside_strings_leaves_the_same_json(value, rng, stride, block_sizes):
    text = spaced(value, rng, longest=6 * stride).encode()
    out, dropped = squeezed(text, stride, block_sizes)
    assert json.loads(out) == value
    assert longest_run_outside_strings(out.decode()) <= 2 * stride
    assert dropped == len(text) - len(out)
    event(f"dropped {'some' if dropped else 'none'}")


# Runs over 2 * STRIDE bytes are cut: most of the runs drawn below.
_TEST_STRIDE = 8
_SPACED_SOURCE = json.loads(RAW["sdpa_flash.json.gz"])
_ROWS = {
    "event_rows": "SELECT cat, name, ph, ts_ns, dur_ns, pid, tid, id, bp, s, args::VARCHAR FROM event_rows",
    "cpu_op_rows": "SELECT name, ts_ns, dur_ns, depth, step, op_path FROM cpu_op_rows",
    "kernel_rows": "SELECT name, ts_ns, dur_ns, stream, correlation, step FROM kernel_rows",
}


def _trace_rows(con, trace_id):
    return {table: sorted(con.execute(f"{sql} WHERE trace_id = ?", [trace_id]).fetchall(), key=repr)
            for table, sql in _ROWS.items()}


@pytest.fixture(scope="module")
def compact_flash(con, tmp_path_factory):
    """The rows of sdpa_flash written compactly (no whitespace), loaded beside the mutations."""
    path = tmp_path_factory.mktemp("compact") / "compact_flash.json"
    path.write_text(json.dumps(_SPACED_SOURCE, separators=(",", ":")))
    result = load_file(con, path)
    trace_id = con.execute("SELECT trace_id FROM trace_files WHERE trace = ?", [result.trace]).fetchone()[0]
    return _trace_rows(con, trace_id)


@settings(max_examples=10 * SCALE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), longest=st.sampled_from([20, 100, 1000]), lenient=st.booleans())
def test_a_real_trace_with_whitespace_between_any_tokens_loads_the_same_rows(con, tmp_path_factory, compact_flash,
                                                                             seed, longest, lenient):
    # A seed, not hypothesis's own random: the trace's thousands of tokens would overflow its buffer.
    path = tmp_path_factory.mktemp("spaced") / "spaced.json"
    path.write_text(spaced(_SPACED_SOURCE, random.Random(seed), longest))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(whitespace, "STRIDE", _TEST_STRIDE)
        result = load_file(con, path, lenient=lenient)
    if result.status == "skipped":  # the same text drawn twice
        return
    assert (result.status, result.dropped) == ("loaded", {})
    trace_id = con.execute("SELECT trace_id FROM trace_files WHERE trace = ?", [result.trace]).fetchone()[0]
    assert _trace_rows(con, trace_id) == compact_flash
