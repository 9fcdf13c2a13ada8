"""Named queries as SQL relations: `FROM summary` (a view, the parameters at their defaults) and
`FROM summary(trace := 'naive')` (a table macro), in any query on a tracekit database or lake.

Each named query (queries/<name>.sql) becomes two macros and a view:
- `_query_<name>(_tk_<param> := NULL, ...)`: the query's SQL, its `$param`s read from the macro's
  own parameters. They are prefixed because DuckDB puts a macro's parameters in front of the
  columns of the same name: `trace = $trace` must not become `trace = trace`.
- `<name>(<param> := default, ...)`: what users call, with the parameters named as `-p` names them.
  It cannot call `_query_<name>` directly with a parameter named like an output column: DuckDB
  refuses a `trace` parameter over a query with `GROUP BY ALL` and a `trace` column ("Conflicting
  column names"). So it writes the call as text, every value as an SQL literal, and runs it with
  DuckDB's query(): text values quoted, numbers cast (no value can add SQL to the call).
- the view `<name>`: `FROM <name>()`, so `FROM summary` reads as people try it.

A named query whose name is already a view or table (`memcpy`: the view of copies) gets none of
these: tracekit's views are the contract and a named query must not shadow one.
"""

import re
from importlib import resources

from tracekit.store.engine import duckdb
from tracekit.store.sql_header import header_params

_TEXT_PARAMS = frozenset({"trace"})  # as tracekit.analysis.param_values reads parameter names
_DECIMAL_SUFFIXES = ("_us", "_ms", "_pct")
_VIEW_NAME = re.compile(r"CREATE OR REPLACE VIEW\s+(\w+)", re.I)


def named_query_texts():
    """{name: SQL text} of every named query installed (tracekit.queries), by name."""
    folder = resources.files("tracekit.queries")
    return {entry.name[:-4]: entry.read_text(encoding="utf-8")
            for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".sql")}


def view_names(statements):
    """The names of the views `statements` (CREATE OR REPLACE VIEW ...) make."""
    return {match.group(1) for match in map(_VIEW_NAME.match, statements) if match}


def relation_statements(taken, temporary=False):
    """The statements that make each named query a relation, skipping those named in `taken` (the
    views and tables a query already reads); `temporary`: as the connection's own."""
    temp = "TEMP " if temporary else ""
    statements = []
    for name, text in named_query_texts().items():
        if name in taken:
            continue
        params = header_params(text)
        inner = ", ".join(f"_tk_{key} := NULL" for key in params)
        outer = ", ".join(f'"{key}" := {_default(key, default)}' for key, default in params.items())
        statements += [
            f"CREATE OR REPLACE {temp}MACRO _query_{name}({inner}) AS TABLE {_macro_body(text)}",
            f"CREATE OR REPLACE {temp}MACRO {name}({outer}) AS TABLE FROM query({_call_text(name, params)})",
            f"CREATE OR REPLACE {temp}VIEW {name} AS FROM {name}()",
        ]
    return statements


def _macro_body(sql):
    """`sql` with each `$param` read as the macro parameter `_tk_param`, and its ending `;` and
    comments gone (a macro's body is one expression of a statement)."""
    raw = sql.encode()  # DuckDB's tokens start at byte offsets
    tokens = duckdb.tokenize(sql)
    pieces, last = [], 0
    for (pos, kind), following in zip(tokens, tokens[1:] + [(None, None)]):
        if kind == duckdb.token_type.operator and raw[pos:pos + 1] == b"$" and following[0] == pos + 1:
            pieces += [raw[last:pos], b"_tk_"]
            last = pos + 1
    pieces.append(raw[last:])
    body = b"".join(pieces).decode()
    kept = [token for token in duckdb.tokenize(body) if token[1] != duckdb.token_type.comment]
    end = len(body.encode())
    while kept and body.encode()[kept[-1][0]:kept[-1][0] + 1] == b";":
        end = kept.pop()[0]
    return body.encode()[:end].decode().rstrip()


def _default(key, default):
    if default is None:
        return "NULL"
    return _quoted(default) if key in _TEXT_PARAMS else default


def _quoted(text):
    return "'" + text.replace("'", "''") + "'"


def _call_text(name, params):
    """SQL that builds the text `FROM _query_<name>(_tk_p := <literal>, ...)` from the macro's parameters."""
    if not params:
        return _quoted(f"FROM _query_{name}()")
    arguments = " || ', ' || ".join(f"'_tk_{key} := ' || {_literal(key)}" for key in params)
    return f"'FROM _query_{name}(' || {arguments} || ')'"


def _literal(key):
    """SQL for the literal text of parameter `key`'s value: NULL, a quoted text or a number."""
    value = f'"{key}"'
    if key in _TEXT_PARAMS:
        text = f"'''' || replace(CAST({value} AS VARCHAR), '''', '''''') || ''''"
    else:
        kind = "DOUBLE" if key.endswith(_DECIMAL_SUFFIXES) else "HUGEINT"
        text = f"CAST(CAST({value} AS {kind}) AS VARCHAR)"
    return f"coalesce({text}, 'NULL')"
