"""Running tracekit's SQL on Apache Spark over a Parquet lake: the same views, named queries and
finding rules as on DuckDB, translated by sqlglot (`query --lake DIR --engine spark`)."""


def query_lake(lake, name=None, *, sql=None, params=None, master=None, settings=None):
    """The Rows of named query `name` (or of `sql`, one SELECT in DuckDB's dialect) with `params`,
    run by Spark on `master` over the lake at `lake`; Spark is started for it and stopped after.
    Without pyspark or sqlglot, a TracekitError that says how to install them."""
    from tracekit.spark.session import require_pyspark

    require_pyspark()  # before the modules that import sqlglot and pyspark
    from tracekit.spark.engine import SparkLake

    with SparkLake(lake, master, settings) as spark:
        return spark.named(name, params) if sql is None else spark.rows(sql, params or None)
