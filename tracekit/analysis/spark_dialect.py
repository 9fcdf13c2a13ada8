"""tracekit's SQL (DuckDB's dialect) in Spark's: sqlglot translates, and a few rewrites mend what
it leaves wrong for Spark. Only `--engine spark` imports this module (sqlglot is the `spark` extra).

tracekit's views and queries are written to mean the same on both engines (see shared/NOTES.md);
what no portable SQL can say is rewritten here, each rewrite with the reason:

- A decimal literal (`1000.0`) is a DOUBLE: DuckDB turns DECIMAL arithmetic with a DOUBLE, and any
  division, into DOUBLE, where Spark keeps DECIMAL with its own precision (`ts_ns / 1000.0` would be
  DECIMAL(27,6) there). `ts_ns / 1000.0D` is DuckDB's double division, bit for bit.
- `CAST(json AS JSON[])`, DuckDB's way to unnest a JSON array, is `FROM_JSON(json, 'ARRAY<STRING>')`:
  each element as its JSON text (sqlglot writes ARRAY<JSON>, a type Spark lacks).
- `json_type(j)` says 'ARRAY' or 'OBJECT' for arrays and objects (what tracekit's SQL asks of it),
  else 'VALUE' for a number, string or boolean; Spark has no json_type (sqlglot keeps the name).
- `regexp_full_match(s, p)` is `s RLIKE '^(?:p)$'` (sqlglot keeps the name; Spark has none).
- `string_agg(... ORDER BY x)` (Spark's LISTAGG ... WITHIN GROUP) sorts without the NULLS LAST that
  sqlglot adds: Spark 4.3 fails on it with DISTINCT, and the aggregate skips NULLs anyway.
- Spark's reflect, java_method and try_reflect (which call any static Java method) are refused:
  a query reads the lake and nothing else.
- A QUALIFY under `SELECT *` (or `t.*`) is refused: sqlglot rewrites QUALIFY as a subquery whose
  outer `*` then also returns its row-number column. Write the columns out.
"""

import sqlglot
from sqlglot import exp

from tracekit.errors import QueryError

READ, WRITE = "duckdb", "spark"


def to_spark(sql):
    """The one statement `sql` (DuckDB's dialect, `$name` parameters) as Spark SQL (`:name`)."""
    return spark_tree(sql).sql(WRITE)


def spark_tree(sql):
    """The parsed statement, with the rewrites above made, ready for sqlglot to write as Spark."""
    try:
        tree = sqlglot.parse_one(sql, read=READ)
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"sqlglot cannot read the SQL as DuckDB's ({_first_line(exc)})") from None
    _refuse_qualify_under_star(tree)
    _refuse_jvm_calls(tree)
    return tree.transform(_rewrite, copy=False)


def view_selects(sql_text):
    """(name, SELECT as Spark SQL) of each `CREATE [OR REPLACE] VIEW name AS SELECT` in `sql_text`,
    a file of statements each ending at a `;` at the end of a line (tracekit's SQL files)."""
    from tracekit.store.database import split_statements

    views = []
    for statement in split_statements(sql_text):
        tree = sqlglot.parse_one(statement, read=READ)
        if not (isinstance(tree, exp.Create) and tree.kind == "VIEW"):
            raise QueryError(f"not a view: {statement[:80]}")
        select = tree.expression
        _refuse_qualify_under_star(select)
        views.append((tree.this.name, select.transform(_rewrite, copy=False).sql(WRITE)))
    return views


def _rewrite(node):
    if isinstance(node, exp.Literal) and not node.is_string and _is_decimal(node.this):
        return exp.Literal.number(node.this + "D")
    if isinstance(node, exp.Cast) and _is_json_array(node.to):
        return exp.func("FROM_JSON", node.this, exp.Literal.string("ARRAY<STRING>"))
    if isinstance(node, exp.JSONType):
        return _json_type(node.this)
    if isinstance(node, exp.RegexpFullMatch):
        anchored = exp.func("CONCAT", exp.Literal.string("^(?:"), node.expression, exp.Literal.string(")$"))
        return exp.RegexpLike(this=node.this, expression=anchored)
    if isinstance(node, exp.GroupConcat) and isinstance(node.this, exp.Order):
        _spark_null_order(node.this)
    if isinstance(node, exp.Filter) and _is_distinct_string_agg(node.this):
        return _filter_inside(node.this, node.expression.this)
    return node


def _is_distinct_string_agg(node):
    return (isinstance(node, exp.GroupConcat) and isinstance(node.this, exp.Order)
            and isinstance(node.this.this, exp.Distinct))


def _filter_inside(aggregate, condition):
    """string_agg(DISTINCT x ORDER BY x) FILTER (WHERE c) as string_agg(DISTINCT CASE WHEN c THEN x
    END ORDER BY CASE WHEN c THEN x END): the same, as the aggregate skips NULLs; Spark 4.3's
    LISTAGG fails (a ClassCastException) on DISTINCT with FILTER."""
    def only_if(value):
        return exp.case().when(condition.copy(), value.copy())

    order = aggregate.this
    for value in order.this.expressions:
        value.replace(only_if(value))
    for ordered in order.expressions:
        ordered.this.replace(only_if(ordered.this))
    _spark_null_order(order)
    return aggregate


def _spark_null_order(order):
    """Spark's own NULL order for each key: sqlglot then writes no NULLS clause."""
    for ordered in order.expressions:
        ordered.set("nulls_first", not ordered.args.get("desc"))


def _is_decimal(text):
    return "." in text and "e" not in text.lower()


def _is_json_array(data_type):
    return (data_type.is_type(exp.DataType.Type.ARRAY) and data_type.expressions
            and data_type.expressions[0].is_type(exp.DataType.Type.JSON))


def _json_type(value):
    """CASE WHEN value IS NULL THEN NULL WHEN it parses as an array THEN 'ARRAY' ... END."""
    array = exp.func("JSON_ARRAY_LENGTH", value.copy()).is_(exp.null()).not_()
    obj = exp.func("JSON_OBJECT_KEYS", value.copy()).is_(exp.null()).not_()
    return (exp.case().when(value.copy().is_(exp.null()), exp.null())
            .when(array, exp.Literal.string("ARRAY")).when(obj, exp.Literal.string("OBJECT"))
            .else_(exp.Literal.string("VALUE")))


def _refuse_qualify_under_star(tree):
    for select in tree.find_all(exp.Select):
        if select.args.get("qualify") and any(isinstance(s, exp.Star) or (isinstance(s, exp.Column)
                                                                          and isinstance(s.this, exp.Star))
                                              for s in select.expressions):
            raise QueryError("QUALIFY under SELECT * does not translate to Spark (sqlglot's rewrite returns its "
                             f"row number too): name the columns — in SQL: {_shown(select.sql(READ))}")


_JVM_CALLS = {"reflect", "java_method", "try_reflect"}


def _refuse_jvm_calls(tree):
    for call in tree.find_all(exp.Func):
        name = call.name if isinstance(call, exp.Anonymous) else call.sql_name()
        if name.lower() in _JVM_CALLS:
            raise QueryError(f"{name.lower()}() is not allowed: a query on Spark reads the lake and nothing else")


def _first_line(exc):
    return str(exc).strip().splitlines()[0]


def _shown(sql):
    shown = " ".join(sql.split())
    return shown if len(shown) <= 200 else shown[:197] + "..."
