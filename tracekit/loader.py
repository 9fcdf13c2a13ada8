"""Loads trace files into a tracekit database, one transaction per file.

A file either loads completely (events, derived tables, kernel classes) or leaves
the database exactly as it was. The events travel from the file to DuckDB through
a FIFO, so Python never holds more than a few MB of the trace.
"""

import glob
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from tracekit import __version__
from tracekit.classify import classify_many, rules_table
from tracekit.database import split_statements, sql_resource
from tracekit.errors import TraceFileError, TracekitError
from tracekit.tracefile import EventLines, stream_events

TRACE_SUFFIXES = (".json.gz", ".json", ".gz")
# `tracekit capture` writes this beside its traces; a folder load passes over it.
CAPTURE_MANIFEST = "manifest.json"
# A 1 MB kernel name is valid; one event bigger than this is not a trace we can use.
MAX_EVENT_BYTES = 256 << 20
CHROME_PHASES = "BEXiICMstfbneOPNDSTpFRa"
EVENT_COLUMNS = ("{ph: 'JSON', cat: 'VARCHAR', name: 'JSON', ts: 'JSON', dur: 'JSON', pid: 'VARCHAR',"
                 " tid: 'VARCHAR', id: 'VARCHAR', bp: 'VARCHAR', s: 'VARCHAR', args: 'JSON'}")

# Each problem an event can have, as an SQL condition over the raw columns; strict loads stop at
# the first ("an event has <problem>"), --lenient loads drop such events and count them.
EVENT_PROBLEMS = {
    "no ph": "ph IS NULL OR json_type(ph) = 'NULL'",
    "a ph that is not a Chrome phase letter": f"json_type(ph) <> 'VARCHAR' OR length(json_extract_string(ph, '$')) <> 1"
                                              f" OR strpos('{CHROME_PHASES}', json_extract_string(ph, '$')) = 0",
    "no name": "name IS NULL OR json_type(name) = 'NULL'",
    "a name that is not a string": "json_type(name) NOT IN ('VARCHAR', 'UBIGINT', 'BIGINT', 'DOUBLE')",
    "no ts": "(ts IS NULL OR json_type(ts) = 'NULL') AND json_extract_string(ph, '$') <> 'M'",
    "a ts that is not a number": "ts IS NOT NULL AND json_type(ts) <> 'NULL' AND NOT tk_is_number(ts)",
    "a dur that is not a number": "dur IS NOT NULL AND json_type(dur) <> 'NULL' AND NOT tk_is_number(dur)",
    "a ts out of range (NaN, infinite or over 4.6e15 us)": "tk_is_number(ts) AND NOT tk_in_range(ts)",
    "a dur out of range (NaN, infinite or over 4.6e15 us)": "tk_is_number(dur) AND NOT tk_in_range(dur)",
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


@dataclass
class LoadResult:
    """What happened to one file."""

    path: str
    status: str  # loaded, skipped, failed
    trace: str = None
    events: int = 0
    kernels: int = 0
    message: str = ""
    dropped: dict = field(default_factory=dict)  # reason -> events dropped (--lenient)
    truncated: bool = False  # the event array never ended (loaded with --lenient)
    cut_bytes: int = 0  # bytes of the trace's cut-off end left out


def expand_paths(patterns):
    """Files, folders (their trace files, recursively) and globs, in a stable order."""
    found = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if glob.has_magic(pattern) and not matches:
            raise TraceFileError(pattern, "no file matches this pattern")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                traces = sorted(p for p in path.rglob("*")
                                if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name != CAPTURE_MANIFEST)
                if not traces:
                    raise TraceFileError(path, "a folder with no .json or .json.gz trace files in it")
                found.extend(traces)
            else:
                found.append(path)
    unique = list(dict.fromkeys(p.resolve() if p.exists() else p for p in found))
    return unique


def trace_name_for(path):
    name = Path(path).name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def _unique_name(con, wanted):
    taken = {row[0] for row in con.execute(
        "SELECT trace FROM trace_files WHERE trace = ? OR trace LIKE ? || '-%'", [wanted, wanted]).fetchall()}
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


class _FifoWriter(threading.Thread):
    """Streams a trace's event array into a FIFO that DuckDB reads."""

    def __init__(self, path, fifo, lenient, progress, lines):
        super().__init__(daemon=True)
        self.path, self.fifo, self.lenient, self.progress, self.lines = path, fifo, lenient, progress, lines
        self.info = None
        self.error = None

    def run(self):
        try:
            with open(self.fifo, "wb", buffering=1 << 20) as sink:
                target = EventLines(sink) if self.lines else sink
                self.info = stream_events(self.path, target, lenient=self.lenient, progress=self.progress)
                if self.lines:
                    target.finish()
        except BrokenPipeError:
            pass  # DuckDB stopped reading: its own error says why.
        except TracekitError as exc:
            self.error = exc
        except Exception as exc:  # noqa: BLE001 - surfaced as the file's error, never swallowed
            self.error = TraceFileError(self.path, f"cannot be read ({exc})")

    def release(self):
        """Unblocks a writer still waiting for a reader, so the thread can end."""
        try:
            fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        self.join(timeout=0.2)
        os.close(fd)


_CONVERTED = ("$trace_id, {cat}, json_extract_string(name, '$'), json_extract_string(ph, '$'), "
              "tk_ns(ts), tk_ns(dur), pid, tid, id, bp, s, args")


# A bad event as shown in its error: the short keys first and the name cut short (kernel names
# run to kilobytes), so the key at fault is in view. Evaluated only for the event that fails.
_EXCERPT = ("left(to_json(struct_pack(ph := e.ph, ts := e.ts, dur := e.dur, cat := e.cat, pid := e.pid, tid := e.tid,"
            " name := CASE WHEN json_type(e.name) = 'VARCHAR' THEN to_json(left(json_extract_string(e.name, '$'), 60))"
            " ELSE e.name END, args := e.args))::VARCHAR, 200)")


def _source(lines):
    # Only newline-delimited input lets DuckDB skip (ignore_errors) an event it cannot parse.
    form = "format = 'newline_delimited', ignore_errors = true" if lines else "format = 'array'"
    return f"read_json($fifo, {form}, columns = {EVENT_COLUMNS}, maximum_object_size = {MAX_EVENT_BYTES})"


def _strict_sql():
    # error() stops the read at the first bad event, naming the problem and showing the event.
    checks = " ".join(f"WHEN {condition} THEN error('an event has {problem}: ' || {_EXCERPT})"
                      for problem, condition in EVENT_PROBLEMS.items())
    return (f"INSERT INTO event_rows SELECT {_CONVERTED.format(cat=f'CASE {checks} ELSE cat END')} "
            f"FROM {_source(False)} AS e")


def _lenient_insert(con, trace_id, lines):
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


def _read_lenient(con, path, progress):
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
    with tempfile.TemporaryDirectory(prefix="tracekit-") as folder:
        fifo = os.path.join(folder, "events.json")
        os.mkfifo(fifo)
        writer = _FifoWriter(path, fifo, lenient, progress, lines)
        writer.start()
        try:
            con.execute(statement, {"fifo": fifo, **params})
        except duckdb.Error as exc:
            writer.release()
            writer.join(timeout=5)
            if writer.error is not None:
                raise writer.error from None
            raise _EventsRefused(path, _duckdb_problem(exc)) from None
        writer.join()
        if writer.error is not None:
            raise writer.error
        return writer.info


_JSON_TYPES = {"UBIGINT": "a number", "BIGINT": "a number", "DOUBLE": "a number", "VARCHAR": "a string",
               "ARRAY": "a list", "BOOLEAN": "a boolean"}
_MALFORMED = re.compile(r'Malformed JSON in file ".*?", at byte (\d+) in record/value (\d+): (.*?)\.?\s*$')
_NOT_OBJECT = re.compile(r'JSON transform error in file ".*?", in record/value (\d+): Expected OBJECT, but got (\w+)')


def _duckdb_problem(exc):
    """DuckDB's error on the event array, said in terms of the trace (never the FIFO's path)."""
    message = str(exc).splitlines()[0]
    malformed = _MALFORMED.search(message)
    if malformed:
        # DuckDB counts the array itself as value 1: its value N is event N - 1.
        offset, value, what = malformed.groups()
        return f"{BROKEN_JSON} ({what} at character {offset} of event {int(value) - 1}; --lenient drops it)"
    if "Empty array with trailing data" in message:
        return f"{BROKEN_JSON} (at its first event; --lenient drops it)"
    not_object = _NOT_OBJECT.search(message)
    if not_object:
        number, kind = not_object.groups()
        return f"not a trace: event {number} of traceEvents is {_JSON_TYPES.get(kind, kind)}, not an event object"
    for prefix in ("Invalid Input Error: ", "Conversion Error: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    return re.sub(r' in file "[^"]*"', "", message)


def _device(header):
    props = header.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        first = props[0]
        major, minor = first.get("computeMajor"), first.get("computeMinor")
        capability = f"{major}.{minor}" if major is not None and minor is not None else None
        return first.get("name"), capability
    return None, None


def _store_classes(con):
    names = [row[0] for row in con.execute(
        "SELECT DISTINCT name FROM kernel_rows WHERE name NOT IN (SELECT name FROM kernel_classes)").fetchall()]
    if names:
        rows = [(name, *classified) for name, classified in zip(names, classify_many(names))]
        con.executemany("INSERT INTO kernel_classes VALUES (?, ?, ?, ?)", rows)
    # Rules are rewritten on every load so the table always matches the classification in use.
    con.execute("DELETE FROM kernel_rules")
    rules = rules_table()
    if rules:
        con.executemany("INSERT INTO kernel_rules VALUES (?, ?, ?, ?, ?)",
                        [(r["order"], r["pattern"], r["kernel_class"], r["gemm_class"], r["why"])
                         for r in rules_table()])


def delete_trace(con, trace_id):
    for table in ("event_rows", "step_rows", "cpu_op_rows", "runtime_rows", "kernel_rows",
                  "transfer_rows", "trace_files"):
        con.execute(f"DELETE FROM {table} WHERE trace_id = ?", [trace_id])


def load_file(con, path, *, replace=False, lenient=False, progress=None):
    """Loads one trace file in one transaction; returns a LoadResult, raises TracekitError."""
    path = Path(path)
    if not path.exists():
        raise TraceFileError(path, "no such file")
    if path.is_dir():
        raise TraceFileError(path, "is a folder, not a trace file")
    try:
        raw = _read_lenient(con, path, progress) if lenient else None
        con.execute("BEGIN")
        try:
            result = _load_in_transaction(con, path, replace, progress, raw)
            con.execute("ROLLBACK" if result.status == "skipped" else "COMMIT")
            return result
        except duckdb.Error as exc:
            # Whatever DuckDB refuses in the events (a value no check foresaw) is the file's error.
            con.execute("ROLLBACK")
            raise TraceFileError(path, _duckdb_problem(exc)) from None
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        if lenient:
            con.execute("DROP TABLE IF EXISTS _raw")


def _load_in_transaction(con, path, replace, progress, raw):
    """Loads the events (or, with --lenient, `raw`: the events read into _raw) and derives the rest."""
    trace_id = con.execute("SELECT nextval('trace_id_seq')").fetchone()[0]
    if raw is None:
        info, dropped = _run_on_fifo(con, path, _strict_sql(), {"trace_id": trace_id}, False, progress, False), {}
    else:
        info, dropped = raw[0], _lenient_insert(con, trace_id, raw[1])
    same = con.execute("SELECT trace_id, trace, sha256 = ? FROM trace_files WHERE sha256 = ? OR (? AND path = ?)",
                       [info.sha256, info.sha256, replace, str(path.resolve())]).fetchall()
    same_content = [row for row in same if row[2]]
    if same_content and not replace:
        return LoadResult(str(path), "skipped", same_content[0][1],
                          message=f"same content as trace {same_content[0][1]!r} (--replace reloads it)")
    name = same[0][1] if same else None
    for old_id, _, _ in same:
        delete_trace(con, old_id)
    name = name or _unique_name(con, trace_name_for(path))
    header = info.header
    metadata = header.get("tracekit") if isinstance(header.get("tracekit"), dict) else None
    device_name, capability = _device(header)
    events = con.execute("SELECT count(*) FROM event_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    if info.cut_events:
        dropped[TRUNCATED] = info.cut_events
    if raw is not None and dropped and not events:
        reasons = ", ".join(f"{count} {why}" if why == TRUNCATED else f"{count} with {why}"
                            for why, count in dropped.items())
        raise TraceFileError(path, f"no event is readable, even with --lenient (dropped {reasons})")
    con.execute(
        "INSERT INTO trace_files VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [trace_id, name, str(path.resolve()), info.sha256, path.stat().st_size,
         datetime.now(timezone.utc).replace(tzinfo=None), __version__,
         json.dumps({k: v for k, v in header.items() if k != "tracekit"}),
         json.dumps(metadata) if metadata is not None else None, device_name, capability, events,
         sum(dropped.values()),
         json.dumps(dropped) if dropped else None])
    for statement in split_statements(sql_resource("derive.sql")):
        con.execute(statement, {"trace_id": trace_id} if "$trace_id" in statement else None)
    _store_classes(con)
    kernels = con.execute("SELECT count(*) FROM kernel_rows WHERE trace_id = ?", [trace_id]).fetchone()[0]
    return LoadResult(str(path), "loaded", name, events, kernels, dropped=dropped,
                      truncated=not info.array_closed, cut_bytes=info.dropped_tail_bytes)
