"""DuckDB's ordered aggregates in Spark's SQL, where sqlglot's translation loses what they mean.

- `list(x ORDER BY k1 DESC, k2)` keeps its order: sqlglot writes COLLECT_LIST(x), whose order is
  whatever the shuffle gives. Here the values are collected with their keys, in a struct
  (`STRUCT(k1 AS _k0, k2 AS _k1, x AS _v)`), sorted by a comparator that orders as DuckDB does
  (NULLS LAST unless the SQL says otherwise), and taken out again. The struct also keeps NULL
  values, which COLLECT_LIST alone drops and DuckDB's list keeps. With a FILTER that no row passes
  it is NULL, as DuckDB's list then is, not [].
- `list(...)[1:n]`, DuckDB's 1-based inclusive slice, is `SLICE(list, 1, n)` (sqlglot keeps the
  brackets, which Spark cannot read); the start must be a literal.
- `to_json(...)` keeps NULL fields (`"cpu_op_id":null`), as DuckDB does; Spark drops them unless
  told not to.
- `string_agg(DISTINCT x, sep ORDER BY x)` is `ARRAY_JOIN(ARRAY_SORT(COLLECT_SET(x)), sep)` (NULL
  when there is no x, as string_agg gives): Spark 4.3's LISTAGG(DISTINCT ...) fails (a
  ClassCastException) beside another DISTINCT aggregate or under a FILTER. Other string_aggs are
  LISTAGG ... WITHIN GROUP, sorted without the NULLS LAST sqlglot adds (the aggregate skips NULLs).
"""

from sqlglot import exp

from tracekit.errors import QueryError


def rewrite_aggregate(node):
    """The Spark form of `node` when it is one of the aggregates above, else `node` itself."""
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArrayAgg):
        return ordered_list(node.this, node.expression.this)
    if isinstance(node, exp.ArrayAgg) and not isinstance(node.parent, exp.Filter):
        return ordered_list(node)
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Slice):
        return _slice(node.this, node.expressions[0])
    if isinstance(node, exp.Anonymous) and node.name.lower() == "to_json" and len(node.expressions) == 1:
        options = exp.Anonymous(this="MAP", expressions=[exp.Literal.string("ignoreNullFields"),
                                                         exp.Literal.string("false")])
        return exp.func("TO_JSON", node.expressions[0], options)
    if isinstance(node, exp.Filter) and _is_distinct_string_agg(node.this):
        return distinct_string_agg(node.this, node.expression.this)
    if _is_distinct_string_agg(node) and not isinstance(node.parent, exp.Filter):
        return distinct_string_agg(node)
    if isinstance(node, exp.GroupConcat) and isinstance(node.this, exp.Order):
        _spark_null_order(node.this)
    return node


def ordered_list(aggregate, condition=None):
    """list(value ORDER BY keys) [FILTER (WHERE condition)] in Spark's SQL (see the module's doc)."""
    order = aggregate.this if isinstance(aggregate.this, exp.Order) else None
    value = order.this if order else aggregate.this
    keys = order.expressions if order else []
    fields = [exp.PropertyEQ(this=exp.to_identifier(f"_k{i}"), expression=key.this.copy()) for i, key in enumerate(keys)]
    fields.append(exp.PropertyEQ(this=exp.to_identifier("_v"), expression=value.copy()))
    collected = exp.func("COLLECT_LIST", exp.Struct(expressions=fields))
    if condition is not None:
        collected = exp.Filter(this=collected, expression=exp.Where(this=condition.copy()))
    listed = exp.func("ARRAY_SORT", collected.copy(), _comparator(keys)) if keys else collected.copy()
    values = exp.func("TRANSFORM", listed, exp.Lambda(this=exp.column("_v", table="e"),
                                                      expressions=[exp.to_identifier("e")]))
    if condition is None:
        return values
    return exp.case().when(exp.GT(this=exp.func("SIZE", collected), expression=exp.Literal.number(0)), values)


def _comparator(keys):
    """(l, r) -> -1, 0 or 1 as l comes before, with or after r in DuckDB's ORDER BY `keys`."""
    body = exp.Literal.number(0)
    for i, key in reversed(list(enumerate(keys))):
        left, right = exp.column(f"_k{i}", table="l"), exp.column(f"_k{i}", table="r")
        first, last = (exp.Literal.number(1), exp.Literal.number(-1)) if key.args.get("desc") else \
            (exp.Literal.number(-1), exp.Literal.number(1))
        null_left = exp.Literal.number(-1) if key.args.get("nulls_first") else exp.Literal.number(1)
        null_right = exp.Literal.number(1) if key.args.get("nulls_first") else exp.Literal.number(-1)
        body = (exp.case()
                .when(exp.and_(left.copy().is_(exp.null()), right.copy().is_(exp.null())), body)
                .when(left.copy().is_(exp.null()), null_left)
                .when(right.copy().is_(exp.null()), null_right)
                .when(exp.LT(this=left.copy(), expression=right.copy()), first)
                .when(exp.GT(this=left.copy(), expression=right.copy()), last)
                .else_(body.copy()))
    return exp.Lambda(this=body, expressions=[exp.to_identifier("l"), exp.to_identifier("r")])


def _slice(array, bounds):
    """array[start:end] (1-based, both ends in) as SLICE(array, start, end - start + 1)."""
    start, end = bounds.this, bounds.expression
    if start is None:
        start = exp.Literal.number(1)
    if not (isinstance(start, exp.Literal) and start.is_int and int(start.this) >= 1) or end is None:
        raise QueryError(f"the slice [{bounds.sql('duckdb')}] does not translate to Spark: "
                         "give it a literal start of 1 or more, and an end")
    length = end.copy() if int(start.this) == 1 else exp.Add(
        this=exp.Sub(this=end.copy(), expression=start.copy()), expression=exp.Literal.number(1))
    return exp.func("SLICE", array.copy(), start.copy(), length)


def _is_distinct_string_agg(node):
    if not isinstance(node, exp.GroupConcat):
        return False
    inner = node.this.this if isinstance(node.this, exp.Order) else node.this
    return isinstance(inner, exp.Distinct)


def distinct_string_agg(aggregate, condition=None):
    """string_agg(DISTINCT x, sep [ORDER BY x [DESC]]) [FILTER (WHERE condition)] in Spark's SQL."""
    order = aggregate.this if isinstance(aggregate.this, exp.Order) else None
    values = (order.this if order else aggregate.this).expressions
    keys = order.expressions if order else []
    if len(values) != 1 or len(keys) > 1 or (keys and keys[0].this != values[0]):
        raise QueryError("string_agg(DISTINCT x ...) translates to Spark ordered by x alone")
    collected = exp.func("COLLECT_SET", values[0].copy())
    if condition is not None:
        collected = exp.Filter(this=collected, expression=exp.Where(this=condition.copy()))
    ordered = exp.func("ARRAY_SORT", collected.copy())
    if keys and keys[0].args.get("desc"):
        ordered = exp.func("REVERSE", ordered)
    separator = aggregate.args.get("separator") or exp.Literal.string(",")
    joined = exp.func("ARRAY_JOIN", ordered, separator.copy())
    return exp.case().when(exp.GT(this=exp.func("SIZE", collected), expression=exp.Literal.number(0)), joined)


def _spark_null_order(order):
    """Spark's own NULL order for each key: sqlglot then writes no NULLS clause."""
    for ordered in order.expressions:
        ordered.set("nulls_first", not ordered.args.get("desc"))
