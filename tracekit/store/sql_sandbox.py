"""What a user's SQL may reach: the trace database, read-only, and nothing else.

Two locks, each enough for the attacks it names. DuckDB's own: the connection's DuckDB instance
turns `enable_external_access` off (no ATTACH of another file, no COPY, no EXPORT DATABASE, no
read_csv/read_text/glob of any path), never installs or loads an extension behind the query's back,
and then locks its configuration, so no SET or RESET can undo any of it. Ours: the SQL must be one
statement of the SELECT kind (WITH, FROM, VALUES, DESCRIBE, SHOW and SUMMARIZE are too, and
EXPLAIN [ANALYZE] of one), so with
`allow_files`, where DuckDB may read the analyst's own CSV or Parquet, nothing can still write a
file, attach a database or change a setting.
"""

from tracekit.store.engine import duckdb
from tracekit.errors import QueryError

# Set in this order: the lock goes last, as it freezes every setting, these included.
_EXTENSIONS_OFF = ("SET autoinstall_known_extensions = false",
                   "SET autoload_known_extensions = false",
                   "SET allow_community_extensions = false")
FILES_HINT = "--allow-files (allow_files=True in Python) lets a query read your own files"


def lock_down(con, *, allow_files=False, allowed_directories=()):
    """Confines `con`'s DuckDB instance to the databases already attached (reading files too with
    `allow_files`), for good: the configuration is locked. `allowed_directories`: folders whose
    files its views read (a lake's), reachable still (only to read: the SQL is one SELECT)."""
    for statement in _EXTENSIONS_OFF:
        con.execute(statement)
    if allowed_directories:
        con.execute("SET allowed_directories = $folders", {"folders": [str(f) for f in allowed_directories]})
    if not allow_files:
        con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def require_text(sql, what="the SQL", hint="; save it as UTF-8"):
    """Raises QueryError where `sql` is not UTF-8 text: bytes that are not UTF-8 come in as lone
    surrogates (Python's surrogateescape: the command line, a pipe), which DuckDB's parser cannot take."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(sql[exc.start])
        which = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        raise QueryError(f"{what} is not UTF-8 text ({which} at character {exc.start + 1}){hint}") from None


def check_read_only(sql):
    """Raises QueryError unless `sql` is one SELECT statement; returns that statement."""
    require_text(sql)
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"{str(exc).strip().splitlines()[0]} — in SQL: {_shown(sql)}") from None
    if not statements:
        raise QueryError("the SQL is empty (or only comments): give a SELECT statement, e.g. SELECT * FROM kernels")
    if len(statements) > 1:
        kinds = ", ".join(statement.type.name for statement in statements)
        raise QueryError(f"the SQL holds {len(statements)} statements: a query runs one SELECT "
                         f"(these are {kinds}: run them one at a time)")
    kind = statements[0].type.name
    if kind == "EXPLAIN":
        return check_read_only(_explained(sql))
    if kind != "SELECT":
        # Named as written (DuckDB files INSTALL under LOAD), unless a WITH comes first.
        first = sql.split(None, 1)[0].upper()
        shown = first if first.isalpha() and first != "WITH" else kind
        raise QueryError(f"{shown} is not allowed: a query is read-only, one SELECT "
                         f"(WITH, DESCRIBE and SHOW are SELECTs too) — in SQL: {_shown(sql)}")
    return statements[0]


def _explained(sql):
    """The statement that `EXPLAIN [ANALYZE] statement` explains (ANALYZE runs it: it must be a
    SELECT as much as the statement run plainly); EXPLAIN's options, `EXPLAIN (FORMAT json)`, are
    refused with the statement."""
    raw = sql.encode()  # DuckDB's tokens start at byte offsets
    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(sql) if kind != duckdb.token_type.comment]
    words = [raw[pos:].split(None, 1)[0].upper() for pos, _ in tokens[:2]]
    skip = 2 if words[1:2] in ([b"ANALYZE"], [b"ANALYSE"]) else 1
    if len(tokens) <= skip:
        raise QueryError(f"EXPLAIN of nothing: give it a SELECT — in SQL: {_shown(sql)}")
    if raw[tokens[skip][0]:tokens[skip][0] + 1] == b"(":
        raise QueryError(f"EXPLAIN takes no options here: EXPLAIN [ANALYZE] SELECT ... — in SQL: {_shown(sql)}")
    return raw[tokens[skip][0]:].decode()


def is_refused_access(exc):
    """True for DuckDB's error when a query reaches for a file the lock keeps from it."""
    return isinstance(exc, duckdb.PermissionException)


def refused_access_message(exc):
    first = str(exc).strip().splitlines()[0]
    target = first.split('"')[1] if first.count('"') >= 2 else "a file"
    return f"the query reaches outside the trace database ({target}): a query sees only that database; {FILES_HINT}"


def _shown(sql):
    shown = " ".join(sql.split())
    return shown if len(shown) <= 300 else shown[:297] + "..."
