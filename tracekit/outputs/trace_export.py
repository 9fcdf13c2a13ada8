"""Writes events from the database back out as a Chrome JSON trace that Perfetto and tracekit load.

Perfetto's JSON importer drops or moves complete (`X`) slices that partially
overlap on one thread track, so slices that would are moved to an extra track
of the same process, beside the original; the file names those tracks, and a
reload by tracekit puts the slices back (track_layout). Events are written in
the order they were loaded, so events at one instant nest on reload as they did.
Timestamps are written from the stored integer nanoseconds, so the microsecond
values keep their nanosecond fraction.
"""

import gzip
import json
import re
from pathlib import Path

import duckdb

from tracekit.errors import QueryError, TracekitError
from tracekit.store.sql_sandbox import check_read_only, is_refused_access, refused_access_message, require_text
from tracekit.ingest.track_layout import OVERLAP_TRACKS_KEY, assign_lanes

EVENT_COLUMNS = ("trace", "cat", "name", "ph", "ts_ns", "dur_ns", "pid", "tid", "id", "bp", "s", "args")
# Metadata events that name and order tracks: kept for every track an export keeps.
PROCESS_METADATA = ("process_name", "process_labels", "process_sort_index", "process_uptime_seconds")
THREAD_METADATA = ("thread_name", "thread_sort_index")
_INTEGER = re.compile(r"-?\d+")


def _micros(ns):
    """Nanoseconds as the microsecond text Kineto writes: 5405973117101.569."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(int(ns)), 1000)
    return f"{sign}{whole}.{frac:03d}"


def _ident(value):
    """pid/tid as Kineto writes them: numbers as numbers, names as strings."""
    if value is None:
        return 0
    return int(value) if _INTEGER.fullmatch(value) else value


def event_json(event):
    """One event dict (EVENT_COLUMNS, args as JSON text) as a line of JSON, args passed through."""
    parts = [f'"ph": {json.dumps(event["ph"])}']
    if event.get("cat") is not None:
        parts.append(f'"cat": {json.dumps(event["cat"])}')
    parts.append(f'"name": {json.dumps(event["name"], ensure_ascii=False)}')
    parts.append(f'"pid": {json.dumps(_ident(event["pid"]))}')
    parts.append(f'"tid": {json.dumps(_ident(event["tid"]))}')
    if event.get("ts_ns") is not None:
        parts.append(f'"ts": {_micros(event["ts_ns"])}')
    if event.get("dur_ns") is not None:
        parts.append(f'"dur": {_micros(event["dur_ns"])}')
    for key in ("id", "bp", "s"):
        if event.get(key) is not None:
            value = event[key]
            parts.append(f'"{key}": {json.dumps(_ident(value) if key == "id" else value)}')
    if event.get("args") is not None:
        parts.append(f'"args": {event["args"]}')
    return "{" + ", ".join(parts) + "}"


def _select(con, sql, params=None):
    """(column names, rows) of `sql`, run as the user wrote it (a trailing `;` or `-- comment`
    included); a one-line error for SQL that selects nothing."""
    shown = " ".join(sql.split())[:300]
    try:
        relation = con.execute(sql, params) if params else con.execute(sql)
        if relation is None or relation.description is None:
            raise TracekitError(f"the SQL must select events (SELECT * FROM events WHERE ...) — in SQL: {shown}")
        columns = [d[0] for d in relation.description]
        return columns, relation.fetchall()
    except duckdb.Error as exc:
        if is_refused_access(exc):
            raise QueryError(refused_access_message(exc)) from None
        raise QueryError(f"{str(exc).splitlines()[0]} — in SQL: {shown}") from None


def _check_user_sql(sql):
    """Refuses SQL that is empty (or only comments) with the export's own hint, then anything but
    one SELECT (sql_sandbox): the SQL runs as written, so nothing may ride along after it."""
    require_text(sql)
    try:
        empty = not duckdb.extract_statements(sql)
    except duckdb.Error:
        empty = False  # check_read_only names the parse error
    if empty:
        raise QueryError("the SQL is empty (or only comments): select the events to export,"
                            " e.g. SELECT * FROM events WHERE trace = '...'")
    check_read_only(sql)


_TRACE_EVENTS = ("SELECT t.trace, e.cat, e.name, e.ph, e.ts_ns, e.dur_ns, e.pid, e.tid, e.id, e.bp, e.s, e.args"
                 " FROM event_rows e JOIN trace_files t USING (trace_id) WHERE t.trace = $trace ORDER BY e.rowid")


def select_events(con, *, trace=None, sql=None):
    """The events to export, as dicts of EVENT_COLUMNS, from one trace or from an SQL query."""
    if trace is not None:
        # In the file's order: events at one instant keep it, and with it their nesting on reload.
        sql, params = _TRACE_EVENTS, {"trace": trace}
    else:
        _check_user_sql(sql)
        params = None
    columns, rows = _select(con, sql, params)
    if "ts_ns" not in columns and "ts_us" in columns:
        columns = ["ts_ns" if c == "ts_us" else "dur_ns" if c == "dur_us" else c for c in columns]
        rows = [tuple(round(v * 1000) if c in ("ts_ns", "dur_ns") and v is not None else v
                      for c, v in zip(columns, row)) for row in rows]
    missing = [c for c in ("trace", "name", "ph", "pid", "tid") if c not in columns]
    if missing:
        raise QueryError(f"the SQL must select events (SELECT * FROM events WHERE ...); "
                            f"its result has no {', '.join(missing)} column")
    keep = [c for c in EVENT_COLUMNS if c in columns]
    index = [columns.index(c) for c in keep]
    events = [dict(zip(keep, (row[i] for i in index))) for row in rows]
    if trace is not None and not events:
        from tracekit.analysis.trace_lookup import trace_row
        trace_row(con, trace)  # raises the "no trace named" error
    return events


def _track_metadata(con, events):
    """The M events naming every process and thread the selected events sit on."""
    traces = sorted({e["trace"] for e in events if e["ph"] != "M"})
    if not traces:
        return []
    pids = {(e["trace"], e["pid"]) for e in events}
    threads = {(e["trace"], e["pid"], e["tid"]) for e in events}
    _, rows = _select(con, "SELECT trace, cat, name, ph, ts_ns, dur_ns, pid, tid, id, bp, s, args FROM events "
                           "WHERE ph = 'M' AND list_contains($traces, trace)", {"traces": traces})
    found = []
    for row in rows:
        meta = dict(zip(EVENT_COLUMNS, row))
        if meta["name"] in THREAD_METADATA and (meta["trace"], meta["pid"], meta["tid"]) in threads:
            found.append(meta)
        elif meta["name"] not in THREAD_METADATA and (meta["trace"], meta["pid"]) in pids:
            found.append(meta)
    return found


def _header(con, traces):
    if len(traces) != 1:
        return {"tracekit": {"exported_from": sorted(traces)}}
    _, rows = _select(con, "SELECT header, metadata FROM trace_files WHERE trace = $t", {"t": traces[0]})
    header = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    if rows and rows[0][1]:
        header["tracekit"] = json.loads(rows[0][1])
    # Keys that a reload would read as something else: a second event array, or tracks moved.
    for key in ("traceName", "traceEvents", OVERLAP_TRACKS_KEY):
        header.pop(key, None)
    return header


def _check_pids(events):
    owners = {}
    for event in events:
        owners.setdefault(event["pid"], set()).add(event["trace"])
    shared = sorted(str(pid) for pid, traces in owners.items() if len(traces) > 1)
    if shared:
        raise TracekitError(f"the selected events come from several traces that share pid {', '.join(shared[:5])}; "
                            "export one trace at a time (add WHERE trace = '...')")


def write_trace(path, header, events):
    """Writes `events` (dicts) under Kineto's top-level keys to `path` (.gz compresses)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "wt", encoding="utf-8") as out:
            out.write("{\n")
            for key, value in header.items():
                out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
            out.write('  "traceEvents": [\n')
            for n, event in enumerate(events):
                out.write(("    " if n == 0 else ",\n    ") + event_json(event))
            out.write("\n  ]\n}\n")
    except OSError as exc:
        raise TracekitError(f"{path}: cannot write ({exc.strerror})") from None
    return path


def export(con, out, *, trace=None, sql=None, findings=False):
    """Writes a trace of one loaded trace (or of the events `sql` selects) to `out`.

    Returns (path, number of events written, number of slices moved off overlaps).
    """
    if (trace is None) == (sql is None):
        raise TracekitError("export needs a trace name or an SQL query, not both")
    events = select_events(con, trace=trace, sql=sql)
    if not events:
        raise TracekitError("the selection holds no events: nothing to export")
    if all(e["ph"] == "M" for e in events):
        raise TracekitError("the selection holds only metadata events (ph 'M', the names of tracks): nothing to"
                            " show; select the events themselves and their tracks' names come with them")
    _check_pids(events)
    if sql is not None:
        have = {_meta_key(e) for e in events if e["ph"] == "M"}
        events += [m for m in _track_metadata(con, events) if _meta_key(m) not in have]
    traces = sorted({e["trace"] for e in events})
    if findings:
        from tracekit.outputs.findings_track import findings_events
        events += findings_events(con, traces)
    events, moved, lanes = assign_lanes(events)
    first = min((e["ts_ns"] for e in events if e["ts_ns"] is not None), default=0)
    for event in events:
        if event["ts_ns"] is None and event["ph"] == "M":
            event["ts_ns"] = first  # Perfetto ignores an M event's ts, but checkers want one
    events.sort(key=lambda e: (e["ph"] != "M", e["ts_ns"] if e["ts_ns"] is not None else 0))
    header = _header(con, traces)
    if lanes:
        header[OVERLAP_TRACKS_KEY] = lanes
    path = write_trace(out, header, events)
    return path, len(events), moved


def _meta_key(event):
    return event["trace"], event["name"], event["pid"], event["tid"]
