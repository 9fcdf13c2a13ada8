"""What a query may reach on Spark: the lake's tables and views, through pure functions, and
nothing else, as on DuckDB (tracekit.store.sql_sandbox; docs/query.md: What a query can reach).

Spark has no switch like DuckDB's enable_external_access: its functions reach out on their own
(xpath_string fetches the DTD a document names, reflect calls any Java method), and a path may
stand for a table (``parquet.`/any/file` ``). So, after tracekit's one-SELECT rule
(tracekit.analysis.named_queries.check_sql), two locks, each enough for the functions:

- check_reach(), tracekit's, on the SQL as sqlglot writes it for Spark, before Spark reads it: a
  DuckDB SELECT (or DESCRIBE) that calls only functions of the allow-list
  (tracekit.spark.allowed_functions), each by its own name (no `catalog.db.f()`), and reads only
  the lake's tables and views and its own CTEs, by name (no `db.table`, no path);
- confine(), Spark's own, set by tracekit: the session's registries of functions and table functions keep the
  allowed ones alone (and tracekit's UDF), so whatever SQL reaches Spark, it finds no other.
  A session of its own (tracekit.spark.session.own_session): the process's other sessions keep theirs.

Spark's own reads of a path as a table are off too (spark.sql.runSQLOnFiles, in session.SETTINGS).
"""

import re

from sqlglot import exp

from tracekit.errors import QueryError
from tracekit.spark.allowed_functions import ALLOWED
from tracekit.spark.format_udf import UDF_NAME

WRITE = "spark"
REACH = "see docs/query.md: What a query can reach"
# Functions that Spark's SQL writes as operators, not calls: nothing is looked up by name for them.
_OPERATORS = (exp.And, exp.Or, exp.Xor, exp.Case, exp.RegexpLike)
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
# Every function a query may call on Spark: the allow-list, and tracekit's format() UDF.
CALLABLE = ALLOWED | {UDF_NAME}


def check_reach(tree, tables):
    """Raises QueryError unless `tree` (a statement as spark_tree gives it) is a query that reads
    only `tables` (the lake's tables and views) and its own CTEs, and calls only allowed functions."""
    if not isinstance(tree, (exp.Query, exp.Values, exp.Describe)):
        kind = tree.name.upper() if isinstance(tree, exp.Command) else tree.key.upper()
        raise QueryError(f"{kind} is not allowed on Spark: a query there is one SELECT (or DESCRIBE)")
    known = {name.lower() for name in tables}
    for node in tree.walk():
        if isinstance(node, exp.Func):
            _check_call(node)
        elif isinstance(node, exp.Table):
            _check_table(node, known)


def _check_call(node):
    if isinstance(node.parent, exp.Dot) and node is node.parent.expression:
        raise QueryError(f"{node.parent.sql(WRITE).split('(')[0]}() is not allowed on Spark: a query calls a "
                         f"function by its own name, not a catalog's ({REACH})")
    name = _called(node)
    if name is None and isinstance(node, _OPERATORS):
        return
    if name not in CALLABLE:
        shown = name or node.sql_name().lower()
        raise QueryError(f"{shown} is not allowed on Spark: a query may call only pure functions ({REACH})")


def _called(node):
    """The name Spark looks up for the call `node`, or None where Spark's SQL writes no call."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    found = _CALL.match(node.sql(WRITE))
    return found.group(1).lower() if found else None


def _check_table(table, known):
    qualified = table.args.get("db") or table.args.get("catalog")
    if isinstance(table.this, exp.Func) and not qualified:
        return  # a table function (range, explode...): _check_call reads its name
    if qualified or not isinstance(table.this, exp.Identifier) or table.name.lower() not in known | ctes_around(table):
        shown = exp.Table(this=table.this, db=table.args.get("db"), catalog=table.args.get("catalog")).sql(WRITE)
        raise QueryError(f"{shown} is not a table of the lake: a query on Spark reads the lake's tables and views, "
                         f"and its own CTEs, by name: no file, no other database ({REACH})")


def ctes_around(table):
    """The names of the CTEs in whose scope `table` is."""
    names, node = set(), table.parent
    while node is not None:
        with_ = node.args.get("with_")
        if with_ is not None:
            names |= {cte.alias.lower() for cte in with_.expressions}
        node = node.parent
    return names


def confine(session):
    """Drops from `session`'s own registries every function and table function that a query may
    not call (the second lock); Spark then answers UNRESOLVED_ROUTINE for any other."""
    state = session._jsparkSession.sessionState()
    for registry in (state.functionRegistry(), state.tableFunctionRegistry()):
        names = registry.listFunction().iterator()
        refused = []
        while names.hasNext():
            name = names.next()
            if name.funcName().lower() not in CALLABLE:
                refused.append(name)
        for name in refused:
            registry.dropFunction(name)
