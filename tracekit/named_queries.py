"""Named queries (queries/*.sql) and ad hoc SQL, run against a tracekit database.

A named query's file starts with a header comment: the question on the first line,
more description, then `columns:` (each output column with its unit) and
`params:` (`name = default: meaning`). Parameters reach DuckDB as `$name`.
"""

import json
import re
from dataclasses import dataclass, field
from importlib import resources

import duckdb

from tracekit.errors import QueryError

_PARAM = re.compile(r"^(\w+)\s*=\s*(.*?):\s*(.*)$")
_COLUMN = re.compile(r"^(\w+):\s*(.*)$")


@dataclass
class NamedQuery:
    name: str
    question: str
    description: str
    sql: str
    columns: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)  # name -> (default text or None, meaning)


def _parse(name, text):
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line[2:].strip())
    if not header:
        raise QueryError(f"queries/{name}.sql: no header comment with the question it answers")
    question, description, columns, params, section = header[0], [], {}, {}, None
    for line in header[1:]:
        if line in ("columns:", "params:"):
            section = line[:-1]
        elif section == "columns" and _COLUMN.match(line):
            key, meaning = _COLUMN.match(line).groups()
            columns[key] = meaning
        elif section == "params" and _PARAM.match(line):
            key, default, meaning = _PARAM.match(line).groups()
            params[key] = (None if default.upper() == "NULL" else default, meaning)
        elif section is None:
            description.append(line)
    return NamedQuery(name, question, " ".join(description), text, columns, params)


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
    return {key: given.get(key, default) for key, (default, _) in query.params.items()}


def _friendly(exc, sql):
    message = str(exc).strip()
    first = message.splitlines()[0]
    if "read-only" in message.lower() or "read only" in message.lower():
        return QueryError("the database is opened read-only: `tracekit query` never changes it "
                          f"(load traces with `tracekit load`) — {first}")
    return QueryError(f"{first} — in SQL: {_shown(sql)}")


def _shown(sql):
    shown = " ".join(sql.split())
    return shown if len(shown) <= 300 else shown[:297] + "..."


def run_sql(con, sql, params=None):
    """Runs one SQL statement and returns a pandas DataFrame; errors become QueryError."""
    try:
        if not con.extract_statements(sql):
            raise QueryError("the SQL is empty (or only comments): give a query, e.g. SELECT * FROM kernels")
        relation = con.execute(sql, params) if params else con.execute(sql)
        if relation is None or relation.description is None:
            raise QueryError(f"the SQL returns no rows to show — in SQL: {_shown(sql)}")
        json_columns = [d[0] for d in relation.description if str(d[1]) == "JSON"]
        frame = relation.df()
    except duckdb.Error as exc:
        raise _friendly(exc, sql) from None
    # JSON columns arrive as text; callers (and -f json) want the objects they hold.
    for column in json_columns:
        frame[column] = frame[column].map(lambda v: _json_cell(v) if isinstance(v, str) else v)
    return frame


# Python reads, renders and writes JSON by recursion, a level at a time: a value nested deeper
# than this (args 1,000 levels deep) stays the text it is, which every format can show.
MAX_JSON_DEPTH = 100
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _json_cell(text):
    """A JSON cell as the objects it holds, or as its text when it nests too deep for Python."""
    if text.count("{") + text.count("[") > MAX_JSON_DEPTH and _depth(text) > MAX_JSON_DEPTH:
        return text
    return json.loads(text)


def _depth(text):
    depth = deepest = 0
    for token in _JSON_TOKEN.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def run_named(con, name, params=None):
    """Runs the named query `name` with `params` (a dict of text values) and returns a DataFrame."""
    query = get_query(name)
    bound = _bind(query, params or {})
    return run_sql(con, query.sql, bound or None)
