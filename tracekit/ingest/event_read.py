"""Reading a trace's events into `event_rows`: a fast typed read, and an exact one for bad input.

The fast read cuts the event array into pieces (event_chunks) that DuckDB parses on every core,
with typed columns: `ts` and `dur` as DECIMAL keep every nanosecond at any magnitude. It checks
each event on the way in, but only says *that* an event is bad; the file is then read again,
as one array through one FIFO with JSON columns, by the exact read, whose checks say which event
and what is wrong with it (and which `--lenient` uses to drop and count bad events).
"""

import os
import re
import tempfile
import threading

from tracekit.store.engine import duckdb
from tracekit.errors import TraceFileError, TracekitError
from tracekit.ingest.event_chunks import ChunkCutter, FifoFeed, piece_bytes
from tracekit.ingest.scratch import scratch_prefix
from tracekit.ingest.tracefile import EventLines, expected_size, stream_events

# A 1 MB kernel name is valid; one event bigger than this is not a trace we can use (DuckDB
# reserves twice this per reader, within the load's memory limit).
MAX_EVENT_BYTES = 64 << 20
CHROME_PHASES = "BEXiICMstfbneOPNDSTpFRa"
EVENT_COLUMNS = ('{"ph": "JSON", "cat": "VARCHAR", "name": "JSON", "ts": "JSON", "dur": "JSON", "pid": "VARCHAR",'
                 ' "tid": "VARCHAR", "id": "VARCHAR", "bp": "VARCHAR", "s": "VARCHAR", "args": "JSON"}')
# A JSON column holds a number as a DOUBLE, which has no room for the nanoseconds of an epoch
# microsecond (1733221234567890.123); a DECIMAL read of the event's own text keeps them.
EXACT_TIMES = '{"ts": "DECIMAL(38,3)", "dur": "DECIMAL(38,3)"}'

# Each problem an event can have, as an SQL condition over the raw columns; strict loads stop at
# the first ("an event has <problem>"), --lenient loads drop such events and count them.
EVENT_PROBLEMS = {
    "no ph": "ph IS NULL OR json_type(ph) = 'NULL'",
    "a ph that is not a Chrome phase letter": f"json_type(ph) <> 'VARCHAR' OR length(json_extract_string(ph, '$')) <> 1"
                                              f" OR strpos('{CHROME_PHASES}', json_extract_string(ph, '$')) = 0",
    # Chrome's end event (E) may leave its name out: it closes the latest B of its thread.
    "no name": "(name IS NULL OR json_type(name) = 'NULL') AND json_extract_string(ph, '$') <> 'E'",
    "a name that is not a string": "json_type(name) NOT IN ('VARCHAR', 'UBIGINT', 'BIGINT', 'DOUBLE')",
    "no ts": "(ts IS NULL OR json_type(ts) = 'NULL') AND json_extract_string(ph, '$') <> 'M'",
    "a ts that is not a number": "ts IS NOT NULL AND json_type(ts) <> 'NULL' AND NOT tk_is_number(ts)",
    "a dur that is not a number": "dur IS NOT NULL AND json_type(dur) <> 'NULL' AND NOT tk_is_number(dur)",
    "a ts out of range (NaN, infinite or over 4.6e15 µs)": "tk_is_number(ts) AND NOT tk_in_range(ts)",
    "a dur out of range (NaN, infinite or over 4.6e15 µs)": "tk_is_number(dur) AND NOT tk_in_range(dur)",
    "args that are not an object": "args IS NOT NULL AND json_type(args) NOT IN ('OBJECT', 'NULL')",
}
# The reason --lenient gives for the one event a truncated file cuts in half.
TRUNCATED = "cut off by truncation"
# How a strict read reports broken JSON among the events, and why --lenient drops such an event:
# read one event per line, DuckDB turns a line it cannot parse into a row of NULLs.
BROKEN_JSON = "not valid JSON in the traceEvents array"
BROKEN_EVENT = "broken JSON"
_ALL_NULL = " AND ".join(f"{column} IS NULL" for column in
                         ("ph", "cat", "name", "ts", "dur", "pid", "tid", "id", "bp", "s", "args"))


# The biggest event the fast read takes (DuckDB reserves twice this per reader); a bigger one
# goes to the exact read.
FAST_MAX_EVENT_BYTES = 16 << 20
# The fast read's columns: exact decimals for times, text for the rest, args as JSON.
TYPED_COLUMNS = ("{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', ts: 'DECIMAL(38,3)', dur: 'DECIMAL(38,3)',"
                 " pid: 'VARCHAR', tid: 'VARCHAR', id: 'VARCHAR', bp: 'VARCHAR', s: 'VARCHAR', args: 'JSON'}")
_TYPED_INSERT = ("INSERT INTO event_rows SELECT $trace_id, cat, name, ph,"
                 " CAST(ts * 1000 AS BIGINT), CAST(dur * 1000 AS BIGINT), pid, tid, id, bp, s, args"
                 f" FROM read_json($fifos, format = 'array', columns = {TYPED_COLUMNS},"
                 f" maximum_object_size = {FAST_MAX_EVENT_BYTES})")
# What the fast read refuses, checked on the stored rows (a check inside the read costs a third of
# it): a refused file is read again by the exact read, which says which event is bad and why. The
# typed read turns a name of true or {...} into text, so such names are refused here.
_REFUSED = (f"ph IS NULL OR length(ph) <> 1 OR strpos('{CHROME_PHASES}', ph) = 0 OR (name IS NULL AND ph <> 'E')"
            " OR name IN ('true', 'false') OR ((starts_with(name, '{') OR starts_with(name, '[')) AND json_valid(name))"
            " OR (ts_ns IS NULL AND ph <> 'M') OR abs(ts_ns) >= 4600000000000000000"
            " OR abs(dur_ns) >= 4600000000000000000 OR (args IS NOT NULL AND NOT starts_with(args, '{'))")


class FastReadRefused(Exception):
    """The fast read could not take this file; the exact read will, or will say why not."""


def read_fast(con, path, trace_id, progress=None):
    """Inserts the trace's events into event_rows (inside the caller's transaction) with the fast
    read; returns the TraceStream. Raises TraceFileError for a file that is not a readable trace
    and FastReadRefused when DuckDB refuses an event or a piece (the caller rolls back)."""
    expected = expected_size(path)
    size = piece_bytes(expected)

    def produce(emit):
        cutter = ChunkCutter(emit, size)
        info = stream_events(path, cutter, progress=reading)
        cutter.finish()
        return info

    def reading(done):
        feed.check()  # a read that gave up ends between any two blocks, all whitespace or not
        if progress is not None:
            progress(done)

    feed = FifoFeed(produce, expected // size + 1)

    def read(fifos):
        con.execute(_TYPED_INSERT, {"trace_id": trace_id, "fifos": fifos})

    try:
        info = feed.run(read)
    except duckdb.Error as exc:
        if feed.error is not None and isinstance(feed.error, TracekitError):
            raise feed.error from None
        raise FastReadRefused(str(exc).splitlines()[0]) from None
    except UnicodeDecodeError:
        # DuckDB's error quoted bytes of the file that are not UTF-8, which its Python client
        # cannot decode: the exact read says what is wrong.
        raise FastReadRefused("DuckDB refused the events (its message held bytes that are not UTF-8)") from None
    refused = con.execute(f"SELECT count(*) FROM event_rows WHERE trace_id = $trace_id AND ({_REFUSED})",
                          {"trace_id": trace_id}).fetchone()[0]
    if refused:
        raise FastReadRefused(f"{refused} events the typed read cannot vouch for")
    return info


def read_exact(con, path, trace_id, progress=None):
    """The exact, one-FIFO read with the per-event checks; returns the TraceStream."""
    return _run_on_fifo(con, path, _strict_sql(), {"trace_id": trace_id}, False, progress, False)


class _FifoWriter(threading.Thread):
    """Streams a trace's event array into a FIFO that DuckDB reads."""

    def __init__(self, path, fifo, lenient, progress, lines):
        super().__init__(daemon=True)
        self.path, self.fifo, self.lenient, self.progress, self.lines = path, fifo, lenient, progress, lines
        self.info = None
        self.error = None
        self.released = threading.Event()

    def run(self):
        try:
            with open(self.fifo, "wb", buffering=1 << 20) as sink:
                target = EventLines(sink) if self.lines else sink
                self.info = stream_events(self.path, target, lenient=self.lenient, progress=self._reading)
                if self.lines:
                    target.finish()
        except (BrokenPipeError, _Released):
            pass  # DuckDB stopped reading: its own error says why.
        except TracekitError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - surfaced as the file's error, never swallowed
            self.error = TraceFileError(self.path, f"cannot be read ({exc})")

    def _reading(self, done):
        if self.released.is_set():
            raise _Released()  # between two blocks, all whitespace or not
        if self.progress is not None:
            self.progress(done)

    def release(self):
        """Unblocks a writer still waiting for a reader, and stops one still reading, so the thread can end."""
        self.released.set()
        try:
            fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        self.join(timeout=0.2)
        os.close(fd)


class _Released(Exception):
    """DuckDB stopped reading: the writer stops where it is."""


_CONVERTED = ("$trace_id, {cat}, json_extract_string(name, '$'), json_extract_string(ph, '$'), "
              "tk_exact_ns(ts, ts_exact), tk_exact_ns(dur, dur_exact), pid, tid, id, bp, s, args")


# A bad event as shown in its error: the keys it has (a key it lacks is not shown as null), the
# short ones first and the name cut short (kernel names run to kilobytes), so the key at fault is
# in view. Evaluated only for the event that fails.
_SHOWN_KEYS = ("ph", "ts", "dur", "cat", "pid", "tid", "name", "args")
_SHOWN_NAME = ("CASE WHEN json_type(e.name) = 'VARCHAR' THEN to_json(left(json_extract_string(e.name, '$'), 60))"
               " ELSE e.name END")


def _shown_value(key):
    # a JSON column holds the value's own JSON text; a VARCHAR one (cat, pid, tid) is quoted as JSON
    return f"e.{key}" if f'"{key}": "JSON"' in EVENT_COLUMNS else f"to_json(e.{key})"


_EXCERPT = ("left('{' || concat_ws(',', "
            + ", ".join(f"""'"{key}":' || ({_SHOWN_NAME if key == "name" else _shown_value(key)})::VARCHAR"""
                        for key in _SHOWN_KEYS)
            + ") || '}', 200)")


def _source(lines):
    # Only newline-delimited input lets DuckDB skip (ignore_errors) an event it cannot parse.
    form = "format = 'newline_delimited', ignore_errors = true" if lines else "format = 'array'"
    # Each event's text once (a broken line: NULL), typed twice: JSON columns for the checks,
    # exact decimals for the times. A value that is not an object is no event: the array read
    # stops there; the line read (--lenient) drops it as broken.
    objects = f"read_json_objects($fifo, {form}, maximum_object_size = {MAX_EVENT_BYTES})"
    not_object = ("NULL" if lines else
                  "error('not a trace: traceEvents holds ' || left(json::VARCHAR, 40) || ', not an event object')")
    return (f"(SELECT unnest(e), n.ts AS ts_exact, n.dur AS dur_exact FROM"
            f" (SELECT CASE WHEN json_type(json) <> 'OBJECT' THEN {not_object}"
            f" ELSE json_transform(json, '{EVENT_COLUMNS}') END AS e, json_transform(json, '{EXACT_TIMES}') AS n"
            f" FROM {objects}))")


def _strict_sql():
    # error() stops the read at the first bad event, naming the problem and showing the event.
    checks = " ".join(f"WHEN {condition} THEN error('an event has {problem}: ' || {_EXCERPT})"
                      for problem, condition in EVENT_PROBLEMS.items())
    return (f"INSERT INTO event_rows SELECT {_CONVERTED.format(cat=f'CASE {checks} ELSE cat END')} "
            f"FROM {_source(False)} AS e")


def lenient_insert(con, trace_id, lines):
    """Counts and drops the problem events of `_raw`, inserts the rest."""
    problems = {**({BROKEN_EVENT: _ALL_NULL} if lines else {}), **EVENT_PROBLEMS}
    cases = " ".join(f"WHEN {condition} THEN '{problem}'" for problem, condition in problems.items())
    con.execute(f"CREATE OR REPLACE TEMP TABLE _raw_checked AS SELECT *, CASE {cases} END AS problem FROM _raw")
    dropped = dict(con.execute("SELECT problem, count(*) FROM _raw_checked WHERE problem IS NOT NULL "
                               "GROUP BY problem ORDER BY problem").fetchall())
    con.execute(f"INSERT INTO event_rows SELECT {_CONVERTED.format(cat='cat')} "
                "FROM _raw_checked WHERE problem IS NULL", {"trace_id": trace_id})
    con.execute("DROP TABLE _raw_checked")
    return dropped


class _EventsRefused(TraceFileError):
    """DuckDB could not read the event array (as opposed to the file not being readable)."""


def read_lenient(con, path, progress):
    """Reads the events into TEMP TABLE _raw, outside the load's transaction (a failed statement
    ends a DuckDB transaction): events DuckDB refuses as broken JSON are read again one per line,
    where it can skip the broken ones. Returns (TraceStream, read by lines)."""
    raw_sql = "CREATE OR REPLACE TEMP TABLE _raw AS SELECT * FROM {}"
    try:
        return _run_on_fifo(con, path, raw_sql.format(_source(False)), {}, True, progress, False), False
    except _EventsRefused as exc:
        if not exc.problem.startswith(BROKEN_JSON):
            raise
    return _run_on_fifo(con, path, raw_sql.format(_source(True)), {}, True, None, True), True


def _run_on_fifo(con, path, statement, params, lenient, progress, lines):
    """Runs `statement`, which reads $fifo, while a thread streams the trace's events into it."""
    with tempfile.TemporaryDirectory(prefix=scratch_prefix()) as folder:
        fifo = os.path.join(folder, "events.json")
        os.mkfifo(fifo)
        writer = _FifoWriter(path, fifo, lenient, progress, lines)
        writer.start()
        try:
            con.execute(statement, {"fifo": fifo, **params})
        except (duckdb.Error, UnicodeDecodeError) as exc:
            writer.release()
            writer.join(timeout=5)
            if writer.error is not None:
                raise writer.error from None
            if isinstance(exc, UnicodeDecodeError):
                # DuckDB's message quoted the file's bytes, which are not UTF-8 there.
                raise _EventsRefused(path, f"{BROKEN_JSON} (bytes that are not UTF-8; --lenient drops the event)") from None
            raise _EventsRefused(path, duckdb_problem(exc)) from None
        writer.join()
        if writer.error is not None:
            raise writer.error
        return writer.info


_JSON_TYPES = {"UBIGINT": "a number", "BIGINT": "a number", "DOUBLE": "a number", "VARCHAR": "a string",
               "ARRAY": "a list", "BOOLEAN": "a boolean"}
_MALFORMED = re.compile(r'Malformed JSON in file ".*?", at byte (\d+) in record/value (\d+): (.*?)\.?\s*$')
_TOO_BIG = re.compile(r'"maximum_object_size" of \d+ bytes exceeded .*\(>(\d+) bytes\)')
# DuckDB names the FIFO it read: a temp path of tracekit's, never the trace's.
_IN_FILE = re.compile(r' (?:in|while reading) file "[^"]*"')
_NOT_OBJECT = re.compile(r'JSON transform error in file ".*?", in record/value (\d+): Expected OBJECT, but got (\w+)')


def duckdb_problem(exc):
    """DuckDB's error on the event array, said in terms of the trace (never the FIFO's path: a
    path DuckDB names that this misses, TraceFileError replaces with the trace's)."""
    message = str(exc).splitlines()[0]
    malformed = _MALFORMED.search(message)
    if malformed:
        # DuckDB counts the array itself as value 1: its value N is event N - 1.
        offset, value, what = malformed.groups()
        return f"{BROKEN_JSON} ({what} at character {offset} of event {int(value) - 1}; --lenient drops it)"
    if "Empty array with trailing data" in message:
        return f"{BROKEN_JSON} (at its first event; --lenient drops it)"
    if message.startswith("Out of Memory Error"):
        # Reading one array, DuckDB holds a whole event at once: an event of tens of MB (the fast
        # read already refused one over 16 MB) does not fit the load's memory.
        return (f"an event too big to read: tracekit reads events of up to {MAX_EVENT_BYTES >> 20} MB, within the"
                f" load's memory limit ({message.splitlines()[0][len('Out of Memory Error: '):]})")
    too_big = _TOO_BIG.search(message)
    if too_big:
        # One event bigger than DuckDB's buffer (twice maximum_object_size): its end never came.
        return (f"an event too big to read: tracekit reads events of up to {MAX_EVENT_BYTES >> 20} MB, and this one"
                f" runs past {int(too_big.group(1)) >> 20} MB")
    not_object = _NOT_OBJECT.search(message)
    if not_object:
        number, kind = not_object.groups()
        return f"not a trace: event {number} of traceEvents is {_JSON_TYPES.get(kind, kind)}, not an event object"
    for prefix in ("Invalid Input Error: ", "Conversion Error: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    return _IN_FILE.sub("", message)


