"""Builds the bad-input corpus from the real sample traces: each case a file and what must happen.

    python tests/make_bad_corpus.py FOLDER     writes every case into FOLDER and lists them

Nothing here is a hand-edited blob: every case starts from a real H200 capture (or the capture's
own manifest) and changes one thing, so a test failure points at exactly one kind of damage.
`BAD` cases must fail with a one-line error containing `problem` (and, with `lenient`, load with
the events that can be read); `ODD` cases are valid but unusual and must load.
"""

import gzip
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
# Small (242 events, 6 kernels), with string pids, flows, metadata and instant events.
SOURCE = SAMPLES / "sdpa_flash.json.gz"


@dataclass(frozen=True)
class Case:
    name: str  # file name in the corpus folder
    problem: str  # fragment of the one-line error ("" for an ODD case, which loads)
    lenient: str = ""  # what --lenient does: "" fails the same way, else a fragment of what it says it dropped


def source_bytes():
    with gzip.open(SOURCE, "rb") as f:
        return f.read()


def source_trace():
    return json.loads(source_bytes())


def _gzip(data, level=9):
    return gzip.compress(data, compresslevel=level, mtime=0)


def _dump(trace):
    return json.dumps(trace, indent=1).encode()


def _first(events, **match):
    return next(e for e in events if all(e.get(k) == v for k, v in match.items()))


def _with_event(change):
    """The source trace with `change(event)` applied to its first kernel event."""
    trace = source_trace()
    change(_first(trace["traceEvents"], cat="kernel"))
    return _dump(trace)


def cut_mid_event():
    """The source text cut inside the name of an event two thirds of the way through the array."""
    raw = source_bytes()
    at = raw.index(b'"name": "', len(raw) * 2 // 3) + 12
    return raw[:at]


def cut_after_event():
    """The source text cut right after the `}` of an event half way through the array."""
    raw = source_bytes()
    return raw[:raw.index(b"},\n  {", len(raw) // 2) + 1]


def _malformed_event(index):
    """The source trace with a syntax error (two values for one key) inside event `index` (0-based)."""
    trace = source_trace()
    trace["traceEvents"][index]["name"] = "@@broken@@"
    return _dump(trace).replace(b'"@@broken@@"', b'"a" "b"')


def _not_utf8(raw, before):
    """`raw` with two bytes that are not UTF-8 put just before the first `before`."""
    at = raw.index(before)
    return raw[:at] + b"\xff\xfe" + raw[at:]


def _broken_tail():
    """The source text with the value of the key after the event array (traceName) broken."""
    raw = source_bytes()
    return raw[:raw.rindex(b'"traceName": ') + 13] + b"oops\n}"


def cut_gzip():
    """The source, gzipped, cut short after 3000 bytes (a copy interrupted)."""
    return _gzip(source_bytes())[:3000]


def _corrupt_gzip():
    data = bytearray(_gzip(source_bytes()))
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0x5A for b in data[middle:middle + 16])
    return bytes(data)


def _set(key, value):
    def change(event):
        event[key] = value
    return change


def _drop(key):
    def change(event):
        del event[key]
    return change


def _array_end(raw):
    """The offset of the event array's closing `]` in the source text (Kineto writes `}\n  ]`)."""
    return raw.rindex(b"]", 0, raw.rindex(b'"traceName"'))


def _after_array(raw, key_and_value):
    """The source text with `"key": value` (bytes) added right after the event array."""
    end = _array_end(raw) + 1
    return raw[:end] + b",\n  " + key_and_value + raw[end:]


def two_trace_events():
    """A second traceEvents key after the array, holding one event of its own."""
    extra = {"ph": "X", "cat": "cpu_op", "name": "only_in_the_second_array", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    return _after_array(source_bytes(), b'"traceEvents": [' + json.dumps(extra).encode() + b"]")


def bare_array():
    """The source's events as Chrome's array form: the file is the event array itself."""
    return json.dumps(source_trace()["traceEvents"], indent=1).encode()


# Deeper than Python's JSON reader and writer go (they recurse once per level, to about 1,000).
DEEP_LEVELS = 1000


def nested(levels):
    """A JSON object nested `levels` deep, as text: {"a": {"a": ... 1}}."""
    return b'{"a": ' * levels + b"1" + b"}" * levels


def deep_args():
    """The source with a value nested DEEP_LEVELS deep in its first kernel's args."""
    raw = source_bytes()
    at = raw.index(b'"args": {', raw.index(b'"cat": "kernel"')) + len(b'"args": {')
    return raw[:at] + b'"deep": ' + nested(DEEP_LEVELS) + b", " + raw[at:]


def bad_cases():
    """(Case, file bytes) for every input `tracekit load` must refuse."""
    raw = source_bytes()
    manifest = (SAMPLES / "manifest.json").read_bytes()
    cut = cut_mid_event()
    return [
        (Case("empty.json", "empty file"), b""),
        (Case("blank.json", "empty file"), b"\n  \n"),
        (Case("not_json.json", "not JSON"), b"ProfilerStep#0 took 11.6 ms\n"),
        (Case("binary.json", "not UTF-8 text"), b"\x89PNG\r\n\x1a\n" + bytes(range(256))),
        (Case("manifest_not_a_trace.json", "a JSON object without a traceEvents array"), manifest),
        (Case("number_array.json", "not an event object"), b"[1, 2, 3]"),
        (Case("events_not_array.json", "traceEvents is not a JSON array"), b'{"traceEvents": {"ph": "X"}}'),
        (Case("events_not_objects.json", "the traceEvents array holds something that is not an event (a JSON object): "
                                         "it ends in [1, 2, 3]}"), b'{"traceEvents": [1, 2, 3]}'),
        (Case("bad_json_in_header.json", "not valid JSON (expected ',' or '}' between keys at line 3"),
         raw.replace(b'"schemaVersion": 1', b'"schemaVersion": 1 2', 1)),
        (Case("bad_json_in_events.json", "not valid JSON in the traceEvents array (unexpected character at",
              lenient="1 with broken JSON"), _malformed_event(2)),
        (Case("bad_utf8_in_event.json", "not valid JSON in the traceEvents array (invalid UTF-8 encoding in string",
              lenient="1 with broken JSON"), _not_utf8(raw, b"flash_fwd_kernel")),
        (Case("bad_utf8_in_header.json", "not UTF-8 text at byte"), _not_utf8(raw, b"NVIDIA H200")),
        (Case("truncated.json", "truncated: the traceEvents array never ends", lenient="1 cut off by truncation"),
         cut),
        (Case("truncated.json.gz", "truncated: the traceEvents array never ends", lenient="1 cut off by truncation"),
         _gzip(cut)),
        (Case("truncated_after_event.json", "does not end properly (truncated after an event",
              lenient="loaded up to its last event, nothing dropped"), cut_after_event()),
        (Case("broken_tail.json", "does not end properly", lenient="loaded up to its last event, nothing dropped"),
         _broken_tail()),
        (Case("truncated_in_header.json", "truncated"), raw[:raw.index(b'"traceEvents"') - 200]),
        (Case("corrupt.json.gz", "corrupt gzip"), _corrupt_gzip()),
        (Case("cut_gzip.json.gz", "corrupt gzip: it ends before the compressed data does",
              lenient="1 cut off by truncation"), cut_gzip()),
        (Case("no_ph.json", "an event has no ph: {", lenient="1 with no ph"), _with_event(_drop("ph"))),
        (Case("no_ts.json", "an event has no ts: {", lenient="1 with no ts"), _with_event(_drop("ts"))),
        (Case("no_name.json", "an event has no name: {", lenient="1 with no name"), _with_event(_drop("name"))),
        (Case("string_dur.json", "an event has a dur that is not a number: {",
              lenient="1 with a dur that is not a number"), _with_event(_set("dur", "3.5 us"))),
        (Case("list_args.json", "an event has args that are not an object: {",
              lenient="1 with args that are not an object"), _with_event(_set("args", [1, 2]))),
        (Case("string_ts.json", "an event has a ts that is not a number: {",
              lenient="1 with a ts that is not a number"), _with_event(_set("ts", "soon"))),
        (Case("bool_name.json", "an event has a name that is not a string: {",
              lenient="1 with a name that is not a string"), _with_event(_set("name", True))),
        (Case("number_ph.json", "an event has a ph that is not a Chrome phase letter: {",
              lenient="1 with a ph that is not a Chrome phase letter"), _with_event(_set("ph", 88))),
        (Case("huge_ts.json", "an event has a ts out of range (NaN, infinite or over 4.6e15 µs): {",
              lenient="1 with a ts out of range"), _with_event(_set("ts", 2 ** 62))),
        (Case("nan_dur.json", "an event has a dur out of range (NaN, infinite or over 4.6e15 µs): {",
              lenient="1 with a dur out of range"), _with_event(_set("dur", float("nan")))),
        (Case("object_name.json", "an event has a name that is not a string: {",
              lenient="1 with a name that is not a string"), _with_event(_set("name", {"kernel": "flash"}))),
        # A JSON reader keeps one of two equal keys (most the last): tracekit will not guess which.
        (Case("two_trace_events.json", "two traceEvents keys"), two_trace_events()),
        (Case("junk_after_trace.json", "junk after the trace: 13 bytes after its closing brace",
              lenient="left out 13 bytes of junk after the trace"), raw + b"\nthis is junk\n"),
        (Case("deep_header_key.json", "a key of its header is nested deeper than tracekit reads"),
         b'{"deep": ' + nested(DEEP_LEVELS) + b", " + raw[raw.index(b"{") + 1:]),
        (Case("deep_key_after_array.json", "a key after its traceEvents array is nested deeper than tracekit reads"),
         _after_array(raw, b'"deep": ' + nested(DEEP_LEVELS))),
        (Case("junk_after_array.json", "junk after the trace: 200 bytes after its closing bracket",
              lenient="left out 200 bytes of junk after the trace"), bare_array() + b"\x00" * 200),
    ]


def _all_events(change):
    trace = source_trace()
    for event in trace["traceEvents"]:
        change(event)
    return _dump(trace)


def _odd_durations():
    trace = source_trace()
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["dur"], kernels[1]["dur"] = -2.5, 0
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["dur"] = 0
    return _dump(trace)


def _stringify_ids(event):
    for key in ("pid", "tid"):
        if key in event:
            event[key] = str(event[key])


def _recategorize(event):
    if event.get("cat") == "overhead":
        event["cat"] = "mystery_category"


def _as_another_device(event):
    # libkineto's category of MTIA's on-device events (ActivityType MTIA_CCP_EVENTS)
    if event.get("cat") == "overhead":
        event["cat"] = "mtia_ccp_events"


# Microseconds since 1970 (Chrome's clock, older Kineto): 16 digits before the point, too many for
# a DOUBLE to keep the nanoseconds.
EPOCH_OFFSET_US = 1_727_815_261_000_000


def epoch_timestamps():
    """The source text with every ts moved to the Unix epoch, digit for digit (no float on the way)."""
    return re.sub(rb'"ts": (-?\d+)', lambda m: b'"ts": %d' % (int(m.group(1)) + EPOCH_OFFSET_US), source_bytes())


def begin_end_pairs():
    """The source with its first cpu_op written as a Chrome B/E pair, the E without a name (the
    format's end event closes the thread's latest B and needs none)."""
    trace = source_trace()
    events = trace["traceEvents"]
    at, op = next((i, e) for i, e in enumerate(events) if e.get("cat") == "cpu_op" and e["ph"] == "X")
    begin = {**op, "ph": "B"}
    del begin["dur"]
    end = {"ph": "E", "pid": op["pid"], "tid": op["tid"], "ts": op["ts"] + op["dur"]}
    events[at:at + 1] = [begin, end]
    return _dump(trace)


def long_whitespace():
    """The source text with whitespace of every kind, 2 MB and 5 MB of it, between two events and
    before the array's `]`."""
    raw = source_bytes()
    between = raw.index(b"},\n  {", len(raw) // 2) + 2
    last = raw.rindex(b"}", 0, _array_end(raw)) + 1
    return (raw[:between] + b" \t\r\n" * (1 << 19) + raw[between:last] + b"\n " * (5 << 19)
            + raw[last:])


def whitespace_places(raw):
    """{place: offset in the source text} for every kind of place JSON lets whitespace sit in a
    trace: around the top-level object and its keys, at the event array's brackets and commas, and
    inside an event, between a key and its value and inside its args."""
    events_key = raw.index(b'"traceEvents"')
    array = raw.index(b"[", events_key)
    comma = raw.index(b"},\n  {", len(raw) // 2) + 1
    kernel = raw.index(b'"cat": "kernel"')
    end = _array_end(raw)
    return {
        "before the trace": 0,
        "after a comma between keys": raw.index(b",", raw.index(b'"schemaVersion"')) + 1,
        "before traceEvents' colon": events_key + len(b'"traceEvents"'),
        "after traceEvents' colon": array,
        "after the array's [": array + 1,
        "before a comma between events": comma,
        "after a comma between events": comma + 1,
        "between a key and its value": raw.index(b'"name":', kernel) + len(b'"name":'),
        "inside args": raw.index(b'"args": {', kernel) + len(b'"args": {'),
        "before the array's ]": raw.rindex(b"}", 0, end) + 1,
        "after the array's ]": end + 1,
        "after the trace": len(raw),
    }


# JSON's four whitespace characters in turn, 1 MB of them.
BLANKS = b" \t\r\n" * (1 << 18)


def padded(raw, runs, blanks=BLANKS):
    """`raw` piece by piece with runs[offset] bytes of whitespace (cut from `blanks`) put at each
    offset: a generator, so gigabytes of it can stream into gzip."""
    at = 0
    for offset in sorted(runs):
        yield raw[at:offset]
        left = runs[offset]
        while left:
            yield blanks[:min(left, len(blanks))]
            left -= min(left, len(blanks))
        at = offset
    yield raw[at:]


def whitespace_everywhere():
    """The source text with 1 MB of whitespace at every place of whitespace_places, and 65 MB
    after the trace: past the 64 MB in which the loader looks for the end of the trace."""
    raw = source_bytes()
    runs = {offset: 1 << 20 for offset in whitespace_places(raw).values()}
    runs[len(raw)] = 65 << 20
    return b"".join(padded(raw, runs))


MEMORY_SOURCE = ROOT / "tests" / "data" / "cpu" / "memory" / "naive_mul_inplace.json.gz"


def odd_memory_events():
    """A real capture with memory events (tests/data/cpu/memory) whose first [memory] events are
    damaged one way each: Bytes as text, no args, no Addr, a Total Allocated of null; and a free
    whose allocation the trace never saw. Each loads; what cannot be read is NULL. Not among
    odd_cases, whose checks expect the 6 kernels of SOURCE: tests/test_memory.py loads it."""
    trace = json.loads(gzip.decompress(MEMORY_SOURCE.read_bytes()))
    memory = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    memory[0]["args"]["Bytes"] = "many"
    del memory[1]["args"]
    del memory[2]["args"]["Addr"]
    memory[3]["args"]["Total Allocated"] = None
    stray = json.loads(json.dumps(memory[-1]))
    stray["args"].update(Addr=12345, Bytes=-64)
    trace["traceEvents"].append(stray)
    return _dump(trace)


def odd_cases():
    """(Case, file bytes) for valid but unusual traces that must load."""
    return [
        (Case("epoch_timestamps.json", ""), epoch_timestamps()),
        (Case("deep_args.json", ""), deep_args()),
        (Case("byte_order_mark.json", ""), b"\xef\xbb\xbf" + source_bytes()),
        (Case("name[with]brackets.json", ""), source_bytes()),
        (Case("gzip_in_gzip.json.gz", ""), _gzip(_gzip(source_bytes()))),
        (Case("begin_end_pairs.json", ""), begin_end_pairs()),
        # Past the 1 MB in which the separator between events is looked for, and past the 4 MB
        # held back for the keys after the array (gzip makes the file 30 KB).
        (Case("long_whitespace.json.gz", ""), _gzip(long_whitespace())),
        # Whitespace anywhere JSON allows it, and past the window for the end of the trace (gzip: 0.4 MB).
        (Case("whitespace_everywhere.json.gz", ""), _gzip(whitespace_everywhere(), level=1)),
        (Case("big_key_after_array.json.gz", ""),
         _gzip(_after_array(source_bytes(), b'"blob": "' + b"x" * (10 << 20) + b'"'))),
        (Case("odd_durations.json", ""), _odd_durations()),
        # A name built to make a backtracking regex take the square of its length (`gemm\w*_ffma`).
        (Case("gemm_repeated_kernel_name.json.gz", ""),
         _gzip(_with_event(lambda e: e.update(name="gemm" * (1 << 20))))),
        (Case("huge_kernel_name.json.gz", ""),
         _gzip(_with_event(lambda e: e.update(name="k" * (1 << 20))))),
        (Case("unknown_category.json", ""), _all_events(_recategorize)),
        (Case("other_device.json", ""), _all_events(_as_another_device)),
        (Case("string_pids.json", ""), _all_events(_stringify_ids)),
        # A number in a string is read as the number, as Perfetto reads it.
        (Case("numeric_string_ts.json", ""), _with_event(_set("ts", "5405975738135.723"))),
        (Case("numeric_string_dur.json", ""), _with_event(_set("dur", "3.5"))),
    ]


def database_state(db):
    """What a failed load must leave as it was: every table's row count and every trace_files row.

    `db` is a database path or an open connection. (A DuckDB file's bytes change on every open,
    so its contents are compared instead.)
    """
    import duckdb

    con = db if isinstance(db, duckdb.DuckDBPyConnection) else duckdb.connect(str(db), read_only=True)
    try:
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            " AND table_catalog = current_database() AND table_schema = 'main' ORDER BY 1").fetchall()]
        counts = {table: con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables}
        return counts, con.execute("SELECT * FROM trace_files ORDER BY trace_id").fetchall()
    finally:
        if con is not db:
            con.close()


def build(folder):
    """Writes every case into `folder`; returns {file name: Case}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cases = {}
    for case, data in bad_cases() + odd_cases():
        (folder / case.name).write_bytes(data)
        cases[case.name] = case
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/make_bad_corpus.py FOLDER")
    for name, case in build(sys.argv[1]).items():
        print(f"{name}: {case.problem or 'loads'}")
