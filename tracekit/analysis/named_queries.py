"""Named queries (queries/*.sql) and ad hoc SQL, run against a tracekit database.

A named query's file starts with a header comment: the question on the first line,
more description, then `keys:` (the columns a reader needs to read a row: a table fitted to a
terminal keeps them first), `columns:` (each output column with its unit) and `params:`
(`name = default: meaning`). Parameters reach DuckDB as `$name`.
"""

import re
from dataclasses import dataclass, field
from importlib import resources

from tracekit.analysis.cells import json_cell
from tracekit.errors import QueryError
from tracekit.analysis.param_values import checked
from tracekit.store.sql_sandbox import check_read_only, is_refused_access, refused_access_message, require_text
from tracekit.analysis.trace_lookup import trace_row
from tracekit.store.sql_header import header_lines, parse_param  # noqa: F401  (findings_engine's too)
# DuckDB's engine: `tracekit query` runs and fetches with it (the package's relation API alone is
# 0.03 s of its start); query_relation imports the package for the relation it returns.
from tracekit.store.engine import duckdb

_COLUMN = re.compile(r"^(\w+):\s*(.*)$")


@dataclass
class NamedQuery:
    name: str
    question: str
    description: str
    sql: str
    columns: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)  # name -> (default text or None, meaning)
    keys: tuple = ()  # the key columns (`-- keys: a, b`), kept first when a table is fitted


def _parse(name, text):
    header = header_lines(text)
    if not header:
        raise QueryError(f"queries/{name}.sql: no header comment with the question it answers")
    question, description, columns, params, keys, section = header[0], [], {}, {}, (), None
    for line in header[1:]:
        if line.startswith("keys:"):
            keys = tuple(k.strip() for k in line[len("keys:"):].split(",") if k.strip())
        elif line in ("columns:", "params:"):
            section = line[:-1]
        elif section == "columns" and _COLUMN.match(line):
            key, meaning = _COLUMN.match(line).groups()
            columns[key] = meaning
        elif section == "params" and parse_param(line):
            key, default, meaning = parse_param(line)
            params[key] = (default, meaning)
        elif section is None:
            description.append(line)
    return NamedQuery(name, question, " ".join(description), text, columns, params, keys)


def named_queries():
    """Every named query, by name, from the installed queries package."""
    folder = resources.files("tracekit.queries")
    found = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            name = entry.name[:-4]
            found[name] = _parse(name, entry.read_text(encoding="utf-8"))
    return found


def get_query(name):
    queries = named_queries()
    if name not in queries:
        raise QueryError(f"no named query {name!r} (tracekit query --list shows them: {', '.join(queries)})")
    return queries[name]


def _bind(query, given):
    unknown = sorted(set(given) - set(query.params))
    if unknown:
        accepted = ", ".join(query.params) or "none"
        raise QueryError(f"query {query.name!r} has no parameter {', '.join(unknown)} (it takes: {accepted})")
    return {key: checked(key, given.get(key, default)) for key, (default, _) in query.params.items()}


def friendly_error(exc, sql):
    message = str(exc).strip()
    first = message.splitlines()[0]
    if is_refused_access(exc):
        return QueryError(refused_access_message(exc))
    if "read-only" in message.lower() or "read only" in message.lower():
        return QueryError("the database is opened read-only: `tracekit query` never changes it "
                          f"(load traces with `tracekit load`) — {first}")
    return QueryError(f"{first} — in SQL: {_shown(sql)}")


def _shown(sql):
    shown = " ".join(sql.split())
    return shown if len(shown) <= 300 else shown[:297] + "..."


def check_sql(sql, params):
    """Refuses, unrun, anything but one SELECT (whatever the connection allows, the SQL may only
    read), a parameter the SQL does not use, and a $name it uses that has no value."""
    statement = check_read_only(sql)
    _check_params(statement.named_parameters, params or {})


def _check_params(used, given):
    for name, value in given.items():
        if isinstance(value, str):
            require_text(value, f"-p {name}", hint="")
    extra = sorted(set(given) - set(used))
    if extra:
        uses = ", ".join(f"${name}" for name in sorted(used)) or "no $parameters"
        raise QueryError(f"-p {extra[0]}: the SQL has no ${extra[0]} (it uses {uses})")
    missing = sorted(set(used) - set(given))
    if missing:
        raise QueryError(f"the SQL uses ${missing[0]}: give it a value with -p {missing[0]} VALUE")


def _execute(con, sql, params):
    """Runs one SELECT statement (every path that runs a user's SQL comes through check_sql). The
    SQL runs as written: a trailing `;` or `-- comment` is fine."""
    check_sql(sql, params)
    try:
        relation = con.execute(sql, params) if params else con.execute(sql)
    except duckdb.Error as exc:
        raise friendly_error(exc, sql) from None
    if relation is None or relation.description is None:
        raise QueryError(f"the SQL returns no rows to show — in SQL: {_shown(sql)}")
    return relation


def run_sql(con, sql, params=None):
    """Runs one SELECT statement and returns a pandas DataFrame; errors become QueryError."""
    relation = _execute(con, sql, params)
    json_columns = [d[0] for d in relation.description if str(d[1]) == "JSON"]
    try:
        frame = relation.df()
    except duckdb.Error as exc:
        raise friendly_error(exc, sql) from None
    # JSON columns arrive as text; callers (and -f json) want the objects they hold.
    for column in json_columns:
        frame[column] = frame[column].map(lambda v: json_cell(v) if isinstance(v, str) else v)
    return frame


def run_sql_text(con, sql, params=None):
    """run_sql on a SqlText (tracekit.analysis.sql_text): its errors name the file the SQL came from."""
    try:
        return run_sql(con, sql.text, params)
    except QueryError as exc:
        raise QueryError(sql.blame(str(exc))) from None


def run_named(con, name, params=None):
    """Runs the named query `name` with `params` (a dict of text values) and returns a DataFrame.

    A `trace` that names no loaded trace is an error, not an empty result."""
    return run_sql(con, *named_sql(name, params, con))


def named_sql(name, params=None, con=None):
    """(SQL, bound parameters or None) of the named query `name` with `params` (text values); with
    `con`, a `trace` that names no loaded trace there is an error."""
    query = get_query(name)
    bound = _bind(query, params or {})
    if con is not None and bound.get("trace") is not None:
        trace_row(con, bound["trace"])
    return query.sql, bound or None


def fetch_rows(con, sql, params=None):
    """Runs one SQL statement and returns its Rows, every value as DuckDB gives it (no pandas)."""
    from tracekit.analysis.rows import Rows

    cursor = _execute(con, sql, params)
    try:
        return Rows.from_cursor(cursor)
    except duckdb.Error as exc:
        raise friendly_error(exc, sql) from None


def query_relation(con, sql, params, columns=None):
    """The DuckDB relation of one SELECT (only `columns`, when given), checked as every query is,
    for a writer that streams it (tracekit.outputs.parquet_out)."""
    from tracekit.analysis.rows import check_columns

    import duckdb as relation_api  # noqa: F401 - gives connections their relation API (con.sql)

    check_sql(sql, params)  # as _execute does: with --allow-files, a COPY here would write a file
    try:
        relation = con.sql(_without_ending(sql), params=params)
        if relation is None:
            raise QueryError(f"the SQL returns no rows to write — in SQL: {_shown(sql)}")
        if columns:
            check_columns(relation.columns, columns)
            relation = relation.project(", ".join('"' + c.replace('"', '""') + '"' for c in columns))
        return relation
    except duckdb.Error as exc:
        raise friendly_error(exc, sql) from None


def _without_ending(sql):
    """`sql` without its trailing `;` and comments: DuckDB nests a relation's SQL in the projection
    that picks the columns, where a `;` or a `-- comment` left at the end breaks it."""
    raw = sql.encode()  # DuckDB's tokens start at byte offsets
    tokens = duckdb.tokenize(sql)
    end = len(raw)
    while tokens and (tokens[-1][1] == duckdb.token_type.comment or raw[tokens[-1][0]:tokens[-1][0] + 1] == b";"):
        end = tokens.pop()[0]
    return raw[:end].decode()
