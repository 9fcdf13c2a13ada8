"""A query whose CTEs are read more than once, run on Spark a step at a time.

Spark plans a CTE read twice as two copies of its plan, so a chain of CTEs each read twice, over
views that are joins of several tables (gpu_idle's gaps, split, probes...), grows a plan that
doubles at every step: past the driver's memory (3 GB tried) before it runs. DuckDB computes each
CTE once. Here each CTE read more than once is computed first, on its own, and kept as a local
checkpoint (its rows, with no plan behind them) under a temporary view that the rest of the query
reads; the CTEs read once stay CTEs of the SQL that reads them. Queries whose CTEs are each read
once run as they are.

Not cache() instead: a cached view keeps its whole plan, which Spark copies into every query that
reads it before it swaps in the cached rows, so the plans grow as before. And no temporary view
over SQL that reads a checkpoint twice: Spark 4.3 then joins wrongly (gpu_idle's `causes`, a
UNION ALL of two reads of `split`, lost 272 of its 2,206 rows as such a view; the same SQL as one
query gives them all).
"""

import uuid

from sqlglot import exp

WRITE = "spark"


def query_frame(session, tree, params, kept):
    """The DataFrame of `tree` (a parsed SELECT in Spark's form) with `params`; the names of the
    temporary views made for it go into `kept`, for release() once its rows are read."""
    with_ = tree.args.get("with_")
    if with_ is None or all(_reads(tree, cte.alias) < 2 for cte in with_.expressions):
        return session.sql(tree.sql(WRITE), args=_used(tree, params))
    ctes = list(with_.expressions)
    tree.set("with_", None)
    inline = []
    for i, cte in enumerate(ctes):
        later = [c.this for c in ctes[i + 1:]] + [tree]
        if sum(_reads(part, cte.alias) for part in later) < 2:
            inline.append(cte)
            continue
        name = f"_tk_{uuid.uuid4().hex[:12]}_{cte.alias}"
        step = _with(inline, cte.this)
        session.sql(step.sql(WRITE), args=_used(step, params)).localCheckpoint().createOrReplaceTempView(name)
        kept.append(name)
        for part in later:
            _rename(part, cte.alias, name)
    query = _with(inline, tree)
    return session.sql(query.sql(WRITE), args=_used(query, params))


def release(session, kept):
    """Drops the temporary views query_frame made."""
    for name in kept:
        session.catalog.dropTempView(name)


def _with(ctes, query):
    """A copy of `query` led by the CTEs `ctes` (before its own, if it has some)."""
    query = query.copy()
    if not ctes:
        return query
    own = query.args.get("with_")
    query.set("with_", exp.With(expressions=[c.copy() for c in ctes] + (list(own.expressions) if own else [])))
    return query


def _reads(tree, alias):
    return sum(1 for table in tree.find_all(exp.Table) if _is_ref(table, alias))


def _rename(part, alias, name):
    """Points `part`'s reads of the CTE `alias` at the view `name`."""
    for table in [table for table in part.find_all(exp.Table) if _is_ref(table, alias)]:
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        table.set("this", exp.to_identifier(name))


def _is_ref(table, alias):
    return not table.args.get("db") and table.name.lower() == alias.lower()


def _used(tree, params):
    """The parameters `tree` uses, of `params` (Spark refuses values for markers it lacks)."""
    if not params:
        return None
    names = {placeholder.name for placeholder in tree.find_all(exp.Placeholder)}
    return {key: value for key, value in params.items() if key in names} or None
