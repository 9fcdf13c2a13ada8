"""tracekit's SQL (DuckDB's dialect) in Spark's: sqlglot translates, and a few rewrites mend what
it leaves wrong for Spark. Only `--engine spark` imports this module (sqlglot is the `spark` extra).

tracekit's views and queries are written to mean the same on both engines (see shared/NOTES.md);
what no portable SQL can say is rewritten here, each rewrite with the reason:

- A decimal literal (`1000.0`) is a DOUBLE: DuckDB turns DECIMAL arithmetic with a DOUBLE, and any
  division, into DOUBLE, where Spark keeps DECIMAL with its own precision (`ts_ns / 1000.0` would be
  DECIMAL(27,6) there). `ts_ns / 1000.0D` is DuckDB's double division, bit for bit.
- `CAST(json AS JSON[])`, DuckDB's way to unnest a JSON array, is `FROM_JSON(json, 'ARRAY<STRING>')`:
  each element as its JSON text (sqlglot writes ARRAY<JSON>, a type Spark lacks).
- `TRY_CAST(j AS BIGINT[])` of a JSON array's text (Kineto's dims of one input, `[8,512,768]`) is
  `FROM_JSON(j, 'ARRAY<BIGINT>')`: Spark casts no string to an array.
- `list_product(a)`, which Spark lacks, is `AGGREGATE(a, 1L, (p, v) -> p * v)`.
- `json_type(j)` says 'ARRAY' or 'OBJECT' for arrays and objects (what tracekit's SQL asks of it),
  else 'VALUE' for a number, string or boolean; Spark has no json_type (sqlglot keeps the name).
- `regexp_full_match(s, p)` is `s RLIKE '^(?:p)$'` (sqlglot keeps the name; Spark has none).
- `regexp_replace(s, p, r, 'g')` replaces every match, as Spark's does (sqlglot drops the 'g');
  without 'g' DuckDB replaces the first match only, which Spark cannot say: that is refused unless
  the pattern is anchored (^ or $), where there is one match at most. A literal replacement's
  `\\1` is Spark's `$1`, and its `$` a plain `$`.
- `format('{} took {:.1f} us', ...)` is the UDF tk_format (tracekit.spark.format_udf): Spark's
  own format_string rounds and writes numbers otherwise. A literal template is read here, so a
  field the UDF would refuse (`{0.__class__}`, `{:>300000000}`) is refused before Spark runs.
- Ordered lists, slices, to_json and string_agg: see tracekit.spark.aggregates.
- A QUALIFY under `SELECT *` (or `t.*`) is refused: sqlglot rewrites QUALIFY as a subquery whose
  outer `*` then also returns its row-number column. Write the columns out.
"""

import functools
import re

import sqlglot
from sqlglot import exp

from tracekit.spark.aggregates import rewrite_aggregate
from tracekit.spark import format_udf
from tracekit.spark.format_udf import UDF_NAME
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
    return _rewritten(tree)


# Views Spark does not make, with the reason a query naming them on Spark is refused (engine.py).
_CRITICAL_PATH = ("it walks each step's critical path back hop by hop, which Spark runs far too slowly",
                  # a recursive CTE: Spark runs a job per hop, and took over 10 minutes on a lake of 11 small
                  # traces where DuckDB takes a tenth of a second
                  {"_cp_waits", "_cp_handoffs", "_cp_stream_waits", "_cp_links", "_cp_hops", "_cp_segments",
                   "_cp_rank_waits", "_cp_path", "critical_path", "step_bounds"})
_PERFETTO = ("the Perfetto-compatible views nest slices and bind flows with ASOF joins, and ancestor_slice and "
             "descendant_slice are table macros: Spark SQL has neither",
             {"_perfetto_events", "_perfetto_counter_values", "_perfetto_tracks", "_perfetto_slices",
              "_perfetto_processes", "_perfetto_threads", "_perfetto_flow_ends", "slice", "process", "thread",
              "track", "thread_track", "process_track", "counter_track", "process_counter_track", "counter", "flow",
              "trace_bounds", "ancestor_slice", "descendant_slice"})
_PATH_NODES = ("the critical path's nodes take a CPU collective's enqueue (its c10d op) and its caller's wait for it "
               "with ASOF joins, which Spark SQL has not", {"_cp_cpu_collectives", "_cp_items", "_cp_steps"})
NOT_ON_SPARK_WHY = {name: why for why, names in (_CRITICAL_PATH, _PATH_NODES, _PERFETTO) for name in names}
NOT_ON_SPARK = frozenset(NOT_ON_SPARK_WHY)


@functools.lru_cache(maxsize=4)
def view_selects(sql_text):
    """(name, SELECT as Spark SQL) of each `CREATE [OR REPLACE] VIEW name AS SELECT` in `sql_text`,
    a file of statements each ending at a `;` at the end of a line (tracekit's SQL files); its
    table macros are left out. Kept for the process: translating tracekit's views takes a second,
    which every SparkLake opened (a notebook's second lake, a session started again) would pay."""
    from tracekit.store.database import split_statements

    views = []
    for statement in split_statements(sql_text):
        if re.match(r"CREATE (OR REPLACE )?MACRO ", statement):
            continue  # DuckDB's table macros (ancestor_slice...): NOT_ON_SPARK names them
        tree = sqlglot.parse_one(statement, read=READ)
        if not (isinstance(tree, exp.Create) and tree.kind == "VIEW"):
            raise QueryError(f"not a view: {statement[:80]}")
        if tree.this.name in NOT_ON_SPARK:
            continue
        select = tree.expression
        _refuse_qualify_under_star(select)
        views.append((tree.this.name, _rewritten(select).sql(WRITE)))
    return tuple(views)


def _rewritten(tree):
    """`tree` with every rewrite made, children before their parents (a rewrite of a parent
    then builds on its children's Spark forms)."""
    for node in reversed(list(tree.walk())):
        new = rewrite_aggregate(_rewrite(node))
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _rewrite(node):
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        # DuckDB's hint to compute a CTE once; Spark has no such clause (and plans CTEs itself)
        node.set("materialized", None)
        return node
    if isinstance(node, exp.Literal) and not node.is_string and _is_decimal(node.this):
        return exp.Literal.number(node.this + "D")
    if isinstance(node, exp.Cast) and _is_json_array(node.to):
        return exp.func("FROM_JSON", node.this, exp.Literal.string("ARRAY<STRING>"))
    if isinstance(node, (exp.TryCast, exp.Cast)) and _is_array_of(node.to, exp.DataType.Type.BIGINT):
        return exp.func("FROM_JSON", node.this, exp.Literal.string("ARRAY<BIGINT>"))
    if isinstance(node, exp.Anonymous) and node.name.lower() == "list_product":
        return sqlglot.parse_one("AGGREGATE(a, CAST(1 AS BIGINT), (p, v) -> p * v)", read=WRITE).transform(
            lambda n: node.expressions[0].copy() if isinstance(n, exp.Column) and n.name == "a" else n)
    if isinstance(node, exp.JSONType):
        return _json_type(node.this)
    if isinstance(node, exp.RegexpFullMatch):
        anchored = exp.func("CONCAT", exp.Literal.string("^(?:"), node.expression, exp.Literal.string(")$"))
        return exp.RegexpLike(this=node.this, expression=anchored)
    if isinstance(node, exp.RegexpReplace):
        return _replace_all(node)
    if isinstance(node, exp.Format):
        _check_template(node.this, len(node.expressions))
        return exp.Anonymous(this=UDF_NAME, expressions=[node.this, *node.expressions])
    return node


def _check_template(template, count):
    """Reads a literal template as the UDF will (a template computed by the query is read there)."""
    if isinstance(template, exp.Literal) and template.is_string:
        try:
            format_udf.parse(template.this, count)
        except ValueError as exc:
            raise QueryError(str(exc)) from None


def _replace_all(node):
    """regexp_replace as Spark's, which replaces every match (see the module's doc)."""
    pattern, replacement = node.expression, node.args.get("replacement")
    modifiers = node.args.get("modifiers")
    flags = modifiers.this if isinstance(modifiers, exp.Literal) else ("" if modifiers is None else None)
    if flags is None or set(flags) - {"g", "i"}:
        raise QueryError("regexp_replace's options translate to Spark only as 'g' and 'i'")
    literal = isinstance(pattern, exp.Literal) and pattern.is_string
    if "g" not in flags and not (literal and _anchored(pattern.this)):
        raise QueryError("regexp_replace without 'g' replaces the first match, which Spark cannot say: "
                         "anchor the pattern (^ or $), or give 'g' to replace every match")
    if "i" in flags:
        if not literal:
            raise QueryError("regexp_replace's 'i' translates to Spark for a literal pattern only")
        pattern = exp.Literal.string("(?i)" + pattern.this)
    if isinstance(replacement, exp.Literal) and replacement.is_string:
        replacement = exp.Literal.string(re.sub(r"\\(\d)", r"$\1", replacement.this.replace("$", "\\$")))
    return exp.RegexpReplace(this=node.this, expression=pattern, replacement=replacement)


def _anchored(pattern):
    return pattern.startswith("^") or (pattern.endswith("$") and not pattern.endswith("\\$"))


def _is_decimal(text):
    return "." in text and "e" not in text.lower()


def _is_json_array(data_type):
    return (data_type.is_type(exp.DataType.Type.ARRAY) and data_type.expressions
            and data_type.expressions[0].is_type(exp.DataType.Type.JSON))


def _is_array_of(data_type, element):
    return (data_type.is_type(exp.DataType.Type.ARRAY) and data_type.expressions
            and data_type.expressions[0].is_type(element))


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


def _first_line(exc):
    return str(exc).strip().splitlines()[0]


def _shown(sql):
    shown = " ".join(sql.split())
    return shown if len(shown) <= 200 else shown[:197] + "..."
