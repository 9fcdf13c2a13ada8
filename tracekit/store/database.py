"""Opening tracekit databases: creating the schema, read-only access, and clear errors."""

import contextvars
import functools
import re
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from tracekit.store.engine import duckdb
from tracekit.version import __version__
from tracekit.errors import DatabaseError, DatabaseLocked
from tracekit.store.disk_full import disk_full_folder
from tracekit.store.file_kind import sniff
from tracekit.store.findings_view import findings_view_sql
from tracekit.store.sql_sandbox import lock_down
from tracekit.store.schema_template import start_from_template

DEFAULT_DB = "tracekit.duckdb"
# 2: trace_files.vendor and gpu_arch, gpu_busy_rows.
# 3: the knowledge tables gpu_specs and gpu_arch_limits; event_rows.args compressed with ZSTD.
# 4: trace_files.rank, world_size, dist_backend and job; collective_rows.
# 5: step_rows.source (steps inferred from a trace's iterations); GPU work whose launch is not in
#    the trace takes its GPU-side step.
# 6: trace_files.default_group, base_time_ns, first_ns and last_ns in place of job (jobs are found
#    across traces: view _jobs); collective_rows.runs_on (gloo's collectives run on the CPU).
# 7: kernel_rows.bytes (was gemm_bytes), model_flops and work_family: a work model for every op
#    family (knowledge/op_work_models.csv); gpu_specs.fp8_tflops and vector_tflops; memory_rows
#    (the allocator's [memory] events); source_file, source_line and
#    source_function on cpu_op_rows, kernel_rows and transfer_rows; the knowledge table library_modules.
# 8: kernel_rows.work_source: the work of a tensor list sized by the step's gradients, and of a
#    kernel launched before the trace from its identical kernels; work_missing: why it has none.
SCHEMA_VERSION = "8"

# Parses a JSON number's text into integer nanoseconds exactly: going through DOUBLE would lose
# the nanosecond fraction of microsecond timestamps larger than 2^33.
_MACROS = r"""
CREATE OR REPLACE TEMP MACRO tk_ns_text(t) AS
    CASE WHEN t LIKE '%e%' OR t LIKE '%E%' THEN TRY_CAST(round(TRY_CAST(t AS DOUBLE) * 1000) AS BIGINT)
         ELSE (CASE WHEN starts_with(t, '-') THEN -1 ELSE 1 END)
              * (abs(TRY_CAST(split_part(t, '.', 1) AS BIGINT)) * 1000
                 + TRY_CAST(coalesce(nullif(rpad(split_part(t, '.', 2), 3, '0')[1:3], ''), '0') AS BIGINT))
    END;
-- A number, or a string holding one: Perfetto reads "ts": "12.5" as 12.5, and so do we.
CREATE OR REPLACE TEMP MACRO tk_is_number(j) AS
    json_type(j) IN ('UBIGINT', 'BIGINT', 'DOUBLE')
    OR (json_type(j) = 'VARCHAR'
        AND regexp_full_match(json_extract_string(j, '$'), '\s*-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\s*'));
CREATE OR REPLACE TEMP MACRO tk_ns(j) AS
    CASE WHEN tk_is_number(j) THEN tk_ns_text(trim(json_extract_string(j, '$'))) END;
-- A time as the exact read gives it: `j` the JSON value (whose number went through DOUBLE: it
-- decides whether there is a number), `exact` the same value read from the event's text as a
-- DECIMAL (every digit kept, rounded to the nanosecond as the fast read rounds).
CREATE OR REPLACE TEMP MACRO tk_exact_ns(j, exact) AS
    CASE WHEN tk_is_number(j) THEN coalesce(TRY_CAST(exact * 1000 AS BIGINT), tk_ns(j)) END;
-- Times must stay under 2^62 ns (4.6e15 us, 146 years) so a ts plus a dur still fits a BIGINT;
-- NaN and infinities are out of range too (the comparison is false for NaN). The loader's checks
-- use it: tk_ns itself stays unguarded, as it runs on every ts and dur of every trace.
CREATE OR REPLACE TEMP MACRO tk_in_range(j) AS abs(TRY_CAST(trim(json_extract_string(j, '$')) AS DOUBLE)) < 4.6e15;
"""


def sql_resource(name):
    """The text of one of tracekit's own SQL files (tracekit/store/sql/<name>)."""
    return resources.files("tracekit.store").joinpath("sql", name).read_text(encoding="utf-8")


def views_sql():
    """The SQL of every view users query: views.sql, then each views_<topic>.sql in name order (a
    topic's views may read views.sql's, never the other way round)."""
    folder = resources.files("tracekit.store").joinpath("sql")
    topics = sorted(entry.name for entry in folder.iterdir()
                    if entry.name.startswith("views_") and entry.name.endswith(".sql"))
    return "\n".join(sql_resource(name) for name in ["views.sql", *topics])


def split_statements(sql):
    """Splits a tracekit SQL file on the `;` that ends a line (our files never put one elsewhere)."""
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in re.split(r";\s*$", body, flags=re.M) if part.strip()]


_LOCK_HOLDER = re.compile(r"lock is held in (\S+) \(PID (\d+)\)")


def _friendly(exc, path):
    message = str(exc)
    full = disk_full_folder(exc, Path(path).resolve().parent)
    if full is not None:
        return DatabaseError(f"{path}: the disk is full (no space left in {full})")
    if "Could not set lock" in message or "Conflicting lock" in message:
        holder = _LOCK_HOLDER.search(message)
        by = f" by {Path(holder.group(1)).name} (PID {holder.group(2)})" if holder else ""
        return DatabaseLocked(f"{path}: database is locked{by}, another tracekit load perhaps")
    if "No such file or directory" in message and not Path(path).parent.is_dir():
        return DatabaseError(f"{path}: its folder {Path(path).parent} does not exist")
    if "not a valid DuckDB database" in message or "Unable to open" in message or "database file" in message.lower():
        return DatabaseError(f"{path}: not a DuckDB database file (use another --db)")
    return DatabaseError(f"{path}: cannot open the database ({message.splitlines()[0]})")


def _refuse_other_files(path):
    """Refuses an existing file that is not a DuckDB database before DuckDB opens it: DuckDB would
    open a CSV, JSON or gzip file as an in-memory database holding a view of it."""
    if path == ":memory:" or not Path(path).is_file():
        return
    try:
        holds = sniff(path)
    except OSError as exc:
        raise DatabaseError(f"{path}: cannot read the database ({exc.strerror})") from None
    if holds not in (None, "a DuckDB database"):
        raise DatabaseError(f"{path}: not a DuckDB database file, it holds {holds} (use another --db)")


# How long an open waits for a database another process holds (a load, most often), and whom it
# tells that it waits: set for a whole command or API call by waiting_for_lock.
DEFAULT_LOCK_WAIT_S = 30  # the API's wait, as the CLI's --wait
_LOCK_WAIT = contextvars.ContextVar("tracekit_lock_wait", default=(0.0, None))
_LOCK_POLL_S = (0.05, 0.5)  # the first retry comes soon, later ones every half second


@contextmanager
def waiting_for_lock(seconds, on_wait=None):
    """Within this block an open of a database that another process holds waits up to `seconds`
    for it, calling `on_wait(message)` once when it starts to wait; then it fails as before."""
    token = _LOCK_WAIT.set((max(float(seconds), 0.0), on_wait))
    try:
        yield
    finally:
        _LOCK_WAIT.reset(token)


def _opened_when_free(open_once):
    """`open_once()`, tried again while another process holds the database, up to the wait set by
    waiting_for_lock. DuckDB lets one process write, or several read, never both: a load's lock
    keeps readers out until its last commit (there is no older snapshot to read meanwhile)."""
    limit, on_wait = _LOCK_WAIT.get()
    started, pause, told = time.monotonic(), _LOCK_POLL_S[0], False
    while True:
        try:
            return open_once()
        except DatabaseLocked as exc:
            waited = time.monotonic() - started
            if limit <= 0:
                raise DatabaseLocked(f"{exc}; wait for it to finish (or give --wait SECONDS)") from None
            if waited >= limit:
                raise DatabaseLocked(f"{exc}; still locked after waiting {limit:g} s "
                                     "(--wait SECONDS waits longer)") from None
            if on_wait is not None and not told:
                on_wait(f"{exc}; waiting up to {limit:g} s for it (--wait SECONDS)")
                told = True
            time.sleep(min(pause, limit - waited))
            pause = _LOCK_POLL_S[1]


def connect(path=DEFAULT_DB, *, read_only=False):
    """Opens (creating when writable) a tracekit database, with the schema in place."""
    path = str(path)
    if read_only and path != ":memory:" and not Path(path).exists():
        raise DatabaseError(f"{path}: no such database; create it with `tracekit load TRACE... --db {path}`")
    _refuse_other_files(path)
    if not read_only:
        start_from_template(path, f"schema-{SCHEMA_VERSION}-{schema_digest()}", ensure_schema)
    return _opened_when_free(lambda: _connect_once(path, read_only))


def _connect_once(path, read_only):
    try:
        con = duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        raise _friendly(exc, path) from None
    def set_up():
        if read_only:
            _check_schema(con, path)
        else:
            ensure_schema(con, path)
        _prepare(con)

    return _set_up(con, path, set_up)


def _set_up(con, path, set_up):
    """`con` once `set_up()` has run; closed, with the error said in a database's terms, if it fails."""
    try:
        set_up()
    except DatabaseError:
        con.close()
        raise
    except duckdb.Error as exc:
        con.close()
        raise _friendly(exc, path) from None
    return con


def connect_for_queries(path, *, allow_files=False):
    """A read-only connection for user SQL that reaches the tracekit database at `path` and nothing
    else (with `allow_files`, the user's own files too, to read): see tracekit.store.sql_sandbox.

    The database is attached to a DuckDB instance of its own, so the locked configuration never
    reaches another connection this process holds to the same file (DuckDB shares one instance
    between the connections to a path)."""
    path = str(path)
    if not Path(path).exists():
        raise DatabaseError(f"{path}: no such database; create it with `tracekit load TRACE... --db {path}`")
    _refuse_other_files(path)
    return _opened_when_free(lambda: _attach_for_queries(path, allow_files))


def _attach_for_queries(path, allow_files):
    con = duckdb.connect(":memory:")

    def set_up():
        quoted = path.replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS tracekit (TYPE duckdb, READ_ONLY)")
        con.execute("USE tracekit")
        # Where DuckDB spills a big sort, as for the database opened directly.
        con.execute(f"SET temp_directory = '{quoted}.tmp'")
        _check_schema(con, path)
        _prepare(con)
        # A database loaded by another tracekit of the same schema keeps that one's views: this
        # connection makes its own, which a read-only database cannot store (nor the knowledge
        # tables added since: temporary ones stand in).
        if not _views_are_current(con):
            _make_own_views(con)
        # (not where the user's own files may be read: those may be big whatever the traces are)
        if not allow_files and _holds_few_events(con):
            con.execute("SET threads = 1")  # before the lock, which freezes every setting
        lock_down(con, allow_files=allow_files)

    return _set_up(con, path, set_up)


# Fewer events than this in the whole database and its queries run faster on one thread than on
# two: their cost is planning and small operators, which a second thread only coordinates. On 2
# cores, `findings` in process, runs of each in turn: the 8 sample traces (6,345 events) 2.45 s on
# one thread against 2.81 on two (medians of 6); 8 H200 loops (55,742 events) 2.94 against 2.96, 25
# H100 loops (96,147 events) 6.88 against 5.90 (medians of 3).
SMALL_DATABASE_EVENTS = 20_000


def _holds_few_events(con):
    return con.execute("SELECT count(*) FROM event_rows").fetchone()[0] < SMALL_DATABASE_EVENTS


def connect_scratch():
    """An in-memory database with tracekit's tables and the macros a load uses, and no views: a
    lake's writer (tracekit.lake) loads each file into one of these and keeps only its tables."""
    from tracekit.store.classify import rule_rows
    from tracekit.store.knowledge import create_with_rows, insert_rows

    con = duckdb.connect(":memory:")
    for statement in split_statements(sql_resource("tables.sql")):
        con.execute(statement)
    create_with_rows(con, "library_modules")  # the load's source-line rule reads it
    # One statement for all the rules: an insert per rule would take most of the set-up's time.
    insert_rows(con, "kernel_rules", rule_rows())
    _prepare(con)
    return con


def worker_connection(con):
    """Another connection to `con`'s database, for a thread of its own (temp tables and macros are
    per connection)."""
    worker = con.cursor()
    _prepare(worker)
    return worker


def _make_own_views(con):
    """This tracekit's views (and the knowledge tables they read that the database lacks) as
    `con`'s own, temporary: over a read-only database that another tracekit's views were stored in."""
    from tracekit.store.knowledge import add_missing

    add_missing(con, {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables() "
                                                    "WHERE database_name = current_database()").fetchall()})
    create_views(con, temporary=True)


def second_connections(con):
    """A maker of connections of their own (cursors, one for each other thread) on `con`'s
    database, seeing what `con` sees: its catalog, settings and macros, and views of their own
    where `con` has them (a database stored by another tracekit, whose views each connection
    makes); None where `con` is not DuckDB's. Call it before the threads start: it queries `con`."""
    if not hasattr(con, "cursor"):
        return None
    # `kernels` stands for tracekit's views: a connection that made them its own made it too
    own_views = con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND view_name = 'kernels'"
                            ).fetchone()[0]
    catalog = con.execute("SELECT current_database()").fetchone()[0]

    def make():
        cursor = con.cursor()
        try:
            cursor.execute(f'USE "{catalog}"')  # a cursor starts in its instance's default catalog
            _make_macros(cursor)
            if own_views:
                _make_own_views(cursor)
        except BaseException:
            cursor.close()
            raise
        return cursor

    return make


def _prepare(con):
    # DuckDB draws its own progress bar on a terminal, over tracekit's output.
    con.execute("SET enable_progress_bar = false")
    # DuckDB runs an ASOF join as a nested loop when it expects few rows on the left; its estimate
    # through a chain of CTEs can be 15 for 15,000, and gpu_idle's ASOF then took 91 s, not 0.3 s.
    # Global, so that a second connection (second_connections) has it too: once a query
    # connection's configuration is locked, it cannot set it itself.
    con.execute("SET GLOBAL asof_loop_join_threshold = 0")
    _make_macros(con)


def _make_macros(con):
    for statement in split_statements(_MACROS):
        con.execute(statement)


def create_views(con, temporary=False):
    """Creates the views users query (views.sql, views_<topic>.sql and their table macros,
    `findings`, and each named query: see tracekit.store.query_relations) over the tables `con`
    sees: a database's, or those tracekit.lake.reader makes of a lake's files. `temporary`: as this
    connection's own (temporary) views, which shadow the database's."""
    from tracekit.store.query_relations import relation_statements, view_names

    temp = "TEMP " if temporary else ""
    views = _view_statements()
    for statement in views:
        # A table macro (views_perfetto.sql's ancestor_slice) goes where the views go.
        for kind in ("VIEW", "MACRO"):
            statement = statement.replace(f"CREATE OR REPLACE {kind}", f"CREATE OR REPLACE {temp}{kind}", 1)
        con.execute(deferred(statement))
    # Then each named query as a view and a table macro (FROM summary, FROM summary(trace := ...)),
    # but never over one of the views above or a table.
    taken = view_names(views) | {row[0] for row in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "AND table_catalog = current_database()").fetchall()}
    for statement in relation_statements(taken, temporary):
        con.execute(deferred(statement))


_VIEW_HEAD = re.compile(r"^((?:\s*--[^\n]*\n)*\s*CREATE OR REPLACE (?:TEMP )?VIEW\s+\w+)", re.I)


def deferred(statement):
    """A CREATE VIEW statement whose view DuckDB binds when a query first reads it, not as it is
    made: binding every view (the findings view is the union of every finding rule) took 0.4-0.75 s,
    most of what a small trace's load into a new database took. A query binds a view either way, so
    none pays more; a view that cannot bind fails the query that reads it (tests/test_views_bind.py
    binds every one). Other statements come back unchanged."""
    return _VIEW_HEAD.sub(r"\1 WITH (DEFER_BINDING)", statement, count=1)


def _view_statements():
    return split_statements(views_sql()) + [f"CREATE OR REPLACE VIEW findings AS {findings_view_sql()}"]


@functools.lru_cache(maxsize=None)
def views_digest():
    """What this tracekit's views are, as a digest of what they are made from (views.sql and the
    finding rules) and bound to: a database whose stored one differs has another tracekit's views.
    Worked out once a process: its files are the installed package's."""
    import hashlib

    from tracekit.store.query_relations import named_query_texts

    # and what binds them: the tables, the macros, tracekit's and DuckDB's versions
    digest = hashlib.sha256("\0".join([__version__, duckdb.__version__, sql_resource("tables.sql"), _MACROS,
                                         views_sql()]).encode())
    for name, text in sorted(named_query_texts().items()):  # each named query is a view and a macro too
        digest.update(name.encode() + text.encode())
    rules = resources.files("tracekit.queries").joinpath("findings")
    for entry in sorted(rules.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            digest.update(entry.name.encode() + entry.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def schema_digest():
    """Everything ensure_schema puts into a database, as a digest: the views (views_digest), the
    knowledge tables' rows and the kernel rules. A database that stores this one (and this schema
    version and views digest) has nothing to bring up to date, and an open skips ensure_schema's
    work: a quarter of the fixed cost of a small trace's load as a command."""
    import hashlib

    from tracekit.store.classify import rule_rows
    from tracekit.store.knowledge import TABLES

    digest = hashlib.sha256(f"{SCHEMA_VERSION}\0{views_digest()}\0{rule_rows()!r}".encode())
    folder = resources.files("tracekit.store").joinpath("knowledge")
    for table, (file_name, columns) in sorted(TABLES.items()):
        digest.update(f"{table}{columns!r}".encode() + folder.joinpath(file_name).read_bytes())
    return digest.hexdigest()[:16]


def _schema_is_current(con):
    """Whether the database says this tracekit's schema is in place, all of it (see schema_digest)."""
    try:
        stored = dict(con.execute("SELECT key, value FROM schema_info WHERE key IN "
                                  "('schema_version', 'views_digest', 'schema_digest')").fetchall())
    except duckdb.Error:
        return False  # no schema_info, or someone else's
    return stored == {"schema_version": SCHEMA_VERSION, "views_digest": views_digest(),
                      "schema_digest": schema_digest()}


def _views_are_current(con):
    try:
        row = con.execute("SELECT value FROM schema_info WHERE key = 'views_digest'").fetchone()
    except duckdb.Error:
        return False
    return bool(row) and row[0] == views_digest()


def prepare(con):
    """The settings and macros every connection tracekit opens has."""
    _prepare(con)


def _check_schema(con, path):
    _refuse_foreign(con, path)
    tables = set(_relations(con))
    if "trace_files" not in tables or "kernels" not in tables:
        raise DatabaseError(f"{path}: a DuckDB database with no traces loaded; load traces into it first")


def _relations(con):
    """The tables and views of the database in use (its main schema), sorted."""
    return sorted(row[0] for row in con.execute(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = 'main'").fetchall())


def _stored_schema_version(con):
    """schema_info's version, or None where there is no tracekit schema_info to read it from."""
    if "schema_info" not in _relations(con):
        return None
    try:
        row = con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()
    except duckdb.Error:
        return None  # a schema_info of someone else's, with other columns
    return str(row[0]) if row and row[0] is not None else None


def _refuse_foreign(con, path):
    """Refuses a database that is not tracekit's (tables or views and no tracekit schema_info) and
    one of another tracekit schema; an empty DuckDB file is fine."""
    stored = _stored_schema_version(con)
    if stored is None:
        names = _relations(con)
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            raise DatabaseError(f"{path or 'the database'}: a DuckDB database that is not tracekit's: it has "
                                f"tables/views {shown}; give tracekit a database of its own (--db NEW.duckdb)")
        return
    _refuse_other_schema(stored, path)


def _refuse_other_schema(stored, path):
    if stored == SCHEMA_VERSION:
        return
    where = path or "the database"
    if stored.isdigit() and int(stored) > int(SCHEMA_VERSION):
        raise DatabaseError(f"{where}: made by a newer tracekit (schema {stored}); upgrade tracekit to read it")
    raise DatabaseError(f"{where}: made by an older tracekit (schema {stored}; this one uses {SCHEMA_VERSION}):"
                        " load its traces again into a new database (tracekit load TRACE... --db NEW.duckdb)")


def ensure_schema(con, path=None):
    """Creates the tables and (re)creates the views; safe to run on every open. Nothing is done
    where the database stores this tracekit's schema_digest (a copy of the schema template, any
    database this tracekit has opened before); the views are made again only where its
    views_digest is not this tracekit's."""
    if _schema_is_current(con):
        return
    from tracekit.store.class_tables import sync_rules
    from tracekit.store.knowledge import sync_knowledge

    _refuse_foreign(con, path)
    con.execute("BEGIN")
    try:
        for statement in split_statements(sql_resource("tables.sql")):
            con.execute(statement)
        sync_knowledge(con)
        if not _views_are_current(con):
            create_views(con)
        sync_rules(con)
        con.execute("INSERT OR REPLACE INTO schema_info VALUES ('schema_version', ?), ('tracekit_version', ?), "
                    "('views_digest', ?), ('schema_digest', ?)",
                    [SCHEMA_VERSION, __version__, views_digest(), schema_digest()])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def schema_doc():
    """The documented views, as text: each view's comment block from the views' SQL files."""
    blocks, current = [], None
    for line in views_sql().splitlines():
        if line.startswith("-- @view "):
            current = [line[len("-- @view "):]]
            blocks.append(current)
        elif current is not None and line.startswith("--"):
            current.append("  " + line[2:].strip())
        else:
            current = None
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
