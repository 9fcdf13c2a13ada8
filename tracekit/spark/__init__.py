"""Running tracekit's SQL on Apache Spark over a Parquet lake: the same views, named queries and
finding rules as on DuckDB, translated by sqlglot (`query --lake DIR --engine spark`)."""
